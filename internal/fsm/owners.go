package fsm

import (
	"slices"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/engine"
)

// owners is the replicated record of which node owns which sessions: the
// connection-bound sessions of a cluster node, which live while the node's
// heartbeat (OpNodeAlive) keeps committing and end a session TTL after the
// last one. It also keeps each node's last heartbeat, for the cluster view.
type owners struct {
	nodes map[string]*owner
	of    map[latch.SessionID]string // the owner of each owned session
}

// owner is one node's record.
type owner struct {
	alive    int64             // the instant of its last heartbeat
	sessions []latch.SessionID // ascending, as the engine numbers them
}

func newOwners() owners {
	return owners{nodes: make(map[string]*owner), of: make(map[latch.SessionID]string)}
}

// get returns name's record, creating it.
func (o *owners) get(name string) *owner {
	n := o.nodes[name]
	if n == nil {
		n = &owner{}
		o.nodes[name] = n
	}
	return n
}

// add records that name owns session id, the newest session.
func (o *owners) add(name string, id latch.SessionID) {
	n := o.get(name)
	n.sessions = append(n.sessions, id)
	o.of[id] = name
}

// remove forgets session id, if a node owns it.
func (o *owners) remove(id latch.SessionID) {
	name, ok := o.of[id]
	if !ok {
		return
	}
	delete(o.of, id)
	n := o.nodes[name]
	if i, found := slices.BinarySearch(n.sessions, id); found {
		n.sessions = slices.Delete(n.sessions, i, i+1)
	}
}

// Owner returns the node that owns session id, and false for a session no
// node owns.
func (s *State) Owner(id latch.SessionID) (string, bool) {
	name, ok := s.owners.of[id]
	return name, ok
}

// Alive returns the instant of the last heartbeat of the node named name,
// and false if none was applied.
func (s *State) Alive(name string) (int64, bool) {
	n := s.owners.nodes[name]
	if n == nil || n.alive == 0 {
		return 0, false
	}
	return n.alive, true
}

// nodeAlive restarts the TTL of every session name owns, in session order.
func (s *State) nodeAlive(now int64, name string) []engine.Event {
	n := s.owners.get(name)
	n.alive = max(n.alive, now)
	s.evs = s.evs[:0]
	s.gather(s.eng.Tick(now))
	for _, id := range n.sessions {
		evs, _ := s.eng.KeepAlive(now, id) // every owned session exists
		s.gather(evs)
	}
	return s.evs
}

// endOwner ends every session name owns, oldest first, and returns how
// many it ended.
func (s *State) endOwner(now int64, name string) (int, []engine.Event) {
	s.evs = s.evs[:0]
	s.gather(s.eng.Tick(now))
	n := s.owners.nodes[name]
	if n == nil {
		return 0, s.evs
	}
	ids := slices.Clone(n.sessions)
	ended := 0
	for _, id := range ids {
		evs, err := s.eng.EndSession(now, id)
		s.gather(evs)
		if err == nil {
			ended++
			s.ended(now, id)
		}
		s.owners.remove(id)
	}
	return ended, s.evs
}
