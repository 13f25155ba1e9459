package znode

import (
	"bytes"
	"slices"
	"strings"
)

// node is one znode. Its full path is not stored: it is its parent's path
// and its name.
type node struct {
	parent   *node
	name     string
	children map[string]*node // nil until the first child; kept once made
	data     []byte           // nil and empty differ, as in ZooKeeper
	acl      []ACL            // shared, never changed in place

	czxid, mzxid, pzxid int64
	ctime, mtime        int64
	version, aversion   int32
	// cseq counts child creations (ZooKeeper's stored cversion): it names
	// sequential children and wraps past 2^31-1.
	cseq  int32
	owner int64 // session id, ContainerOwner, or 0
}

func (n *node) isEphemeral() bool { return n.owner != 0 && n.owner != ContainerOwner }

func (n *node) stat() Stat {
	nc := int32(len(n.children))
	owner := n.owner
	if owner == ContainerOwner {
		owner = 0 // ZooKeeper shows its clients no owner for a container
	}
	return Stat{
		Czxid: n.czxid, Mzxid: n.mzxid, Ctime: n.ctime, Mtime: n.mtime,
		Version: n.version,
		// ZooKeeper exposes changes (creations and deletions), computed
		// from the creations and the children still present.
		Cversion:       n.cseq*2 - nc,
		Aversion:       n.aversion,
		EphemeralOwner: owner,
		DataLength:     int32(len(n.data)),
		NumChildren:    nc,
		Pzxid:          n.pzxid,
	}
}

// path builds n's full path from its ancestors.
func (n *node) path() string {
	if n.parent == nil {
		return "/"
	}
	size := 0
	for m := n; m.parent != nil; m = m.parent {
		size += 1 + len(m.name)
	}
	b := make([]byte, size)
	i := size
	for m := n; m.parent != nil; m = m.parent {
		i -= len(m.name)
		copy(b[i:], m.name)
		i--
		b[i] = '/'
	}
	return string(b)
}

// allows reports whether n's ACL grants perm (every entry is world:anyone).
func (n *node) allows(perm int32) bool {
	for _, a := range n.acl {
		if a.Perms&perm != 0 {
			return true
		}
	}
	return false
}

type zkSession struct {
	passwd     [16]byte
	timeoutMs  int32
	ephemerals map[*node]struct{}
}

// Tree is latch's ZooKeeper data tree. It is not safe for concurrent use.
type Tree struct {
	cfg        Config
	root       *node
	zxid       int64
	nodes      int // znodes, the root included
	ephemerals int
	sessions   map[int64]*zkSession
	containers map[*node]struct{}
	events     []Event
	undo       []undo // Multi's log, reused
}

var (
	openACL = []ACL{{Perms: PermAll, Scheme: SchemeWorld, ID: IDAnyone}}
	readACL = []ACL{{Perms: PermRead, Scheme: SchemeWorld, ID: IDAnyone}}
)

func normalize(cfg Config) Config {
	if cfg.MaxData == 0 {
		cfg.MaxData = DefaultMaxData
	}
	return cfg
}

func newEmpty(cfg Config) *Tree {
	return &Tree{
		cfg:        normalize(cfg),
		sessions:   make(map[int64]*zkSession),
		containers: make(map[*node]struct{}),
	}
}

// New returns a tree holding "/", "/zookeeper", "/zookeeper/config" (empty
// data, readable by anyone, aversion -1 as ZooKeeper shows it) and
// "/zookeeper/quota", every stat zero, and zxid 0. The built-in children
// do not advance their parents' sequence counters, so their exposed
// cversions are negative, as ZooKeeper's are (-1 on "/", -2 on
// "/zookeeper").
func New(cfg Config) *Tree {
	t := newEmpty(cfg)
	t.root = &node{data: []byte{}, acl: openACL}
	zk := t.attach(t.root, "zookeeper", &node{data: []byte{}, acl: openACL})
	t.attach(zk, "config", &node{data: []byte{}, acl: readACL, aversion: -1})
	t.attach(zk, "quota", &node{data: []byte{}, acl: openACL})
	t.nodes = 4
	return t
}

func (t *Tree) attach(parent *node, name string, n *node) *node {
	n.parent, n.name = parent, name
	if parent.children == nil {
		parent.children = make(map[string]*node)
	}
	parent.children[name] = n
	return n
}

