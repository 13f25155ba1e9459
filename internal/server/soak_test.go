package server

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/latchd/latch/dlockpb"
	"github.com/latchd/latch/internal/frame"
)

// soakKeys is how many keys the soak test's clients fight over: few, so
// that they conflict often.
const soakKeys = 6

// TestSoak churns connections over every protocol (memcached text and
// binary, dlock v2 and v3) against one server: each client connects, locks
// keys exclusively or shared, trying once, waiting a while or forever,
// holds them for a moment, unlocks, and leaves, often in the middle of a
// wait or while holding locks, cleanly or with a reset (SO_LINGER 0).
//
// A checker counts the holders of every key client-side, in the critical
// section (entered after the grant arrives, left before the release is
// sent): no key may ever have two exclusive holders, or an exclusive holder
// beside shared ones, and fencing tokens of exclusive grants must grow.
// Every request must end within a bound. Afterwards the lock table must be
// empty and the goroutine count and heap back near their baseline.
//
// The default run takes about 6s (-short: 2s) with a few hundred
// connections alive at once; LATCH_SOAK=5m runs it for 5 minutes with
// thousands.
func TestSoak(t *testing.T) {
	dur, workers := 6*time.Second, 150
	if testing.Short() {
		dur, workers = 2*time.Second, 60
	}
	if v := os.Getenv("LATCH_SOAK"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("LATCH_SOAK=%q: %v", v, err)
		}
		dur, workers = d, 2000
	}

	cfg := testConfig()
	cfg.Admin.Addr = ""
	cfg.Memcache.WriteTimeout = 5 * time.Second
	cfg.DLock.WriteTimeout = 5 * time.Second
	s, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())

	// Every memcached lock needs an item.
	mc := dialT(t, s.MemcacheAddr())
	for k := range soakKeys {
		fmt.Fprintf(mc, "set %s 0 0 1\r\nx\r\n", soakKey(k))
	}
	r := bufio.NewReader(mc)
	for range soakKeys {
		if line, err := r.ReadString('\n'); err != nil || line != "STORED\r\n" {
			t.Fatalf("set: %q, %v", line, err)
		}
	}
	mc.Close()

	baseG, baseHeap := settle(t, 0, 0, 0)

	ck := newChecker()
	ctx, cancel := context.WithTimeout(context.Background(), dur)
	defer cancel()
	var wg sync.WaitGroup
	for i := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), uint64(time.Now().UnixNano())))
			for ctx.Err() == nil {
				c := &soakClient{ck: ck, rng: rng, srv: s}
				if err := c.run(); err != nil {
					ck.fail(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := ck.err(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d connections, %d grants (%d shared), %d busy, %d cut off, %d resets",
		ck.conns.Load(), ck.grants.Load(), ck.sharedGrants.Load(), ck.busy.Load(), ck.cut.Load(), ck.resets.Load())
	if ck.grants.Load() == 0 || ck.busy.Load() == 0 {
		t.Errorf("the soak granted %d and refused %d: it did not exercise conflicts", ck.grants.Load(), ck.busy.Load())
	}

	// Every connection closed client-side: the server must forget them all.
	deadline := time.Now().Add(30 * time.Second)
	for {
		st := s.node.Stats()
		if st.Holds == 0 && st.Waiters == 0 && st.Sessions == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the churn the lock table still has %+v", st)
		}
		time.Sleep(10 * time.Millisecond)
	}
	settle(t, baseG, baseHeap, 30*time.Second)
}

// settle waits until the goroutine count is within a small margin of
// baseG and the live heap within a margin of baseHeap, after a GC, failing
// after wait; with baseG 0 it just returns the current values.
func settle(t *testing.T, baseG int, baseHeap uint64, wait time.Duration) (int, uint64) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		g := runtime.NumGoroutine()
		if baseG == 0 {
			return g, ms.HeapAlloc
		}
		heapOK := ms.HeapAlloc <= baseHeap+max(baseHeap/2, 16<<20)
		if g <= baseG+5 && heapOK {
			t.Logf("after the churn: %d goroutines (baseline %d), heap %d KiB (baseline %d KiB)", g, baseG, ms.HeapAlloc>>10, baseHeap>>10)
			return g, ms.HeapAlloc
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Fatalf("leak: %d goroutines (baseline %d), heap %d KiB (baseline %d KiB); goroutines:\n%s",
				g, baseG, ms.HeapAlloc>>10, baseHeap>>10, buf)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func soakKey(k int) string { return fmt.Sprintf("soak/%d", k) }

// checker tracks the holders of every key as the clients see them.
type checker struct {
	excl, shared [soakKeys]atomic.Int64

	mu       sync.Mutex
	lastTok  [soakKeys]uint64
	firstErr error

	conns, grants, busy, cut, resets atomic.Int64
	sharedGrants                     atomic.Int64
}

func newChecker() *checker { return &checker{} }

func (ck *checker) fail(err error) {
	ck.mu.Lock()
	if ck.firstErr == nil {
		ck.firstErr = err
	}
	ck.mu.Unlock()
}

func (ck *checker) err() error {
	ck.mu.Lock()
	defer ck.mu.Unlock()
	return ck.firstErr
}

// enter records a grant of key k; token is 0 when the protocol has none.
func (ck *checker) enter(k int, shared bool, token uint64) {
	ck.grants.Add(1)
	if shared {
		ck.sharedGrants.Add(1)
		ck.shared[k].Add(1)
		if n := ck.excl[k].Load(); n != 0 {
			ck.fail(fmt.Errorf("key %d: shared grant beside %d exclusive holders", k, n))
		}
		return
	}
	if n := ck.excl[k].Add(1); n != 1 {
		ck.fail(fmt.Errorf("key %d: %d exclusive holders at once", k, n))
	}
	if n := ck.shared[k].Load(); n != 0 {
		ck.fail(fmt.Errorf("key %d: exclusive grant beside %d shared holders", k, n))
	}
	if token != 0 {
		ck.mu.Lock()
		if token <= ck.lastTok[k] {
			ck.firstErr = cmpOr(ck.firstErr, fmt.Errorf("key %d: exclusive token %d after %d", k, token, ck.lastTok[k]))
		}
		ck.lastTok[k] = token
		ck.mu.Unlock()
	}
}

// leave records that key k is about to be released (or its connection
// closed).
func (ck *checker) leave(k int, shared bool) {
	if shared {
		ck.shared[k].Add(-1)
	} else {
		ck.excl[k].Add(-1)
	}
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// opTimeout bounds every request: a waiter that has not ended by then is a
// failure ("every waiter ends").
const opTimeout = 20 * time.Second

// soakClient is one connection's life.
type soakClient struct {
	ck   *checker
	rng  *rand.Rand
	srv  *Server
	nc   net.Conn
	r    *bufio.Reader
	held []heldKey
	id   uint64
}

type heldKey struct {
	k      int
	shared bool
}

// protocol is how a soakClient speaks.
type protocol int

const (
	memText protocol = iota
	memBinary
	dlockV2
	dlockV3
	nProtocols
)

func (c *soakClient) run() error {
	p := protocol(c.rng.IntN(int(nProtocols)))
	addr := c.srv.MemcacheAddr()
	if p >= dlockV2 {
		addr = c.srv.DLockAddr()
	}
	nc, err := net.Dial("tcp", addr.String())
	if err != nil {
		return fmt.Errorf("dial: %w", err)
	}
	c.ck.conns.Add(1)
	c.nc, c.r = nc, bufio.NewReader(nc)
	defer c.close()
	for range 1 + c.rng.IntN(8) {
		k := c.rng.IntN(soakKeys)
		ok, done, err := c.lock(p, k)
		if err != nil || done {
			return err
		}
		if !ok {
			continue
		}
		time.Sleep(time.Duration(c.rng.IntN(1000)) * time.Microsecond)
		switch c.rng.IntN(10) {
		case 0:
			return nil // leave holding it
		case 1, 2:
			continue // keep it; maybe take another
		}
		if err := c.unlock(p); err != nil {
			return err
		}
	}
	return nil
}

// close ends the connection, cleanly or with a reset, after leaving the
// critical sections it holds.
func (c *soakClient) close() {
	for _, h := range c.held {
		c.ck.leave(h.k, h.shared)
	}
	c.held = nil
	if c.rng.IntN(3) == 0 {
		c.ck.resets.Add(1)
		c.nc.(*net.TCPConn).SetLinger(0)
	}
	c.nc.Close()
}

// lock takes key k in a way p allows. ok reports a grant; done that the
// client chose to leave in the middle of a wait.
func (c *soakClient) lock(p protocol, k int) (ok, done bool, err error) {
	for _, h := range c.held {
		if h.k == k {
			return false, false, nil // no re-locking: keep the checker simple
		}
	}
	c.nc.SetDeadline(time.Now().Add(opTimeout))
	key := soakKey(k)
	switch p {
	case memText:
		fmt.Fprintf(c.nc, "lock %s\r\n", key)
		line, err := c.r.ReadString('\n')
		if err != nil {
			return false, false, fmt.Errorf("memcache text lock: %w", err)
		}
		switch line {
		case "OK\r\n":
			return c.granted(k, false, 0), false, nil
		case "LOCKED\r\n":
			c.ck.busy.Add(1)
			return false, false, nil
		}
		return false, false, fmt.Errorf("memcache text lock: %q", line)
	case memBinary:
		status, err := c.binary(0x40, key)
		if err != nil {
			return false, false, fmt.Errorf("memcache binary lock: %w", err)
		}
		if status == 0 {
			return c.granted(k, false, 0), false, nil
		}
		c.ck.busy.Add(1)
		return false, false, nil
	}

	req := &pb.Request{Type: pb.RequestType_Lock, Lock: &pb.RequestLock{Keys: []string{key}}}
	shared := false
	if p == dlockV3 {
		c.id++
		req.Version, req.Id = 3, c.id
		shared = c.rng.IntN(3) == 0
		if shared {
			req.Lock.Mode = pb.LockMode_Shared
		}
	} else {
		req.Version = 2
	}
	// Wait only while holding nothing: two clients each holding what the
	// other waits for would wait forever.
	switch n := c.rng.IntN(4); {
	case n == 0 || len(c.held) > 0:
		if p == dlockV3 {
			req.Lock.TryOnce = true
		} else {
			req.Lock.WaitMicro = 1
		}
	case n == 1:
		// forever (wait_micro 0)
	default:
		req.Lock.WaitMicro = uint64(1 + c.rng.IntN(5000))
	}
	if err := c.send(req); err != nil {
		return false, false, err
	}
	if c.rng.IntN(20) == 0 {
		// Leave without waiting for the answer, maybe in the middle of
		// the wait. A grant, if any, goes to a session that is ending and
		// is never used.
		c.ck.cut.Add(1)
		return false, true, nil
	}
	resp, err := c.recv()
	if err != nil {
		return false, false, err
	}
	switch resp.GetStatus() {
	case pb.ResponseStatus_Ok:
		var tok uint64
		if len(resp.GetTokens()) > 0 {
			tok = resp.GetTokens()[0]
		}
		return c.granted(k, shared, tok), false, nil
	case pb.ResponseStatus_AcquireTimeout:
		c.ck.busy.Add(1)
		return false, false, nil
	}
	return false, false, fmt.Errorf("dlock v%d lock: %v %s", req.Version, resp.GetStatus(), resp.GetErrorText())
}

func (c *soakClient) granted(k int, shared bool, tok uint64) bool {
	c.ck.enter(k, shared, tok)
	c.held = append(c.held, heldKey{k, shared})
	return true
}

// unlock releases the most recent key held.
func (c *soakClient) unlock(p protocol) error {
	h := c.held[len(c.held)-1]
	c.held = c.held[:len(c.held)-1]
	c.ck.leave(h.k, h.shared)
	key := soakKey(h.k)
	c.nc.SetDeadline(time.Now().Add(opTimeout))
	switch p {
	case memText:
		fmt.Fprintf(c.nc, "unlock %s\r\n", key)
		line, err := c.r.ReadString('\n')
		if err != nil || line != "OK\r\n" {
			return fmt.Errorf("memcache text unlock: %q, %v", line, err)
		}
		return nil
	case memBinary:
		status, err := c.binary(0x42, key)
		if err != nil || status != 0 {
			return fmt.Errorf("memcache binary unlock: status %#x, %v", status, err)
		}
		return nil
	}
	req := &pb.Request{Version: 2, Type: pb.RequestType_Unlock, Lock: &pb.RequestLock{Keys: []string{key}}}
	if p == dlockV3 {
		c.id++
		req.Version, req.Id = 3, c.id
	}
	if err := c.send(req); err != nil {
		return err
	}
	resp, err := c.recv()
	if err != nil {
		return err
	}
	if resp.GetStatus() != pb.ResponseStatus_Ok {
		return fmt.Errorf("dlock unlock: %v %s", resp.GetStatus(), resp.GetErrorText())
	}
	return nil
}

// binary sends a memcached binary request with only a key and returns the
// status of its answer.
func (c *soakClient) binary(op byte, key string) (uint16, error) {
	req := make([]byte, 24+len(key))
	req[0], req[1] = 0x80, op
	binary.BigEndian.PutUint16(req[2:], uint16(len(key)))
	binary.BigEndian.PutUint32(req[8:], uint32(len(key)))
	copy(req[24:], key)
	if _, err := c.nc.Write(req); err != nil {
		return 0, err
	}
	var hdr [24]byte
	if _, err := io.ReadFull(c.r, hdr[:]); err != nil {
		return 0, err
	}
	if hdr[0] != 0x81 || hdr[1] != op {
		return 0, fmt.Errorf("bad answer header %x", hdr)
	}
	if _, err := c.r.Discard(int(binary.BigEndian.Uint32(hdr[8:]))); err != nil {
		return 0, err
	}
	return binary.BigEndian.Uint16(hdr[6:]), nil
}

func (c *soakClient) send(req *pb.Request) error {
	buf, off := frame.Start(nil)
	buf, err := proto.MarshalOptions{}.MarshalAppend(buf, req)
	if err == nil {
		err = frame.Finish(buf, off)
	}
	if err == nil {
		_, err = c.nc.Write(buf)
	}
	if err != nil {
		return fmt.Errorf("dlock send: %w", err)
	}
	return nil
}

func (c *soakClient) recv() (*pb.Response, error) {
	b, err := frame.NewReader(c.r, 1<<20).Read()
	if err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return nil, fmt.Errorf("dlock: a request did not end within %v: %w", opTimeout, err)
		}
		return nil, fmt.Errorf("dlock recv: %w", err)
	}
	resp := new(pb.Response)
	if err := proto.Unmarshal(b, resp); err != nil {
		return nil, err
	}
	return resp, nil
}

func dialT(t *testing.T, addr net.Addr) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(30 * time.Second))
	return c
}
