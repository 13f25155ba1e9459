package admin_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
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
