package framework

import "syscall"

// sysProcAttr puts each process in its own process group, so a Ctrl-C in the terminal reaches
// only the test binary, and asks the kernel to kill the process when the thread that started it
// dies: processes never outlive a crashed test binary (see spawner).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
