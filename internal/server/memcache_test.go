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
