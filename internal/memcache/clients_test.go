package memcache_test

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	gomemcache "github.com/bradfitz/gomemcache/memcache"
	"github.com/couchbase/gomemcached"
	mcclient "github.com/couchbase/gomemcached/client"

	"github.com/latchd/latch/internal/latchtest"
)

// clientDeadline bounds every exchange with the server, so that a server that
// fails to answer fails the test instead of hanging it. It says nothing of
// how fast the server is.
const clientDeadline = 10 * time.Second

// Errors gomemcache reports without a sentinel; matched by their text.
var (
	errLockedLine = errors.New(`"LOCKED\r\n"`)
	errNonNumeric = errors.New("non-numeric")
)

// textStep is one call of the gomemcache client and what it must return.
type textStep struct {
	name    string
	do      func(c *gomemcache.Client) (string, error)
	want    string
	wantErr error // matched with errors.Is, or as a substring of the message
}

func gcSet(key, value string, flags uint32) func(*gomemcache.Client) (string, error) {
	return func(c *gomemcache.Client) (string, error) {
		return "", c.Set(&gomemcache.Item{Key: key, Value: []byte(value), Flags: flags})
	}
}

func gcAdd(key, value string) func(*gomemcache.Client) (string, error) {
	return func(c *gomemcache.Client) (string, error) {
		return "", c.Add(&gomemcache.Item{Key: key, Value: []byte(value)})
	}
}

func gcReplace(key, value string) func(*gomemcache.Client) (string, error) {
	return func(c *gomemcache.Client) (string, error) {
		return "", c.Replace(&gomemcache.Item{Key: key, Value: []byte(value)})
	}
}

// gcGet returns "value/flags".
func gcGet(key string) func(*gomemcache.Client) (string, error) {
	return func(c *gomemcache.Client) (string, error) {
		it, err := c.Get(key)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("%s/%d", it.Value, it.Flags), nil
	}
}

// gcGetMulti returns the hits as "key=value" in key order.
func gcGetMulti(keys ...string) func(*gomemcache.Client) (string, error) {
	return func(c *gomemcache.Client) (string, error) {
		items, err := c.GetMulti(keys)
		if err != nil {
			return "", err
		}
		var hits []string
		for _, k := range slices.Sorted(maps.Keys(items)) {
			if items[k].Key != k {
				return "", fmt.Errorf("item under %q has key %q", k, items[k].Key)
			}
			hits = append(hits, k+"="+string(items[k].Value))
		}
		return strings.Join(hits, " "), nil
	}
}

// gcSave gets key and keeps the item (and its CAS ID) in saved.
func gcSave(saved map[string]*gomemcache.Item, key string) func(*gomemcache.Client) (string, error) {
	return func(c *gomemcache.Client) (string, error) {
		it, err := c.Get(key)
		if err != nil {
			return "", err
		}
		saved[key] = it
		return string(it.Value), nil
	}
}

// gcCAS stores value under key with the CAS ID of the item gcSave kept.
func gcCAS(saved map[string]*gomemcache.Item, key, value string) func(*gomemcache.Client) (string, error) {
	return func(c *gomemcache.Client) (string, error) {
		it, ok := saved[key]
		if !ok {
			return "", fmt.Errorf("no saved item %q", key)
		}
		cp := *it
		cp.Value = []byte(value)
		return "", c.CompareAndSwap(&cp)
	}
}

func gcDelete(key string) func(*gomemcache.Client) (string, error) {
	return func(c *gomemcache.Client) (string, error) { return "", c.Delete(key) }
}

func gcIncr(key string, delta uint64) func(*gomemcache.Client) (string, error) {
	return func(c *gomemcache.Client) (string, error) {
		v, err := c.Increment(key, delta)
		return strconv.FormatUint(v, 10), err
	}
}

func gcDecr(key string, delta uint64) func(*gomemcache.Client) (string, error) {
	return func(c *gomemcache.Client) (string, error) {
		v, err := c.Decrement(key, delta)
		return strconv.FormatUint(v, 10), err
	}
}

func gcTouch(key string, seconds int32) func(*gomemcache.Client) (string, error) {
	return func(c *gomemcache.Client) (string, error) { return "", c.Touch(key, seconds) }
}

func gcFlushAll(c *gomemcache.Client) (string, error) { return "", c.FlushAll() }

func gcPing(c *gomemcache.Client) (string, error) { return "", c.Ping() }

