package znode

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
)

// sampleTree holds every kind of znode, sessions, and changed stats.
func sampleTree(t testing.TB) *Tree {
	tr := New(Config{})
	tr.SeedZxid(1 << 40)
	tr.OpenSession(3, [16]byte{3, 3}, 3000, 1)
	tr.OpenSession(1<<50, [16]byte{9}, 9000, 1)
	ops := []Op{
		create("/a", Persistent), create("/a/b", Persistent), create("/a-b", Persistent),
		create("/a/s-", PersistentSequential), create("/a/e-", EphemeralSequential),
		create("/c", Container), create("/c/x", Persistent), del("/c/x", -1),
		{Kind: OpCreate, Path: "/nil", ACL: open},
		{Kind: OpCreate, Path: "/empty", ACL: open, Data: []byte{}},
		createACL("/acl", []ACL{{1, "world", "anyone"}, {-7, "world", "anyone"}}),
		set("/a", "data", -1), setACL("/a", perms(PermRead|PermCreate|PermDelete), -1),
		create("/zookeeper/mine", Persistent),
	}
	for _, op := range ops {
		if r := tr.Write(3, 1700000000000, op); r.Code != OK {
			t.Fatalf("%+v: %v", op, r.Code)
		}
	}
	tr.Write(1<<50, 5, create("/big", Ephemeral))
	return tr
}

func TestSnapshotRoundTrip(t *testing.T) {
	for _, tr := range []*Tree{New(Config{}), sampleTree(t)} {
		snap := tr.AppendSnapshot([]byte("prefix"))
		if string(snap[:6]) != "prefix" || snap[6] != 1 {
			t.Fatalf("head %q", snap[:7])
		}
		snap = snap[6:]
		got, err := Restore(Config{}, snap)
		if err != nil {
			t.Fatal(err)
		}
		if again := got.AppendSnapshot(nil); !bytes.Equal(again, snap) {
			t.Fatal("round trip differs")
		}
		assertSameTree(t, tr, got)
		// The restored tree works on.
		got.Write(3, 1, create("/a/s-", PersistentSequential))
		tr.Write(3, 1, create("/a/s-", PersistentSequential))
		assertSameTree(t, tr, got)
	}
}

// assertSameTree compares two trees through the API.
func assertSameTree(t *testing.T, a, b *Tree) {
	t.Helper()
	if a.Zxid() != b.Zxid() {
		t.Errorf("zxid %d, %d", a.Zxid(), b.Zxid())
	}
	if !reflect.DeepEqual(a.Sessions(), b.Sessions()) {
		t.Errorf("sessions %v, %v", a.Sessions(), b.Sessions())
	}
	an, ae := a.Count()
	bn, be := b.Count()
	if an != bn || ae != be {
		t.Errorf("Count %d %d, %d %d", an, ae, bn, be)
	}
	var walk func(p string)
	walk = func(p string) {
		da, sa, ca := a.Get(p)
		db, sb, cb := b.Get(p)
		if !bytes.Equal(da, db) || (da == nil) != (db == nil) || sa != sb || ca != cb {
			t.Errorf("%s: %q %+v %v, %q %+v %v", p, da, sa, ca, db, sb, cb)
		}
		aa, _, _ := a.GetACL(p)
		ab, _, _ := b.GetACL(p)
		if !reflect.DeepEqual(aa, ab) {
			t.Errorf("%s: ACL %v, %v", p, aa, ab)
		}
		na, _, _ := a.Children(p)
		nb, _, _ := b.Children(p)
		if !reflect.DeepEqual(na, nb) {
			t.Errorf("%s: children %v, %v", p, na, nb)
		}
		for _, n := range na {
			if p == "/" {
				walk("/" + n)
			} else {
				walk(p + "/" + n)
			}
		}
	}
	walk("/")
}

// snapBuilder writes snapshots by hand, to build invalid ones.
type snapBuilder struct{ b []byte }

