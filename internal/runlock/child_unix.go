//go:build unix

package runlock

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// child is the command run under the lock. It leads a process group of its
// own, so that stopping it stops every process it started too.
type child struct {
	cmd  *exec.Cmd
	pgid int
	// exited is closed once the child has exited and been reaped; then
	// state holds its status.
	exited chan struct{}
	state  *os.ProcessState
}

// startChild starts argv with env and the given standard streams. When
// stdin is the controlling terminal and latch run is in the terminal's
// foreground, the child's process group is given the terminal (as a shell
// does for a foreground job), and it is taken back when the child exits.
//
// The error of a command that cannot be started wraps an *execError with
// exit code 127 (not found) or 126 (found, but could not be run).
func startChild(argv, env []string, stdin io.Reader, stdout, stderr io.Writer) (*child, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	// Streams that are not files are copied by goroutines of os/exec; do
	// not let a grandchild that keeps them open hold Wait forever.
	cmd.WaitDelay = time.Second
	attr := &syscall.SysProcAttr{Setpgid: true}
	tty := foregroundTerminal(stdin)
	if tty != nil {
		attr.Foreground = true
		attr.Ctty = tty.fd
	}
	cmd.SysProcAttr = attr
	if err := cmd.Start(); err != nil {
		code := 126
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
			code = 127
		}
		return nil, &execError{code: code, err: err}
	}
	c := &child{cmd: cmd, pgid: cmd.Process.Pid, exited: make(chan struct{})}
	go func() {
		// The error is in the ProcessState; a non-nil error with no
		// state (an I/O copy failure) leaves the exit status to it.
		_ = cmd.Wait()
		c.state = cmd.ProcessState
		if tty != nil {
			tty.restore()
		}
		close(c.exited)
	}()
	return c, nil
}

// signal sends sig to the child's process group. Once every process of the
// group has exited, it is a no-op.
func (c *child) signal(sig syscall.Signal) error {
	err := syscall.Kill(-c.pgid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("signalling process group %d: %w", c.pgid, err)
	}
	return nil
}

// status returns the child's exit status as a shell reports it: the exit
// code, or 128 plus the signal that killed it. Valid once exited is closed.
func (c *child) status() int {
	if c.state == nil {
		return ExitError
	}
	if ws, ok := c.state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return c.state.ExitCode()
}

// execError is the error of a command that could not be started.
type execError struct {
	code int // 126 or 127
	err  error
}

func (e *execError) Error() string { return e.err.Error() }
func (e *execError) Unwrap() error { return e.err }

// groupAlive reports whether a process of the child's group is left.
func (c *child) groupAlive() bool {
	return !errors.Is(syscall.Kill(-c.pgid, 0), syscall.ESRCH)
}
