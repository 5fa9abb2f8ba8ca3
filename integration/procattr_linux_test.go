package integration

import (
	"os/exec"
	"syscall"
)

// dieWithTest makes the kernel kill a service if the test process dies
// first (a timeout, a crash), so no service outlives its test.
func dieWithTest(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
