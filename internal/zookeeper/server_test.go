package zookeeper

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/jute"
	"github.com/latchd/latch/internal/node"
	"github.com/latchd/latch/internal/znode"
)

// startServer starts a node in memory and a ZooKeeper front end on a free
// loopback port; both stop when the test ends.
func startServer(t testing.TB, modify func(*Config)) (*Server, *node.Node) {
	t.Helper()
	n, err := node.New(node.Config{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.TouchEvery = 50 * time.Millisecond
	if modify != nil {
		modify(&cfg)
	}
	s, err := New(n, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
		n.Shutdown(ctx)
	})
	return s, n
}

// rawClient speaks jute to a server, one request at a time.
type rawClient struct {
	t    testing.TB
	c    net.Conn
	r    *bufio.Reader
	xid  int32
	sess int64
	pw   []byte
	// events are the watch events read while waiting for replies.
	events []jute.WatcherEvent
	zxid   int64
}

func dialRaw(t testing.TB, addr string) *rawClient {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	return &rawClient{t: t, c: c, r: bufio.NewReader(c)}
}

func (rc *rawClient) send(body []byte) {
	rc.t.Helper()
	if _, err := rc.c.Write(jute.AppendFrame(nil, body)); err != nil {
		rc.t.Fatal(err)
	}
}

// frame reads one frame, or returns an error (io.EOF when the server
// closed the connection).
func (rc *rawClient) frame() ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(rc.r, hdr[:]); err != nil {
		return nil, err
	}
	b := make([]byte, binary.BigEndian.Uint32(hdr[:]))
	_, err := io.ReadFull(rc.r, b)
	return b, err
}

// connect opens (sess 0) or attaches a session and returns the response.
func (rc *rawClient) connect(req jute.ConnectRequest) jute.ConnectResponse {
	rc.t.Helper()
	rc.send(req.Append(nil))
	b, err := rc.frame()
	if err != nil {
		rc.t.Fatalf("connect: %v", err)
	}
	var resp jute.ConnectResponse
	d := jute.NewDecoder(b)
	resp.Decode(d)
	if d.Err() != nil {
		rc.t.Fatalf("connect response: %v", d.Err())
	}
	rc.sess, rc.pw = resp.SessionID, resp.Passwd
	return resp
}

// call sends op with record and returns the reply header and its body,
// collecting the events that come first.
func (rc *rawClient) call(op jute.Op, record []byte) (jute.ReplyHeader, *jute.Decoder) {
	rc.t.Helper()
	rc.xid++
	xid := rc.xid
	if op == jute.OpPing {
		xid = jute.XidPing
	}
	rc.send(append((&jute.RequestHeader{Xid: xid, Type: op}).Append(nil), record...))
	for {
		b, err := rc.frame()
		if err != nil {
			rc.t.Fatalf("%v: %v", op, err)
		}
		d := jute.NewDecoder(b)
		var h jute.ReplyHeader
		h.Decode(d)
		if h.Xid == jute.XidWatch {
			var ev jute.WatcherEvent
			ev.Decode(d)
			rc.events = append(rc.events, ev)
			continue
		}
		if h.Xid != xid {
			rc.t.Fatalf("%v: reply xid %d, want %d", op, h.Xid, xid)
		}
		rc.zxid = h.Zxid
		return h, d
	}
}

