package fsm

import (
	"errors"
	"fmt"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/cache"
	"github.com/latchd/latch/internal/engine"
	"github.com/latchd/latch/internal/znode"
	"github.com/latchd/latch/internal/zset"
)

// ErrDuplicate is the result of a command that was not applied because its
// (Origin, Seq) was applied before: a resend.
var ErrDuplicate = errors.New("fsm: command already applied")

// ErrSuperseded is the result of a command on a session's behalf from a
// connection the session has moved away from (OpResume): an OpEndSession,
// or a command that carries a generation (Command.Gen), of an older
// generation than the session's. It is not applied. It wraps
// latch.ErrUnavailable: the connection can no longer vouch for the
// session, and its client should resume it (a resume it gave up as late
// may have been applied after the one it kept).
var ErrSuperseded = fmt.Errorf("fsm: the session was resumed on another connection: %w", latch.ErrUnavailable)

// ErrUnknownOp is the result of a command whose Op this version does not
// know.
var ErrUnknownOp = errors.New("fsm: unknown command")

// Config configures a State. Neither part is replicated: every replica is
// configured alike by its operator.
type Config struct {
	Engine engine.Config
	Cache  cache.Config
	ZNode  znode.Config
	// ZSet limits the sorted sets (the Redis front end's).
	ZSet zset.Limits
}

// State is the whole replicated state of a latch server: the lock table
// and the item cache, and the last sequence number applied per proposer.
// It is changed only by Apply (and replaced by Restore). It is not safe for
// concurrent use.
type State struct {
	eng   *engine.Engine
	cache *cache.Cache
	tree  *znode.Tree
	// zEnded holds the ZooKeeper sessions ended since the last TakeZ.
	zEnded []latch.SessionID

	// seqs holds the last Seq applied per Origin, but for the origin of
	// the last numbered command, which is kept in lastOrigin and lastSeq
	// (a single proposer then costs no map access per command).
	seqs                map[uint64]uint64
	lastOrigin, lastSeq uint64

	// now is the latest instant applied: the replicated clock, from which
	// a new leader's clock resumes.
	now int64
	// owners records the sessions that cluster nodes own.
	owners owners
	// gens holds the generation of each session resumed at least once
	// (OpResume); the others are of generation 0.
	gens map[latch.SessionID]uint64
	// z holds the sorted sets (zsets.go).
	z zsets

	// drops gathers the holds ended by a command that makes several
	// lock-table calls (multi set), which Drops returns.
	drops []engine.Drop
	multi bool

	cfg  Config
	keys [1]string      // scratch: one key naming a lock-table request
	evs  []engine.Event // scratch: the events of two lock-table calls
}

// New returns an empty state.
func New(cfg Config) (*State, error) {
	c, err := cache.New(cfg.Cache)
	if err != nil {
		return nil, fmt.Errorf("fsm: %w", err)
	}
	return &State{eng: engine.New(cfg.Engine), cache: c, tree: znode.New(cfg.ZNode), seqs: make(map[uint64]uint64), owners: newOwners(), gens: make(map[latch.SessionID]uint64), z: newZsets(), cfg: cfg}, nil
}

// Drops returns the holds that the last command applied ended, when the
// lock table records them (engine.Config.RecordDrops); valid until the
// next Apply.
func (s *State) Drops() []engine.Drop {
	if s.multi {
		return s.drops
	}
	return s.eng.Drops()
}

// gather keeps the drops of one of several lock-table calls of a command,
// for Drops. evs are the call's events, appended to s.evs.
func (s *State) gather(evs []engine.Event) {
	s.multi = true
	s.drops = append(s.drops, s.eng.Drops()...)
	s.evs = append(s.evs, evs...)
}

// Now returns the latest instant of a command applied (or restored): the
// replicated clock. It never goes back.
func (s *State) Now() int64 { return s.now }

// Config returns the configuration the state was made with.
func (s *State) Config() Config { return s.cfg }

// Engine returns the lock table, for reads only (inspection, deadlines,
// drops): a change made through it would not be replicated.
func (s *State) Engine() *engine.Engine { return s.eng }

// Cache returns the item cache, for reads only (get, keys, stats, eviction
// plans), as Engine.
func (s *State) Cache() *cache.Cache { return s.cache }

// fresh reports whether c is new from its origin and records it applied.
func (s *State) fresh(c *Command) bool {
	if c.Seq == 0 {
		return true
	}
	if c.Origin != s.lastOrigin {
		if s.lastOrigin != 0 || s.lastSeq != 0 {
			s.seqs[s.lastOrigin] = s.lastSeq
		}
		s.lastOrigin, s.lastSeq = c.Origin, s.seqs[c.Origin]
		delete(s.seqs, c.Origin)
	}
	if c.Seq <= s.lastSeq {
		return false
	}
	s.lastSeq = c.Seq
	return true
}

