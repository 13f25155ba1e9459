//go:build unix

package runlock

import (
	"os"
	"os/signal"
	"syscall"
	"unsafe"
)

// terminal is a controlling terminal whose foreground process group latch
// run hands to its child.
type terminal struct {
	fd   int
	pgrp int // the foreground process group to give the terminal back to
}

// foregroundTerminal returns stdin's terminal when stdin is the controlling
// terminal and latch run's process group is its foreground group; nil
// otherwise (not a terminal, or running in the background).
func foregroundTerminal(stdin any) *terminal {
	f, ok := stdin.(*os.File)
	if !ok || f == nil {
		return nil
	}
	fd := int(f.Fd())
	pgrp, err := tcgetpgrp(fd)
	if err != nil || pgrp != syscall.Getpgrp() {
		return nil
	}
	return &terminal{fd: fd, pgrp: pgrp}
}

// restore gives the terminal back to the process group that had it. latch
// run is then in a background group, where changing the foreground group
// raises SIGTTOU: it is ignored for the call.
func (t *terminal) restore() {
	if !signal.Ignored(syscall.SIGTTOU) {
		signal.Ignore(syscall.SIGTTOU)
		defer signal.Reset(syscall.SIGTTOU)
	}
	_ = tcsetpgrp(t.fd, t.pgrp)
}

func tcgetpgrp(fd int) (int, error) {
	var pgrp int32
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), uintptr(syscall.TIOCGPGRP), uintptr(unsafe.Pointer(&pgrp))); errno != 0 {
		return 0, errno
	}
	return int(pgrp), nil
}

func tcsetpgrp(fd, pgrp int) error {
	p := int32(pgrp)
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), uintptr(syscall.TIOCSPGRP), uintptr(unsafe.Pointer(&p))); errno != 0 {
		return errno
	}
	return nil
}