// closed reports whether the server closed the connection (reading
// nothing more).
func (rc *rawClient) closed() bool {
	rc.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := rc.frame()
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

var open = jute.ACL{Perms: jute.PermAll, Scheme: "world", ID: "anyone"}

func create(path string, data []byte, flags int32) []byte {
	return (&jute.CreateRequest{Path: path, Data: data, ACL: []jute.ACL{open}, Flags: flags}).Append(nil)
}

func TestRequests(t *testing.T) {
	s, _ := startServer(t, nil)
	rc := dialRaw(t, s.Addr().String())
	resp := rc.connect(jute.ConnectRequest{TimeOut: 100, HasReadOnly: true})
	if resp.SessionID == 0 || len(resp.Passwd) != 16 || !resp.HasReadOnly {
		t.Fatalf("connect response %+v", resp)
	}
	if resp.TimeOut != 4000 { // clamped to 2 ticks of 2 s
		t.Errorf("negotiated timeout %d ms, want 4000", resp.TimeOut)
	}

	h, d := rc.call(jute.OpCreate, create("/a", []byte("x"), 0))
	var cr jute.CreateResponse
	cr.Decode(d)
	if h.Err != jute.OK || cr.Path != "/a" {
		t.Fatalf("create: %v %q", h.Err, cr.Path)
	}
	created := h.Zxid
	h, _ = rc.call(jute.OpCreate, create("/a", nil, 0))
	if h.Err != jute.NodeExists {
		t.Errorf("create again: %v, want NODEEXISTS", h.Err)
	}
	h, d = rc.call(jute.OpCreate2, create("/a/s-", nil, 3))
	var c2 jute.Create2Response
	c2.Decode(d)
	if h.Err != jute.OK || c2.Path != "/a/s-0000000000" || c2.Stat.EphemeralOwner != rc.sess {
		t.Fatalf("create2 ephemeral sequential: %v %+v", h.Err, c2)
	}

	// A watch on /a's data fires before the reply of the write that
	// fires it.
	h, d = rc.call(jute.OpGetData, (&jute.GetDataRequest{Path: "/a", Watch: true}).Append(nil))
	var gd jute.GetDataResponse
	gd.Decode(d)
	if h.Err != jute.OK || string(gd.Data) != "x" || gd.Stat.Czxid != created {
		t.Fatalf("getData: %v %+v", h.Err, gd)
	}
	h, _ = rc.call(jute.OpSetData, (&jute.SetDataRequest{Path: "/a", Data: []byte("y"), Version: 0}).Append(nil))
	if h.Err != jute.OK || len(rc.events) != 1 || rc.events[0].Type != jute.EventNodeDataChanged || rc.events[0].Path != "/a" {
		t.Fatalf("setData: %v, events %+v", h.Err, rc.events)
	}
	h, _ = rc.call(jute.OpSetData, (&jute.SetDataRequest{Path: "/a", Data: []byte("z"), Version: 0}).Append(nil))
	if h.Err != jute.BadVersion || len(rc.events) != 1 {
		t.Errorf("setData at an old version: %v, events %+v", h.Err, rc.events)
	}

	// exists on a missing node leaves a watch.
	h, _ = rc.call(jute.OpExists, (&jute.ExistsRequest{Path: "/b", Watch: true}).Append(nil))
	if h.Err != jute.NoNode {
		t.Fatalf("exists /b: %v", h.Err)
	}
	rc.call(jute.OpCreate, create("/b", nil, 0))
	if len(rc.events) != 2 || rc.events[1].Type != jute.EventNodeCreated {
		t.Fatalf("create /b: events %+v", rc.events)
	}

	// A failed multi consumes a zxid and answers every op.
	before := rc.zxid
	multi := jute.MultiRequest{Ops: []jute.MultiOp{
		{Type: jute.OpCreate, Path: "/m", ACL: []jute.ACL{open}},
		{Type: jute.OpDelete, Path: "/none", Version: -1},
		{Type: jute.OpCreate, Path: "/m2", ACL: []jute.ACL{open}},
	}}
	h, d = rc.call(jute.OpMulti, multi.Append(nil))
	var mr jute.MultiResponse
	mr.Decode(d)
	wantErrs := []jute.Code{jute.OK, jute.NoNode, jute.RuntimeInconsistency}
	if h.Err != jute.OK || h.Zxid != before+1 || len(mr.Results) != 3 {
		t.Fatalf("failed multi: %v zxid %d (before %d) %+v", h.Err, h.Zxid, before, mr)
	}
	for i, r := range mr.Results {
		if r.Type != jute.OpError || r.Err != wantErrs[i] {
			t.Errorf("failed multi result %d: %+v, want error %v", i, r, wantErrs[i])
		}
	}
	h, _ = rc.call(jute.OpExists, (&jute.ExistsRequest{Path: "/m"}).Append(nil))
	if h.Err != jute.NoNode {
		t.Errorf("after a failed multi, /m: %v", h.Err)
	}

	// getChildren2, sync, ping, the ops answered as stock ZooKeeper does.
	h, d = rc.call(jute.OpGetChildren2, (&jute.GetChildrenRequest{Path: "/a"}).Append(nil))
	var ch jute.GetChildren2Response
	ch.Decode(d)
	if h.Err != jute.OK || len(ch.Children) != 1 || ch.Stat.NumChildren != 1 {
		t.Errorf("getChildren2: %v %+v", h.Err, ch)
	}
	if h, _ = rc.call(jute.OpSync, (&jute.SyncRequest{Path: "/"}).Append(nil)); h.Err != jute.OK {
		t.Errorf("sync: %v", h.Err)
	}
	if h, _ = rc.call(jute.OpPing, nil); h.Err != jute.OK || h.Zxid != rc.zxid {
		t.Errorf("ping: %v", h.Err)
	}
	if h, _ = rc.call(jute.OpCreateTTL, append(create("/ttl", nil, 5), 0, 0, 0, 0, 0, 0, 0, 1)); h.Err != jute.Unimplemented {
		t.Errorf("createTTL: %v, want UNIMPLEMENTED", h.Err)
	}
	if h, _ = rc.call(jute.OpReconfig, nil); h.Err != jute.ReconfigDisabled {
		t.Errorf("reconfig: %v, want RECONFIGDISABLED", h.Err)
	}
	if h, _ = rc.call(jute.OpSetACL, (&jute.SetACLRequest{Path: "/a", ACL: []jute.ACL{{Perms: 31, Scheme: "digest", ID: "u:p"}}, Version: -1}).Append(nil)); h.Err != jute.InvalidACL {
		t.Errorf("setACL digest: %v, want INVALIDACL", h.Err)
	}
	if h, _ = rc.call(jute.OpCheckWatches, (&jute.CheckWatchesRequest{Path: "/a", Type: jute.WatcherData}).Append(nil)); h.Err != jute.NoWatcher {
		t.Errorf("checkWatches without one: %v, want NOWATCHER", h.Err)
	}
	rc.call(jute.OpGetChildren, (&jute.GetChildrenRequest{Path: "/a", Watch: true}).Append(nil))
	if h, _ = rc.call(jute.OpRemoveWatches, (&jute.RemoveWatchesRequest{Path: "/a", Type: jute.WatcherAny}).Append(nil)); h.Err != jute.OK {
		t.Errorf("removeWatches: %v", h.Err)
	}

	// closeSession ends the session and its ephemerals.
	other := dialRaw(t, s.Addr().String())
	other.connect(jute.ConnectRequest{TimeOut: 10000})
	other.call(jute.OpGetChildren, (&jute.GetChildrenRequest{Path: "/a", Watch: true}).Append(nil))
	if h, _ = rc.call(jute.OpCloseSession, nil); h.Err != jute.OK {
		t.Fatalf("closeSession: %v", h.Err)
	}
	if !rc.closed() {
		t.Error("connection open after closeSession")
	}
	h, d = other.call(jute.OpGetChildren, (&jute.GetChildrenRequest{Path: "/a"}).Append(nil))
	var gc jute.GetChildrenResponse
	gc.Decode(d)
	if len(gc.Children) != 0 || len(other.events) != 1 || other.events[0].Type != jute.EventNodeChildrenChanged {
		t.Errorf("after closeSession: children %q, events %+v", gc.Children, other.events)
	}
}

func TestUnknownOpCloses(t *testing.T) {
	s, _ := startServer(t, nil)
	rc := dialRaw(t, s.Addr().String())
	rc.connect(jute.ConnectRequest{TimeOut: 10000})
	if h, _ := rc.call(jute.Op(77), nil); h.Err != jute.Unimplemented || h.Zxid != -1 {
		t.Errorf("op 77: %v zxid %d, want UNIMPLEMENTED and zxid -1, as ZooKeeper's", h.Err, h.Zxid)
	}
	if !rc.closed() {
		t.Error("connection open after an unknown op")
	}
}

func TestAuthFails(t *testing.T) {
	s, _ := startServer(t, nil)
	rc := dialRaw(t, s.Addr().String())
	rc.connect(jute.ConnectRequest{TimeOut: 10000})
	rc.send(append((&jute.RequestHeader{Xid: jute.XidAuth, Type: jute.OpAuth}).Append(nil), (&jute.AuthPacket{Scheme: "digest", Auth: []byte("u:p")}).Append(nil)...))
	b, err := rc.frame()
	if err != nil {
		t.Fatal(err)
	}
	var h jute.ReplyHeader
	h.Decode(jute.NewDecoder(b))
	if h.Xid != jute.XidAuth || h.Err != jute.AuthFailed || h.Zxid != 0 {
		t.Errorf("auth: %+v, want AUTHFAILED and zxid 0, as ZooKeeper's", h)
	}
	if !rc.closed() {
		t.Error("connection open after a failed auth")
	}
}

func TestReattach(t *testing.T) {
	s, _ := startServer(t, nil)
	a := dialRaw(t, s.Addr().String())
	resp := a.connect(jute.ConnectRequest{TimeOut: 10000})
	a.call(jute.OpCreate, create("/e", nil, 1))

	// A wrong password: the session is "expired" to this client.
	bad := dialRaw(t, s.Addr().String())
	got := bad.connect(jute.ConnectRequest{TimeOut: 10000, SessionID: resp.SessionID, Passwd: make([]byte, 16)})
	if got.SessionID != 0 || got.TimeOut != 0 {
		t.Errorf("attach with a wrong password: %+v, want expired", got)
	}
	if !bad.closed() {
		t.Error("connection open after a refused attach")
	}

	// The right one moves the session; the old connection closes.
	b := dialRaw(t, s.Addr().String())
	got = b.connect(jute.ConnectRequest{TimeOut: 10000, SessionID: resp.SessionID, Passwd: resp.Passwd, LastZxidSeen: a.zxid})
	if got.SessionID != resp.SessionID || got.TimeOut != resp.TimeOut {
		t.Fatalf("attach: %+v", got)
	}
	if !a.closed() {
		t.Error("old connection open after its session moved")
	}
	h, d := b.call(jute.OpExists, (&jute.ExistsRequest{Path: "/e"}).Append(nil))
	var ex jute.ExistsResponse
	ex.Decode(d)
	if h.Err != jute.OK || ex.Stat.EphemeralOwner != resp.SessionID {
		t.Errorf("ephemeral after the move: %v %+v", h.Err, ex)
	}

	// A client that has seen a zxid this node never reached is closed.
	ahead := dialRaw(t, s.Addr().String())
	ahead.send((&jute.ConnectRequest{TimeOut: 10000, LastZxidSeen: b.zxid + 1000}).Append(nil))
	if !ahead.closed() {
		t.Error("a client from the future was answered")
	}
}

func TestSessionExpires(t *testing.T) {
	s, n := startServer(t, func(c *Config) { c.TickTime = 100 * time.Millisecond })
	a := dialRaw(t, s.Addr().String())
	resp := a.connect(jute.ConnectRequest{TimeOut: 200})
	a.call(jute.OpCreate, create("/gone", nil, 1))
	// Silence: the session lapses, its ephemeral goes, its connection
	// closes.
	if !a.closed() {
		t.Fatal("connection of a silent session still open")
	}
	var ok bool
	n.ZRead(func(tr *znode.Tree) { _, ok = tr.Exists("/gone") })
	if ok {
		t.Error("ephemeral of an expired session still there")
	}
	b := dialRaw(t, s.Addr().String())
	if got := b.connect(jute.ConnectRequest{TimeOut: 10000, SessionID: resp.SessionID, Passwd: resp.Passwd}); got.SessionID != 0 {
		t.Errorf("attach of an expired session: %+v", got)
	}
}

func TestFourLetterWords(t *testing.T) {
	s, _ := startServer(t, nil)
	for word, want := range map[string]string{
		"ruok": "imok",
		"isro": "rw",
		"srvr": "Mode: standalone",
		"stat": "Clients:",
		"mntr": "zk_znode_count\t4",
		"envi": "zookeeper.version=3.8.0-latch-",
		"conf": "tickTime=2000",
		"dump": "dump is not executed because it is not in the whitelist.",
	} {
		c, err := net.Dial("tcp", s.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		c.Write([]byte(word))
		out, err := io.ReadAll(c)
		c.Close()
		if err != nil || !strings.Contains(string(out), want) {
			t.Errorf("%s: %q (%v), want it to contain %q", word, out, err, want)
		}
	}
}

func TestFrameTooLarge(t *testing.T) {
	s, _ := startServer(t, nil)
	rc := dialRaw(t, s.Addr().String())
	rc.connect(jute.ConnectRequest{TimeOut: 10000})
	rc.c.Write(binary.BigEndian.AppendUint32(nil, jute.MaxFrame+1))
	if !rc.closed() {
		t.Error("connection open after a frame over the limit")
	}
}

func TestWatchLimit(t *testing.T) {
	s, _ := startServer(t, func(c *Config) { c.MaxWatches = 2 })
	rc := dialRaw(t, s.Addr().String())
	rc.connect(jute.ConnectRequest{TimeOut: 10000})
	for i, want := range []jute.Code{jute.NoNode, jute.NoNode, jute.QuotaExceeded} {
		path := []string{"/w1", "/w2", "/w3"}[i]
		if h, _ := rc.call(jute.OpExists, (&jute.ExistsRequest{Path: path, Watch: true}).Append(nil)); h.Err != want {
			t.Errorf("watch %d: %v, want %v", i+1, h.Err, want)
		}
	}
}

// TestPingsKeepSessionAlive: a session whose client pings lives on past
// its timeout many times over, through the touches, without a command per
// ping.
func TestPingsKeepSessionAlive(t *testing.T) {
	s, n := startServer(t, func(c *Config) { c.TickTime = 500 * time.Millisecond })
	a := dialRaw(t, s.Addr().String())
	a.connect(jute.ConnectRequest{TimeOut: 1000})
	a.call(jute.OpCreate, create("/alive", nil, 1))
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); {
		if h, _ := a.call(jute.OpPing, nil); h.Err != jute.OK {
			t.Fatalf("ping: %v", h.Err)
		}
		time.Sleep(40 * time.Millisecond)
	}
	var ok bool
	n.ZRead(func(tr *znode.Tree) { _, ok = tr.Exists("/alive") })
	if !ok {
		t.Error("the ephemeral of a session that pinged is gone")
	}
}

// cutOff is a node that can be told it cannot commit.
type cutOff struct {
	*node.Node
	off atomic.Bool
}

func (c *cutOff) ZVouched() bool { return !c.off.Load() && c.Node.ZVouched() }

// TestCutOffNodeLetsGo: a node that cannot vouch for its clients'
// sessions (cut off from its cluster) closes its ZooKeeper connections and
// turns new ones away, so that their clients move to a node that can; it
// serves them again once it can.
func TestCutOffNodeLetsGo(t *testing.T) {
	n, err := node.New(node.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Shutdown(context.Background()) })
	svc := &cutOff{Node: n}
	cfg := DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.TouchEvery = 20 * time.Millisecond
	s, err := New(svc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown(context.Background()) })

	a := dialRaw(t, s.Addr().String())
	resp := a.connect(jute.ConnectRequest{TimeOut: 10000})
	svc.off.Store(true)
	if !a.closed() {
		t.Fatal("a cut-off node kept its connection")
	}
	b := dialRaw(t, s.Addr().String())
	b.send((&jute.ConnectRequest{TimeOut: 10000, SessionID: resp.SessionID, Passwd: resp.Passwd}).Append(nil))
	if !b.closed() {
		t.Fatal("a cut-off node took a session")
	}
	svc.off.Store(false)
	time.Sleep(100 * time.Millisecond) // a touch or more
	c := dialRaw(t, s.Addr().String())
	if got := c.connect(jute.ConnectRequest{TimeOut: 10000, SessionID: resp.SessionID, Passwd: resp.Passwd}); got.SessionID != resp.SessionID {
		t.Errorf("attach once the node commits again: %+v", got)
	}
}

