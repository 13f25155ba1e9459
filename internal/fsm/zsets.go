package fsm

import (
	"errors"
	"fmt"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/zset"
)

// Sorted sets: Redis's second key type in the state, beside the owned
// locks of the lock table, in the same key namespace. A key is free, a
// lock (held in the lock table, by an owned hold or a session), or a
// sorted set (kept here, in State.zsets, never in the lock table and never
// fenced by tokens). A lock command on a sorted-set key and a sorted-set
// command on a held key fail with ErrWrongType (or count the key in
// Result.ZKeys, Result.Foreign), as Redis answers WRONGTYPE; the generic
// Redis commands (DEL, PEXPIRE, PERSIST, TYPE, EXISTS, PTTL) work on both
// through OwnedRelease, OwnedRenew and OwnedGet.
//
// A sorted-set key may expire (an absolute instant of the replicated
// clock, as a lease): from its command's At on it is gone. It is deleted
// lazily, by the first command that touches it at or after that instant,
// and by OpTick; a read (OwnedGet, OwnedZGet at an instant) sees it gone
// without changing anything. A set that a command empties is deleted, as
// Redis deletes an empty sorted set.
//
// Every change to a sorted-set key (its members or its expiry) gives it a
// new version, drawn from a counter of the state that never goes back: a
// Watch of the key (its Version) sees any change, a delete and a
// re-creation included.

// ZSetArgs are the arguments of the sorted-set kinds of OpOwned (see each
// kind for the fields it reads). Slices are borrowed, as Command's.
type ZSetArgs struct {
	// Flags are OwnedZAdd's options (ZADD's NX, XX, GT, LT, CH, INCR).
	Flags zset.AddFlags
	// Pairs are OwnedZAdd's score and member pairs, in order, and
	// OwnedZPut's whole content (members distinct, any order).
	Pairs []zset.Pair
	// Members are OwnedZRem's.
	Members []string
	// Range is OwnedZRemRangeByScore's.
	Range zset.Range
	// Start and Stop are OwnedZRemRangeByRank's ranks, inclusive,
	// negative from the end.
	Start, Stop int64
}

// ErrWrongType is the error of a command on a key that holds another kind
// of value: a sorted-set command on a lock, or a lock command that cannot
// apply to a sorted set (OwnedSet). Redis's WRONGTYPE.
var ErrWrongType = errors.New("fsm: the key holds the wrong kind of value")

// ErrZSetLimit is wrapped by the error of a command that would take a
// sorted set, or all of them, past the limits of zset.Limits (a
// *ZSetLimitError). It wraps latch.ErrInvalidRequest.
var ErrZSetLimit = fmt.Errorf("fsm: sorted-set limit: %w", latch.ErrInvalidRequest)

// ZSetLimitError is the error of a command that would take the sorted set
// Key past zset.Limits.MaxMembers, or all sets past MaxTotal (Total): it
// would hold Would members, at most Max. It wraps ErrZSetLimit.
type ZSetLimitError struct {
	Key        string
	Total      bool
	Would, Max int
}

func (e *ZSetLimitError) Error() string {
	if e.Total {
		return fmt.Sprintf("sorted sets would hold %d members in all, at most %d", e.Would, e.Max)
	}
	return fmt.Sprintf("sorted set %q would hold %d members, at most %d", e.Key, e.Would, e.Max)
}

func (e *ZSetLimitError) Unwrap() error { return ErrZSetLimit }

// zkey is a sorted-set key of the state.
type zkey struct {
	set     *zset.Set // never empty
	expires int64     // 0: none
	ver     uint64    // the version of the key's last change
}

// zsets is the state's sorted sets.
type zsets struct {
	keys     map[string]*zkey
	volatile map[string]struct{} // the keys with an expiry
	ver      uint64              // the last version given
	members  int                 // of all sets
}

func newZsets() zsets {
	return zsets{keys: make(map[string]*zkey), volatile: make(map[string]struct{})}
}

// live returns key's set at now, nil if there is none or it has expired
// (without changing anything).
func (z *zsets) live(now int64, key string) *zkey {
	k := z.keys[key]
	if k == nil || k.expires != 0 && k.expires <= now {
		return nil
	}
	return k
}

// touch returns key's set at now for a command, deleting it first if it
// has expired.
func (z *zsets) touch(now int64, key string) *zkey {
	k := z.keys[key]
	if k != nil && k.expires != 0 && k.expires <= now {
		z.del(key)
		return nil
	}
	return k
}

