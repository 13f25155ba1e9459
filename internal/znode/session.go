package znode

import (
	"slices"
)

// OpenSession records ZooKeeper session id (> 0) with its password and
// negotiated timeout, and consumes one zxid. Opening a known id replaces
// its password and timeout and keeps its ephemerals. An id <= 0 is never a
// session (0 means none, and negative owners are reserved for containers
// and TTL znodes): the call then does nothing and consumes no zxid.
func (t *Tree) OpenSession(id int64, passwd [16]byte, timeoutMs int32, now int64) {
	if id <= 0 {
		return
	}
	t.zxid++
	if s := t.sessions[id]; s != nil {
		s.passwd, s.timeoutMs = passwd, timeoutMs
		return
	}
	t.sessions[id] = &zkSession{passwd: passwd, timeoutMs: timeoutMs, ephemerals: make(map[*node]struct{})}
}

// Session returns a known session's password and timeout.
func (t *Tree) Session(id int64) (passwd [16]byte, timeoutMs int32, ok bool) {
	s := t.sessions[id]
	if s == nil {
		return passwd, 0, false
	}
	return s.passwd, s.timeoutMs, true
}

// EndSession closes or expires a known session: it consumes one zxid and
// deletes the session's ephemerals in path order, each firing NodeDeleted
// and its parent's NodeChildrenChanged, and returns how many it deleted.
// For an id the tree does not know (latch's other sessions) it does
// nothing and consumes no zxid.
func (t *Tree) EndSession(id int64, now int64) (deleted int) {
	s := t.sessions[id]
	if s == nil {
		return 0
	}
	t.zxid++
	paths := sortedPaths(s.ephemerals)
	for _, p := range paths {
		n := t.lookup(p)
		t.remove(n, t.zxid, false)
		parent, _, _ := splitPath(p)
		t.emit(NodeDeleted, p)
		t.emit(NodeChildrenChanged, parent)
	}
	delete(t.sessions, id)
	return len(paths)
}

func sortedPaths(set map[*node]struct{}) []string {
	paths := make([]string, 0, len(set))
	for n := range set {
		paths = append(paths, n.path())
	}
	slices.Sort(paths)
	return paths
}

// NumSessions returns how many sessions the tree knows.
func (t *Tree) NumSessions() int { return len(t.sessions) }

// Sessions lists the known sessions by id, each with its ephemerals' paths.
func (t *Tree) Sessions() []SessionInfo {
	out := make([]SessionInfo, 0, len(t.sessions))
	for id, s := range t.sessions {
		out = append(out, SessionInfo{ID: id, TimeoutMs: s.timeoutMs, Ephemerals: sortedPaths(s.ephemerals)})
	}
	slices.SortFunc(out, func(a, b SessionInfo) int { return cmpInt64(a.ID, b.ID) })
	return out
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Ephemerals returns the sorted paths of a session's ephemerals (none for
// an unknown session).
func (t *Tree) Ephemerals(id int64) []string {
	s := t.sessions[id]
	if s == nil {
		return nil
	}
	return sortedPaths(s.ephemerals)
}

// ReapContainers deletes, in path order, every container znode that is
// empty and has had a child created in it (its child-creation counter is
// above 0, ZooKeeper's rule, so that a new container lives until it is
// used). Each delete consumes a zxid and fires NodeDeleted and its
// parent's NodeChildrenChanged. A container that only becomes empty by
// this sweep's deletes waits for the next sweep, as in ZooKeeper, whose
// sweep picks its candidates first. now is not used by the rule.
func (t *Tree) ReapContainers(now int64) int {
	var reap map[*node]struct{}
	for n := range t.containers {
		if len(n.children) == 0 && n.cseq > 0 {
			if reap == nil {
				reap = make(map[*node]struct{})
			}
			reap[n] = struct{}{}
		}
	}
	if reap == nil {
		return 0
	}
	for _, p := range sortedPaths(reap) {
		t.zxid++
		t.remove(t.lookup(p), t.zxid, false)
		parent, _, _ := splitPath(p)
		t.emit(NodeDeleted, p)
		t.emit(NodeChildrenChanged, parent)
	}
	return len(reap)
}
