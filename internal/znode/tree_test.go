package znode

import (
	"math"
	"reflect"
	"slices"
	"testing"
)

var open = []ACL{{Perms: PermAll, Scheme: "world", ID: "anyone"}}

func perms(p int32) []ACL { return []ACL{{Perms: p, Scheme: "world", ID: "anyone"}} }

func create(path string, mode Mode) Op {
	return Op{Kind: OpCreate, Path: path, Mode: mode, ACL: open, Data: []byte("d")}
}
func createACL(path string, acl []ACL) Op {
	return Op{Kind: OpCreate, Path: path, ACL: acl}
}
func del(path string, version int32) Op { return Op{Kind: OpDelete, Path: path, Version: version} }
func set(path string, data string, version int32) Op {
	return Op{Kind: OpSetData, Path: path, Data: []byte(data), Version: version}
}
func check(path string, version int32) Op { return Op{Kind: OpCheck, Path: path, Version: version} }
func setACL(path string, acl []ACL, version int32) Op {
	return Op{Kind: OpSetACL, Path: path, ACL: acl, Version: version}
}

const (
	sess      = 7
	noSession = -1 // TestWriteRules: write as session 0
)

// newTree returns a tree with session sess open and the setup ops applied,
// each of which must succeed; its events are taken.
func newTree(t *testing.T, cfg Config, setup ...Op) *Tree {
	t.Helper()
	tr := New(cfg)
	tr.OpenSession(sess, [16]byte{1}, 10000, 1)
	for _, op := range setup {
		if r := tr.Write(sess, 2, op); r.Code != OK {
			t.Fatalf("setup %+v: %v", op, r.Code)
		}
	}
	tr.TakeEvents(nil)
	return tr
}

func TestNewBuiltins(t *testing.T) {
	tr := New(Config{})
	if tr.Zxid() != 0 {
		t.Errorf("zxid %d", tr.Zxid())
	}
	if n, e := tr.Count(); n != 4 || e != 0 {
		t.Errorf("Count = %d, %d", n, e)
	}
	tests := []struct {
		path     string
		cversion int32
		children []string
		aversion int32
		acl      []ACL
	}{
		{"/", -1, []string{"zookeeper"}, 0, open},
		{"/zookeeper", -2, []string{"config", "quota"}, 0, open},
		{"/zookeeper/config", 0, []string{}, -1, perms(PermRead)},
		{"/zookeeper/quota", 0, []string{}, 0, open},
	}
	for _, tt := range tests {
		data, st, code := tr.Get(tt.path)
		if code != OK || data == nil || len(data) != 0 {
			t.Errorf("Get(%s) = %q (nil %v), %v", tt.path, data, data == nil, code)
		}
		want := Stat{Cversion: tt.cversion, Aversion: tt.aversion, NumChildren: int32(len(tt.children))}
		if st != want {
			t.Errorf("%s: stat %+v, want %+v", tt.path, st, want)
		}
		names, _, _ := tr.Children(tt.path)
		if !slices.Equal(names, tt.children) {
			t.Errorf("%s: children %q, want %q", tt.path, names, tt.children)
		}
		acl, _, _ := tr.GetACL(tt.path)
		if !reflect.DeepEqual(acl, tt.acl) {
			t.Errorf("%s: ACL %+v", tt.path, acl)
		}
	}
}

