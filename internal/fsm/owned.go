package fsm

import (
	"errors"
	"fmt"
	"time"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/engine"
)

// Owned-lock commands: the lock operations of clients that identify a
// lock's owner by a value of their choosing rather than by a session (the
// Redis lock recipes and libraries). Each is one OpOwned command on owned
// holds of the lock table (see internal/engine); OpOwnedTx applies several
// at once, if the keys it watches have not changed.

// OwnedKind says what an OpOwned command does.
type OwnedKind uint8

// The owned-lock operations. Every one reads Req.Keys (one key unless
// said otherwise), Value (the owner value) and Req.Lease (0: no lease),
// and the OwnedFlags listed.
const (
	// OwnedGet reads the key: Found is 1 if it is held, Count 1 if by an
	// owned hold, whose value is Owner; Token and Expires describe the
	// holder. It changes nothing (a read inside OpOwnedTx).
	OwnedGet OwnedKind = iota + 1
	// OwnedAcquire takes every key for Value at once if all are free, with
	// the lease: Count is 1 (Token, Expires) or 0 when one is busy.
	OwnedAcquire
	// OwnedSet stores Value on a key as a plain Redis SET does, without
	// ever taking it from another owner: a free key is acquired (not with
	// OwnedXX: Count 0), a key owned by the same value gets the lease
	// (kept with OwnedKeepTTL); a key held otherwise fails with an error
	// wrapping latch.ErrWouldBlock. Count is 1 when stored.
	OwnedSet
	// OwnedGetSet stores Value and returns the previous owner in Owner
	// (Found 1), or acquires a free key (Found 0), without a lease. Taking
	// an owned key from its owner is a new grant (a new token): the
	// SETNX/GETSET recipe's takeover. A key held by a session fails with an
	// error wrapping latch.ErrWouldBlock.
	OwnedGetSet
	// OwnedRelease releases the owned holds of the keys whose owner is
	// Value (any owner without OwnedMatch); with OwnedAll, none unless all
	// are. Count is how many it released, Found how many keys were held by
	// anyone. Keys held by sessions are never released.
	OwnedRelease
	// OwnedRenew sets the lease of the owned holds as OwnedRelease chooses
	// them (OwnedMatch, OwnedAll): to Req.Lease, or to Req.Lease plus what
	// is left of the lease with OwnedAdd. A lease that comes out zero or
	// negative releases the hold, as a Redis PEXPIRE of 0 deletes the
	// key. Count is how many it renewed or released, Found as above.
	OwnedRenew
	// OwnedObtain acquires a free key for Value with the lease, or, when
	// the key's owner value and Value agree on their first Prefix bytes
	// (with OwnedMatch: are equal), stores Value with the lease
	// (bsm/redislock's re-obtain, redsync's extend-or-acquire). Count is 1
	// when obtained.
	OwnedObtain

	// The sorted-set kinds (zsets.go): Redis's sorted sets, a second kind
	// of key beside the locks. Each reads one key, Req.Keys[0], and the
	// fields of ZSet it lists. On a key held as a lock each fails with an
	// error wrapping ErrWrongType (Foreign 1 if a session holds it); on a
	// free key each acts as on an empty set. After each (but OwnedZPut's
	// own reply) Found is 1 if the key then holds a set, with its
	// Expires (0: none), its Version and ZKeys 1.

	// OwnedZGet reads the key: Found, Expires, Version, and a copy of its
	// set in ZSet (nil when free). It changes nothing.
	OwnedZGet
	// OwnedZAdd is ZADD with ZSet.Flags of ZSet.Pairs (zset.Set.Add):
	// Count is ZADD's reply (members added, or added or changed with CH);
	// with zset.INCR, Count is 1 and Score the new score, or Count 0
	// when NX, XX, GT or LT refused it (ZADD replies nil). Errors: the
	// options' (zset.AddFlags.Check), zset.ErrNaN, or ErrZSetLimit when
	// the set, or all sets, would get too many members.
	OwnedZAdd
	// OwnedZRem is ZREM of ZSet.Members: Count is how many were removed.
	OwnedZRem
	// OwnedZRemRangeByScore is ZREMRANGEBYSCORE of ZSet.Range: Count is
	// how many were removed.
	OwnedZRemRangeByScore
	// OwnedZRemRangeByRank is ZREMRANGEBYRANK of ZSet.Start to ZSet.Stop:
	// Count is how many were removed.
	OwnedZRemRangeByRank
	// OwnedZExpire is PEXPIRE on a sorted-set key: its expiry becomes
	// Req.Lease from At; a lease of 0 or less deletes it; with
	// OwnedPersist, the expiry is removed (PERSIST). Count is 1 if it
	// did something (a set was there; with OwnedPersist, a set with an
	// expiry). OwnedRenew does the same on sorted-set keys without
	// OwnedMatch, for the generic PEXPIRE and PERSIST of a transaction.
	OwnedZExpire
	// OwnedZDel deletes the key's set: Count is 1 if there was one.
	// OwnedRelease without OwnedMatch does the same, for DEL.
	OwnedZDel
	// OwnedZPut replaces the key with a set of ZSet.Pairs (members
	// distinct, scores not NaN), or deletes it when there are none, with
	// the expiry Req.Lease from At (0: none) or, with OwnedKeepTTL, the
	// one it had: a script's effect on the key, replicated. Count is the
	// members put. It fails on a held key (ErrWrongType), on a member
	// given twice or a NaN score (latch.ErrInvalidRequest, zset.ErrNaN),
	// and past a limit (ErrZSetLimit), changing nothing.
	OwnedZPut

	numOwnedKinds
)

