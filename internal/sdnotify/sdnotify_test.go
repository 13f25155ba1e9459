package sdnotify

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// listen opens a unix datagram socket named name, as systemd does for
// NOTIFY_SOCKET.
func listen(t *testing.T, name string) *net.UnixConn {
	t.Helper()
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		t.Fatalf("listen %s: %v", name, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func receive(t *testing.T, c *net.UnixConn) string {
	t.Helper()
	if err := c.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	n, err := c.Read(buf)
	if err != nil {
		t.Fatalf("receive: %v", err)
	}
	return string(buf[:n])
}

func TestNotify(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("NOTIFY_SOCKET is systemd's, on Linux")
	}
	sockets := []struct {
		name   string
		socket func(t *testing.T) string
	}{
		{"path", func(t *testing.T) string { return filepath.Join(t.TempDir(), "notify") }},
		{"abstract", func(t *testing.T) string {
			return fmt.Sprintf("@latch-sdnotify-test-%d-%d", os.Getpid(), time.Now().UnixNano())
		}},
	}
	messages := []struct {
		name  string
		lines []string
		want  string
	}{
		{"ready", []string{Ready}, "READY=1\n"},
		{"stopping", []string{Stopping, Status("shutting down")}, "STOPPING=1\nSTATUS=shutting down\n"},
		{"status one line", []string{Status("a\nb")}, "STATUS=a b\n"},
	}
	for _, s := range sockets {
		t.Run(s.name, func(t *testing.T) {
			name := s.socket(t)
			c := listen(t, name)
			n, err := New(name)
			if err != nil {
				t.Fatal(err)
			}
			if !n.Enabled() {
				t.Fatal("not enabled")
			}
			for _, m := range messages {
				if err := n.Notify(m.lines...); err != nil {
					t.Fatalf("%s: %v", m.name, err)
				}
				if got := receive(t, c); got != m.want {
					t.Errorf("%s: received %q, want %q", m.name, got, m.want)
				}
			}
			// A reload: RELOADING=1 with the monotonic clock in µs.
			before := monotonicNow()
			if err := n.Notify(Reloading, MonotonicUsec()); err != nil {
				t.Fatal(err)
			}
			got := receive(t, c)
			rest, ok := strings.CutPrefix(got, "RELOADING=1\nMONOTONIC_USEC=")
			if !ok || !strings.HasSuffix(rest, "\n") {
				t.Fatalf("reloading: received %q", got)
			}
			usec, err := strconv.ParseInt(strings.TrimSuffix(rest, "\n"), 10, 64)
			if err != nil {
				t.Fatalf("reloading: MONOTONIC_USEC in %q: %v", got, err)
			}
			if at := time.Duration(usec) * time.Microsecond; at < before.Truncate(time.Microsecond) || at > monotonicNow() || at <= 0 {
				t.Errorf("reloading: MONOTONIC_USEC=%d, not between %v and now", usec, before)
			}
		})
	}
}

func TestNew(t *testing.T) {
	tests := []struct {
		socket  string
		enabled bool
		err     bool
	}{
		{"", false, false},
		{"/run/systemd/notify", true, false},
		{"@abstract", true, false},
		{"relative/path", false, true},
	}
	for _, tt := range tests {
		n, err := New(tt.socket)
		if (err != nil) != tt.err {
			t.Errorf("New(%q): err %v, want error %v", tt.socket, err, tt.err)
			continue
		}
		if err == nil && n.Enabled() != tt.enabled {
			t.Errorf("New(%q).Enabled() = %v, want %v", tt.socket, n.Enabled(), tt.enabled)
		}
	}
	// Nothing is sent, and nothing fails, without a socket.
	for _, n := range []*Notifier{nil, {}} {
		if err := n.Notify(Ready); err != nil {
			t.Errorf("Notify without a socket: %v", err)
		}
	}
}

func TestNotifyNoListener(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("NOTIFY_SOCKET is systemd's, on Linux")
	}
	n, err := New(filepath.Join(t.TempDir(), "absent"))
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Notify(Ready); err == nil {
		t.Error("Notify to a socket nobody listens on succeeded")
	}
}