// TestWriteRules holds each rule of a single write: the setup ops succeed,
// then op answers code (and path, for a create).
func TestWriteRules(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		setup   []Op
		session int64 // 0: sess
		op      Op
		code    Code
		path    string
	}{
		{name: "create", op: create("/a", Persistent), path: "/a"},
		{name: "create under root seq", op: create("/seq-", PersistentSequential), path: "/seq-0000000000"},
		{name: "create root seq", op: create("/", PersistentSequential), path: "/0000000000"},
		{name: "create trailing slash seq", setup: []Op{create("/a", Persistent)}, op: create("/a/", PersistentSequential), path: "/a/0000000000"},
		{name: "create trailing slash", setup: []Op{create("/a", Persistent)}, op: create("/a/", Persistent), code: BadArguments},
		{name: "create dot seq", setup: []Op{create("/a", Persistent)}, op: create("/a/.", EphemeralSequential), path: "/a/.0000000000"},
		{name: "create root", op: create("/", Persistent), code: NodeExists},
		{name: "create relative", op: create("a", Persistent), code: BadArguments},
		{name: "create empty segment", op: create("//a", Persistent), code: BadArguments},
		{name: "create dotdot", op: create("/a/..", Persistent), code: NoNode},
		{name: "create dotdot existing parent", setup: []Op{create("/a", Persistent)}, op: create("/a/..", Persistent), code: BadArguments},
		{name: "create dot parent", setup: []Op{create("/a", Persistent)}, op: create("/a/./b", Persistent), code: NoNode},
		{name: "create empty segment in parent", setup: []Op{create("/a", Persistent)}, op: create("/a//b", Persistent), code: NoNode},
		{name: "create nul", op: create("/a\x00", Persistent), code: BadArguments},
		{name: "create bad path before session", session: 99, op: create("a", Ephemeral), code: BadArguments},
		{name: "create control", op: create("/a\x01", Persistent), code: BadArguments},
		{name: "create exists", setup: []Op{create("/a", Persistent)}, op: create("/a", Persistent), code: NodeExists},
		{name: "create builtin", op: create("/zookeeper", Persistent), code: NodeExists},
		{name: "create under builtin", op: create("/zookeeper/x", Persistent), path: "/zookeeper/x"},
		{name: "create no parent", op: create("/a/b", Persistent), code: NoNode},
		{name: "create seq no parent", op: create("/a/b-", PersistentSequential), code: NoNode},
		{name: "create mode 5", op: create("/a", 5), code: Unimplemented},
		{name: "create mode 6", op: create("/a", 6), code: Unimplemented},
		{name: "create mode 7", op: create("/a", 7), code: BadArguments},
		{name: "create mode -1", op: create("/a", -1), code: BadArguments},
		{name: "create bad path before mode", op: create("a", 5), code: Unimplemented},
		{name: "ephemeral no session", session: noSession, op: create("/e", Ephemeral), code: SessionExpired},
		{name: "ephemeral unknown session", session: 99, op: create("/e", EphemeralSequential), code: SessionExpired},
		{name: "persistent unknown session", session: 99, op: create("/p", Persistent), path: "/p"},
		{name: "ephemeral parent before path", session: 99, op: create("//", Ephemeral), code: SessionExpired},
		{name: "session before ACL", session: 99, op: Op{Kind: OpCreate, Path: "/e", Mode: Ephemeral}, code: SessionExpired},
		{name: "ephemeral parent", setup: []Op{create("/e", Ephemeral)}, op: create("/e/c", Persistent), code: NoChildrenForEphemerals},
		{name: "ephemeral parent seq", setup: []Op{create("/e", Ephemeral)}, op: create("/e/c", EphemeralSequential), code: NoChildrenForEphemerals},
		{name: "exists before ephemeral parent", setup: []Op{create("/e", Ephemeral)}, op: create("/e", Ephemeral), code: NodeExists},
		{name: "container children", setup: []Op{create("/c", Container)}, op: create("/c/x", Ephemeral), path: "/c/x"},
		{name: "ACL empty", op: createACL("/a", nil), code: InvalidACL},
		{name: "ACL digest", op: createACL("/a", []ACL{{31, "digest", "u:p"}}), code: InvalidACL},
		{name: "ACL world other", op: createACL("/a", []ACL{{31, "world", "someone"}}), code: InvalidACL},
		{name: "ACL one bad", op: createACL("/a", []ACL{{31, "world", "anyone"}, {1, "ip", "1.2.3.4"}}), code: InvalidACL},
		{name: "ACL before parent", op: createACL("/x/a", nil), code: InvalidACL},
		{name: "ACL dup", op: createACL("/a", []ACL{{1, "world", "anyone"}, {1, "world", "anyone"}}), path: "/a"},
		{name: "no create perm", setup: []Op{createACL("/r", perms(PermAll&^PermCreate))}, op: create("/r/a", Persistent), code: NoAuth},
		{name: "perm before exists", setup: []Op{create("/r", Persistent), create("/r/a", Persistent), setACL("/r", perms(PermRead), -1)}, op: create("/r/a", Persistent), code: NoAuth},
		{name: "create perm enough", setup: []Op{createACL("/r", perms(PermCreate))}, op: create("/r/a", Persistent), path: "/r/a"},
		{name: "create root no perm", setup: []Op{setACL("/", perms(PermRead), -1)}, op: create("/", Persistent), code: NoAuth},
		{name: "config read only", op: create("/zookeeper/config/x", Persistent), code: NoAuth},

		{name: "delete", setup: []Op{create("/a", Persistent)}, op: del("/a", -1)},
		{name: "delete version", setup: []Op{create("/a", Persistent), set("/a", "x", -1)}, op: del("/a", 1)},
		{name: "delete bad version", setup: []Op{create("/a", Persistent)}, op: del("/a", 1), code: BadVersion},
		{name: "delete missing", op: del("/a", -1), code: NoNode},
		{name: "delete missing parent", op: del("/a/b", -1), code: NoNode},
		{name: "delete not empty", setup: []Op{create("/a", Persistent), create("/a/b", Persistent)}, op: del("/a", -1), code: NotEmpty},
		{name: "version before not empty", setup: []Op{create("/a", Persistent), create("/a/b", Persistent)}, op: del("/a", 3), code: BadVersion},
		{name: "delete root", op: del("/", -1), code: BadArguments},
		{name: "delete zookeeper", op: del("/zookeeper", -1), code: BadArguments},
		{name: "delete config", op: del("/zookeeper/config", -1), code: BadArguments},
		{name: "delete quota", op: del("/zookeeper/quota", -1), code: BadArguments},
		{name: "delete under zookeeper", setup: []Op{create("/zookeeper/x", Persistent)}, op: del("/zookeeper/x", -1)},
		{name: "delete bad path", op: del("/a/", -1), code: BadArguments},
		{name: "delete no perm", setup: []Op{create("/r", Persistent), create("/r/a", Persistent), setACL("/r", perms(PermAll&^PermDelete), -1)}, op: del("/r/a", -1), code: NoAuth},
		{name: "delete no perm missing", setup: []Op{createACL("/r", perms(PermRead))}, op: del("/r/a", -1), code: NoAuth},
		{name: "delete needs no perm on node", setup: []Op{create("/a", Persistent), setACL("/a", perms(0), -1)}, op: del("/a", -1)},
		{name: "delete ephemeral any session", setup: []Op{create("/e", Ephemeral)}, session: noSession, op: del("/e", -1)},

		{name: "setData", setup: []Op{create("/a", Persistent)}, op: set("/a", "x", 0)},
		{name: "setData bad version", setup: []Op{create("/a", Persistent)}, op: set("/a", "x", 1), code: BadVersion},
		{name: "setData missing", op: set("/a", "x", -1), code: NoNode},
		{name: "setData bad path", op: set("/a/", "x", -1), code: BadArguments},
		{name: "setData no perm", setup: []Op{createACL("/a", perms(PermAll&^PermWrite))}, op: set("/a", "x", -1), code: NoAuth},
		{name: "setData perm before version", setup: []Op{createACL("/a", perms(PermRead))}, op: set("/a", "x", 5), code: NoAuth},
		{name: "setData config", op: set("/zookeeper/config", "x", -1), code: NoAuth},
		{name: "setData root", op: set("/", "x", -1)},

		{name: "setACL", setup: []Op{create("/a", Persistent)}, op: setACL("/a", perms(PermRead), 0)},
		{name: "setACL bad version", setup: []Op{create("/a", Persistent)}, op: setACL("/a", perms(PermRead), 1), code: BadVersion},
		{name: "setACL version is aversion", setup: []Op{create("/a", Persistent), set("/a", "x", -1)}, op: setACL("/a", perms(PermRead), 1), code: BadVersion},
		{name: "setACL invalid", setup: []Op{create("/a", Persistent)}, op: setACL("/a", nil, -1), code: InvalidACL},
		{name: "setACL invalid before missing", op: setACL("/a", nil, -1), code: InvalidACL},
		{name: "setACL missing", op: setACL("/a", open, -1), code: NoNode},
		{name: "setACL no admin", setup: []Op{createACL("/a", perms(PermAll&^PermAdmin))}, op: setACL("/a", open, -1), code: NoAuth},
		{name: "setACL config", op: setACL("/zookeeper/config", open, -1), code: NoAuth},
		{name: "setACL bad path", op: setACL("/a/", open, -1), code: BadArguments},

		{name: "check", setup: []Op{create("/a", Persistent)}, op: check("/a", 0)},
		{name: "check any", setup: []Op{create("/a", Persistent)}, op: check("/a", -1)},
		{name: "check bad version", setup: []Op{create("/a", Persistent)}, op: check("/a", 1), code: BadVersion},
		{name: "check missing", op: check("/a", -1), code: NoNode},
		{name: "check no read", setup: []Op{createACL("/a", perms(PermWrite))}, op: check("/a", -1), code: NoAuth},

		{name: "kind 0", op: Op{Path: "/a"}, code: BadArguments},
		{name: "kind 99", op: Op{Kind: 99, Path: "/a"}, code: BadArguments},

		{name: "max data create", cfg: Config{MaxData: 3}, op: Op{Kind: OpCreate, Path: "/a", ACL: open, Data: []byte("1234")}, code: QuotaExceeded},
		{name: "max data create ok", cfg: Config{MaxData: 3}, op: Op{Kind: OpCreate, Path: "/a", ACL: open, Data: []byte("123")}, path: "/a"},
		{name: "max data set", cfg: Config{MaxData: 3}, setup: []Op{create("/a", Persistent)}, op: set("/a", "1234", -1), code: QuotaExceeded},
		{name: "max data before version", cfg: Config{MaxData: 3}, setup: []Op{create("/a", Persistent)}, op: set("/a", "1234", 9), code: QuotaExceeded},
		{name: "max data default", op: Op{Kind: OpCreate, Path: "/a", ACL: open, Data: make([]byte, DefaultMaxData+1)}, code: QuotaExceeded},
		{name: "max data default ok", op: Op{Kind: OpCreate, Path: "/a", ACL: open, Data: make([]byte, DefaultMaxData)}, path: "/a"},
		{name: "max data none", cfg: Config{MaxData: -1}, op: Op{Kind: OpCreate, Path: "/a", ACL: open, Data: make([]byte, 2<<20)}, path: "/a"},
		{name: "max nodes", cfg: Config{MaxNodes: 5}, setup: []Op{create("/a", Persistent)}, op: create("/b", Persistent), code: QuotaExceeded},
		{name: "max nodes ok", cfg: Config{MaxNodes: 6}, setup: []Op{create("/a", Persistent)}, op: create("/b", Persistent), path: "/b"},
		{name: "max nodes after exists", cfg: Config{MaxNodes: 5}, setup: []Op{create("/a", Persistent)}, op: create("/a", Persistent), code: NodeExists},
		{name: "max children", cfg: Config{MaxChildren: 2}, setup: []Op{create("/a", Persistent), create("/a/1", Persistent), create("/a/2", Persistent)}, op: create("/a/3", Persistent), code: QuotaExceeded},
		{name: "max children other parent", cfg: Config{MaxChildren: 2}, setup: []Op{create("/a", Persistent), create("/a/1", Persistent), create("/a/2", Persistent)}, op: create("/a/1/3", Persistent), path: "/a/1/3"},
		{name: "max ephemerals", cfg: Config{MaxEphemerals: 1}, setup: []Op{create("/e", Ephemeral)}, op: create("/f", EphemeralSequential), code: QuotaExceeded},
		{name: "max ephemerals persistent", cfg: Config{MaxEphemerals: 1}, setup: []Op{create("/e", Ephemeral)}, op: create("/f", Persistent), path: "/f"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := newTree(t, tt.cfg, tt.setup...)
			session := int64(sess)
			switch tt.session {
			case noSession:
				session = 0
			case 0:
			default:
				session = tt.session
			}
			before := tr.AppendSnapshot(nil)
			zxid := tr.Zxid()
			r := tr.Write(session, 3, tt.op)
			if r.Code != tt.code {
				t.Fatalf("code %v, want %v", r.Code, tt.code)
			}
			if tr.Zxid() != zxid+1 {
				t.Errorf("zxid %d after %d", tr.Zxid(), zxid)
			}
			if r.Path != tt.path && (tt.op.Kind == OpCreate || r.Path != "") {
				t.Errorf("path %q, want %q", r.Path, tt.path)
			}
			if tt.code != OK {
				if r != (Result{Code: tt.code}) {
					t.Errorf("failed result %+v", r)
				}
				if ev := tr.TakeEvents(nil); len(ev) != 0 {
					t.Errorf("events %v", ev)
				}
				tr.zxid-- // the only change
				if after := tr.AppendSnapshot(nil); string(after) != string(before) {
					t.Errorf("a failed write changed the tree")
				}
			}
		})
	}
}

