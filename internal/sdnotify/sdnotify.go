// Package sdnotify tells the service manager (systemd) how the process is
// doing, by the notify protocol of sd_notify(3): datagrams of
// newline-separated VARIABLE=value lines sent to the unix datagram socket
// named by $NOTIFY_SOCKET. A name starting with '@' is an abstract socket.
package sdnotify

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"time"
)

// Messages of sd_notify(3).
const (
	Ready     = "READY=1"
	Stopping  = "STOPPING=1"
	Reloading = "RELOADING=1"
)

// Status returns the STATUS= line saying s (one line: newlines become
// spaces).
func Status(s string) string {
	return "STATUS=" + strings.ReplaceAll(s, "\n", " ")
}

// MonotonicUsec returns the MONOTONIC_USEC= line systemd wants with
// RELOADING=1: now on CLOCK_MONOTONIC, in microseconds.
func MonotonicUsec() string {
	return fmt.Sprintf("MONOTONIC_USEC=%d", monotonicNow()/time.Microsecond)
}

// Notifier sends to one notify socket. The zero value, and a nil
// *Notifier, send nothing (no service manager listens).
type Notifier struct {
	addr *net.UnixAddr
}

// New returns a Notifier for the socket named socket (the value of
// $NOTIFY_SOCKET); an empty name gives one that sends nothing.
func New(socket string) (*Notifier, error) {
	if socket == "" {
		return &Notifier{}, nil
	}
	if socket[0] != '/' && socket[0] != '@' {
		return nil, fmt.Errorf("sdnotify: NOTIFY_SOCKET %q is neither a path nor an abstract name ('@')", socket)
	}
	// net names an abstract unix socket with a leading '@' too.
	return &Notifier{addr: &net.UnixAddr{Name: socket, Net: "unixgram"}}, nil
}

// Enabled reports whether n sends to a service manager.
func (n *Notifier) Enabled() bool { return n != nil && n.addr != nil }

// Notify sends lines as one datagram. It does nothing when n is not
// enabled.
func (n *Notifier) Notify(lines ...string) error {
	if !n.Enabled() {
		return nil
	}
	if len(lines) == 0 {
		return errors.New("sdnotify: nothing to send")
	}
	conn, err := net.DialUnix("unixgram", nil, n.addr)
	if err != nil {
		return fmt.Errorf("sdnotify: %w", err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(strings.Join(lines, "\n") + "\n")); err != nil {
		return fmt.Errorf("sdnotify: sending to %s: %w", n.addr.Name, err)
	}
	return nil
}
