//go:build !unix

package zookeeper_test

import "os/exec"

// ownGroup does nothing where there are no process groups: cancellation
// kills cmd's process alone.
func ownGroup(*exec.Cmd) {}