func TestCreateStat(t *testing.T) {
	tr := newTree(t, Config{}, create("/p", Persistent))
	z := tr.Zxid() + 1
	r := tr.Write(sess, 1234, Op{Kind: OpCreate, Path: "/p/e", Mode: Ephemeral, ACL: open, Data: []byte("hello")})
	want := Stat{Czxid: z, Mzxid: z, Pzxid: z, Ctime: 1234, Mtime: 1234, EphemeralOwner: sess, DataLength: 5}
	if r.Code != OK || r.Stat != want {
		t.Fatalf("create %+v, want stat %+v", r, want)
	}
	if st, ok := tr.Exists("/p/e"); !ok || st != want {
		t.Errorf("Exists %+v", st)
	}
	_, pst, _ := tr.Children("/p")
	if pst.Pzxid != z || pst.Cversion != 1 || pst.NumChildren != 1 || pst.Mzxid == z {
		t.Errorf("parent %+v", pst)
	}
	r = tr.Write(sess, 1, create("/c", Container))
	if r.Stat.EphemeralOwner != 0 {
		t.Errorf("container owner %d, want 0 (ZooKeeper shows none)", r.Stat.EphemeralOwner)
	}
	if n, e := tr.Count(); n != 7 || e != 1 {
		t.Errorf("Count %d %d", n, e)
	}
}