// IsZSet reports whether k is a sorted-set kind (OwnedZGet to OwnedZPut).
func (k OwnedKind) IsZSet() bool { return k >= OwnedZGet && k <= OwnedZPut }

var ownedNames = [numOwnedKinds]string{
	OwnedGet:     "get",
	OwnedAcquire: "acquire",
	OwnedSet:     "set",
	OwnedGetSet:  "getset",
	OwnedRelease: "release",
	OwnedRenew:   "renew",
	OwnedObtain:  "obtain",

	OwnedZGet:             "zget",
	OwnedZAdd:             "zadd",
	OwnedZRem:             "zrem",
	OwnedZRemRangeByScore: "zremrangebyscore",
	OwnedZRemRangeByRank:  "zremrangebyrank",
	OwnedZExpire:          "zexpire",
	OwnedZDel:             "zdel",
	OwnedZPut:             "zput",
}

func (k OwnedKind) String() string {
	if k > 0 && k < numOwnedKinds {
		return ownedNames[k]
	}
	return fmt.Sprintf("OwnedKind(%d)", uint8(k))
}

// Valid reports whether k is a known operation.
func (k OwnedKind) Valid() bool { return k > 0 && k < numOwnedKinds }

// OwnedFlags modify an owned-lock operation.
type OwnedFlags uint8

const (
	// OwnedMatch: act only on keys whose owner value is Value.
	OwnedMatch OwnedFlags = 1 << iota
	// OwnedAll: act on no key unless on every key.
	OwnedAll
	// OwnedAdd: OwnedRenew adds the lease left to Req.Lease.
	OwnedAdd
	// OwnedKeepTTL: OwnedSet keeps the lease of a key it stores over.
	OwnedKeepTTL
	// OwnedXX: OwnedSet stores only over a held key.
	OwnedXX
	// OwnedPersist: OwnedRenew and OwnedZExpire remove the lease or
	// expiry of the keys rather than set it (PERSIST); Count is how many
	// keys had one.
	OwnedPersist

	ownedFlagsMask = 1<<iota - 1
)

// Watch is a key's state as a client saw it (Engine.Owned, or the sorted
// set, at some instant): an OpOwnedTx applies only if each of its watched
// keys still has the same holder, token, lease end and owner value, or,
// for a sorted-set key, the same Version (any change to a set, its
// expiry, or its deletion and re-creation, gives it a new one).
type Watch struct {
	Key     string
	Token   latch.Token // 0: free
	Expires int64
	Owner   string
	// Version is the sorted set's (Result.Version): 0 unless the key
	// holds one.
	Version uint64
}