// TestAsZooKeeper covers what TestDifferential found latch answering
// otherwise than ZooKeeper 3.8: the refusals that consume a zxid (an
// error txn in ZooKeeper), the modes that create and createContainer
// really make, the type of a multi's create results, and exists on a path
// that is not valid.
func TestAsZooKeeper(t *testing.T) {
	s, n := startServer(t, nil)
	rc := dialRaw(t, s.Addr().String())
	rc.connect(jute.ConnectRequest{TimeOut: 10000})
	rc.call(jute.OpCreate, create("/p", nil, 0))

	ttl := func(flags int32) []byte {
		return jute.AppendLong(create("/t", nil, flags), 1000)
	}
	reconfig := jute.AppendLong(jute.AppendString(jute.AppendString(jute.AppendString(nil, "server.2=h:1:2"), ""), ""), -1)
	for _, tc := range []struct {
		name string
		op   jute.Op
		rec  []byte
		code jute.Code
	}{
		{"create mode 7", jute.OpCreate, create("/m", nil, 7), jute.BadArguments},
		{"create2 mode TTL", jute.OpCreate2, create("/m", nil, 5), jute.Unimplemented},
		{"createContainer mode TTL", jute.OpCreateContainer, create("/m", nil, 6), jute.Unimplemented},
		{"createContainer sequential", jute.OpCreateContainer, create("/m", nil, 2), jute.BadArguments},
		{"createTTL", jute.OpCreateTTL, ttl(5), jute.Unimplemented},
		{"createTTL mode not TTL", jute.OpCreateTTL, ttl(0), jute.BadArguments},
		{"reconfig", jute.OpReconfig, reconfig, jute.ReconfigDisabled},
		{"create parent not valid", jute.OpCreate, create("/p/./x", nil, 0), jute.NoNode},
		{"create path not valid", jute.OpCreate, create("/p/", nil, 0), jute.BadArguments},
	} {
		before := rc.zxid
		if h, _ := rc.call(tc.op, tc.rec); h.Err != tc.code || h.Zxid != before+1 {
			t.Errorf("%s: %v zxid %d, want %v and zxid %d (one consumed)", tc.name, h.Err, h.Zxid, tc.code, before+1)
		}
	}

	// createContainer makes a container whatever its flags say of
	// ephemerality; create with the container flag a persistent znode.
	for _, tc := range []struct {
		name      string
		op        jute.Op
		path      string
		flags     int32
		container bool
	}{
		{"createContainer persistent", jute.OpCreateContainer, "/cp", 0, true},
		{"createContainer ephemeral", jute.OpCreateContainer, "/ce", 1, true},
		{"create container", jute.OpCreate, "/pc", 4, false},
		{"create2 container", jute.OpCreate2, "/pc2", 4, false},
	} {
		if h, _ := rc.call(tc.op, create(tc.path, nil, tc.flags)); h.Err != jute.OK {
			t.Fatalf("%s: %v", tc.name, h.Err)
		}
		rc.call(jute.OpCreate, create(tc.path+"/x", nil, 0))
		rc.call(jute.OpDelete, (&jute.DeleteRequest{Path: tc.path + "/x", Version: -1}).Append(nil))
		if _, err := n.ZReap(); err != nil {
			t.Fatal(err)
		}
		h, _ := rc.call(jute.OpExists, (&jute.ExistsRequest{Path: tc.path}).Append(nil))
		if reaped := h.Err == jute.NoNode; reaped != tc.container {
			t.Errorf("%s: reaped once empty: %v, want %v", tc.name, reaped, tc.container)
		}
	}

	// A multi's creates are read as their flags say: a result with a
	// stat (create2) for the container flag only.
	multi := jute.MultiRequest{Ops: []jute.MultiOp{
		{Type: jute.OpCreate2, Path: "/m1", ACL: []jute.ACL{open}},
		{Type: jute.OpCreateContainer, Path: "/m2", ACL: []jute.ACL{open}, Flags: 0},
		{Type: jute.OpCreate, Path: "/m3", ACL: []jute.ACL{open}, Flags: 4},
	}}
	h, d := rc.call(jute.OpMulti, multi.Append(nil))
	var mr jute.MultiResponse
	mr.Decode(d)
	want := []jute.Op{jute.OpCreate, jute.OpCreate, jute.OpCreate2}
	if h.Err != jute.OK || len(mr.Results) != len(want) {
		t.Fatalf("multi: %v %+v", h.Err, mr)
	}
	for i, r := range mr.Results {
		if r.Type != want[i] {
			t.Errorf("multi result %d: %v, want %v", i, r.Type, want[i])
		}
	}
	// A multi with a mode that is not valid fails in the tree, consuming
	// a zxid.
	before := rc.zxid
	multi = jute.MultiRequest{Ops: []jute.MultiOp{{Type: jute.OpCreate, Path: "/m4", ACL: []jute.ACL{open}, Flags: 7}}}
	h, d = rc.call(jute.OpMulti, multi.Append(nil))
	mr.Decode(d)
	if h.Zxid != before+1 || len(mr.Results) != 1 || mr.Results[0].Err != jute.BadArguments {
		t.Errorf("multi with mode 7: zxid %d (before %d) %+v", h.Zxid, before, mr)
	}

	// exists answers NoNode for a path that is not valid, and watches it;
	// BadArguments for a NUL only.
	if h, _ := rc.call(jute.OpExists, (&jute.ExistsRequest{Path: "/p/", Watch: true}).Append(nil)); h.Err != jute.NoNode {
		t.Errorf("exists /p/: %v, want NONODE", h.Err)
	}
	if h, _ := rc.call(jute.OpCheckWatches, (&jute.CheckWatchesRequest{Path: "/p/", Type: jute.WatcherData}).Append(nil)); h.Err != jute.OK {
		t.Errorf("checkWatches /p/: %v, want OK", h.Err)
	}
	if h, _ := rc.call(jute.OpExists, (&jute.ExistsRequest{Path: "/p\x00"}).Append(nil)); h.Err != jute.BadArguments {
		t.Errorf("exists with a NUL: %v, want BADARGUMENTS", h.Err)
	}
	if h, _ := rc.call(jute.OpGetData, (&jute.GetDataRequest{Path: "//"}).Append(nil)); h.Err != jute.NoNode {
		t.Errorf("getData //: %v, want NONODE", h.Err)
	}
}