func TestNilAndEmptyData(t *testing.T) {
	tr := newTree(t, Config{})
	tr.Write(sess, 1, Op{Kind: OpCreate, Path: "/nil", ACL: open})
	tr.Write(sess, 1, Op{Kind: OpCreate, Path: "/empty", ACL: open, Data: []byte{}})
	if d, _, _ := tr.Get("/nil"); d != nil {
		t.Errorf("nil data became %q", d)
	}
	if d, _, _ := tr.Get("/empty"); d == nil {
		t.Error("empty data became nil")
	}
	tr.Write(sess, 1, Op{Kind: OpSetData, Path: "/empty", Version: -1})
	if d, _, _ := tr.Get("/empty"); d != nil {
		t.Error("setData nil kept data")
	}
	buf := []byte("abc")
	tr.Write(sess, 1, Op{Kind: OpSetData, Path: "/nil", Data: buf, Version: -1})
	buf[0] = 'X'
	if d, _, _ := tr.Get("/nil"); string(d) != "abc" {
		t.Errorf("data borrowed, not copied: %q", d)
	}
}

// TestSequence: x-0000000000, a plain child, both deleted, then
// x-0000000002 with an exposed cversion of 5 (ZooKeeper 3.8, measured).
func TestSequence(t *testing.T) {
	tr := newTree(t, Config{}, create("/p", Persistent))
	if r := tr.Write(sess, 1, create("/p/x-", PersistentSequential)); r.Path != "/p/x-0000000000" {
		t.Fatalf("first %q", r.Path)
	}
	tr.Write(sess, 1, create("/p/plain", Persistent))
	tr.Write(sess, 1, del("/p/x-0000000000", -1))
	tr.Write(sess, 1, del("/p/plain", -1))
	r := tr.Write(sess, 1, create("/p/x-", EphemeralSequential))
	if r.Path != "/p/x-0000000002" {
		t.Fatalf("third %q", r.Path)
	}
	_, st, _ := tr.Children("/p")
	if st.Cversion != 5 {
		t.Errorf("cversion %d, want 5", st.Cversion)
	}
	// A failed create does not advance the counter.
	tr.Write(sess, 1, create("/p/x-0000000002", Persistent))
	tr.Write(sess, 1, Op{Kind: OpCreate, Path: "/p/y-", Mode: PersistentSequential})
	if r := tr.Write(sess, 1, create("/p/y-", PersistentSequential)); r.Path != "/p/y-0000000003" {
		t.Errorf("after failures %q", r.Path)
	}
	// The counter is a signed 32-bit int.
	tr.lookup("/p").cseq = math.MaxInt32
	if r := tr.Write(sess, 1, create("/p/z-", PersistentSequential)); r.Path != "/p/z-2147483647" {
		t.Errorf("max %q", r.Path)
	}
	if r := tr.Write(sess, 1, create("/p/z-", PersistentSequential)); r.Path != "/p/z--2147483648" {
		t.Errorf("wrapped %q", r.Path)
	}
	if r := tr.Write(sess, 1, create("/p/z-", PersistentSequential)); r.Path != "/p/z--2147483647" {
		t.Errorf("wrapped+1 %q", r.Path)
	}
	// A sequential name that exists already answers NodeExists.
	tr.lookup("/p").cseq = 2
	if r := tr.Write(sess, 1, create("/p/x-", PersistentSequential)); r.Code != NodeExists {
		t.Errorf("taken name: %+v", r)
	}
}