// Zxid returns the last zxid used.
func (t *Tree) Zxid() int64 { return t.zxid }

// SeedZxid raises the zxid to z if it is lower; it never lowers it.
func (t *Tree) SeedZxid(z int64) {
	if z > t.zxid {
		t.zxid = z
	}
}

// lookup finds a valid path's znode, or nil.
func (t *Tree) lookup(p string) *node {
	n := t.root
	if p == "/" {
		return n
	}
	for i := 1; ; {
		j := strings.IndexByte(p[i:], '/')
		if j < 0 {
			return n.children[p[i:]]
		}
		n = n.children[p[i:i+j]]
		if n == nil {
			return nil
		}
		i += j + 1
	}
}

// find validates p and finds its znode, for a write.
func (t *Tree) find(p string) (*node, Code) {
	if !ValidPath(p, false) {
		return nil, BadArguments
	}
	n := t.lookup(p)
	if n == nil {
		return nil, NoNode
	}
	return n, OK
}

// read finds p's znode for a read: ZooKeeper checks no read's path, it
// looks it up, so a path that is not valid is missing (NoNode), as no
// znode has it.
func (t *Tree) read(p string) (*node, Code) {
	if !ValidPath(p, false) {
		return nil, NoNode
	}
	return t.find(p)
}

// Get returns a znode's data and stat. It needs PermRead. The data is the
// tree's own and read-only; the tree never changes it in place (setData
// stores a new slice), so it stays valid after the caller's lock is let go.
func (t *Tree) Get(p string) (data []byte, st Stat, code Code) {
	n, code := t.read(p)
	if code != OK {
		return nil, Stat{}, code
	}
	if !n.allows(PermRead) {
		return nil, Stat{}, NoAuth
	}
	return n.data, n.stat(), OK
}

// Exists returns a znode's stat; ok is false for a missing znode or an
// invalid path. It checks no permission, as ZooKeeper does not.
func (t *Tree) Exists(p string) (st Stat, ok bool) {
	n, code := t.read(p)
	if code != OK {
		return Stat{}, false
	}
	return n.stat(), true
}

// Children returns a znode's children's names, sorted, and its stat. It
// needs PermRead.
func (t *Tree) Children(p string) (names []string, st Stat, code Code) {
	n, code := t.read(p)
	if code != OK {
		return nil, Stat{}, code
	}
	if !n.allows(PermRead) {
		return nil, Stat{}, NoAuth
	}
	names = make([]string, 0, len(n.children))
	for name := range n.children {
		names = append(names, name)
	}
	slices.Sort(names)
	return names, n.stat(), OK
}

// GetACL returns a copy of a znode's ACL and its stat. It checks no
// permission, as ZooKeeper does not.
func (t *Tree) GetACL(p string) ([]ACL, Stat, Code) {
	n, code := t.read(p)
	if code != OK {
		return nil, Stat{}, code
	}
	return slices.Clone(n.acl), n.stat(), OK
}

// Count returns how many znodes the tree holds (the root and the built-in
// ones included) and how many of them are ephemeral.
func (t *Tree) Count() (znodes, ephemerals int) { return t.nodes, t.ephemerals }

// TakeEvents appends the pending watch triggers to dst, in the order of
// the changes that made them, and clears them.
func (t *Tree) TakeEvents(dst []Event) []Event {
	dst = append(dst, t.events...)
	clear(t.events)
	t.events = t.events[:0]
	return dst
}

// HasEvents reports whether watch triggers wait to be taken (TakeEvents).
func (t *Tree) HasEvents() bool { return len(t.events) > 0 }

func (t *Tree) emit(typ EventType, p string) { t.events = append(t.events, Event{typ, p}) }

// fixACL checks an ACL list given to create or setACL and returns the one
// to store: duplicates removed (as ZooKeeper's fixupACL does), the common
// lists shared. Only world:anyone is accepted; an empty list is invalid.
func fixACL(acl []ACL) ([]ACL, bool) {
	if len(acl) == 0 {
		return nil, false
	}
	dup := false
	for i, a := range acl {
		if a.Scheme != SchemeWorld || a.ID != IDAnyone {
			return nil, false
		}
		for _, b := range acl[:i] {
			if b.Perms == a.Perms {
				dup = true
			}
		}
	}
	if len(acl) == 1 {
		switch acl[0].Perms {
		case PermAll:
			return openACL, true
		case PermRead:
			return readACL, true
		}
	}
	out := make([]ACL, 0, len(acl))
	for _, a := range acl {
		if dup && slices.ContainsFunc(out, func(b ACL) bool { return b.Perms == a.Perms }) {
			continue
		}
		out = append(out, ACL{Perms: a.Perms, Scheme: SchemeWorld, ID: IDAnyone})
	}
	return out, true
}

