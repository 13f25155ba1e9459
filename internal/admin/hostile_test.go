package admin_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/latchd/latch/internal/admin"
)

// TestHostileHTTP sends garbage, truncated and oversized requests to the
// admin port: each is answered with an error or closed, and the server
// keeps serving others.
func TestHostileHTTP(t *testing.T) {
	e := start(t, "")
	addr := strings.TrimPrefix(e.base, "http://")
	tests := []struct {
		name   string
		input  string
		status string // the status line's code; "" when the server just closes
	}{
		{"garbage", "\x00\x01\x02 garbage\r\n\r\n", "400"},
		{"memcached on the wrong port", "get k\r\n", "400"},
		{"header over 1 MiB", "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 2<<20) + "\r\n\r\n", "431"},
		{"truncated request line", "GET /heal", ""},
		{"truncated body", "POST /v1/keys/k/release HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nabc", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nc, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			nc.SetDeadline(time.Now().Add(20 * time.Second))
			go io.WriteString(nc, tt.input) // may fail once the server answers
			if tt.status != "" {
				line, err := bufio.NewReader(nc).ReadString('\n')
				if err != nil || !strings.Contains(line, " "+tt.status+" ") {
					t.Errorf("answer %q, %v; want status %s", line, err, tt.status)
				}
			} else {
				nc.(*net.TCPConn).CloseWrite()
				io.Copy(io.Discard, nc)
			}
			resp, err := http.Get(e.base + "/healthz")
			if err != nil {
				t.Fatalf("healthz after %s: %v", tt.name, err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("healthz after %s: %s", tt.name, resp.Status)
			}
		})
	}
}

// TestMaxConns fills the admin port's connections with silent clients:
// one more is answered 503 at once, and a slot freed serves again.
func TestMaxConns(t *testing.T) {
	const max = 2
	e := newTestAdminWith(t, func(c *admin.Config) { c.MaxConns = max })
	addr := strings.TrimPrefix(e.base, "http://")
	var held []net.Conn
	for range max {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		held = append(held, nc)
	}
	// The listener may not have accepted the held ones yet: one more is
	// refused once it has, so try until it is.
	deadline := time.Now().Add(20 * time.Second)
	for {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		nc.SetDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(nc, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(nc), nil)
		nc.Close()
		if err == nil && resp.StatusCode == http.StatusServiceUnavailable {
			if !resp.Close {
				t.Errorf("refusal without Connection: close: %v", resp.Header)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("over the limit: %v, %v; want 503", resp, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	held[0].Close()
	for {
		resp, err := http.Get(e.base + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("after a slot freed: %v, %v; want 200", resp, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSlowSender: a request that does not arrive whole within the read
// timeout gets its connection closed, without an answer.
func TestSlowSender(t *testing.T) {
	e := newTestAdminWith(t, func(c *admin.Config) { c.ReadTimeout = 200 * time.Millisecond })
	for _, partial := range []string{
		"GET /healthz HTTP/1.1\r\nHost: x\r\n",
		"POST /v1/sessions/1/end HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nabc",
	} {
		nc, err := net.Dial("tcp", strings.TrimPrefix(e.base, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		nc.SetDeadline(time.Now().Add(20 * time.Second))
		io.WriteString(nc, partial)
		got, err := io.ReadAll(nc)
		nc.Close()
		if err != nil {
			t.Errorf("%q: connection not closed: %v", partial, err)
		}
		if strings.HasPrefix(string(got), "HTTP/1.1 2") {
			t.Errorf("%q: answered %q", partial, got)
		}
	}
}
