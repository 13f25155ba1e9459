package znode

import (
	"bytes"
	"reflect"
	"slices"
	"testing"
)

// checkInvariants walks the tree and checks its indexes against it.
func checkInvariants(t *testing.T, tr *Tree) {
	t.Helper()
	nodes, eph := 0, 0
	containers := 0
	perSession := map[int64]int{}
	var walk func(n *node)
	walk = func(n *node) {
		nodes++
		switch {
		case n.owner == ContainerOwner:
			containers++
			if _, ok := tr.containers[n]; !ok {
				t.Fatalf("container %s not indexed", n.path())
			}
		case n.owner != 0:
			eph++
			perSession[n.owner]++
			s := tr.sessions[n.owner]
			if s == nil {
				t.Fatalf("%s: owner %d is no session", n.path(), n.owner)
			}
			if _, ok := s.ephemerals[n]; !ok {
				t.Fatalf("%s not in its session's set", n.path())
			}
			if len(n.children) > 0 {
				t.Fatalf("ephemeral %s has children", n.path())
			}
		}
		for name, c := range n.children {
			if c.parent != n || c.name != name {
				t.Fatalf("%s: child %q links back wrong", n.path(), name)
			}
			walk(c)
		}
	}
	walk(tr.root)
	if gotN, gotE := tr.Count(); gotN != nodes || gotE != eph {
		t.Fatalf("Count %d %d, walk %d %d", gotN, gotE, nodes, eph)
	}
	if len(tr.containers) != containers {
		t.Fatalf("%d containers indexed, %d in the tree", len(tr.containers), containers)
	}
	for id, s := range tr.sessions {
		if len(s.ephemerals) != perSession[id] {
			t.Fatalf("session %d indexes %d ephemerals, owns %d", id, len(s.ephemerals), perSession[id])
		}
	}
	for _, p := range []string{"/", "/zookeeper", "/zookeeper/config", "/zookeeper/quota"} {
		if _, ok := tr.Exists(p); !ok {
			t.Fatalf("%s gone", p)
		}
	}
}

// checkSnapshot holds AppendSnapshot(Restore(AppendSnapshot(t))) ==
// AppendSnapshot(t).
func checkSnapshot(t *testing.T, tr *Tree) {
	t.Helper()
	snap := tr.AppendSnapshot(nil)
	back, err := Restore(tr.cfg, snap)
	if err != nil {
		t.Fatalf("Restore of a snapshot: %v", err)
	}
	if again := back.AppendSnapshot(nil); !bytes.Equal(again, snap) {
		t.Fatal("snapshot does not round-trip")
	}
	checkInvariants(t, back)
}

// fuzzReader decodes ops from fuzz bytes; past the end it reads zeros.
type fuzzReader struct{ b []byte }

