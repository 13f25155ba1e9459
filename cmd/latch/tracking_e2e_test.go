//go:build unix

package main

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"testing"
	"time"
)

// respConn is a raw RESP connection of TestClusterTracking.
type respConn struct {
	t  *testing.T
	nc net.Conn
	br *bufio.Reader
}

func dialRESP(t *testing.T, addr string) *respConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &respConn{t: t, nc: nc, br: bufio.NewReader(nc)}
}

// send writes one command.
func (c *respConn) send(args ...string) {
	c.t.Helper()
	var b bytes.Buffer
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := c.nc.Write(b.Bytes()); err != nil {
		c.t.Fatal(err)
	}
}

// expect reads until what arrived ends with want, within d.
func (c *respConn) expect(want string, d time.Duration) {
	c.t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(d))
	var got []byte
	for !bytes.HasSuffix(got, []byte(want)) {
		b, err := c.br.ReadByte()
		if err != nil {
			c.t.Fatalf("waiting for %q: got %q, then %v", want, got, err)
		}
		got = append(got, b)
	}
}

// do sends a command and reads its reply, which must be want (with no
// push before it), within 5 s.
func (c *respConn) do(want string, args ...string) {
	c.t.Helper()
	c.send(args...)
	c.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	got := make([]byte, len(want))
	for i := range got {
		b, err := c.br.ReadByte()
		if err != nil {
			c.t.Fatalf("%q: %v after %q", args, err, got[:i])
		}
		got[i] = b
	}
	if string(got) != want {
		c.t.Fatalf("%q: %q, want %q", args, got, want)
	}
}

// push is the RESP3 invalidation of key.
func push(key string) string {
	return fmt.Sprintf(">2\r\n$10\r\ninvalidate\r\n*1\r\n$%d\r\n%s\r\n", len(key), key)
}

// TestClusterTracking: client-side caching across a cluster. A client
// tracking on node n1 is told when a client of node n2 releases a key it
// read, when a lease taken through n3 ends with nobody touching the key,
// and when n2's client takes a key it read: each node tells its clients
// of the changes it applies, whoever proposed them.
func TestClusterTracking(t *testing.T) {
	redisAddrs := freePorts(t, 3)
	procs, _ := startClusterEach(t, func(i int) []string { return []string{"--redis-addr", redisAddrs[i]} })
	waitLeader(t, procs)
	key := fmt.Sprintf("track:%d", time.Now().UnixNano())

	a := dialRESP(t, redisAddrs[0])
	b := dialRESP(t, redisAddrs[1])
	c := dialRESP(t, redisAddrs[2])
	b.do("+OK\r\n", "SET", key, "tok", "NX")
	a.send("HELLO", "3")
	a.expect("$7\r\nmodules\r\n*0\r\n", 5*time.Second)
	a.do("+OK\r\n", "CLIENT", "TRACKING", "ON")
	// readTok GETs key on n1 until it reads the value tok: n1 may not
	// have applied another node's SET yet (each read tracks the key, and
	// the SET's arrival meanwhile is pushed).
	readTok := func() {
		t.Helper()
		for i := 0; ; i++ {
			a.send("GET", key)
			a.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
			line, err := a.br.ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			if line == "$3\r\n" {
				a.expect("tok\r\n", time.Second)
				return
			}
			if line != "_\r\n" || i > 100 {
				t.Fatalf("GET on n1: %q", line)
			}
			a.expect(push(key), 5*time.Second)
			time.Sleep(20 * time.Millisecond)
		}
	}
	readTok()
	b.do(":1\r\n", "DEL", key)
	a.expect(push(key), 5*time.Second)

	// A lease ends: n1 hears of it when the leader's tick is applied.
	c.do("+OK\r\n", "SET", key, "tok", "NX", "PX", "1500")
	time.Sleep(100 * time.Millisecond)
	a.do("+OK\r\n", "CLIENT", "TRACKING", "ON", "NOLOOP") // still on: the mode may change but not BCAST
	readTok()
	start := time.Now()
	a.expect(push(key), 5*time.Second)
	if d := time.Since(start); d > 2500*time.Millisecond {
		t.Errorf("the lease's end was told %v after the read, want about 1.4 s", d)
	}

	// n1's own change, with NOLOOP: not told; n2's change: told.
	a.do("_\r\n", "GET", key)
	a.do("+OK\r\n", "SET", key, "mine", "NX")
	a.do("$4\r\nmine\r\n", "GET", key)
	b.do(":1\r\n", "DEL", key)
	a.expect(push(key), 5*time.Second)
}