// del deletes key's set.
func (z *zsets) del(key string) {
	k := z.keys[key]
	if k == nil {
		return
	}
	z.members -= k.set.Card()
	delete(z.keys, key)
	delete(z.volatile, key)
}

// changed gives k a new version after a change of its members from
// before members; an emptied set is deleted.
func (z *zsets) changed(key string, k *zkey, before int) {
	if k.set.Card() == 0 {
		z.members -= before
		delete(z.keys, key)
		delete(z.volatile, key)
		return
	}
	z.members += k.set.Card() - before
	z.ver++
	k.ver = z.ver
}

// setExpires sets k's expiry and gives it a new version.
func (z *zsets) setExpires(key string, k *zkey, expires int64) {
	k.expires = expires
	if expires != 0 {
		z.volatile[key] = struct{}{}
	} else {
		delete(z.volatile, key)
	}
	z.ver++
	k.ver = z.ver
}

// sweep deletes the sets expired at now. The order does not matter: a
// deletion changes nothing but the deleted key.
func (z *zsets) sweep(now int64) {
	for key := range z.volatile {
		if k := z.keys[key]; k.expires <= now {
			z.del(key)
		}
	}
}

// checkLimits fails if adding added members to k (nil: a new set) would
// go past the limits.
func (s *State) checkZLimits(key string, k *zkey, added int) error {
	lim := s.cfg.ZSet
	if added <= 0 {
		return nil
	}
	if lim.MaxMembers > 0 && k.card()+added > lim.MaxMembers {
		return &ZSetLimitError{Key: key, Would: k.card() + added, Max: lim.MaxMembers}
	}
	if lim.MaxTotal > 0 && s.z.members+added > lim.MaxTotal {
		return &ZSetLimitError{Key: key, Total: true, Would: s.z.members + added, Max: lim.MaxTotal}
	}
	return nil
}

func (k *zkey) card() int {
	if k == nil {
		return 0
	}
	return k.set.Card()
}

// zdescribe fills r with what a read of k tells: Found, ZKeys, Expires,
// Version.
func zdescribe(k *zkey, r *Result) {
	if k == nil {
		return
	}
	r.Found, r.ZKeys, r.Expires, r.Version = 1, 1, k.expires, k.ver
}

// applyZSet is OpOwned of the sorted-set kind c.Owned on key.
func (s *State) applyZSet(c *Command, key string, r *Result) {
	now, z := c.At, &s.z
	k := z.touch(now, key)
	if k == nil && c.Owned != OwnedZPut {
		if st := s.eng.Owned(now, key); st.Held {
			r.Foreign = foreign(st)
			r.Err = fmt.Errorf("owned %v %q: a lock: %w", c.Owned, key, ErrWrongType)
			return
		}
	}
	a := &c.ZSet
	switch c.Owned {
	case OwnedZGet:
		zdescribe(k, r)
		if k != nil {
			r.ZSet = k.set.Clone()
		}
		return
	case OwnedZAdd:
		if err := a.Flags.Check(len(a.Pairs)); err != nil {
			r.Err = fmt.Errorf("owned %v %q: %w", c.Owned, key, err)
			return
		}
		if err := s.checkZLimits(key, k, zAdds(k, a)); err != nil {
			r.Err = fmt.Errorf("owned %v: %w", c.Owned, err)
			return
		}
		fresh := k == nil
		if fresh {
			k = &zkey{set: &zset.Set{}}
		}
		before := k.set.Card()
		res, err := k.set.Add(a.Flags, a.Pairs...)
		if err != nil {
			r.Err = fmt.Errorf("owned %v %q: %w", c.Owned, key, err)
			break
		}
		if a.Flags&zset.INCR != 0 {
			if res.Done {
				r.Count, r.Score = 1, res.Score
			}
		} else {
			r.Count = res.Count
		}
		if k.set.Card() == 0 {
			break // a new key XX added nothing to
		}
		if fresh {
			z.keys[key] = k
		}
		if res.Added > 0 || res.Changed > 0 {
			z.changed(key, k, before)
		}
	case OwnedZRem:
		if k == nil {
			return
		}
		before := k.set.Card()
		if r.Count = k.set.Rem(a.Members...); r.Count > 0 {
			z.changed(key, k, before)
		}
	case OwnedZRemRangeByScore, OwnedZRemRangeByRank:
		if k == nil {
			return
		}
		before := k.set.Card()
		if c.Owned == OwnedZRemRangeByScore {
			r.Count = k.set.RemRangeByScore(a.Range)
		} else {
			r.Count = k.set.RemRangeByRank(a.Start, a.Stop)
		}
		if r.Count > 0 {
			z.changed(key, k, before)
		}
	case OwnedZExpire:
		if k == nil {
			return
		}
		switch {
		case c.OwnedFlags&OwnedPersist != 0:
			if k.expires != 0 {
				r.Count = 1
				z.setExpires(key, k, 0)
			}
		case c.Req.Lease <= 0:
			r.Count = 1
			z.del(key)
		default:
			r.Count = 1
			z.setExpires(key, k, now+int64(c.Req.Lease))
		}
	case OwnedZDel:
		if k != nil {
			r.Count = 1
			z.del(key)
		}
	case OwnedZPut:
		s.zput(c, key, k, r)
		return
	}
	zdescribe(z.live(now, key), r)
}

