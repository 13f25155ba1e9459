//go:build unix

package zookeeper_test

import (
	"os/exec"
	"syscall"
)

// ownGroup runs cmd in a process group of its own, and makes its
// cancellation kill the whole group: zkCli.sh starts java as its child, and
// killing the shell alone would leave the JVM running.
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}
