package znode

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
)

// snapshotVersion is the first byte of every snapshot.
const snapshotVersion = 1

// AppendSnapshot appends the tree's snapshot to dst: the version byte 1,
// the zxid, the sessions by id (id, password, timeout), then every znode in
// a depth-first walk with children sorted by name (path, data with nil and
// empty told apart, ACL, zxids, times, versions, child-creation counter,
// owner). Integers are varints (zigzag for signed ones). Pending events are
// not part of it. Equal trees give equal bytes; the caller adds a checksum.
func (t *Tree) AppendSnapshot(dst []byte) []byte {
	dst = append(dst, snapshotVersion)
	dst = binary.AppendVarint(dst, t.zxid)
	ids := make([]int64, 0, len(t.sessions))
	for id := range t.sessions {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	dst = binary.AppendUvarint(dst, uint64(len(ids)))
	for _, id := range ids {
		s := t.sessions[id]
		dst = binary.AppendVarint(dst, id)
		dst = append(dst, s.passwd[:]...)
		dst = binary.AppendVarint(dst, int64(s.timeoutMs))
	}
	dst = binary.AppendUvarint(dst, uint64(t.nodes))
	path := make([]byte, 0, 256)
	var names []string
	var walk func(n *node, path []byte)
	walk = func(n *node, path []byte) {
		dst = appendBytes(dst, path)
		if n.data == nil {
			dst = append(dst, 0)
		} else {
			dst = binary.AppendUvarint(dst, uint64(len(n.data))+1)
			dst = append(dst, n.data...)
		}
		dst = binary.AppendUvarint(dst, uint64(len(n.acl)))
		for _, a := range n.acl {
			dst = binary.AppendVarint(dst, int64(a.Perms))
			dst = appendBytes(dst, []byte(a.Scheme))
			dst = appendBytes(dst, []byte(a.ID))
		}
		for _, v := range [...]int64{n.czxid, n.mzxid, n.pzxid, n.ctime, n.mtime,
			int64(n.version), int64(n.aversion), int64(n.cseq), n.owner} {
			dst = binary.AppendVarint(dst, v)
		}
		if len(n.children) == 0 {
			return
		}
		start := len(names)
		for name := range n.children {
			names = append(names, name)
		}
		slices.Sort(names[start:])
		if len(path) > 1 {
			path = append(path, '/')
		}
		for i := start; i < start+len(n.children); i++ {
			name := names[i]
			walk(n.children[name], append(path, name...))
		}
		names = names[:start]
	}
	walk(t.root, append(path, '/'))
	return dst
}

func appendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

// errSnapshot wraps every reason Restore refuses a snapshot.
var errSnapshot = errors.New("znode: bad snapshot")

type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", errSnapshot, fmt.Sprintf(format, args...))
	}
}

func (d *decoder) uvarint(what string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("%s: bad varint", what)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint(what string) int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("%s: bad varint", what)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) int32(what string) int32 {
	v := d.varint(what)
	if v < math.MinInt32 || v > math.MaxInt32 {
		d.fail("%s: %d out of range", what, v)
		return 0
	}
	return int32(v)
}

// bytes returns the next n bytes, aliasing the input.
func (d *decoder) bytes(n uint64, what string) []byte {
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.fail("%s: %d bytes, %d left", what, n, len(d.b))
		return nil
	}
	b := d.b[:n]
	d.b = d.b[n:]
	return b
}

func (d *decoder) string(what string) string {
	return string(d.bytes(d.uvarint(what), what))
}