// WatchOfResult returns the Watch of key from an OwnedGet result r on it
// (State.OwnedGet, or a proposer's read that answers alike).
func WatchOfResult(key string, r *Result) Watch {
	switch {
	case r.Found == 0:
		return Watch{Key: key}
	case r.ZKeys > 0:
		return Watch{Key: key, Version: r.Version}
	}
	return Watch{Key: key, Token: r.Token, Expires: r.Expires, Owner: r.Owner}
}

// watchOf returns the Watch of key in s at now.
func (s *State) watchOf(now int64, key string) Watch {
	if k := s.z.live(now, key); k != nil {
		return Watch{Key: key, Version: k.ver}
	}
	return WatchOf(key, s.eng.Owned(now, key))
}

// WatchOf returns the Watch of key in st.
func WatchOf(key string, st engine.OwnedState) Watch {
	if !st.Held {
		return Watch{Key: key}
	}
	return Watch{Key: key, Token: st.Token, Expires: st.Expires, Owner: st.Owner}
}

// ErrWatchChanged is the result of an OpOwnedTx whose watched keys changed:
// nothing was applied.
var ErrWatchChanged = errors.New("fsm: a watched key changed")

// applyOwned is OpOwned at c.At. The engine's events of its calls are
// gathered in s.evs.
func (s *State) applyOwned(c *Command, r *Result) {
	now, e := c.At, s.eng
	if !c.Owned.Valid() || c.OwnedFlags&^ownedFlagsMask != 0 ||
		c.OwnedFlags&OwnedPersist != 0 && c.Owned != OwnedRenew && c.Owned != OwnedZExpire {
		r.Err = fmt.Errorf("owned %v flags %#x: %w", c.Owned, uint8(c.OwnedFlags), latch.ErrInvalidRequest)
		return
	}
	keys := c.Req.Keys
	if len(keys) == 0 {
		r.Err = fmt.Errorf("owned %v: %w", c.Owned, latch.ErrNoKeys)
		return
	}
	for _, k := range keys {
		if err := latch.CheckKey(k); err != nil {
			r.Err = fmt.Errorf("owned %v: %w", c.Owned, err)
			return
		}
	}
	if c.Owned != OwnedAcquire && c.Owned != OwnedRelease && c.Owned != OwnedRenew && len(keys) != 1 {
		r.Err = fmt.Errorf("owned %v: %d keys, want 1: %w", c.Owned, len(keys), latch.ErrInvalidRequest)
		return
	}
	if c.Owned.IsZSet() {
		s.applyZSet(c, keys[0], r)
		return
	}
	if c.Req.Lease < 0 && c.Owned != OwnedRenew {
		r.Err = fmt.Errorf("owned %v: negative lease: %w", c.Owned, latch.ErrInvalidRequest)
		return
	}
	// A lock command on a sorted-set key: OwnedGet describes it,
	// OwnedRelease and OwnedRenew act on it (below), the others count
	// it in ZKeys and change nothing, but OwnedSet, which fails.
	if c.Owned != OwnedGet && c.Owned != OwnedRelease && c.Owned != OwnedRenew {
		for _, k := range keys {
			if s.z.touch(now, k) != nil {
				r.ZKeys++
			}
		}
		if r.ZKeys > 0 {
			if c.Owned == OwnedSet {
				r.Err = fmt.Errorf("owned %v %q: a sorted set: %w", c.Owned, key0(keys), ErrWrongType)
			}
			return
		}
	}
	// The owner value is made a string only where the lock table keeps it:
	// a release or renewal by value compares it in place.
	value := c.Value
	key := keys[0]
	switch c.Owned {
	case OwnedGet:
		*r = s.OwnedGet(now, key)
	case OwnedAcquire:
		res, evs, err := e.AcquireOwned(now, keys, value, c.Req.Lease)
		s.evs = append(s.evs, evs...)
		switch {
		case errors.Is(err, latch.ErrWouldBlock):
		case err != nil:
			r.Err = err
		default:
			r.Count, r.Granted, r.Token, r.Expires = 1, true, res.Token, res.Expires
		}
	case OwnedSet:
		st := e.Owned(now, key)
		switch {
		case !st.Held && c.OwnedFlags&OwnedXX != 0:
		case !st.Held:
			s.acquireOwned(now, key, value, c.Req.Lease, r)
		case st.Owned && st.Owner == string(value):
			r.Count, r.Token, r.Expires = 1, st.Token, st.Expires
			if c.OwnedFlags&OwnedKeepTTL == 0 {
				s.renewOwned(now, key, c.Req.Lease, r)
			}
		default:
			r.Foreign = foreign(st)
			r.Err = &latch.BusyError{Err: latch.ErrWouldBlock, Keys: []string{key}}
		}
	case OwnedGetSet:
		st := e.Owned(now, key)
		switch {
		case !st.Held:
			s.acquireOwned(now, key, value, 0, r)
		case st.Owned:
			old, tok, evs, err := e.ReplaceOwner(now, key, string(value), true)
			s.evs = append(s.evs, evs...)
			r.Found, r.Count, r.Owner, r.Token, r.Err = 1, 1, old, tok, err
			r.Granted = err == nil
		default:
			r.Foreign = 1
			r.Err = &latch.BusyError{Err: latch.ErrWouldBlock, Keys: []string{key}}
		}
	case OwnedRelease, OwnedRenew:
		s.releaseOrRenew(c, r)
	case OwnedObtain:
		st := e.Owned(now, key)
		p := int(c.Prefix)
		r.Foreign = foreign(st)
		switch {
		case !st.Held:
			s.acquireOwned(now, key, value, c.Req.Lease, r)
		case st.Owned && c.OwnedFlags&OwnedMatch != 0 && st.Owner != string(value):
		case st.Owned && len(st.Owner) >= p && len(value) >= p && st.Owner[:p] == string(value[:p]):
			_, _, evs, err := e.ReplaceOwner(now, key, string(value), false)
			s.evs = append(s.evs, evs...)
			if r.Err = err; err == nil {
				r.Count = 1
				s.renewOwned(now, key, c.Req.Lease, r)
			}
		}
	}
}