// nextVersion is ZooKeeper's checkAndIncVersion step: it skips -1, which
// means "any version" in requests.
func nextVersion(v int32) int32 {
	v++
	if v == -1 {
		v = 0
	}
	return v
}

// Write applies one op and consumes one zxid, failed or not. session is the
// ZooKeeper session making it (0: none), which owns the ephemerals it
// creates; now (Unix milliseconds) becomes ctime and mtime. A failed op
// changes nothing and leaves no events.
func (t *Tree) Write(session int64, now int64, op Op) Result {
	t.zxid++
	return t.apply(session, now, t.zxid, op, false)
}

// apply runs one op at zxid. Every check runs before the first change, so
// a failed op changed nothing. With log, each change is logged for Multi's
// rollback.
func (t *Tree) apply(session, now, zxid int64, op Op, log bool) Result {
	switch op.Kind {
	case OpCreate:
		return t.create(session, now, zxid, op, log)
	case OpDelete:
		return t.delete(op, zxid, log)
	case OpSetData:
		return t.setData(now, zxid, op, log)
	case OpSetACL:
		return t.setACL(op)
	case OpCheck:
		n, code := t.find(op.Path)
		if code != OK {
			return Result{Code: code}
		}
		if !n.allows(PermRead) {
			return Result{Code: NoAuth}
		}
		if op.Version != -1 && op.Version != n.version {
			return Result{Code: BadVersion}
		}
		return Result{Code: OK}
	}
	return Result{Code: BadArguments}
}

func (t *Tree) create(session, now, zxid int64, op Op, log bool) Result {
	switch op.Mode {
	case Persistent, Ephemeral, PersistentSequential, EphemeralSequential, Container:
	case 5, 6:
		return Result{Code: Unimplemented}
	default:
		return Result{Code: BadArguments}
	}
	// ZooKeeper's order (PrepRequestProcessor.pRequest2TxnCreate): a path
	// with no "/" or with a NUL is refused first; then the parent, the
	// path up to the last "/", must exist (NoNode: a parent that is no
	// valid path exists nowhere) and allow creating; only then is the
	// whole path, with its sequence suffix, checked (BadArguments).
	p := op.Path
	i := strings.LastIndexByte(p, '/')
	if i < 0 || strings.IndexByte(p, 0) >= 0 {
		return Result{Code: BadArguments}
	}
	var owner *zkSession
	if op.Mode.ephemeral() {
		owner = t.sessions[session]
		if owner == nil {
			return Result{Code: SessionExpired}
		}
	}
	acl, ok := fixACL(op.ACL)
	if !ok {
		return Result{Code: InvalidACL}
	}
	parentPath, name := p[:i], p[i+1:]
	if i == 0 {
		parentPath = "/"
	}
	var parent *node
	if ValidPath(parentPath, false) {
		parent = t.lookup(parentPath)
	}
	if parent == nil {
		return Result{Code: NoNode}
	}
	if !parent.allows(PermCreate) {
		return Result{Code: NoAuth}
	}
	seq := op.Mode.sequential()
	if seq {
		b := make([]byte, 0, len(p)+11)
		b = appendSeq(append(b, p...), parent.cseq)
		p = string(b)
		name = p[i+1:]
	}
	if !ValidPath(p, false) {
		return Result{Code: BadArguments}
	}
	if p == "/" || parent.children[name] != nil {
		// ZooKeeper finds the root as its own parent, then finds it there.
		return Result{Code: NodeExists}
	}
	if parent.isEphemeral() {
		return Result{Code: NoChildrenForEphemerals}
	}
	if t.cfg.MaxData > 0 && len(op.Data) > t.cfg.MaxData ||
		t.cfg.MaxNodes > 0 && t.nodes >= t.cfg.MaxNodes ||
		t.cfg.MaxChildren > 0 && len(parent.children) >= t.cfg.MaxChildren ||
		owner != nil && t.cfg.MaxEphemerals > 0 && len(owner.ephemerals) >= t.cfg.MaxEphemerals {
		return Result{Code: QuotaExceeded}
	}
	if !seq {
		name = strings.Clone(name)
	}
	n := &node{
		data: bytes.Clone(op.Data), acl: acl,
		czxid: zxid, mzxid: zxid, pzxid: zxid, ctime: now, mtime: now,
	}
	switch {
	case owner != nil:
		n.owner = session
	case op.Mode == Container:
		n.owner = ContainerOwner
	}
	if log {
		t.undo = append(t.undo, undo{kind: undoCreate, n: n, cseq: parent.cseq, pzxid: parent.pzxid})
	}
	t.attach(parent, name, n)
	parent.cseq++
	parent.pzxid = zxid
	t.nodes++
	t.index(n)
	t.emit(NodeCreated, p)
	t.emit(NodeChildrenChanged, parentPath)
	return Result{Code: OK, Path: p, Stat: n.stat()}
}

