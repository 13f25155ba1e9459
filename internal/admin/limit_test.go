package admin

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestWriteDeadline: an answer that a client never reads fails to write
// once the write timeout passes, freeing the handler.
func TestWriteDeadline(t *testing.T) {
	done := make(chan error, 1)
	big := make([]byte, 1<<20)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// 256 MiB: far more than the socket buffers hold.
		for range 256 {
			if _, err := w.Write(big); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	})
	srv := httptest.NewServer(withWriteDeadline(h, 200*time.Millisecond))
	defer srv.Close()
	nc, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if _, err := nc.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, os.ErrDeadlineExceeded) && !errors.Is(err, syscall.EPIPE) {
			t.Errorf("handler's write: %v; want a deadline error", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the handler is still writing to a client that does not read")
	}
}

// TestWriteDeadlineProfile: a pprof profile gets its seconds on top of
// the write timeout.
func TestWriteDeadlineProfile(t *testing.T) {
	tests := []struct {
		url  string
		want time.Duration
	}{
		{"/v1/locks", time.Minute},
		{"/v1/locks?seconds=100", time.Minute},
		{"/debug/pprof/profile", time.Minute + 30*time.Second},
		{"/debug/pprof/profile?seconds=5", time.Minute + 5*time.Second},
		{"/debug/pprof/trace?seconds=2.5", time.Minute + 2500*time.Millisecond},
		{"/debug/pprof/profile?seconds=1e300", time.Minute + 24*time.Hour},
	}
	for _, tt := range tests {
		rec := &deadlineRecorder{ResponseRecorder: httptest.NewRecorder()}
		before := time.Now()
		withWriteDeadline(http.NotFoundHandler(), time.Minute).ServeHTTP(rec, httptest.NewRequest("GET", tt.url, nil))
		got := rec.deadline.Sub(before)
		if got < tt.want || got > tt.want+10*time.Second {
			t.Errorf("%s: write deadline in %v, want %v", tt.url, got, tt.want)
		}
	}
}

// deadlineRecorder records the write deadline set through an
// http.ResponseController.
type deadlineRecorder struct {
	*httptest.ResponseRecorder
	deadline time.Time
}

func (r *deadlineRecorder) SetWriteDeadline(d time.Time) error {
	r.deadline = d
	return nil
}