// cutService is a node whose touches do not apply while cut is set, as
// those of a node cut off from its cluster (they wait until their
// context ends).
type cutService struct {
	*node.Node
	cut atomic.Bool
}

func (s *cutService) ZTouch(ctx context.Context, ids []latch.SessionID, gens []uint64) error {
	if s.cut.Load() {
		<-ctx.Done()
		return fmt.Errorf("touch: %w: %w", latch.ErrUnavailable, ctx.Err())
	}
	return s.Node.ZTouch(ctx, ids, gens)
}

// TestCutOffClosesConnections: a node that cannot commit its sessions'
// touches closes the connection of a session whose liveness has not
// reached the cluster for half its timeout, however busy its client, so
// that the client moves the session elsewhere before it lapses; the
// session lives on, and attaches again. A node that can commit keeps
// the connection however long it lasts.
func TestCutOffClosesConnections(t *testing.T) {
	n, err := node.New(node.Config{})
	if err != nil {
		t.Fatal(err)
	}
	svc := &cutService{Node: n}
	cfg := DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.TickTime = 100 * time.Millisecond
	cfg.TouchEvery = 50 * time.Millisecond
	s, err := New(svc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
		n.Shutdown(ctx)
	})
	const timeout = time.Second
	a := dialRaw(t, s.Addr().String())
	resp := a.connect(jute.ConnectRequest{TimeOut: int32(timeout / time.Millisecond)})
	a.call(jute.OpCreate, create("/e", nil, 1))
	// ping pings every timeout/10 for d, and returns false as soon as
	// the connection closes.
	ping := func(d time.Duration) bool {
		for end := time.Now().Add(d); time.Now().Before(end); {
			a.send((&jute.RequestHeader{Xid: jute.XidPing, Type: jute.OpPing}).Append(nil))
			a.c.SetReadDeadline(time.Now().Add(time.Second))
			if _, err := a.frame(); err != nil {
				return false
			}
			time.Sleep(timeout / 10)
		}
		return true
	}
	if !ping(2 * timeout) {
		t.Fatal("the connection closed while the node could commit")
	}
	svc.cut.Store(true)
	cutAt := time.Now()
	if ping(2 * timeout) {
		t.Fatalf("the connection is open %v after the node could no longer commit (session timeout %v)", time.Since(cutAt), timeout)
	}
	if d := time.Since(cutAt); d > timeout {
		t.Errorf("the connection closed %v after the node could no longer commit: after the session's timeout, %v", d, timeout)
	}
	svc.cut.Store(false)
	b := dialRaw(t, s.Addr().String())
	got := b.connect(jute.ConnectRequest{TimeOut: resp.TimeOut, SessionID: resp.SessionID, Passwd: resp.Passwd, LastZxidSeen: a.zxid})
	if got.SessionID != resp.SessionID {
		t.Fatalf("attach after the close: %+v, want session %#x", got, resp.SessionID)
	}
	h, d := b.call(jute.OpExists, (&jute.ExistsRequest{Path: "/e"}).Append(nil))
	var ex jute.ExistsResponse
	ex.Decode(d)
	if h.Err != jute.OK || ex.Stat.EphemeralOwner != resp.SessionID {
		t.Errorf("ephemeral after the reattach: %v %+v", h.Err, ex)
	}
}