// OwnedGet answers what an OwnedGet command on key at now would, without
// changing anything: a read for the proposer. On a sorted-set key, Found
// and ZKeys are 1, Expires and Version its own.
func (s *State) OwnedGet(now int64, key string) Result {
	var r Result
	if k := s.z.live(now, key); k != nil {
		zdescribe(k, &r)
		return r
	}
	st := s.eng.Owned(now, key)
	if st.Held {
		r.Found, r.Token, r.Expires = 1, st.Token, st.Expires
	}
	if st.Owned {
		r.Count, r.Owner = 1, st.Owner
	}
	r.Foreign = foreign(st)
	return r
}

// foreign is 1 when st is a key held by a session (memcached, dlock): a
// lock without an owner value (Result.Foreign), else 0.
func foreign(st engine.OwnedState) int {
	if st.Held && !st.Owned {
		return 1
	}
	return 0
}

// acquireOwned takes one free key for value; Count is 1 when it did.
func (s *State) acquireOwned(now int64, key string, value []byte, lease time.Duration, r *Result) {
	s.keys[0] = key
	res, evs, err := s.eng.AcquireOwned(now, s.keys[:], value, lease)
	s.keys[0] = ""
	s.evs = append(s.evs, evs...)
	if err != nil {
		r.Err = err
		return
	}
	r.Count, r.Granted, r.Token, r.Expires = 1, true, res.Token, res.Expires
}

// renewOwned sets the lease of key's owned hold and reports its end.
func (s *State) renewOwned(now int64, key string, lease time.Duration, r *Result) {
	tok, exp, evs, err := s.eng.RenewOwned(now, key, lease)
	s.evs = append(s.evs, evs...)
	r.Token, r.Expires, r.Err = tok, exp, err
}

