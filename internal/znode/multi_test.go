package znode

import (
	"reflect"
	"testing"
)

func codes(rs []Result) []Code {
	out := make([]Code, len(rs))
	for i, r := range rs {
		out[i] = r.Code
	}
	return out
}

func TestMulti(t *testing.T) {
	tests := []struct {
		name  string
		setup []Op
		ops   []Op
		codes []Code
		paths []string // successful multis: each result's path
	}{
		{name: "empty", ops: nil, codes: []Code{}},
		{name: "all ok", setup: []Op{create("/p", Persistent)},
			ops:   []Op{create("/p/a", Persistent), set("/p/a", "x", 0), check("/p/a", 1), create("/p/s-", PersistentSequential), del("/p/a", 1)},
			codes: []Code{OK, OK, OK, OK, OK}, paths: []string{"/p/a", "", "", "/p/s-0000000001", ""}},
		{name: "sequential see earlier ops", setup: []Op{create("/q", Persistent)},
			ops:   []Op{create("/q/x-", EphemeralSequential), create("/q/x-", EphemeralSequential), create("/q/x-", PersistentSequential)},
			codes: []Code{OK, OK, OK}, paths: []string{"/q/x-0000000000", "/q/x-0000000001", "/q/x-0000000002"}},
		{name: "create then delete then create", ops: []Op{create("/a", Persistent), del("/a", -1), create("/a", Persistent)},
			codes: []Code{OK, OK, OK}, paths: []string{"/a", "", "/a"}},
		{name: "fail middle", setup: []Op{create("/p", Persistent)},
			ops:   []Op{create("/p/a", Persistent), del("/nope", -1), create("/p/b", Persistent)},
			codes: []Code{OK, NoNode, RuntimeInconsistency}},
		{name: "fail first", ops: []Op{check("/nope", -1), create("/a", Persistent)},
			codes: []Code{NoNode, RuntimeInconsistency}},
		{name: "fail last rolls back all", setup: []Op{create("/p", Persistent), create("/p/old", Persistent)},
			ops: []Op{create("/p/s-", PersistentSequential), set("/p", "new", -1), del("/p/old", -1),
				create("/p/e", Ephemeral), create("/c", Container), check("/p", 5)},
			codes: []Code{OK, OK, OK, OK, OK, BadVersion}},
		{name: "delete parent after child delete", setup: []Op{create("/p", Persistent), create("/p/c", Persistent)},
			ops: []Op{del("/p/c", -1), del("/p", -1), create("/p", Persistent), check("/p", 1)}, codes: []Code{OK, OK, OK, BadVersion}},
		{name: "setACL refused", setup: []Op{create("/p", Persistent)},
			ops: []Op{set("/p", "x", -1), setACL("/p", open, -1), set("/p", "y", -1)}, codes: []Code{OK, BadArguments, RuntimeInconsistency}},
		{name: "bad kind", ops: []Op{{Kind: 0, Path: "/a"}}, codes: []Code{BadArguments}},
		{name: "TTL", ops: []Op{create("/a", 5)}, codes: []Code{Unimplemented}},
		{name: "version sees earlier setData", setup: []Op{create("/p", Persistent)},
			ops: []Op{set("/p", "x", 0), set("/p", "y", 1), check("/p", 2)}, codes: []Code{OK, OK, OK}, paths: []string{"", "", ""}},
		{name: "ephemeral child of earlier ephemeral", ops: []Op{create("/e", Ephemeral), create("/e/c", Persistent)},
			codes: []Code{OK, NoChildrenForEphemerals}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := newTree(t, Config{}, tt.setup...)
			before := tr.AppendSnapshot(nil)
			zxid := tr.Zxid()
			rs := tr.Multi(sess, 9, tt.ops)
			if got := codes(rs); !reflect.DeepEqual(got, tt.codes) {
				t.Fatalf("codes %v, want %v", got, tt.codes)
			}
			if tr.Zxid() != zxid+1 {
				t.Errorf("zxid %d after %d", tr.Zxid(), zxid)
			}
			ev := tr.TakeEvents(nil)
			if tt.paths == nil && len(tt.codes) > 0 {
				for i, r := range rs {
					if r != (Result{Code: tt.codes[i]}) {
						t.Errorf("result %d: %+v", i, r)
					}
				}
				if len(ev) != 0 {
					t.Errorf("events %v", ev)
				}
				tr.zxid--
				if string(tr.AppendSnapshot(nil)) != string(before) {
					t.Error("a failed multi changed the tree")
				}
				return
			}
			for i, r := range rs {
				if r.Path != tt.paths[i] {
					t.Errorf("result %d path %q, want %q", i, r.Path, tt.paths[i])
				}
				if r.Path != "" && r.Stat.Czxid != zxid+1 {
					t.Errorf("result %d czxid %d", i, r.Stat.Czxid)
				}
			}
		})
	}
}

// TestMultiMatchesWrites: a successful multi leaves the tree and events that
// the same ops written one by one leave, but for the zxids.
func TestMultiMatchesWrites(t *testing.T) {
	ops := []Op{create("/p", Persistent), create("/p/s-", EphemeralSequential), set("/p", "v", 0),
		create("/p/c", Container), create("/p/c/x", Persistent), del("/p/c/x", -1), check("/p", 1)}
	a := newTree(t, Config{})
	b := newTree(t, Config{})
	rs := a.Multi(sess, 5, ops)
	for i, op := range ops {
		r := b.Write(sess, 5, op)
		if r.Code != OK || rs[i].Code != OK || r.Path != rs[i].Path {
			t.Fatalf("op %d: multi %+v, write %+v", i, rs[i], r)
		}
	}
	if ea, eb := a.TakeEvents(nil), b.TakeEvents(nil); !reflect.DeepEqual(ea, eb) {
		t.Errorf("events\n%v\n%v", ea, eb)
	}
	for _, p := range []string{"/", "/p", "/p/s-0000000000", "/p/c"} {
		sa, _ := a.Exists(p)
		sb, _ := b.Exists(p)
		sb.Czxid, sb.Mzxid, sb.Pzxid = sa.Czxid, sa.Mzxid, sa.Pzxid
		if sa != sb {
			t.Errorf("%s: multi %+v, writes %+v", p, sa, sb)
		}
		if sa.Pzxid != a.Zxid() && p != "/p/s-0000000000" {
			t.Errorf("%s: pzxid %d, zxid %d", p, sa.Pzxid, a.Zxid())
		}
	}
}

// TestMultiRollbackCounters: a failed multi gives back its sequence
// numbers, its ephemerals and its znode counts.
func TestMultiRollbackCounters(t *testing.T) {
	tr := newTree(t, Config{MaxNodes: 8}, create("/p", Persistent))
	rs := tr.Multi(sess, 1, []Op{create("/p/s-", EphemeralSequential), create("/p/t-", PersistentSequential),
		create("/p/u", Persistent), create("/p/v", Persistent)})
	if got := codes(rs); !reflect.DeepEqual(got, []Code{OK, OK, OK, QuotaExceeded}) {
		t.Fatalf("codes %v", got)
	}
	if n, e := tr.Count(); n != 5 || e != 0 {
		t.Errorf("Count %d %d", n, e)
	}
	if got := tr.Ephemerals(sess); len(got) != 0 {
		t.Errorf("ephemerals %v", got)
	}
	if r := tr.Write(sess, 1, create("/p/s-", PersistentSequential)); r.Path != "/p/s-0000000000" {
		t.Errorf("sequence not rolled back: %q", r.Path)
	}
}
