package server

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/latchd/latch"
)

// TestMemcacheStatsReportLocks checks that the memcached stats command
// reports the lock table's counters next to yrmcds's item counters, and
// that they count locks taken over any protocol.
func TestMemcacheStatsReportLocks(t *testing.T) {
	s := newServer(t, testConfig())
	sess := openSession(t, s.Service())
	if _, err := sess.Acquire(context.Background(), latch.LockRequest{Keys: []string{"a", "b"}}); err != nil {
		t.Fatal(err)
	}

	c, err := net.Dial("tcp", s.MemcacheAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprint(c, "set k 0 0 1\r\nx\r\nlock k\r\nstats\r\n")
	r := bufio.NewReader(c)
	stats := map[string]string{}
	var names []string
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("reading stats: %v", err)
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "END" {
			break
		}
		if f := strings.Fields(line); len(f) == 3 && f[0] == "STAT" {
			stats[f[1]] = f[2]
			names = append(names, f[1])
		}
	}
	want := map[string]string{
		"lock_keys": "3", "lock_holds": "3", "lock_sessions": "2", "lock_grants": "2",
		"curr_items": "1", "locked_items": "1",
	}
	for name, v := range want {
		if stats[name] != v {
			t.Errorf("stat %s = %q, want %q", name, stats[name], v)
		}
	}
	// yrmcds's fields come first, in its order.
	if len(names) < 2 || names[0] != "pid" || names[1] != "time" {
		t.Errorf("stats begin with %v, want yrmcds's pid, time, ...", names[:min(len(names), 2)])
	}
}

// TestMemcacheTextErrorsCounted checks that text protocol errors count in
// the metrics: on their command, or on "invalid" for a line that names
// none.
func TestMemcacheTextErrorsCounted(t *testing.T) {
	s := newServer(t, testConfig())
	count := func() (req, errs uint64) {
		for _, p := range s.Metrics().Snapshot().Protocols {
			if p.Protocol == "memcache" {
				return p.Requests, p.Errors
			}
		}
		return 0, 0
	}
	req0, err0 := count()
	c, err := net.Dial("tcp", s.MemcacheAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	// set: fine; bogus: ERROR (invalid); get without a key: ERROR;
	// incr by a negative delta: CLIENT_ERROR; a bare LF: ERROR (invalid).
	fmt.Fprint(c, "set k 0 0 1\r\n1\r\nbogus\r\nget\r\nincr k -1\r\n\nversion\r\n")
	r := bufio.NewReader(c)
	var got []string
	for len(got) < 6 {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("after %q: %v", got, err)
		}
		got = append(got, strings.TrimRight(line, "\r\n"))
	}
	want := []string{"STORED", "ERROR", "ERROR", "CLIENT_ERROR invalid numeric delta argument", "ERROR"}
	for i, w := range want {
		if got[i] != w {
			t.Fatalf("replies %q, want %q then a version", got, want)
		}
	}
	req, errs := count()
	if req-req0 != 6 || errs-err0 != 4 {
		t.Errorf("memcache requests +%d, errors +%d; want +6, +4", req-req0, errs-err0)
	}
}
