package resp_test

import (
	"bufio"
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/latchd/latch/client"
)

// memcacheDo sends memcached text lines and reads n reply lines.
func memcacheDo(t *testing.T, addr, req string, n int) []string {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := nc.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(nc)
	var out []string
	for range n {
		l, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, strings.TrimSpace(l))
	}
	return out
}

// TestCrossProtocol: a key locked with SET NX is LOCKED to memcached's lock
// and makes a dlock client wait until it is released; a key held over dlock
// makes SET NX answer nil, DEL does not release it, and it is a key of
// another type to the commands that read a string.
func TestCrossProtocol(t *testing.T) {
	lt := startLatch(t)
	r := dial(t, lt.redis)
	key := strings.ReplaceAll(prefix(t), "/", "_") + "x"

	if got := r.do("SET", key, "tok", "NX", "PX", "60000"); got != "+OK\r\n" {
		t.Fatalf("SET NX: %q", got)
	}
	if got := memcacheDo(t, lt.memcache, "set "+key+" 0 0 1\r\nv\r\nlock "+key+"\r\n", 2); got[1] != "LOCKED" {
		t.Fatalf("memcached lock of a key held over Redis: %q, want LOCKED", got)
	}

	ctx := context.Background()
	dc, err := client.Dial(ctx, lt.dlock)
	if err != nil {
		t.Fatal(err)
	}
	defer dc.Close()
	granted := make(chan error, 1)
	go func() {
		l, err := dc.Lock(ctx, []string{key})
		if err == nil {
			defer l.Unlock(ctx)
			granted <- nil
			<-ctx.Done()
			return
		}
		granted <- err
	}()
	select {
	case err := <-granted:
		t.Fatalf("dlock granted a key held over Redis: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	if got := r.do("EVAL", compareDoc, "1", key, "tok"); got != ":1\r\n" {
		t.Fatalf("compare-and-delete: %q", got)
	}
	select {
	case err := <-granted:
		if err != nil {
			t.Fatalf("dlock lock: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the dlock waiter was not granted when the Redis lock was released")
	}

	// Now dlock holds it.
	if got := r.do("SET", key, "tok", "NX", "PX", "60000"); got != "$-1\r\n" {
		t.Fatalf("SET NX of a key held over dlock: %q, want nil", got)
	}
	if got := r.do("SET", key, "tok"); !strings.HasPrefix(got, "-LOCKED ") {
		t.Fatalf("plain SET of a key held over dlock: %q, want an error", got)
	}
	if got := r.do("DEL", key); got != ":0\r\n" {
		t.Fatalf("DEL of a key held over dlock: %q, want :0", got)
	}
	if got := r.do("EXISTS", key); got != ":1\r\n" {
		t.Fatalf("EXISTS of a key held over dlock: %q", got)
	}
	wrongType := "-WRONGTYPE Operation against a key holding the wrong kind of value"
	if got := r.do("GET", key); got != wrongType+"\r\n" {
		t.Fatalf("GET of a key held over dlock: %q, want WRONGTYPE", got)
	}
	if got := r.do("TYPE", key); got != "+latchlock\r\n" {
		t.Fatalf("TYPE of a key held over dlock: %q", got)
	}
	if got := r.do("EVAL", compareDoc, "1", key, "tok"); !strings.HasPrefix(got, wrongType+" script: ") {
		t.Fatalf("compare-and-delete of a key held over dlock: %q, want WRONGTYPE", got)
	}
	if got := r.do("LATCH.TOKEN", key); !strings.HasPrefix(got, ":") {
		t.Fatalf("LATCH.TOKEN: %q", got)
	}
	// With an owner value: only that owner's hold has its token read.
	if got := r.do("LATCH.TOKEN", key, "tok"); got != "$-1\r\n" {
		t.Fatalf("LATCH.TOKEN of a key held over dlock, with a value: %q, want nil", got)
	}
	owned := "lock:token-owned"
	if got := r.do("SET", owned, "me", "NX", "PX", "10000"); got != "+OK\r\n" {
		t.Fatalf("SET NX: %q", got)
	}
	tok := r.do("LATCH.TOKEN", owned)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"LATCH.TOKEN", owned, "me"}, tok},
		{[]string{"LATCH.TOKEN", owned, "someone-else"}, "$-1\r\n"},
		{[]string{"LATCH.TOKEN", owned, "me", "extra"}, "-ERR syntax error\r\n"},
		{[]string{"DEL", owned}, ":1\r\n"},
		{[]string{"LATCH.TOKEN", owned, "me"}, "$-1\r\n"},
	} {
		if got := r.do(c.args...); got != c.want {
			t.Fatalf("%q: %q, want %q", c.args, got, c.want)
		}
	}
}