// Apply applies one command at its instant c.At and writes its outcome to
// r. It returns what the lock table reported (grants of queued requests,
// timeouts, aborts, expiries), in order; the slice is owned by the lock
// table and valid until the next Apply. The holds that the command ended
// are in Drops() until then too, when the engine records them.
func (s *State) Apply(c *Command, r *Result) []engine.Event {
	*r = Result{}
	s.eng.ClearDrops() // c may not reach the lock table
	if s.multi {
		clear(s.drops)
		s.drops, s.multi = s.drops[:0], false
	}
	if !c.Op.Valid() {
		r.Err = fmt.Errorf("apply %v: %w", c.Op, ErrUnknownOp)
		return nil
	}
	if !s.fresh(c) {
		r.Err = fmt.Errorf("apply %v from %x #%d: %w", c.Op, c.Origin, c.Seq, ErrDuplicate)
		return nil
	}
	s.now = max(s.now, c.At)
	if c.Op == OpOwned || c.Op == OpOwnedTx {
		s.evs = s.evs[:0]
		if c.Op == OpOwned {
			s.applyOwned(c, r)
		} else {
			s.applyOwnedTx(c, r)
		}
		s.expired(c.At, s.evs)
		return s.evs
	}
	if c.Op.IsItem() {
		return s.applyItem(c, r)
	}
	var evs []engine.Event
	now := c.At
	if r.Err = s.superseded(c); r.Err != nil {
		evs = s.eng.Tick(now)
		s.expired(now, evs)
		return evs
	}
	if c.Op.IsZ() {
		return s.applyZ(c, r, now)
	}
	switch c.Op {
	case OpSeed:
		s.eng.SeedToken(c.Token)
		s.tree.SeedZxid(zxidSeed(c.Token))
		evs = s.eng.Tick(now)
	case OpOpenSession:
		r.Session, evs = s.eng.OpenSession(now, engine.SessionOptions{TTL: c.TTL, LockDelay: c.LockDelay})
		if len(c.Key) > 0 {
			s.owners.add(string(c.Key), r.Session)
		}
	case OpKeepAlive:
		evs, r.Err = s.eng.KeepAlive(now, c.Session)
	case OpEndSession:
		if uint64(c.Token) < s.gens[c.Session] {
			r.Err = fmt.Errorf("end session %d of generation %d: %w", c.Session, c.Token, ErrSuperseded)
			evs = s.eng.Tick(now)
			break
		}
		evs, r.Err = s.eng.EndSession(now, c.Session)
		if r.Err == nil {
			s.ended(now, c.Session)
		}
	case OpResume:
		if st, ok := s.eng.Session(c.Session); ok && st.TTL == 0 {
			r.Err = fmt.Errorf("resume session %d: it has no TTL, it lives with its connection: %w", c.Session, latch.ErrInvalidRequest)
			evs = s.eng.Tick(now)
			break
		}
		if _, owned := s.owners.of[c.Session]; owned {
			r.Err = fmt.Errorf("resume session %d: bound to its node's connection: %w", c.Session, latch.ErrInvalidRequest)
			evs = s.eng.Tick(now)
			break
		}
		evs, r.Err = s.eng.Resume(now, c.Session)
		if r.Err == nil {
			s.gens[c.Session]++
			r.Count = int(s.gens[c.Session])
		}
	case OpAcquire:
		var res engine.Result
		res, evs, r.Err = s.eng.Acquire(now, c.Session, c.Req)
		r.Granted, r.Token, r.Expires, r.Waiter = res.Granted, res.Token, res.Expires, res.Waiter
	case OpCancel:
		evs, r.Err = s.eng.Cancel(now, c.Waiter)
	case OpRelease:
		evs, r.Err = s.eng.Release(now, c.Session, c.Req.Keys)
	case OpReleaseAll:
		r.Count, evs, r.Err = s.eng.ReleaseAll(now, c.Session)
	case OpRenew:
		r.Token, r.Expires, evs, r.Err = s.eng.Renew(now, c.Session, c.Req.Keys, c.Req.Lease)
	case OpForceRelease:
		r.Count, evs = s.eng.ForceRelease(now, string(c.Key))
		s.unmark(now, c.Key)
	case OpTick:
		evs = s.eng.Tick(now)
		s.z.sweep(now)
	case OpPromote:
		evs = s.eng.Promote(now, c.TTL)
	case OpNodeAlive:
		evs = s.nodeAlive(now, string(c.Key))
	case OpEndOwner:
		r.Count, evs = s.endOwner(now, string(c.Key))
	}
	s.expired(now, evs)
	return evs
}

// Gen returns the generation of session id: how many times it was
// resumed (OpResume) or attached (OpZAttach); 0 for a session never
// resumed, or unknown. A command that carries an older one is superseded.
func (s *State) Gen(id latch.SessionID) uint64 { return s.gens[id] }

// superseded returns the error of c if it carries a generation (carriesGen)
// older than its session's, nil otherwise: the command comes from the
// session's connection before the session was resumed elsewhere, late, and
// must change nothing. The session's generation is 0 unless it was
// resumed; AnyGen (a version 1 command) is never older.
func (s *State) superseded(c *Command) error {
	if len(s.gens) == 0 || !carriesGen(c.Op) {
		return nil
	}
	if gen := s.gens[c.Session]; c.Gen < gen {
		return fmt.Errorf("%v of session %d of generation %d, now %d: %w", c.Op, c.Session, c.Gen, gen, ErrSuperseded)
	}
	return nil
}

// ended forgets what the state keeps beside the lock table about session
// id, which ended: its item locks, its owner, its generation.
func (s *State) ended(now int64, id latch.SessionID) {
	s.cache.UnlockAll(now, id)
	s.owners.remove(id)
	delete(s.gens, id)
	s.endZ(now, id)
}

// expired drops the item locks of the sessions whose TTL lapsed in evs:
// the lock table released their keys, so their items must not stay marked.
func (s *State) expired(now int64, evs []engine.Event) {
	for i := range evs {
		if evs[i].Kind == engine.EventSessionExpired {
			s.ended(now, evs[i].Session)
		}
	}
}