// textConn is a raw text-protocol connection, for the lock commands that
// gomemcache does not know.
type textConn struct {
	nc net.Conn
	r  *bufio.Reader
}

func dialText(t *testing.T, addr string) *textConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, clientDeadline)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &textConn{nc: nc, r: bufio.NewReader(nc)}
}

// command sends one command line and returns its one-line reply.
func (tc *textConn) command(line string) (string, error) {
	tc.nc.SetDeadline(time.Now().Add(clientDeadline))
	if _, err := io.WriteString(tc.nc, line+"\r\n"); err != nil {
		return "", err
	}
	reply, err := tc.r.ReadString('\n')
	return strings.TrimSuffix(reply, "\r\n"), err
}

// viaText runs a text command on another connection than the client's.
func viaText(tc *textConn, line string) func(*gomemcache.Client) (string, error) {
	return func(*gomemcache.Client) (string, error) { return tc.command(line) }
}

// TestGomemcache drives latch with bradfitz/gomemcache, a text-protocol
// memcached client, and a second raw connection that takes yrmcds locks.
func TestGomemcache(t *testing.T) {
	addr := latchtest.StartLatch(t)
	c := gomemcache.New(addr)
	c.Timeout = clientDeadline
	t.Cleanup(func() { c.Close() })
	other := dialText(t, addr)
	saved := make(map[string]*gomemcache.Item)

	// absolutePast is an exptime over 30 days: an absolute Unix time, long
	// past, so the item expires at once (no clock involved).
	const absolutePast = 60 * 60 * 24 * 31

	steps := []textStep{
		{name: "ping", do: gcPing},
		{name: "get miss", do: gcGet("a"), wantErr: gomemcache.ErrCacheMiss},
		{name: "set", do: gcSet("a", "alpha", 42)},
		{name: "get hit", do: gcGet("a"), want: "alpha/42"},
		{name: "set overwrites", do: gcSet("a", "alpha2", 7)},
		{name: "get overwritten", do: gcGet("a"), want: "alpha2/7"},
		{name: "set b", do: gcSet("b", "beta", 0)},
		{name: "get multi", do: gcGetMulti("a", "b", "missing"), want: "a=alpha2 b=beta"},
		{name: "get multi all miss", do: gcGetMulti("x", "y"), want: ""},

		{name: "add existing", do: gcAdd("a", "x"), wantErr: gomemcache.ErrNotStored},
		{name: "add new", do: gcAdd("c", "gamma")},
		{name: "get added", do: gcGet("c"), want: "gamma/0"},
		{name: "replace missing", do: gcReplace("d", "x"), wantErr: gomemcache.ErrNotStored},
		{name: "replace existing", do: gcReplace("c", "gamma2")},
		{name: "get replaced", do: gcGet("c"), want: "gamma2/0"},

		{name: "gets", do: gcSave(saved, "c"), want: "gamma2"},
		{name: "cas", do: gcCAS(saved, "c", "gamma3")},
		{name: "cas with a stale id", do: gcCAS(saved, "c", "gamma4"), wantErr: gomemcache.ErrCASConflict},
		{name: "get after cas", do: gcGet("c"), want: "gamma3/0"},
		{name: "gets again", do: gcSave(saved, "c"), want: "gamma3"},
		{name: "delete", do: gcDelete("c")},
		{name: "delete missing", do: gcDelete("c"), wantErr: gomemcache.ErrCacheMiss},
		{name: "cas on a deleted key", do: gcCAS(saved, "c", "x"), wantErr: gomemcache.ErrCacheMiss},
		// One store-wide CAS counter: an ID from before a delete does not
		// match the re-created item. (yrmcds counts CAS per item from 1,
		// so there both items have CAS 1 and the stale CAS succeeds.)
		{name: "set d", do: gcSet("d", "first", 0)},
		{name: "gets d", do: gcSave(saved, "d"), want: "first"},
		{name: "delete d", do: gcDelete("d")},
		{name: "re-create d", do: gcSet("d", "second", 0)},
		{name: "cas with an id from before the delete", do: gcCAS(saved, "d", "x"), wantErr: gomemcache.ErrCASConflict},
		{name: "get re-created", do: gcGet("d"), want: "second/0"},

		{name: "incr missing", do: gcIncr("n", 1), want: "0", wantErr: gomemcache.ErrCacheMiss},
		{name: "set counter", do: gcSet("n", "10", 0)},
		{name: "incr", do: gcIncr("n", 5), want: "15"},
		{name: "decr", do: gcDecr("n", 3), want: "12"},
		{name: "decr stops at zero", do: gcDecr("n", 100), want: "0"},
		{name: "incr to 2^64-1", do: gcIncr("n", 1<<64-1), want: strconv.FormatUint(1<<64-1, 10)},
		{name: "incr wraps at 2^64", do: gcIncr("n", 2), want: "1"},
		{name: "incr non-numeric", do: gcIncr("a", 1), want: "0", wantErr: errNonNumeric},
		{name: "decr missing", do: gcDecr("missing", 1), want: "0", wantErr: gomemcache.ErrCacheMiss},

		{name: "touch", do: gcTouch("b", 3600)},
		{name: "get touched", do: gcGet("b"), want: "beta/0"},
		{name: "touch missing", do: gcTouch("missing", 3600), wantErr: gomemcache.ErrCacheMiss},
		{name: "touch into the past", do: gcTouch("b", absolutePast)},
		{name: "get expired", do: gcGet("b"), wantErr: gomemcache.ErrCacheMiss},

		// A yrmcds lock taken by another connection: reads and touch
		// still work, writes answer LOCKED.
		{name: "other locks a", do: viaText(other, "lock a"), want: "OK"},
		{name: "get locked", do: gcGet("a"), want: "alpha2/7"},
		{name: "set locked", do: gcSet("a", "x", 0), wantErr: errLockedLine},
		{name: "delete locked", do: gcDelete("a"), wantErr: errLockedLine},
		{name: "touch locked", do: gcTouch("a", 3600)},
		{name: "other unlocks a", do: viaText(other, "unlock a"), want: "OK"},
		{name: "set unlocked", do: gcSet("a", "alpha3", 0)},

		{name: "flush all", do: gcFlushAll},
		{name: "get flushed", do: gcGet("a"), wantErr: gomemcache.ErrCacheMiss},
		{name: "get multi flushed", do: gcGetMulti("a", "c", "n"), want: ""},
		{name: "set after flush", do: gcSet("a", "after", 0)},
		{name: "get after flush", do: gcGet("a"), want: "after/0"},
		{name: "ping again", do: gcPing},
	}
	for _, s := range steps {
		got, err := s.do(c)
		switch {
		case s.wantErr != nil && (err == nil || !errors.Is(err, s.wantErr) && !strings.Contains(err.Error(), s.wantErr.Error())):
			t.Errorf("%s: error = %v, want %v", s.name, err, s.wantErr)
		case s.wantErr == nil && err != nil:
			t.Errorf("%s: error = %v", s.name, err)
		case got != s.want:
			t.Errorf("%s = %q, want %q", s.name, got, s.want)
		}
	}
}

