package engine

import (
	"cmp"
	"slices"
	"strings"

	"github.com/latchd/latch"
)

// Key describes one key of the table; ok is false when the key is neither
// held, waited for, nor delayed.
func (e *Engine) Key(name string) (st KeyState, ok bool) {
	k := e.keys[name]
	if k == nil {
		return KeyState{}, false
	}
	return e.keyState(k), true
}

// Keys describes the keys with the given prefix that sort after after, in
// key order, at most limit of them (limit <= 0: all).
func (e *Engine) Keys(prefix, after string, limit int) []KeyState {
	names := make([]string, 0, len(e.keys))
	for name := range e.keys {
		if strings.HasPrefix(name, prefix) && name > after {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	if limit > 0 && len(names) > limit {
		names = names[:limit]
	}
	out := make([]KeyState, len(names))
	for i, name := range names {
		out[i] = e.keyState(e.keys[name])
	}
	return out
}

func (e *Engine) keyState(k *key) KeyState {
	st := KeyState{Key: k.name, Mode: k.mode}
	if k.nshared() > 0 {
		st.Limit = k.limit // agreed by shared holders and waiters; stale otherwise
	}
	if t := e.delays[k]; t != nil {
		st.DelayedUntil = t.when
	}
	for h := k.holds; h != nil; h = h.knext {
		hs := HolderState{Token: h.token, Acquired: h.acquired}
		if h.s != nil {
			hs.Session = h.s.id
		}
		if h.lease != nil {
			hs.Expires = h.lease.when
		}
		hs.Owner, hs.Owned = h.owner, h.owned
		st.Holders = append(st.Holders, hs)
	}
	slices.SortFunc(st.Holders, func(a, b HolderState) int { return cmp.Compare(a.Token, b.Token) })
	pos := 0
	for q := k.qhead; q != nil; q = q.next {
		w := q.w
		ws := WaiterState{ID: w.id, Session: w.s.id, Mode: w.mode, Limit: w.limit, Position: pos, Since: w.since}
		if w.deadline != nil {
			ws.Deadline = w.deadline.when
		}
		ws.Keys = make([]string, len(w.entries))
		for i := range w.entries {
			ws.Keys[i] = w.entries[i].k.name
		}
		st.Waiters = append(st.Waiters, ws)
		pos++
	}
	return st
}

// Session describes a live session.
func (e *Engine) Session(id latch.SessionID) (SessionState, bool) {
	s := e.sessions[id]
	if s == nil {
		return SessionState{}, false
	}
	return s.state(), true
}

// Sessions describes every live session, in ID order.
func (e *Engine) Sessions() []SessionState {
	out := make([]SessionState, 0, len(e.sessions))
	for _, s := range e.sessions {
		out = append(out, s.state())
	}
	slices.SortFunc(out, func(a, b SessionState) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// Held lists the keys session id holds, in key order.
func (e *Engine) Held(id latch.SessionID) []string {
	s := e.sessions[id]
	if s == nil {
		return nil
	}
	out := make([]string, 0, s.nholds)
	for h := s.holds; h != nil; h = h.snext {
		out = append(out, h.k.name)
	}
	slices.Sort(out)
	return out
}

func (s *session) state() SessionState {
	st := SessionState{ID: s.id, Opened: s.opened, TTL: s.ttl, LockDelay: s.lockDelay, Held: s.nholds, Waiting: s.nwait}
	if s.expiry != nil {
		st.Expires = s.expiry.when
	}
	return st
}
