package znode

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// ref is a naive reference tree: znodes in one map by full path, children
// found by scanning, a multi rolled back by restoring a deep copy. It
// follows the rules as written in the tests' terms, not the tree's code.
type ref struct {
	cfg      Config
	nodes    map[string]*refNode
	zxid     int64
	sessions map[int64]refSession
	events   []Event
}

type refNode struct {
	data                              []byte
	acl                               []ACL
	czxid, mzxid, pzxid, ctime, mtime int64
	version, aversion, creations      int32
	owner                             int64
}

type refSession struct {
	passwd  [16]byte
	timeout int32
}

func newRef(cfg Config) *ref {
	if cfg.MaxData == 0 {
		cfg.MaxData = DefaultMaxData
	}
	all := []ACL{{31, "world", "anyone"}}
	r := &ref{cfg: cfg, nodes: map[string]*refNode{}, sessions: map[int64]refSession{}}
	for _, p := range []string{"/", "/zookeeper", "/zookeeper/quota"} {
		r.nodes[p] = &refNode{data: []byte{}, acl: all}
	}
	r.nodes["/zookeeper/config"] = &refNode{data: []byte{}, acl: []ACL{{1, "world", "anyone"}}, aversion: -1}
	return r
}

func (r *ref) clone() *ref {
	c := *r
	c.nodes = map[string]*refNode{}
	for p, n := range r.nodes {
		m := *n
		c.nodes[p] = &m
	}
	c.sessions = map[int64]refSession{}
	for id, s := range r.sessions {
		c.sessions[id] = s
	}
	c.events = slices.Clone(r.events)
	return &c
}

func refParent(p string) string {
	i := strings.LastIndex(p, "/")
	if i == 0 {
		return "/"
	}
	return p[:i]
}

func (r *ref) children(p string) []string {
	var out []string
	for q := range r.nodes {
		if q != "/" && refParent(q) == p {
			out = append(out, q[strings.LastIndex(q, "/")+1:])
		}
	}
	slices.Sort(out)
	return out
}

func (r *ref) stat(p string) Stat {
	n := r.nodes[p]
	kids := int32(len(r.children(p)))
	return Stat{
		Czxid: n.czxid, Mzxid: n.mzxid, Ctime: n.ctime, Mtime: n.mtime,
		Version: n.version, Cversion: 2*n.creations - kids, Aversion: n.aversion,
		EphemeralOwner: clientOwner(n.owner), DataLength: int32(len(n.data)), NumChildren: kids, Pzxid: n.pzxid,
	}
}

func can(n *refNode, perm int32) bool {
	for _, a := range n.acl {
		if a.Perms&perm != 0 {
			return true
		}
	}
	return false
}

// refValid is ZooKeeper's path rule, segment by segment.
func refValid(p string) bool {
	if p == "/" {
		return true
	}
	if !strings.HasPrefix(p, "/") {
		return false
	}
	for _, seg := range strings.Split(p[1:], "/") {
		if seg == "" || seg == "." || seg == ".." {
			return false
		}
		for i, c := range seg {
			if c == 0xfffd && !strings.HasPrefix(seg[i:], "\ufffd") {
				return false
			}
			if c < 0x20 || c >= 0x7f && c <= 0x9f || c >= 0xd800 && c <= 0xf8ff || c >= 0xfff0 {
				return false
			}
		}
	}
	return true
}

