//go:build !linux

package integration

import "os/exec"

// dieWithTest is a no-op where the kernel offers no parent-death signal;
// the tests' cleanups stop the services.
func dieWithTest(*exec.Cmd) {}