// The yrmcds lock extension's opcodes and statuses, which gomemcached
// (written for memcached and Couchbase) does not name.
const (
	yrLock      gomemcached.CommandCode = 0x40
	yrLockQ     gomemcached.CommandCode = 0x41
	yrUnlock    gomemcached.CommandCode = 0x42
	yrUnlockQ   gomemcached.CommandCode = 0x43
	yrUnlockAll gomemcached.CommandCode = 0x44
	yrLaG       gomemcached.CommandCode = 0x46
	yrLaGK      gomemcached.CommandCode = 0x48
	yrRaU       gomemcached.CommandCode = 0x4a

	yrLocked    gomemcached.Status = 0x0010
	yrNotLocked gomemcached.Status = 0x0011
)

// binReply is what a test compares of a binary response.
type binReply struct {
	op     gomemcached.CommandCode
	status gomemcached.Status
	key    string
	value  string // the value, or an error's message
	flags  uint32
}

func (r binReply) String() string {
	return fmt.Sprintf("{op=%#02x status=%#04x key=%q value=%q flags=%d}", byte(r.op), uint16(r.status), r.key, r.value, r.flags)
}

func replyOf(res *gomemcached.MCResponse) binReply {
	r := binReply{op: res.Opcode, status: res.Status, key: string(res.Key), value: string(res.Body)}
	if len(res.Extras) == 4 {
		r.flags = binary.BigEndian.Uint32(res.Extras)
	}
	return r
}