func (s *snapBuilder) v(x int64) *snapBuilder  { s.b = binary.AppendVarint(s.b, x); return s }
func (s *snapBuilder) u(x uint64) *snapBuilder { s.b = binary.AppendUvarint(s.b, x); return s }
func (s *snapBuilder) str(x string) *snapBuilder {
	s.u(uint64(len(x)))
	s.b = append(s.b, x...)
	return s
}
func (s *snapBuilder) session(id int64) *snapBuilder {
	s.v(id)
	s.b = append(s.b, make([]byte, 16)...)
	return s.v(1000)
}

// node writes a znode with empty data, open ACL, zero stats but owner.
func (s *snapBuilder) node(path string, owner int64, acl ...ACL) *snapBuilder {
	s.str(path).u(1)
	if acl == nil {
		acl = open
	}
	s.u(uint64(len(acl)))
	for _, a := range acl {
		s.v(int64(a.Perms)).str(a.Scheme).str(a.ID)
	}
	for range 8 {
		s.v(0)
	}
	return s.v(owner)
}

func builtins(s *snapBuilder, extra int) *snapBuilder {
	s.u(uint64(4 + extra))
	s.node("/", 0).node("/zookeeper", 0).node("/zookeeper/config", 0, perms(PermRead)...).node("/zookeeper/quota", 0)
	return s
}