// releaseOrRenew is OwnedRelease and OwnedRenew over every key of c.
func (s *State) releaseOrRenew(c *Command, r *Result) {
	now, e := c.At, s.eng
	chosen := func(st engine.OwnedState) bool {
		return st.Owned && (c.OwnedFlags&OwnedMatch == 0 || st.Owner == string(c.Value))
	}
	// A sorted-set key is chosen without OwnedMatch (DEL, PEXPIRE,
	// PERSIST), and never with it.
	for _, key := range c.Req.Keys {
		if s.z.touch(now, key) != nil {
			r.Found++
			r.ZKeys++
			if c.OwnedFlags&OwnedMatch != 0 && c.OwnedFlags&OwnedAll != 0 {
				return
			}
			continue
		}
		st := e.Owned(now, key)
		if st.Held {
			r.Found++
		}
		r.Foreign += foreign(st)
		if !chosen(st) && c.OwnedFlags&OwnedAll != 0 {
			return
		}
	}
	for i, key := range c.Req.Keys {
		if dupKey(c.Req.Keys[:i], key) {
			continue
		}
		if k := s.z.keys[key]; k != nil {
			if c.OwnedFlags&OwnedMatch == 0 {
				s.zgeneric(c, key, k, r)
			}
			continue
		}
		st := e.Owned(now, key)
		if !chosen(st) {
			continue
		}
		if c.OwnedFlags&OwnedPersist != 0 {
			if c.Owned == OwnedRenew && st.Expires != 0 {
				var evs []engine.Event
				var err error
				r.Token, r.Expires, evs, err = e.RenewOwned(now, key, 0)
				s.evs = append(s.evs, evs...)
				if err != nil {
					r.Err = err
					return
				}
				r.Count++
			}
			continue
		}
		lease := c.Req.Lease
		if c.Owned == OwnedRenew && c.OwnedFlags&OwnedAdd != 0 && st.Expires > now {
			lease += time.Duration(st.Expires - now)
		}
		var evs []engine.Event
		var err error
		if c.Owned == OwnedRelease || lease <= 0 {
			evs, err = e.ReleaseOwned(now, key)
		} else {
			r.Token, r.Expires, evs, err = e.RenewOwned(now, key, lease)
		}
		s.evs = append(s.evs, evs...)
		if err != nil {
			r.Err = err
			return
		}
		r.Count++
	}
}

// zgeneric is OwnedRelease or OwnedRenew (without OwnedMatch) on the
// sorted-set key k: DEL, PEXPIRE or PERSIST.
func (s *State) zgeneric(c *Command, key string, k *zkey, r *Result) {
	now, z := c.At, &s.z
	switch {
	case c.Owned == OwnedRelease:
		z.del(key)
		r.Count++
	case c.OwnedFlags&OwnedPersist != 0:
		if k.expires != 0 {
			z.setExpires(key, k, 0)
			r.Count++
		}
	default:
		lease := c.Req.Lease
		if c.OwnedFlags&OwnedAdd != 0 && k.expires > now {
			lease += time.Duration(k.expires - now)
		}
		if lease <= 0 {
			z.del(key)
		} else {
			z.setExpires(key, k, now+int64(lease))
		}
		r.Count++
	}
}

func key0(keys []string) string {
	if len(keys) == 0 {
		return ""
	}
	return keys[0]
}

func dupKey(keys []string, k string) bool {
	for _, x := range keys {
		if x == k {
			return true
		}
	}
	return false
}

// applyOwnedTx is OpOwnedTx: unless a watched key changed, each command
// of c.Tx (all OpOwned) is applied in order at c.At, its result in r.Tx.
func (s *State) applyOwnedTx(c *Command, r *Result) {
	for _, w := range c.Watch {
		if s.watchOf(c.At, w.Key) != w {
			r.Err = fmt.Errorf("exec: key %q: %w", w.Key, ErrWatchChanged)
			return
		}
	}
	if cap(c.TxResults) >= len(c.Tx) {
		r.Tx = c.TxResults[:len(c.Tx)]
		clear(r.Tx)
	} else {
		r.Tx = make([]Result, len(c.Tx))
	}
	for i := range c.Tx {
		sub := &c.Tx[i]
		if sub.Op != OpOwned {
			r.Tx[i].Err = fmt.Errorf("exec: %v in a transaction: %w", sub.Op, ErrUnknownOp)
			continue
		}
		at := sub.At
		sub.At = c.At
		s.applyOwned(sub, &r.Tx[i])
		sub.At = at
	}
}