// ok, failed and binSilent build the replies the steps want.
func binOK(op gomemcached.CommandCode) binReply { return binReply{op: op} }

func binErr(op gomemcached.CommandCode, st gomemcached.Status, msg string) binReply {
	return binReply{op: op, status: st, value: msg}
}

// binSilent is what a quiet request that sends nothing "answers" (see bQuiet).
var binSilent = binReply{op: gomemcached.NOOP}

// binAction is one request on a gomemcached client.
type binAction func(c *mcclient.Client) (binReply, error)

// call turns a gomemcached call into a binAction; a response with an
// error status is a reply, not an error.
func binCall(f func(c *mcclient.Client) (*gomemcached.MCResponse, error)) binAction {
	return func(c *mcclient.Client) (binReply, error) {
		res, err := mcclient.UnwrapMemcachedError(f(c))
		if err != nil {
			return binReply{}, err
		}
		return replyOf(res), nil
	}
}

func bSet(key string, flags int, value string) binAction {
	return binCall(func(c *mcclient.Client) (*gomemcached.MCResponse, error) {
		return c.Set(0, key, flags, 0, []byte(value))
	})
}

func bAdd(key, value string) binAction {
	return binCall(func(c *mcclient.Client) (*gomemcached.MCResponse, error) {
		return c.Add(0, key, 0, 0, []byte(value))
	})
}

func bGet(key string) binAction {
	return binCall(func(c *mcclient.Client) (*gomemcached.MCResponse, error) { return c.Get(0, key) })
}

func bDel(key string) binAction {
	return binCall(func(c *mcclient.Client) (*gomemcached.MCResponse, error) { return c.Del(0, key) })
}

// bIncr increments key, creating it with initial when missing. Its reply's
// value is the new count, in decimal.
func bIncr(key string, delta, initial uint64) binAction {
	return func(c *mcclient.Client) (binReply, error) {
		n, err := c.Incr(0, key, delta, initial, 0)
		var res *gomemcached.MCResponse
		if errors.As(err, &res) {
			return replyOf(res), nil
		}
		if err != nil {
			return binReply{}, err
		}
		return binReply{op: gomemcached.INCREMENT, value: strconv.FormatUint(n, 10)}, nil
	}
}

// rawOpaque is the opaque of the raw requests; its echo is checked.
const rawOpaque = 0xfeedbeef

// bRaw sends a request gomemcached has no method for.
func bRaw(op gomemcached.CommandCode, key string, extras []byte, value string) binAction {
	return func(c *mcclient.Client) (binReply, error) {
		req := &gomemcached.MCRequest{Opcode: op, Key: []byte(key), Extras: extras, Body: []byte(value), Opaque: rawOpaque}
		res, err := mcclient.UnwrapMemcachedError(c.Send(req))
		if err != nil {
			return binReply{}, err
		}
		if res.Opaque != rawOpaque {
			return binReply{}, fmt.Errorf("opaque %#x echoed as %#x", uint32(rawOpaque), res.Opaque)
		}
		return replyOf(res), nil
	}
}

func bLock(key string) binAction   { return bRaw(yrLock, key, nil, "") }
func bUnlock(key string) binAction { return bRaw(yrUnlock, key, nil, "") }
func bLaG(key string) binAction    { return bRaw(yrLaG, key, nil, "") }
func bLaGK(key string) binAction   { return bRaw(yrLaGK, key, nil, "") }
func bUnlockAll() binAction        { return bRaw(yrUnlockAll, "", nil, "") }

// bRaU is ReplaceAndUnlock: 8 bytes of extras (flags, exptime) and a value.
func bRaU(key string, flags uint32, value string) binAction {
	extras := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, flags), 0)
	return bRaw(yrRaU, key, extras, value)
}