func TestVersions(t *testing.T) {
	tr := newTree(t, Config{}, create("/a", Persistent))
	r := tr.Write(sess, 50, set("/a", "xy", 0))
	if r.Code != OK || r.Stat.Version != 1 || r.Stat.DataLength != 2 || r.Stat.Mtime != 50 || r.Stat.Mzxid != tr.Zxid() || r.Stat.Ctime != 2 {
		t.Errorf("setData %+v", r)
	}
	if r := tr.Write(sess, 1, setACL("/a", perms(PermAll), 0)); r.Code != OK || r.Stat.Aversion != 1 || r.Stat.Version != 1 {
		t.Errorf("setACL %+v", r)
	}
	// Version skips -1 (ZOOKEEPER-4743).
	n := tr.lookup("/a")
	n.version = math.MaxInt32
	if r := tr.Write(sess, 1, set("/a", "", -1)); r.Stat.Version != math.MinInt32 {
		t.Errorf("wrap %d", r.Stat.Version)
	}
	n.version = -2
	if r := tr.Write(sess, 1, set("/a", "", -2)); r.Stat.Version != 0 {
		t.Errorf("-2+1 = %d, want 0", r.Stat.Version)
	}
	// /zookeeper/config's aversion of -1 is matched by any.
	tr.Write(sess, 1, Op{Kind: OpSetACL, Path: "/", ACL: open, Version: 0})
	if _, st, _ := tr.GetACL("/"); st.Aversion != 1 {
		t.Errorf("root aversion %d", st.Aversion)
	}
}

