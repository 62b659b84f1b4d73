//go:build !linux

package framework

import "syscall"

// sysProcAttr has no parent-death signal outside Linux: there, the processes of a crashed test
// binary must be killed by hand.
func sysProcAttr() *syscall.SysProcAttr { return nil }