// bQuiet sends a quiet request followed by a Noop. It returns the quiet
// request's reply, or binSilent when the first reply is the Noop's.
func bQuiet(op gomemcached.CommandCode, key string) binAction {
	return func(c *mcclient.Client) (binReply, error) {
		if err := c.Transmit(&gomemcached.MCRequest{Opcode: op, Key: []byte(key), Opaque: rawOpaque}); err != nil {
			return binReply{}, err
		}
		if err := c.Transmit(&gomemcached.MCRequest{Opcode: gomemcached.NOOP, Opaque: rawOpaque + 1}); err != nil {
			return binReply{}, err
		}
		first, err := mcclient.UnwrapMemcachedError(c.Receive())
		if err != nil {
			return binReply{}, err
		}
		if first.Opcode == gomemcached.NOOP {
			return binSilent, nil
		}
		if first.Opaque != rawOpaque {
			return binReply{}, fmt.Errorf("opaque %#x echoed as %#x", uint32(rawOpaque), first.Opaque)
		}
		noop, err := mcclient.UnwrapMemcachedError(c.Receive())
		if err != nil {
			return binReply{}, err
		}
		if noop.Opcode != gomemcached.NOOP || noop.Opaque != rawOpaque+1 {
			return binReply{}, fmt.Errorf("after the quiet request's reply, got %v, want the Noop's", replyOf(noop))
		}
		return replyOf(first), nil
	}
}

// binConn is one client connection: the gomemcached client over a TCP
// connection the test controls.
type binConn struct {
	nc *net.TCPConn
	c  *mcclient.Client
}

func dialBinary(t *testing.T, addr string) *binConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, clientDeadline)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetReadDeadline(time.Now().Add(clientDeadline))
	c, err := mcclient.Wrap(nc)
	if err != nil {
		t.Fatal(err)
	}
	return &binConn{nc: nc.(*net.TCPConn), c: c}
}

// binStep is one request on connection A or B and the reply it must get.
type binStep struct {
	name string
	conn int // onA or onB
	do   binAction
	want binReply
}

const (
	onA = iota
	onB
)

// TestGomemcachedLocks drives latch with couchbase/gomemcached, a
// binary-protocol client, over two connections: its own methods for
// Get/Set/Add/Delete/Incr, raw requests for the yrmcds lock extension.
//
// The same steps run against a real yrmcds, so that what they want is
// yrmcds's behaviour and not only latch's.
func TestGomemcachedLocks(t *testing.T) {
	servers := []struct {
		name  string
		start func(testing.TB) string
	}{
		{"latch", latchtest.StartLatch},
		{"yrmcds", latchtest.StartYrmcds},
	}
	for _, srv := range servers {
		t.Run(srv.name, func(t *testing.T) {
			t.Parallel()
			addr := srv.start(t)
			runBinSteps(t, gomemcachedLockSteps(), dialBinary(t, addr), dialBinary(t, addr))
		})
	}
}

// runBinSteps runs steps on connections A and B.
func runBinSteps(t *testing.T, steps []binStep, connA, connB *binConn) {
	t.Helper()
	conns := []*binConn{connA, connB}
	for _, s := range steps {
		got, err := s.do(conns[s.conn].c)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if got != s.want {
			t.Errorf("%s = %v, want %v", s.name, got, s.want)
		}
	}
}

