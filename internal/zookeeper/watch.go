package zookeeper

import (
	"sync"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/znode"
)

// Watch kinds, as a server keeps them: ZooKeeper's server has two tables,
// data watches (set by getData, and by exists, whether or not the node
// exists) and child watches (set by getChildren).
const (
	dataWatch = iota
	childWatch
	numWatchKinds
)

// watches are the one-shot watches of a server's connections, by path.
// They are registered under the node's lock (inside Service.ZRead, with
// the read that sets them) and fired under it too (the node.ZListener
// calls, as the tree's changes are applied), so that no change falls
// between a read and its watch; an event is queued on its connection
// before the reply of the write that fired it, and before any later
// reply. mu guards the tables against the connections that drop their
// watches (a close, removeWatches) outside the node's lock.
type watches struct {
	s  *Server
	mu sync.Mutex
	by [numWatchKinds]map[string]map[*conn]struct{}
	// n counts the watches in by, for count.
	n int
	// fired is scratch: the connections an event reaches.
	fired map[*conn]struct{}
}

func (w *watches) init(s *Server) {
	w.s = s
	for k := range w.by {
		w.by[k] = make(map[string]map[*conn]struct{})
	}
	w.fired = make(map[*conn]struct{})
}

// add sets a watch of kind on path for c, unless c holds its most
// (Config.MaxWatches); it reports whether it did. A watch c already holds
// counts once.
func (w *watches) add(c *conn, kind int, path string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	set := w.by[kind][path]
	if _, ok := set[c]; ok {
		return true
	}
	if c.nwatches >= w.s.cfg.MaxWatches || c.gone {
		return false
	}
	if set == nil {
		set = make(map[*conn]struct{})
		w.by[kind][path] = set
	}
	set[c] = struct{}{}
	c.nwatches++
	w.n++
	c.own[kind][path] = struct{}{}
	return true
}

// has reports whether c holds a watch of kind on path.
func (w *watches) has(c *conn, kind int, path string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := c.own[kind][path]
	return ok
}

// remove drops c's watch of kind on path, and reports whether it held one.
func (w *watches) remove(c *conn, kind int, path string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.removeLocked(c, kind, path)
}

func (w *watches) removeLocked(c *conn, kind int, path string) bool {
	if _, ok := c.own[kind][path]; !ok {
		return false
	}
	delete(c.own[kind], path)
	c.nwatches--
	w.n--
	set := w.by[kind][path]
	delete(set, c)
	if len(set) == 0 {
		delete(w.by[kind], path)
	}
	return true
}

// drop removes every watch of c, which is closing, and keeps it from
// setting any more.
func (w *watches) drop(c *conn) {
	w.mu.Lock()
	defer w.mu.Unlock()
	c.gone = true
	for kind := range c.own {
		for path := range c.own[kind] {
			w.removeLocked(c, kind, path)
		}
	}
}

// count returns the watches of every connection (mntr's zk_watch_count).
func (w *watches) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n
}

// ZChanged fires the watches that the tree's changes evs trigger, as
// ZooKeeper's server does: NodeCreated and NodeDataChanged fire a path's
// data watches; NodeDeleted its data and child watches, each connection
// told once; NodeChildrenChanged its child watches. Each fired watch is
// gone.
func (w *watches) ZChanged(zxid int64, evs []znode.Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ev := range evs {
		switch ev.Type {
		case znode.NodeCreated, znode.NodeDataChanged:
			w.fire(dataWatch, ev)
		case znode.NodeDeleted:
			w.fire(dataWatch, ev)
			w.fire(childWatch, ev)
		case znode.NodeChildrenChanged:
			w.fire(childWatch, ev)
		}
		clear(w.fired)
	}
}

// fire sends ev to the connections that watch its path in kind's table,
// but those w.fired says were told already, and drops their watches.
// Called with mu held.
func (w *watches) fire(kind int, ev znode.Event) {
	set := w.by[kind][ev.Path]
	if len(set) == 0 {
		return
	}
	delete(w.by[kind], ev.Path)
	w.n -= len(set)
	for c := range set {
		delete(c.own[kind], ev.Path)
		c.nwatches--
		if _, told := w.fired[c]; told {
			continue
		}
		w.fired[c] = struct{}{}
		c.event(ev.Type, ev.Path)
	}
}

// ZSessionEnded closes the connection of a session that ended.
func (w *watches) ZSessionEnded(id latch.SessionID) { w.s.sessionEnded(id) }

// ZSessionMoved closes the connection of a session that moved, if it is
// an older one.
func (w *watches) ZSessionMoved(id latch.SessionID, gen uint64) { w.s.sessionMoved(id, gen) }