// index adds n to the ephemeral and container indexes.
func (t *Tree) index(n *node) {
	switch {
	case n.owner == ContainerOwner:
		t.containers[n] = struct{}{}
	case n.owner != 0:
		t.sessions[n.owner].ephemerals[n] = struct{}{}
		t.ephemerals++
	}
}

func (t *Tree) unindex(n *node) {
	switch {
	case n.owner == ContainerOwner:
		delete(t.containers, n)
	case n.owner != 0:
		delete(t.sessions[n.owner].ephemerals, n)
		t.ephemerals--
	}
}

func (t *Tree) delete(op Op, zxid int64, log bool) Result {
	p := op.Path
	if !ValidPath(p, false) || isSpecial(p) {
		return Result{Code: BadArguments}
	}
	parentPath, name, _ := splitPath(p)
	parent := t.lookup(parentPath)
	if parent == nil {
		return Result{Code: NoNode}
	}
	if !parent.allows(PermDelete) {
		return Result{Code: NoAuth}
	}
	n := parent.children[name]
	if n == nil {
		return Result{Code: NoNode}
	}
	if op.Version != -1 && op.Version != n.version {
		return Result{Code: BadVersion}
	}
	if len(n.children) > 0 {
		return Result{Code: NotEmpty}
	}
	t.remove(n, zxid, log)
	t.emit(NodeDeleted, p)
	t.emit(NodeChildrenChanged, parentPath)
	return Result{Code: OK}
}

// remove detaches a childless znode at zxid.
func (t *Tree) remove(n *node, zxid int64, log bool) {
	parent := n.parent
	if log {
		t.undo = append(t.undo, undo{kind: undoDelete, n: n, pzxid: parent.pzxid})
	}
	delete(parent.children, n.name)
	parent.pzxid = zxid
	t.nodes--
	t.unindex(n)
}

func (t *Tree) setData(now, zxid int64, op Op, log bool) Result {
	n, code := t.find(op.Path)
	if code != OK {
		return Result{Code: code}
	}
	if !n.allows(PermWrite) {
		return Result{Code: NoAuth}
	}
	if t.cfg.MaxData > 0 && len(op.Data) > t.cfg.MaxData {
		return Result{Code: QuotaExceeded}
	}
	if op.Version != -1 && op.Version != n.version {
		return Result{Code: BadVersion}
	}
	if log {
		t.undo = append(t.undo, undo{kind: undoSetData, n: n, data: n.data,
			version: n.version, mzxid: n.mzxid, mtime: n.mtime})
	}
	n.data = bytes.Clone(op.Data)
	n.version = nextVersion(n.version)
	n.mzxid = zxid
	n.mtime = now
	t.emit(NodeDataChanged, op.Path)
	return Result{Code: OK, Stat: n.stat()}
}

// setACL is never logged: Multi refuses it.
func (t *Tree) setACL(op Op) Result {
	if !ValidPath(op.Path, false) {
		return Result{Code: BadArguments}
	}
	acl, ok := fixACL(op.ACL)
	if !ok {
		return Result{Code: InvalidACL}
	}
	n := t.lookup(op.Path)
	if n == nil {
		return Result{Code: NoNode}
	}
	if !n.allows(PermAdmin) {
		return Result{Code: NoAuth}
	}
	if op.Version != -1 && op.Version != n.aversion {
		return Result{Code: BadVersion}
	}
	n.acl = acl
	n.aversion = nextVersion(n.aversion)
	return Result{Code: OK, Stat: n.stat()}
}