// gomemcachedLockSteps is TestGomemcachedLocks's scenario.
func gomemcachedLockSteps() []binStep {
	return []binStep{
		{"A sets k", onA, bSet("k", 7, "v1"), binOK(gomemcached.SET)},
		{"A gets k", onA, bGet("k"), binReply{op: gomemcached.GET, value: "v1", flags: 7}},
		{"A adds existing k", onA, bAdd("k", "x"), binErr(gomemcached.ADD, gomemcached.KEY_EEXISTS, "Exists")},
		{"A adds k2", onA, bAdd("k2", "v"), binOK(gomemcached.ADD)},
		{"A deletes k2", onA, bDel("k2"), binOK(gomemcached.DELETE)},
		{"A deletes missing k2", onA, bDel("k2"), binErr(gomemcached.DELETE, gomemcached.KEY_ENOENT, "Not found")},
		{"A gets missing k2", onA, bGet("k2"), binErr(gomemcached.GET, gomemcached.KEY_ENOENT, "Not found")},
		{"A incr creates n", onA, bIncr("n", 5, 10), binReply{op: gomemcached.INCREMENT, value: "10"}},
		{"A incr n", onA, bIncr("n", 5, 10), binReply{op: gomemcached.INCREMENT, value: "15"}},
		{"B incr n", onB, bIncr("n", 1, 0), binReply{op: gomemcached.INCREMENT, value: "16"}},

		// A locks k: B may read it but not write, unlock or lock it.
		{"A locks k", onA, bLock("k"), binOK(yrLock)},
		{"A locks k again", onA, bLock("k"), binErr(yrLock, yrLocked, "Locked")},
		{"B sets k", onB, bSet("k", 0, "v2"), binErr(gomemcached.SET, yrLocked, "Locked")},
		{"B deletes k", onB, bDel("k"), binErr(gomemcached.DELETE, yrLocked, "Locked")},
		{"B gets k", onB, bGet("k"), binReply{op: gomemcached.GET, value: "v1", flags: 7}},
		{"B unlocks k", onB, bUnlock("k"), binErr(yrUnlock, yrNotLocked, "Not locked")},
		{"B locks k", onB, bLock("k"), binErr(yrLock, yrLocked, "Locked")},
		{"B LaG k", onB, bLaG("k"), binErr(yrLaG, yrLocked, "Locked")},
		{"B RaU k", onB, bRaU("k", 0, "v2"), binErr(yrRaU, yrNotLocked, "Not locked")},
		{"A sets locked k", onA, bSet("k", 7, "v1b"), binOK(gomemcached.SET)},
		{"B sets k still", onB, bSet("k", 0, "v2"), binErr(gomemcached.SET, yrLocked, "Locked")},
		{"A unlocks k", onA, bUnlock("k"), binOK(yrUnlock)},
		{"A unlocks k again", onA, bUnlock("k"), binErr(yrUnlock, yrNotLocked, "Not locked")},
		{"B unlocks missing", onB, bUnlock("missing"), binErr(yrUnlock, gomemcached.KEY_ENOENT, "Not found")},
		{"B locks missing", onB, bLock("missing"), binErr(yrLock, gomemcached.KEY_ENOENT, "Not found")},

		// B locks k and gets it in one step, then replaces and unlocks.
		{"B LaG k", onB, bLaG("k"), binReply{op: yrLaG, value: "v1b", flags: 7}},
		{"A LaGK k", onA, bLaGK("k"), binErr(yrLaGK, yrLocked, "Locked")},
		{"A sets k", onA, bSet("k", 0, "x"), binErr(gomemcached.SET, yrLocked, "Locked")},
		{"A RaU k", onA, bRaU("k", 0, "x"), binErr(yrRaU, yrNotLocked, "Not locked")},
		{"B RaU k", onB, bRaU("k", 9, "v3"), binOK(yrRaU)},
		{"B RaU k unlocked", onB, bRaU("k", 9, "v4"), binErr(yrRaU, yrNotLocked, "Not locked")},
		{"A gets k", onA, bGet("k"), binReply{op: gomemcached.GET, value: "v3", flags: 9}},
		{"A LaGK k", onA, bLaGK("k"), binReply{op: yrLaGK, key: "k", value: "v3", flags: 9}},

		// Quiet variants: success is binSilent, errors are sent.
		{"B LockQ k", onB, bQuiet(yrLockQ, "k"), binErr(yrLockQ, yrLocked, "Locked")},
		{"B UnlockQ k", onB, bQuiet(yrUnlockQ, "k"), binErr(yrUnlockQ, yrNotLocked, "Not locked")},
		{"A UnlockQ k", onA, bQuiet(yrUnlockQ, "k"), binSilent},
		{"B LockQ k", onB, bQuiet(yrLockQ, "k"), binSilent},
		{"A sets k2", onA, bSet("k2", 0, "w"), binOK(gomemcached.SET)},
		{"A locks k2", onA, bLock("k2"), binOK(yrLock)},

		// UnlockAll drops the caller's locks only.
		{"B unlocks all", onB, bUnlockAll(), binOK(yrUnlockAll)},
		{"B sets k2", onB, bSet("k2", 0, "x"), binErr(gomemcached.SET, yrLocked, "Locked")},
		{"A locks k", onA, bLock("k"), binOK(yrLock)},
		{"A unlocks all", onA, bUnlockAll(), binOK(yrUnlockAll)},
		{"B sets k2 unlocked", onB, bSet("k2", 0, "x"), binOK(gomemcached.SET)},
		{"B locks k", onB, bLock("k"), binOK(yrLock)},
		{"A deletes k", onA, bDel("k"), binErr(gomemcached.DELETE, yrLocked, "Locked")},
		// The holder's delete drops the lock with the item.
		{"B deletes k", onB, bDel("k"), binOK(gomemcached.DELETE)},
		{"A adds k", onA, bAdd("k", "new"), binOK(gomemcached.ADD)},
		{"A locks k at last", onA, bLock("k"), binOK(yrLock)},
	}
}

