package node

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/fsm"
	"github.com/latchd/latch/internal/znode"
)

// zRecorder is a ZListener that records the sessions that ended.
type zRecorder struct {
	mu    sync.Mutex
	ended []latch.SessionID
}

func (r *zRecorder) ZChanged(int64, []znode.Event)         {}
func (r *zRecorder) ZSessionMoved(latch.SessionID, uint64) {}
func (r *zRecorder) ZSessionEnded(id latch.SessionID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ended = append(r.ended, id)
}

func (r *zRecorder) get() []latch.SessionID {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ended)
}

var openACL = []znode.ACL{{Perms: znode.PermAll, Scheme: znode.SchemeWorld, ID: znode.IDAnyone}}

// zCreate creates path with mode for session id of generation gen, or
// fails the test.
func zCreate(t *testing.T, n *Node, id latch.SessionID, gen uint64, path string, mode znode.Mode) {
	t.Helper()
	rs, _, err := n.ZWrite(id, gen, []znode.Op{{Kind: znode.OpCreate, Path: path, ACL: openACL, Mode: mode}}, false)
	if err != nil || len(rs) != 1 || rs[0].Code != znode.OK {
		t.Fatalf("create %s: %v %+v", path, err, rs)
	}
}

// TestZSessionsShown checks what Stats and Sessions show of the data
// tree and its sessions.
func TestZSessionsShown(t *testing.T) {
	n := newNode(t, Config{})
	before := n.Stats()
	if before.ZSessions != 0 || before.Znodes != 4 || before.Ephemerals != 0 {
		t.Fatalf("Stats() of an empty tree = %+v", before)
	}
	dl := open(t, n, latch.SessionOptions{Protocol: "dlock", Peer: "10.0.0.1:1"})
	defer dl.Close()
	passwd := [fsm.PasswordLen]byte{1}
	id, _, err := n.ZOpen(6*time.Second, passwd)
	if err != nil {
		t.Fatal(err)
	}
	empty, _, err := n.ZOpen(4*time.Second, passwd)
	if err != nil {
		t.Fatal(err)
	}
	zCreate(t, n, id, 0, "/app", znode.Persistent)
	zCreate(t, n, id, 0, "/app/b", znode.Ephemeral)
	zCreate(t, n, id, 0, "/app/a", znode.Ephemeral)

	st := n.Stats()
	if st.ZSessions != 2 || st.Znodes != 7 || st.Ephemerals != 2 || st.Sessions != 3 || st.Zxid <= before.Zxid {
		t.Errorf("Stats() = %+v, want 2 ZooKeeper sessions of 3, 7 znodes, 2 ephemerals, zxid past %#x", st, before.Zxid)
	}
	var zxid int64
	n.ZRead(func(tr *znode.Tree) { zxid = tr.Zxid() })
	if st.Zxid != zxid {
		t.Errorf("Stats().Zxid = %#x, the tree's %#x", st.Zxid, zxid)
	}

	got := map[latch.SessionID]latch.SessionInfo{}
	for _, si := range n.Sessions() {
		got[si.ID] = si
	}
	for _, tt := range []struct {
		id         latch.SessionID
		protocol   string
		ttl        time.Duration
		ephemerals []string
	}{
		{dl.ID(), "dlock", 0, nil},
		{id, ZooKeeperProtocol, 6 * time.Second, []string{"/app/a", "/app/b"}},
		{empty, ZooKeeperProtocol, 4 * time.Second, []string{}},
	} {
		si, ok := got[tt.id]
		if !ok {
			t.Errorf("Sessions() lacks session %d", tt.id)
			continue
		}
		if si.Protocol != tt.protocol || si.TTL != tt.ttl || !slices.Equal(si.Ephemerals, tt.ephemerals) ||
			(si.Ephemerals == nil) != (tt.ephemerals == nil) {
			t.Errorf("session %d = protocol %q TTL %v ephemerals %#v; want %q %v %#v",
				tt.id, si.Protocol, si.TTL, si.Ephemerals, tt.protocol, tt.ttl, tt.ephemerals)
		}
	}
}

// TestEndZSession checks that EndSession ends a ZooKeeper session, which
// this node keeps no record of, whatever its generation: its ephemerals
// go and the listener hears of its end.
func TestEndZSession(t *testing.T) {
	for _, tt := range []struct {
		name     string
		attaches int // times the session is attached after it opens
	}{
		{"opened", 0},
		{"attached", 1},
		{"attached twice", 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n := newNode(t, Config{})
			var rec zRecorder
			n.SetZListener(&rec)
			passwd := [fsm.PasswordLen]byte{7}
			id, _, err := n.ZOpen(10*time.Second, passwd)
			if err != nil {
				t.Fatal(err)
			}
			var gen uint64
			for range tt.attaches {
				if gen, _, _, err = n.ZAttach(id, passwd); err != nil {
					t.Fatal(err)
				}
			}
			zCreate(t, n, id, gen, "/lock", znode.Ephemeral)
			other, _, err := n.ZOpen(10*time.Second, passwd)
			if err != nil {
				t.Fatal(err)
			}
			zCreate(t, n, other, 0, "/other", znode.Ephemeral)

			if err := n.EndSession(id); err != nil {
				t.Fatalf("EndSession(%d) = %v", id, err)
			}
			if got := rec.get(); !slices.Equal(got, []latch.SessionID{id}) {
				t.Errorf("ZSessionEnded heard %v, want [%d]", got, id)
			}
			var lock, kept bool
			n.ZRead(func(tr *znode.Tree) {
				_, lock = tr.Exists("/lock")
				_, kept = tr.Exists("/other")
			})
			if lock || !kept {
				t.Errorf("after the end: /lock exists %v, /other exists %v; want false, true", lock, kept)
			}
			if st := n.Stats(); st.ZSessions != 1 || st.Ephemerals != 1 || st.Sessions != 1 {
				t.Errorf("Stats() after the end = %+v, want the other session alone", st)
			}
			if _, _, err := n.ZWrite(id, gen, []znode.Op{{Kind: znode.OpCreate, Path: "/late", ACL: openACL}}, false); !errors.Is(err, fsm.ErrZSession) {
				t.Errorf("a write of the ended session = %v, want ErrZSession", err)
			}
			if err := n.EndSession(id); !errors.Is(err, latch.ErrNoSession) {
				t.Errorf("EndSession(%d) again = %v, want ErrNoSession", id, err)
			}
		})
	}
}