// zAdds returns how many members an OwnedZAdd of a would add to k: the
// distinct members of its pairs not in k, unless XX.
func zAdds(k *zkey, a *ZSetArgs) int {
	if a.Flags&zset.XX != 0 {
		return 0
	}
	if len(a.Pairs) == 1 {
		if _, in := k.score(a.Pairs[0].Member); in {
			return 0
		}
		return 1
	}
	seen := make(map[string]struct{}, len(a.Pairs))
	for _, p := range a.Pairs {
		if _, in := k.score(p.Member); !in {
			seen[p.Member] = struct{}{}
		}
	}
	return len(seen)
}

func (k *zkey) score(m string) (float64, bool) {
	if k == nil {
		return 0, false
	}
	return k.set.Score(m)
}

// zput is OwnedZPut: key becomes a set of a.Pairs (deleted if there are
// none), with the expiry Req.Lease from now (0: none), or, with
// OwnedKeepTTL, the expiry it had.
func (s *State) zput(c *Command, key string, k *zkey, r *Result) {
	z, now := &s.z, c.At
	if st := s.eng.Owned(now, key); st.Held {
		r.Foreign = foreign(st)
		r.Err = fmt.Errorf("owned %v %q: a lock: %w", c.Owned, key, ErrWrongType)
		return
	}
	if c.Req.Lease < 0 {
		r.Err = fmt.Errorf("owned %v: negative lease: %w", c.Owned, latch.ErrInvalidRequest)
		return
	}
	set, err := zset.New(c.ZSet.Pairs...)
	if err != nil {
		r.Err = fmt.Errorf("owned %v %q: %w", c.Owned, key, err)
		return
	}
	if set.Card() != len(c.ZSet.Pairs) {
		r.Err = fmt.Errorf("owned %v %q: a member given twice: %w", c.Owned, key, latch.ErrInvalidRequest)
		return
	}
	if err := s.checkZLimits(key, k, set.Card()-k.card()); err != nil {
		r.Err = fmt.Errorf("owned %v: %w", c.Owned, err)
		return
	}
	expires := int64(0)
	if c.OwnedFlags&OwnedKeepTTL != 0 && k != nil {
		expires = k.expires
	} else if c.Req.Lease > 0 {
		expires = now + int64(c.Req.Lease)
	}
	z.del(key)
	if set.Card() > 0 {
		k = &zkey{set: set}
		z.keys[key] = k
		z.members += set.Card()
		z.setExpires(key, k, expires)
	}
	r.Count = set.Card()
	zdescribe(z.live(now, key), r)
}

// OwnedZGet answers what an OwnedZGet command on key at now would, without
// changing anything: a read for the proposer. Result.ZSet is a copy.
func (s *State) OwnedZGet(now int64, key string) Result {
	var r Result
	k := s.z.live(now, key)
	if k == nil {
		if st := s.eng.Owned(now, key); st.Held {
			r.Foreign = foreign(st)
			r.Err = fmt.Errorf("owned %v %q: a lock: %w", OwnedZGet, key, ErrWrongType)
		}
		return r
	}
	zdescribe(k, &r)
	r.ZSet = k.set.Clone()
	return r
}

// ZSet returns key's sorted set at now and its expiry (0: none), or nil:
// the state's own, for reads only, valid until the next Apply.
func (s *State) ZSet(now int64, key string) (*zset.Set, int64) {
	k := s.z.live(now, key)
	if k == nil {
		return nil, 0
	}
	return k.set, k.expires
}

// ZKeys returns the sorted-set keys the state holds, expired or not, and
// their members in all.
func (s *State) ZKeys() (keys, members int) { return len(s.z.keys), s.z.members }