// Restore rebuilds a tree from a snapshot that AppendSnapshot wrote, under
// cfg. It checks everything (the version, every count and range, that each
// path is valid and unique and comes after its parent, that the built-in
// znodes are there, that every ACL is world:anyone, that every ephemeral's
// owner is a known session and has no children, that zxids do not pass the
// tree's) and refuses any input that is not exactly the canonical encoding
// of the tree it describes, with an error wrapping its reason; it never
// panics. It does not apply cfg's limits to what the snapshot holds.
func Restore(cfg Config, b []byte) (*Tree, error) {
	if len(b) == 0 || b[0] != snapshotVersion {
		if len(b) == 0 {
			return nil, fmt.Errorf("%w: empty", errSnapshot)
		}
		return nil, fmt.Errorf("%w: version %d, want %d", errSnapshot, b[0], snapshotVersion)
	}
	d := &decoder{b: b[1:]}
	t := newEmpty(cfg)
	t.zxid = d.varint("zxid")
	if t.zxid < 0 {
		d.fail("zxid %d", t.zxid)
	}
	nsess := d.uvarint("session count")
	for i := uint64(0); i < nsess && d.err == nil; i++ {
		id := d.varint("session id")
		var s zkSession
		copy(s.passwd[:], d.bytes(16, "password"))
		s.timeoutMs = d.int32("timeout")
		if d.err != nil {
			break
		}
		if id <= 0 || t.sessions[id] != nil {
			d.fail("session id %d", id)
			break
		}
		s.ephemerals = make(map[*node]struct{})
		t.sessions[id] = &s
	}
	nnodes := d.uvarint("znode count")
	for i := uint64(0); i < nnodes && d.err == nil; i++ {
		t.restoreNode(d)
	}
	if d.err != nil {
		return nil, d.err
	}
	if len(d.b) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the last znode", errSnapshot, len(d.b))
	}
	for _, p := range [...]string{"/", "/zookeeper", "/zookeeper/config", "/zookeeper/quota"} {
		if n := t.lookup(p); n == nil || n.owner != 0 {
			return nil, fmt.Errorf("%w: built-in znode %s missing or not persistent", errSnapshot, p)
		}
	}
	if !bytes.Equal(t.AppendSnapshot(nil), b) {
		return nil, fmt.Errorf("%w: not in canonical form", errSnapshot)
	}
	return t, nil
}

func (t *Tree) restoreNode(d *decoder) {
	p := d.string("path")
	var data []byte
	if n := d.uvarint("data length"); n > 0 {
		data = bytes.Clone(d.bytes(n-1, "data"))
		if data == nil {
			data = []byte{}
		}
	}
	nacl := d.uvarint("ACL count")
	acl := make([]ACL, 0, min(nacl, 32))
	for j := uint64(0); j < nacl && d.err == nil; j++ {
		perms := d.int32("perms")
		scheme := d.string("scheme")
		id := d.string("id")
		acl = append(acl, ACL{Perms: perms, Scheme: scheme, ID: id})
	}
	n := &node{}
	n.czxid = d.varint("czxid")
	n.mzxid = d.varint("mzxid")
	n.pzxid = d.varint("pzxid")
	n.ctime = d.varint("ctime")
	n.mtime = d.varint("mtime")
	n.version = d.int32("version")
	n.aversion = d.int32("aversion")
	n.cseq = d.int32("cversion")
	n.owner = d.varint("owner")
	if d.err != nil {
		return
	}
	n.data = data
	fixed, ok := fixACL(acl)
	if !ok || len(fixed) != len(acl) {
		d.fail("%s: bad ACL", p)
		return
	}
	n.acl = fixed
	for _, z := range [...]int64{n.czxid, n.mzxid, n.pzxid} {
		if z < 0 || z > t.zxid {
			d.fail("%s: zxid %d outside [0, %d]", p, z, t.zxid)
			return
		}
	}
	if n.mzxid < n.czxid || n.pzxid < n.czxid {
		d.fail("%s: mzxid or pzxid before czxid", p)
		return
	}
	if n.owner < 0 && n.owner != ContainerOwner || n.owner > 0 && t.sessions[n.owner] == nil {
		d.fail("%s: owner %d is no session", p, n.owner)
		return
	}
	if t.root == nil {
		if p != "/" {
			d.fail("first znode %q, want /", p)
			return
		}
		if n.owner != 0 {
			d.fail("root has an owner")
			return
		}
		t.root = n
		t.nodes = 1
		return
	}
	if !ValidPath(p, false) || p == "/" {
		d.fail("bad path %q", p)
		return
	}
	parentPath, name, _ := splitPath(p)
	parent := t.lookup(parentPath)
	switch {
	case parent == nil:
		d.fail("%s: no parent", p)
	case parent.isEphemeral():
		d.fail("%s: child of an ephemeral", p)
	case parent.children[name] != nil:
		d.fail("%s: twice", p)
	default:
		t.attach(parent, strings.Clone(name), n)
		t.nodes++
		t.index(n)
	}
}