func TestACLs(t *testing.T) {
	tr := newTree(t, Config{}, createACL("/w", perms(PermWrite)),
		createACL("/d", []ACL{{PermRead, "world", "anyone"}, {PermWrite, "world", "anyone"}, {PermRead, "world", "anyone"}}))
	if _, _, code := tr.Get("/w"); code != NoAuth {
		t.Errorf("Get without read: %v", code)
	}
	if _, _, code := tr.Children("/w"); code != NoAuth {
		t.Errorf("Children without read: %v", code)
	}
	if _, ok := tr.Exists("/w"); !ok {
		t.Error("Exists checks read")
	}
	acl, _, code := tr.GetACL("/w")
	if code != OK || !reflect.DeepEqual(acl, perms(PermWrite)) {
		t.Errorf("GetACL %v %v", acl, code)
	}
	acl[0].Perms = 0 // a copy
	acl, _, _ = tr.GetACL("/d")
	if !reflect.DeepEqual(acl, []ACL{{PermRead, "world", "anyone"}, {PermWrite, "world", "anyone"}}) {
		t.Errorf("duplicates kept: %v", acl)
	}
	if _, _, code := tr.Get("/d"); code != OK {
		t.Errorf("read through a second entry: %v", code)
	}
	for _, p := range []string{"/x", "//", "/w/"} {
		if _, _, code := tr.GetACL(p); code == OK {
			t.Errorf("GetACL(%q) OK", p)
		}
	}
	if _, _, code := tr.Get("/w/"); code != NoNode {
		t.Errorf("Get bad path: %v", code)
	}
	if _, _, code := tr.Children("/nope"); code != NoNode {
		t.Errorf("Children missing: %v", code)
	}
}