func TestRestoreRejects(t *testing.T) {
	head := func(sessions ...int64) *snapBuilder {
		s := &snapBuilder{b: []byte{1}}
		s.v(10).u(uint64(len(sessions)))
		for _, id := range sessions {
			s.session(id)
		}
		return s
	}
	// A hand-built valid snapshot, to show the builder is right.
	ok := builtins(head(4), 2).node("/zze", 4).node("/zzz", 0).b
	if _, err := Restore(Config{}, ok); err != nil {
		t.Fatalf("valid: %v", err)
	}
	tests := map[string][]byte{
		"empty":              nil,
		"version 0":          {0},
		"version 2":          {2, 0, 0, 0},
		"only version":       {1},
		"negative zxid":      (&snapBuilder{b: []byte{1}}).v(-1).u(0).u(0).b,
		"trailing byte":      append(bytes.Clone(ok), 0),
		"no znodes":          head().u(0).b,
		"root not first":     head().u(1).node("/zza", 0).b,
		"count too high":     head().u(5).node("/", 0).b,
		"count too low":      head().u(3).node("/", 0).node("/zookeeper", 0).node("/zookeeper/config", 0).node("/zookeeper/quota", 0).b,
		"missing builtin":    head().u(3).node("/", 0).node("/zookeeper", 0).node("/zookeeper/config", 0, perms(PermRead)...).b,
		"builtin ephemeral":  head(4).u(4).node("/", 0).node("/zookeeper", 0).node("/zookeeper/config", 0, perms(PermRead)...).node("/zookeeper/quota", 4).b,
		"no parent":          builtins(head(), 1).node("/zza/b", 0).b,
		"twice":              builtins(head(), 2).node("/zza", 0).node("/zza", 0).b,
		"unsorted":           builtins(head(), 2).node("/zzb", 0).node("/zza", 0).b,
		"child of ephemeral": builtins(head(4), 2).node("/zze", 4).node("/zze/c", 0).b,
		"unknown owner":      builtins(head(4), 1).node("/zze", 5).b,
		"negative owner":     builtins(head(), 1).node("/zze", -5).b,
		"root owner":         head(4).u(1).node("/", 4).b,
		"bad path":           builtins(head(), 1).node("/zza/", 0).b,
		"relative path":      builtins(head(), 1).node("a", 0).b,
		"second root":        builtins(head(), 1).node("/", 0).b,
		"digest ACL":         builtins(head(), 1).node("/zza", 0, ACL{31, "digest", "x"}).b,
		"dup ACL":            builtins(head(), 1).node("/zza", 0, ACL{31, "world", "anyone"}, ACL{31, "world", "anyone"}).b,
		"session zero":       builtins(head(0), 0).b,
		"session negative":   builtins(head(-4), 0).b,
		"session twice":      builtins(head(4, 4), 0).b,
		"sessions unsorted":  builtins(head(5, 4), 0).b,
		"huge data length":   builtins(head(), 1).str("/zza").u(1 << 62).b,
		"huge count":         head().u(1 << 62).b,
		"non-minimal varint": append([]byte{1, 0x94, 0x80, 0x00}, builtins(head(), 0).b[2:]...),
	}
	// An ACL list that is empty: built by hand.
	s := builtins(head(), 1)
	s.str("/zza").u(1).u(0)
	for range 9 {
		s.v(0)
	}
	tests["empty ACL"] = s.b
	// A zxid past the tree's.
	s = builtins(head(), 1)
	s.str("/zza").u(1).u(1).v(31).str("world").str("anyone").v(11)
	for range 8 {
		s.v(11)
	}
	tests["zxid past tree"] = s.b
	s = builtins(head(), 1)
	s.str("/zza").u(1).u(1).v(31).str("world").str("anyone").v(5).v(4).v(5)
	for range 6 {
		s.v(0)
	}
	tests["mzxid before czxid"] = s.b
	s = builtins(head(), 1)
	s.str("/zza").u(1).u(1).v(math.MaxInt32 + 1).str("world").str("anyone")
	for range 9 {
		s.v(0)
	}
	tests["perms out of range"] = s.b

	// The reason each is refused for (the rest: any reason).
	why := map[string]string{
		"version 2":          "version 2",
		"trailing byte":      "after the last",
		"root not first":     "want /",
		"missing builtin":    "built-in",
		"builtin ephemeral":  "built-in",
		"no parent":          "no parent",
		"twice":              "twice",
		"unsorted":           "canonical",
		"child of ephemeral": "child of an ephemeral",
		"unknown owner":      "no session",
		"negative owner":     "no session",
		"root owner":         "root has an owner",
		"bad path":           "bad path",
		"second root":        "bad path",
		"digest ACL":         "bad ACL",
		"dup ACL":            "bad ACL",
		"empty ACL":          "bad ACL",
		"session zero":       "session id 0",
		"session twice":      "session id 4",
		"sessions unsorted":  "canonical",
		"perms out of range": "out of range",
		"zxid past tree":     "outside",
		"mzxid before czxid": "before czxid",
		"non-minimal varint": "canonical",
	}
	for name, b := range tests {
		tr, err := Restore(Config{}, b)
		if err == nil || tr != nil {
			t.Errorf("%s: accepted", name)
		} else if !errors.Is(err, errSnapshot) {
			t.Errorf("%s: %v does not wrap errSnapshot", name, err)
		} else if !strings.Contains(err.Error(), why[name]) {
			t.Errorf("%s: %v, want %q", name, err, why[name])
		}
	}
}

// TestRestoreCorruption: no truncation or flipped byte of a real snapshot
// panics, and whatever is accepted round-trips.
func TestRestoreCorruption(t *testing.T) {
	snap := sampleTree(t).AppendSnapshot(nil)
	for n := range len(snap) {
		if _, err := Restore(Config{}, snap[:n]); err == nil {
			t.Errorf("truncated to %d accepted", n)
		}
	}
	for i := range snap {
		for _, x := range []byte{1, 0x80, 0xff} {
			b := bytes.Clone(snap)
			b[i] ^= x
			if tr, err := Restore(Config{}, b); err == nil && !bytes.Equal(tr.AppendSnapshot(nil), b) {
				t.Errorf("byte %d ^ %#x accepted but not canonical", i, x)
			}
		}
	}
}

func TestRestoreIgnoresLimits(t *testing.T) {
	snap := sampleTree(t).AppendSnapshot(nil)
	tr, err := Restore(Config{MaxNodes: 1, MaxData: 1}, snap)
	if err != nil {
		t.Fatal(err)
	}
	if r := tr.Write(3, 1, create("/more", Persistent)); r.Code != QuotaExceeded {
		t.Errorf("limit not applied after restore: %v", r.Code)
	}
}
