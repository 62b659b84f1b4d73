//go:build !linux

package framework

import "syscall"

// sysProcAttr has no parent-death signal outside Linux: there, a crashed test binary leaves its
// processes running.
func sysProcAttr() *syscall.SysProcAttr { return nil }