func TestEvents(t *testing.T) {
	tr := newTree(t, Config{})
	tr.Write(sess, 1, create("/a", Persistent))
	tr.Write(sess, 1, create("/a/b-", PersistentSequential))
	tr.Write(sess, 1, set("/a", "x", -1))
	tr.Write(sess, 1, setACL("/a", open, -1))
	tr.Write(sess, 1, check("/a", -1))
	tr.Write(sess, 1, del("/a/b-0000000000", -1))
	tr.Write(sess, 1, del("/a", 7)) // fails
	want := []Event{
		{NodeCreated, "/a"}, {NodeChildrenChanged, "/"},
		{NodeCreated, "/a/b-0000000000"}, {NodeChildrenChanged, "/a"},
		{NodeDataChanged, "/a"},
		{NodeDeleted, "/a/b-0000000000"}, {NodeChildrenChanged, "/a"},
	}
	got := tr.TakeEvents([]Event{{NodeDeleted, "/before"}})
	if !reflect.DeepEqual(got, append([]Event{{NodeDeleted, "/before"}}, want...)) {
		t.Errorf("events\n%v\nwant\n%v", got, want)
	}
	if got := tr.TakeEvents(nil); len(got) != 0 {
		t.Errorf("not cleared: %v", got)
	}
}

func TestSeedZxid(t *testing.T) {
	tr := New(Config{})
	tr.SeedZxid(100)
	tr.SeedZxid(50)
	if tr.Zxid() != 100 {
		t.Fatalf("zxid %d", tr.Zxid())
	}
	if r := tr.Write(0, 1, create("/a", Persistent)); r.Stat.Czxid != 101 {
		t.Errorf("czxid %d", r.Stat.Czxid)
	}
}