func refACL(acl []ACL) ([]ACL, bool) {
	var out []ACL
	for _, a := range acl {
		if a.Scheme != "world" || a.ID != "anyone" {
			return nil, false
		}
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out, len(out) > 0
}

func refNext(v int32) int32 {
	if v+1 == -1 {
		return 0
	}
	return v + 1
}

func (r *ref) emit(t EventType, p string) { r.events = append(r.events, Event{t, p}) }

func (r *ref) op(session, now, zxid int64, op Op) Result {
	switch op.Kind {
	case OpCreate:
		return r.create(session, now, zxid, op)
	case OpDelete:
		p := op.Path
		if !refValid(p) || p == "/" || p == "/zookeeper" || p == "/zookeeper/config" || p == "/zookeeper/quota" {
			return Result{Code: BadArguments}
		}
		parent := r.nodes[refParent(p)]
		if parent == nil {
			return Result{Code: NoNode}
		}
		if !can(parent, PermDelete) {
			return Result{Code: NoAuth}
		}
		n := r.nodes[p]
		switch {
		case n == nil:
			return Result{Code: NoNode}
		case op.Version != -1 && op.Version != n.version:
			return Result{Code: BadVersion}
		case len(r.children(p)) > 0:
			return Result{Code: NotEmpty}
		}
		delete(r.nodes, p)
		parent.pzxid = zxid
		r.emit(NodeDeleted, p)
		r.emit(NodeChildrenChanged, refParent(p))
		return Result{}
	case OpSetData:
		if !refValid(op.Path) {
			return Result{Code: BadArguments}
		}
		n := r.nodes[op.Path]
		switch {
		case n == nil:
			return Result{Code: NoNode}
		case !can(n, PermWrite):
			return Result{Code: NoAuth}
		case r.cfg.MaxData > 0 && len(op.Data) > r.cfg.MaxData:
			return Result{Code: QuotaExceeded}
		case op.Version != -1 && op.Version != n.version:
			return Result{Code: BadVersion}
		}
		n.data = append([]byte(nil), op.Data...)
		if op.Data != nil && n.data == nil {
			n.data = []byte{}
		}
		n.version = refNext(n.version)
		n.mzxid, n.mtime = zxid, now
		r.emit(NodeDataChanged, op.Path)
		return Result{Stat: r.stat(op.Path)}
	case OpSetACL:
		if !refValid(op.Path) {
			return Result{Code: BadArguments}
		}
		acl, ok := refACL(op.ACL)
		if !ok {
			return Result{Code: InvalidACL}
		}
		n := r.nodes[op.Path]
		switch {
		case n == nil:
			return Result{Code: NoNode}
		case !can(n, PermAdmin):
			return Result{Code: NoAuth}
		case op.Version != -1 && op.Version != n.aversion:
			return Result{Code: BadVersion}
		}
		n.acl = acl
		n.aversion = refNext(n.aversion)
		return Result{Stat: r.stat(op.Path)}
	case OpCheck:
		if !refValid(op.Path) {
			return Result{Code: BadArguments}
		}
		n := r.nodes[op.Path]
		switch {
		case n == nil:
			return Result{Code: NoNode}
		case !can(n, PermRead):
			return Result{Code: NoAuth}
		case op.Version != -1 && op.Version != n.version:
			return Result{Code: BadVersion}
		}
		return Result{}
	}
	return Result{Code: BadArguments}
}

func (r *ref) create(session, now, zxid int64, op Op) Result {
	if op.Mode == 5 || op.Mode == 6 {
		return Result{Code: Unimplemented}
	}
	if op.Mode < 0 || op.Mode > 4 {
		return Result{Code: BadArguments}
	}
	seq := op.Mode == PersistentSequential || op.Mode == EphemeralSequential
	eph := op.Mode == Ephemeral || op.Mode == EphemeralSequential
	p := op.Path
	if !strings.Contains(p, "/") || strings.Contains(p, "\x00") {
		return Result{Code: BadArguments}
	}
	if _, ok := r.sessions[session]; eph && !ok {
		return Result{Code: SessionExpired}
	}
	acl, ok := refACL(op.ACL)
	if !ok {
		return Result{Code: InvalidACL}
	}
	parentPath := refParent(p)
	parent := r.nodes[parentPath]
	if parent == nil {
		return Result{Code: NoNode}
	}
	if !can(parent, PermCreate) {
		return Result{Code: NoAuth}
	}
	if seq {
		p += fmt.Sprintf("%010d", parent.creations)
	}
	if !refValid(p) {
		return Result{Code: BadArguments}
	}
	if r.nodes[p] != nil {
		return Result{Code: NodeExists}
	}
	if parent.owner > 0 {
		return Result{Code: NoChildrenForEphemerals}
	}
	mine := 0
	for _, n := range r.nodes {
		if eph && n.owner == session {
			mine++
		}
	}
	if r.cfg.MaxData > 0 && len(op.Data) > r.cfg.MaxData ||
		r.cfg.MaxNodes > 0 && len(r.nodes) >= r.cfg.MaxNodes ||
		r.cfg.MaxChildren > 0 && len(r.children(parentPath)) >= r.cfg.MaxChildren ||
		eph && r.cfg.MaxEphemerals > 0 && mine >= r.cfg.MaxEphemerals {
		return Result{Code: QuotaExceeded}
	}
	n := &refNode{data: append([]byte(nil), op.Data...), acl: acl,
		czxid: zxid, mzxid: zxid, pzxid: zxid, ctime: now, mtime: now}
	if op.Data != nil && n.data == nil {
		n.data = []byte{}
	}
	if eph {
		n.owner = session
	} else if op.Mode == Container {
		n.owner = -1 << 63
	}
	r.nodes[p] = n
	parent.creations++
	parent.pzxid = zxid
	r.emit(NodeCreated, p)
	r.emit(NodeChildrenChanged, parentPath)
	return Result{Path: p, Stat: r.stat(p)}
}

func (r *ref) write(session, now int64, op Op) Result {
	r.zxid++
	before := r.clone()
	res := r.op(session, now, r.zxid, op)
	if res.Code != OK {
		*r = *before
	}
	return res
}

func (r *ref) multi(session, now int64, ops []Op) []Result {
	r.zxid++
	before := r.clone()
	out := []Result{}
	for i, op := range ops {
		var res Result
		if op.Kind == OpSetACL {
			res = Result{Code: BadArguments}
		} else {
			res = r.op(session, now, r.zxid, op)
		}
		if res.Code != OK {
			*r = *before
			out = make([]Result, len(ops))
			out[i].Code = res.Code
			for j := i + 1; j < len(ops); j++ {
				out[j].Code = RuntimeInconsistency
			}
			return out
		}
		out = append(out, res)
	}
	return out
}

func (r *ref) open(id int64, pw [16]byte, timeout int32) {
	if id > 0 {
		r.zxid++
		r.sessions[id] = refSession{pw, timeout}
	}
}

func (r *ref) ephemerals(id int64) []string {
	var out []string
	for p, n := range r.nodes {
		if n.owner == id {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

func (r *ref) end(id int64) int {
	if _, ok := r.sessions[id]; !ok {
		return 0
	}
	r.zxid++
	eph := r.ephemerals(id)
	for _, p := range eph {
		delete(r.nodes, p)
		r.nodes[refParent(p)].pzxid = r.zxid
		r.emit(NodeDeleted, p)
		r.emit(NodeChildrenChanged, refParent(p))
	}
	delete(r.sessions, id)
	return len(eph)
}

func (r *ref) reap() int {
	var doomed []string
	for p, n := range r.nodes {
		if n.owner == -1<<63 && n.creations > 0 && len(r.children(p)) == 0 {
			doomed = append(doomed, p)
		}
	}
	slices.Sort(doomed)
	for _, p := range doomed {
		r.zxid++
		delete(r.nodes, p)
		r.nodes[refParent(p)].pzxid = r.zxid
		r.emit(NodeDeleted, p)
		r.emit(NodeChildrenChanged, refParent(p))
	}
	return len(doomed)
}

// gen makes random ops over a small namespace.
type gen struct {
	rng *rand.Rand
	r   *ref
}

var genNames = []string{"a", "b", "c", "x-"}

func (g *gen) path() string {
	switch g.rng.IntN(12) {
	case 0:
		return []string{"/", "/zookeeper", "/zookeeper/config", "/zookeeper/quota", "/zookeeper/a"}[g.rng.IntN(5)]
	case 1:
		return []string{"", "a", "//a", "/a/", "/a/..", "/.", "/a\x00", "/\u00e9", "/a\ufff0"}[g.rng.IntN(9)]
	case 2, 3, 4:
		// An existing znode, sequential ones included.
		paths := make([]string, 0, len(g.r.nodes))
		for p := range g.r.nodes {
			paths = append(paths, p)
		}
		slices.Sort(paths)
		return paths[g.rng.IntN(len(paths))]
	}
	depth := 1 + g.rng.IntN(3)
	p := ""
	for range depth {
		p += "/" + genNames[g.rng.IntN(len(genNames))]
	}
	return p
}

func (g *gen) acl() []ACL {
	switch g.rng.IntN(10) {
	case 0:
		return nil
	case 1:
		return []ACL{{31, "digest", "u:x"}}
	case 2:
		return []ACL{{int32(g.rng.IntN(32)), "world", "anyone"}, {int32(g.rng.IntN(32)), "world", "anyone"}}
	case 3:
		return []ACL{{31 &^ (1 << g.rng.IntN(5)), "world", "anyone"}}
	}
	return []ACL{{31, "world", "anyone"}}
}

func (g *gen) data() []byte {
	switch g.rng.IntN(4) {
	case 0:
		return nil
	case 1:
		return []byte{}
	}
	return bytes.Repeat([]byte{byte('a' + g.rng.IntN(26))}, g.rng.IntN(12))
}

func (g *gen) version() int32 {
	if g.rng.IntN(2) == 0 {
		return -1
	}
	return int32(g.rng.IntN(3))
}

func (g *gen) op(inMulti bool) Op {
	k := g.rng.IntN(20)
	switch {
	case k < 9:
		mode := Mode(g.rng.IntN(5))
		if g.rng.IntN(30) == 0 {
			mode = Mode(g.rng.IntN(9) - 1)
		}
		return Op{Kind: OpCreate, Path: g.path(), Mode: mode, Data: g.data(), ACL: g.acl()}
	case k < 13:
		return Op{Kind: OpDelete, Path: g.path(), Version: g.version()}
	case k < 16:
		return Op{Kind: OpSetData, Path: g.path(), Data: g.data(), Version: g.version()}
	case k < 18:
		return Op{Kind: OpCheck, Path: g.path(), Version: g.version()}
	case k < 19 || !inMulti:
		return Op{Kind: OpSetACL, Path: g.path(), ACL: g.acl(), Version: g.version()}
	}
	return Op{Kind: OpKind(g.rng.IntN(20)), Path: g.path()}
}

// compare checks every read of every znode either tree might hold.
func compare(t *testing.T, step int, tr *Tree, r *ref) {
	t.Helper()
	if tr.Zxid() != r.zxid {
		t.Fatalf("step %d: zxid %d, model %d", step, tr.Zxid(), r.zxid)
	}
	eph := 0
	for _, n := range r.nodes {
		if n.owner > 0 {
			eph++
		}
	}
	if nodes, e := tr.Count(); nodes != len(r.nodes) || e != eph {
		t.Fatalf("step %d: Count %d %d, model %d %d", step, nodes, e, len(r.nodes), eph)
	}
	var sessions []SessionInfo
	for id, s := range r.sessions {
		sessions = append(sessions, SessionInfo{id, s.timeout, r.ephemerals(id)})
		pw, to, ok := tr.Session(id)
		if !ok || pw != s.passwd || to != s.timeout {
			t.Fatalf("step %d: Session(%d) %v %d %v", step, id, pw, to, ok)
		}
		if got := tr.Ephemerals(id); !slices.Equal(got, r.ephemerals(id)) {
			t.Fatalf("step %d: Ephemerals(%d) %v, model %v", step, id, got, r.ephemerals(id))
		}
	}
	slices.SortFunc(sessions, func(a, b SessionInfo) int { return cmpInt64(a.ID, b.ID) })
	got := tr.Sessions()
	if len(got) != len(sessions) {
		t.Fatalf("step %d: Sessions %+v, model %+v", step, got, sessions)
	}
	for i, s := range got {
		w := sessions[i]
		if s.ID != w.ID || s.TimeoutMs != w.TimeoutMs || !slices.Equal(s.Ephemerals, w.Ephemerals) {
			t.Fatalf("step %d: Sessions %+v, model %+v", step, got, sessions)
		}
	}
	paths := []string{"/nope", "/a/nope", "//", "/a/"}
	for p := range r.nodes {
		paths = append(paths, p)
	}
	for _, p := range paths {
		n := r.nodes[p]
		data, st, code := tr.Get(p)
		st2, ok := tr.Exists(p)
		names, st3, code3 := tr.Children(p)
		acl, st4, code4 := tr.GetACL(p)
		if n == nil {
			// A read of a path that is not valid finds nothing, as
			// ZooKeeper's.
			want := NoNode
			if code != want || ok || code3 != want || code4 != want {
				t.Fatalf("step %d: %s missing: %v %v %v %v", step, p, code, ok, code3, code4)
			}
			continue
		}
		ws := r.stat(p)
		if !ok || st2 != ws || st4 != ws || code4 != OK || !reflect.DeepEqual(acl, n.acl) {
			t.Fatalf("step %d: %s: Exists %+v %v, GetACL %v %+v %v, model %+v %v", step, p, st2, ok, acl, st4, code4, ws, n.acl)
		}
		if !can(n, PermRead) {
			if code != NoAuth || code3 != NoAuth {
				t.Fatalf("step %d: %s unreadable: %v %v", step, p, code, code3)
			}
			continue
		}
		if code != OK || st != ws || !bytes.Equal(data, n.data) || (data == nil) != (n.data == nil) {
			t.Fatalf("step %d: %s: Get %q %+v %v, model %q %+v", step, p, data, st, code, n.data, ws)
		}
		if kids := r.children(p); code3 != OK || st3 != ws || len(names) != len(kids) || len(kids) > 0 && !slices.Equal(names, kids) {
			t.Fatalf("step %d: %s: Children %v %v, model %v", step, p, names, code3, kids)
		}
	}
}

func TestModel(t *testing.T) {
	configs := []Config{{}, {MaxNodes: 12, MaxChildren: 3, MaxData: 6, MaxEphemerals: 2}, {MaxData: -1}}
	seeds := 150
	if testing.Short() {
		seeds = 20
	}
	for seed := range seeds {
		cfg := configs[seed%len(configs)]
		rng := rand.New(rand.NewPCG(uint64(seed), 99))
		tr := New(cfg)
		r := newRef(cfg)
		g := &gen{rng: rng, r: r}
		now := int64(1_700_000_000_000)
		for step := range 300 {
			now += int64(rng.IntN(1000))
			session := int64(rng.IntN(4)) // 0 = none
			what := ""
			switch k := rng.IntN(40); {
			case k < 28:
				op := g.op(false)
				what = fmt.Sprintf("Write(%d, %+v)", session, op)
				got, want := tr.Write(session, now, op), r.write(session, now, op)
				if got != want {
					t.Fatalf("seed %d step %d: %s = %+v, model %+v", seed, step, what, got, want)
				}
			case k < 34:
				ops := make([]Op, rng.IntN(5))
				for i := range ops {
					ops[i] = g.op(true)
				}
				what = fmt.Sprintf("Multi(%d, %+v)", session, ops)
				got, want := tr.Multi(session, now, ops), r.multi(session, now, ops)
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("seed %d step %d: %s = %+v, model %+v", seed, step, what, got, want)
				}
			case k < 36:
				id := int64(rng.IntN(5) - 1)
				pw := [16]byte{byte(rng.IntN(256))}
				to := int32(rng.IntN(10000))
				what = fmt.Sprintf("OpenSession(%d)", id)
				tr.OpenSession(id, pw, to, now)
				r.open(id, pw, to)
			case k < 38:
				id := int64(rng.IntN(5))
				what = fmt.Sprintf("EndSession(%d)", id)
				if got, want := tr.EndSession(id, now), r.end(id); got != want {
					t.Fatalf("seed %d step %d: %s = %d, model %d", seed, step, what, got, want)
				}
			default:
				what = "ReapContainers"
				if got, want := tr.ReapContainers(now), r.reap(); got != want {
					t.Fatalf("seed %d step %d: %s = %d, model %d", seed, step, what, got, want)
				}
			}
			if got := tr.TakeEvents(nil); !slices.Equal(got, r.events) {
				t.Fatalf("seed %d step %d: %s: events %v, model %v", seed, step, what, got, r.events)
			}
			r.events = r.events[:0]
			compare(t, step, tr, r)
		}
		snap := tr.AppendSnapshot(nil)
		back, err := Restore(cfg, snap)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		compare(t, -1, back, r)
	}
}

// clientOwner is the owner a client sees: none for a container.
func clientOwner(owner int64) int64 {
	if owner == ContainerOwner {
		return 0
	}
	return owner
}