func (r *fuzzReader) byte() byte {
	if len(r.b) == 0 {
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

var fuzzPaths = []string{"/", "/a", "/a/b", "/a/b/c", "/b", "/a/x-", "/x-", "/a/", "/zookeeper",
	"/zookeeper/config", "/zookeeper/q", "/c", "/c/d", "//", "/a/.", "a"}

func (r *fuzzReader) path(tr *Tree) string {
	c := r.byte()
	switch {
	case c < 128:
		return fuzzPaths[int(c)%len(fuzzPaths)]
	case c < 224:
		// An existing znode.
		var paths []string
		var walk func(n *node)
		walk = func(n *node) {
			paths = append(paths, n.path())
			for _, c := range n.children {
				walk(c)
			}
		}
		walk(tr.root)
		slices.Sort(paths)
		return paths[int(c)%len(paths)]
	}
	// Raw bytes, for the path rules.
	n := int(r.byte() % 12)
	b := make([]byte, 0, n)
	for range n {
		b = append(b, r.byte())
	}
	return string(b)
}

func (r *fuzzReader) op(tr *Tree) Op {
	c := r.byte()
	op := Op{Kind: []OpKind{OpCreate, OpCreate, OpCreate, OpDelete, OpSetData, OpCheck, OpSetACL, 0}[c%8]}
	op.Path = r.path(tr)
	op.Version = int32(r.byte()%4) - 1
	m := r.byte()
	op.Mode = Mode(m % 5)
	if m >= 250 {
		op.Mode = Mode(m - 250)
	}
	switch a := r.byte(); {
	case a < 200:
		op.ACL = open
	case a < 230:
		op.ACL = perms(int32(a % 32))
	case a < 250:
		op.ACL = []ACL{{int32(a % 32), "world", "anyone"}, {PermRead, "world", "anyone"}}
	case a < 253:
		op.ACL = []ACL{{31, "ip", "127.0.0.1"}}
	}
	if d := r.byte(); d > 0 {
		op.Data = bytes.Repeat([]byte{d}, int(d%9))
	}
	return op
}

// FuzzTree applies ops decoded from the input to a tree and to the naive
// reference tree of the model test, comparing every result and event, and
// checks the tree's invariants and its snapshot's round trip.
func FuzzTree(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 1, 0, 0, 0, 5})
	f.Add([]byte{0, 1, 0, 0, 0, 5, 0, 6, 0, 2, 0, 0, 0, 6, 0, 3, 0, 0, 0, 3, 0, 6, 0})
	f.Add([]byte{8, 0, 1, 0, 0, 0, 0, 9, 3, 0, 0, 1, 1, 0, 0, 0, 0, 10, 0, 0, 0, 12, 3})
	f.Add([]byte{0, 11, 0, 4, 0, 0, 0, 12, 0, 0, 0, 4, 0, 0, 3, 12, 0, 0, 0, 14})
	f.Add([]byte{1, 2, 0, 0, 0, 0, 0, 4, 9, 0, 8, 6, 14, 0, 1, 0, 0, 0, 0, 0, 3, 2, 3})
	f.Add([]byte("\x00\xe0\x05/a\x00b\x01\x00\x00\x00\x00\x01\xf0\x04/\xc3\xa9\x00\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) > 4000 {
			return
		}
		cfgs := []Config{{}, {MaxNodes: 10, MaxChildren: 3, MaxData: 5, MaxEphemerals: 2}}
		r := &fuzzReader{b: in}
		cfg := cfgs[r.byte()%2]
		tr, model := New(cfg), newRef(cfg)
		now := int64(1000)
		for step := 0; len(r.b) > 0; step++ {
			now += int64(r.byte())
			c := r.byte()
			session := int64(c % 4)
			switch c >> 4 {
			default:
				op := r.op(tr)
				if got, want := tr.Write(session, now, op), model.write(session, now, op); got != want {
					t.Fatalf("step %d: Write(%d, %+v) = %+v, model %+v", step, session, op, got, want)
				}
			case 8, 9, 10:
				ops := make([]Op, r.byte()%5)
				for i := range ops {
					ops[i] = r.op(tr)
				}
				if got, want := tr.Multi(session, now, ops), model.multi(session, now, ops); !reflect.DeepEqual(got, want) {
					t.Fatalf("step %d: Multi(%d, %+v) = %+v, model %+v", step, session, ops, got, want)
				}
			case 11, 12:
				tr.OpenSession(session, [16]byte{c}, int32(c), now)
				model.open(session, [16]byte{c}, int32(c))
			case 13:
				if got, want := tr.EndSession(session, now), model.end(session); got != want {
					t.Fatalf("step %d: EndSession(%d) = %d, model %d", step, session, got, want)
				}
			case 14:
				if got, want := tr.ReapContainers(now), model.reap(); got != want {
					t.Fatalf("step %d: ReapContainers = %d, model %d", step, got, want)
				}
			case 15:
				tr.SeedZxid(tr.Zxid() + int64(c&3))
				model.zxid = tr.Zxid()
			}
			if got := tr.TakeEvents(nil); !slices.Equal(got, model.events) {
				t.Fatalf("step %d: events %v, model %v", step, got, model.events)
			}
			model.events = model.events[:0]
			if tr.Zxid() != model.zxid {
				t.Fatalf("step %d: zxid %d, model %d", step, tr.Zxid(), model.zxid)
			}
			checkInvariants(t, tr)
		}
		compare(t, -1, tr, model)
		checkSnapshot(t, tr)
	})
}

// FuzzRestore: Restore never panics on any input, and what it accepts
// round-trips byte for byte and holds the tree's invariants.
func FuzzRestore(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{1})
	f.Add([]byte{1, 0, 0, 0})
	f.Add(New(Config{}).AppendSnapshot(nil))
	f.Add(sampleTree(f).AppendSnapshot(nil))
	small := New(Config{})
	small.OpenSession(1, [16]byte{1}, 100, 1)
	small.Write(1, 5, create("/e", Ephemeral))
	small.Write(1, 5, create("/c", Container))
	f.Add(small.AppendSnapshot(nil))
	f.Fuzz(func(t *testing.T, in []byte) {
		tr, err := Restore(Config{}, in)
		if err != nil {
			if tr != nil {
				t.Fatal("a tree with an error")
			}
			return
		}
		if out := tr.AppendSnapshot(nil); !bytes.Equal(out, in) {
			t.Fatal("accepted input does not round-trip")
		}
		checkInvariants(t, tr)
		// The restored tree takes writes.
		tr.Write(0, 1, create("/fuzz", Persistent))
		tr.EndSession(1, 1)
		checkInvariants(t, tr)
		checkSnapshot(t, tr)
	})
}