func TestSessions(t *testing.T) {
	tr := New(Config{})
	tr.OpenSession(0, [16]byte{}, 1, 1)
	tr.OpenSession(-3, [16]byte{}, 1, 1)
	if tr.Zxid() != 0 || len(tr.Sessions()) != 0 {
		t.Fatalf("id <= 0 opened: zxid %d, %v", tr.Zxid(), tr.Sessions())
	}
	tr.OpenSession(5, [16]byte{5}, 5000, 1)
	tr.OpenSession(3, [16]byte{3}, 3000, 1)
	if tr.Zxid() != 2 {
		t.Errorf("zxid %d", tr.Zxid())
	}
	if pw, to, ok := tr.Session(5); !ok || pw != [16]byte{5} || to != 5000 {
		t.Errorf("Session(5) %v %d %v", pw, to, ok)
	}
	if _, _, ok := tr.Session(4); ok {
		t.Error("Session(4)")
	}
	tr.Write(5, 1, create("/p", Persistent))
	tr.Write(5, 1, create("/p/e", Ephemeral))
	tr.Write(5, 1, create("/e", EphemeralSequential))
	tr.Write(3, 1, create("/p/f", Ephemeral))
	tr.OpenSession(5, [16]byte{6}, 6000, 1) // reopen: keeps ephemerals
	want := []SessionInfo{{3, 3000, []string{"/p/f"}}, {5, 6000, []string{"/e0000000001", "/p/e"}}}
	if got := tr.Sessions(); !reflect.DeepEqual(got, want) {
		t.Errorf("Sessions %+v", got)
	}
	if n := tr.NumSessions(); n != 2 {
		t.Errorf("NumSessions %d", n)
	}
	if got := tr.Ephemerals(5); !slices.Equal(got, want[1].Ephemerals) {
		t.Errorf("Ephemerals %v", got)
	}
	if got := tr.Ephemerals(4); got != nil {
		t.Errorf("Ephemerals(4) %v", got)
	}
	tr.TakeEvents(nil)
	zxid := tr.Zxid()
	if n := tr.EndSession(99, 1); n != 0 || tr.Zxid() != zxid {
		t.Errorf("EndSession(unknown) %d, zxid %d", n, tr.Zxid())
	}
	if n := tr.EndSession(5, 1); n != 2 || tr.Zxid() != zxid+1 {
		t.Errorf("EndSession(5) %d, zxid %d", n, tr.Zxid())
	}
	wantEv := []Event{{NodeDeleted, "/e0000000001"}, {NodeChildrenChanged, "/"}, {NodeDeleted, "/p/e"}, {NodeChildrenChanged, "/p"}}
	if got := tr.TakeEvents(nil); !reflect.DeepEqual(got, wantEv) {
		t.Errorf("events %v", got)
	}
	if _, st, _ := tr.Children("/p"); st.Pzxid != zxid+1 || st.NumChildren != 1 {
		t.Errorf("parent %+v", st)
	}
	if _, _, ok := tr.Session(5); ok {
		t.Error("session 5 lives")
	}
	if n, e := tr.Count(); n != 6 || e != 1 {
		t.Errorf("Count %d %d", n, e)
	}
	if n := tr.NumSessions(); n != 1 {
		t.Errorf("NumSessions after an end %d", n)
	}
	if r := tr.Write(5, 1, create("/x", Ephemeral)); r.Code != SessionExpired {
		t.Errorf("ended session creates: %v", r.Code)
	}
	if n := tr.EndSession(3, 1); n != 1 {
		t.Errorf("EndSession(3) %d", n)
	}
	if n, e := tr.Count(); n != 5 || e != 0 {
		t.Errorf("Count %d %d", n, e)
	}
}

func TestReapContainers(t *testing.T) {
	tr := newTree(t, Config{},
		create("/new", Container),      // never used: kept
		create("/used", Container),     // used and empty: reaped
		create("/used/x", Persistent),  //
		del("/used/x", -1),             //
		create("/full", Container),     // not empty: kept
		create("/full/c", Container),   // used, empty: reaped
		create("/full/c/x", Ephemeral), //
		del("/full/c/x", -1),           //
		create("/plain", Persistent),   // not a container
		create("/plain/x", Persistent), //
		del("/plain/x", -1),            //
		create("/full/d", PersistentSequential),
	)
	zxid := tr.Zxid()
	if n := tr.ReapContainers(1); n != 2 {
		t.Fatalf("reaped %d", n)
	}
	if tr.Zxid() != zxid+2 {
		t.Errorf("zxid %d after %d", tr.Zxid(), zxid)
	}
	want := []Event{{NodeDeleted, "/full/c"}, {NodeChildrenChanged, "/full"}, {NodeDeleted, "/used"}, {NodeChildrenChanged, "/"}}
	if got := tr.TakeEvents(nil); !reflect.DeepEqual(got, want) {
		t.Errorf("events %v", got)
	}
	if _, st, _ := tr.Children("/full"); st.Pzxid != zxid+1 {
		t.Errorf("/full pzxid %d", st.Pzxid)
	}
	if _, st, _ := tr.Children("/"); st.Pzxid != zxid+2 {
		t.Errorf("/ pzxid %d", st.Pzxid)
	}
	for _, p := range []string{"/new", "/full", "/plain", "/full/d0000000001"} {
		if _, ok := tr.Exists(p); !ok {
			t.Errorf("%s reaped", p)
		}
	}
	if n := tr.ReapContainers(1); n != 0 || tr.Zxid() != zxid+2 {
		t.Errorf("second sweep %d", n)
	}
	// A container emptied by a sweep goes in the next one.
	tr.Write(sess, 1, del("/full/d0000000001", -1))
	if n := tr.ReapContainers(1); n != 1 {
		t.Errorf("third sweep %d", n)
	}
}