// TestGomemcachedCloseReleasesLocks checks that a connection's locks are
// released as soon as the server has seen it end, however it ends. For
// each way, the test knows without sleeping when the server is done with
// the connection: either the client reads the server's close (which comes
// after the release), or B polls the connection count, which drops after
// the release.
func TestGomemcachedCloseReleasesLocks(t *testing.T) {
	tests := []struct {
		name string
		end  func(t *testing.T, c *binConn) // ends A's connection
		// seen is true when end returns only after the server closed
		// the connection; otherwise B waits for curr_connections.
		seen bool
	}{
		{"close", func(t *testing.T, c *binConn) { c.nc.Close() }, false},
		{"reset", func(t *testing.T, c *binConn) {
			if err := c.nc.SetLinger(0); err != nil {
				t.Fatal(err)
			}
			c.nc.Close()
		}, false},
		{"shutdown write", func(t *testing.T, c *binConn) {
			if err := c.nc.CloseWrite(); err != nil {
				t.Fatal(err)
			}
			readToEOF(t, c.nc, "")
		}, true},
		{"Quit", func(t *testing.T, c *binConn) {
			got, err := bRaw(gomemcached.QUIT, "", nil, "")(c.c)
			if err != nil {
				t.Fatal(err)
			}
			if want := binOK(gomemcached.QUIT); got != want {
				t.Errorf("Quit = %v, want %v", got, want)
			}
			readToEOF(t, c.nc, "")
		}, true},
		{"QuitQ", func(t *testing.T, c *binConn) {
			if err := c.c.Transmit(&gomemcached.MCRequest{Opcode: gomemcached.QUITQ}); err != nil {
				t.Fatal(err)
			}
			readToEOF(t, c.nc, "")
		}, true},
		{"text quit", func(t *testing.T, c *binConn) {
			if _, err := io.WriteString(c.nc, "quit\r\n"); err != nil {
				t.Fatal(err)
			}
			readToEOF(t, c.nc, "")
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr := latchtest.StartLatch(t)
			connA, connB := dialBinary(t, addr), dialBinary(t, addr)
			setup := []binStep{
				{"A sets k1", onA, bSet("k1", 0, "one"), binOK(gomemcached.SET)},
				{"A sets k2", onA, bSet("k2", 0, "two"), binOK(gomemcached.SET)},
				{"A locks k1", onA, bLock("k1"), binOK(yrLock)},
				{"A LaG k2", onA, bLaG("k2"), binReply{op: yrLaG, value: "two"}},
				{"B locks k1", onB, bLock("k1"), binErr(yrLock, yrLocked, "Locked")},
				{"B sets k2", onB, bSet("k2", 0, "x"), binErr(gomemcached.SET, yrLocked, "Locked")},
			}
			runBinSteps(t, setup, connA, connB)
			if t.Failed() {
				t.FailNow()
			}

			tt.end(t, connA)
			if !tt.seen {
				waitConnections(t, connB.c, 1)
			}

			// No retry: the locks must already be free.
			after := []binStep{
				{"B locks k1", onB, bLock("k1"), binOK(yrLock)},
				{"B sets k2", onB, bSet("k2", 0, "x"), binOK(gomemcached.SET)},
				{"B LaG k2", onB, bLaG("k2"), binReply{op: yrLaG, value: "x"}},
			}
			runBinSteps(t, after, connA, connB)
		})
	}
}

// readToEOF reads nc until the server closes it and checks what came.
func readToEOF(t *testing.T, nc net.Conn, want string) {
	t.Helper()
	nc.SetReadDeadline(time.Now().Add(clientDeadline))
	got, err := io.ReadAll(nc)
	if err != nil {
		t.Fatalf("reading until the server closes the connection: %v", err)
	}
	if string(got) != want {
		t.Errorf("before closing, the server sent %q, want %q", got, want)
	}
}

// waitConnections polls the server's curr_connections until it is n. The
// server counts a connection out only after releasing its locks.
func waitConnections(t *testing.T, c *mcclient.Client, n int) {
	t.Helper()
	want := strconv.Itoa(n)
	deadline := time.Now().Add(clientDeadline)
	for {
		stats, err := c.StatsMap("")
		if err != nil {
			t.Fatalf("stats: %v", err)
		}
		if stats["curr_connections"] == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("curr_connections is still %q, want %s", stats["curr_connections"], want)
		}
		time.Sleep(time.Millisecond)
	}
}
