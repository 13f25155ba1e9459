package engine

import (
	"fmt"
	"time"

	"github.com/latchd/latch"
)

// Owned holds.
//
// An owned hold belongs to no session: it is owned by a value, the bytes
// its acquirer chose (a Redis lock client's random token), and whoever
// shows that value may renew or release it. It is exclusive, ends only by
// its lease, by a release naming its key, or by ForceRelease, and never
// with a session: the clients that use them pool their connections and
// identify owners by value, so no connection owns their locks. An owned
// hold without a lease stays until released.
//
// Owned holds share the lock table with session holds: a key held either
// way excludes the other, and a release of an owned hold grants the key's
// queued requests in the same step.

// OwnedState describes the current holder of a key, as the owned-hold
// operations see it at an instant.
type OwnedState struct {
	// Held is true when the key has a holder at that instant (a lease
	// that ends at or before it does not count).
	Held bool
	// Owned is true when the holder is an owned hold; Owner is its value.
	Owned bool
	Owner string
	// Shared is true when the key is held in shared mode (by sessions).
	Shared bool
	// Token is the holder's fencing token (the newest one when shared);
	// Expires its lease end, 0 without a lease.
	Token   latch.Token
	Expires int64
}

// Owned describes key name's holder at instant now without changing the
// table: a lease due at or before now counts as ended, as it will once the
// table is brought up to now, so that a reader never sees a lapsed owner.
func (e *Engine) Owned(now int64, name string) OwnedState {
	k := e.keys[name]
	if k == nil {
		return OwnedState{}
	}
	now = max(now, e.now)
	var st OwnedState
	for h := k.holds; h != nil; h = h.knext {
		var exp int64
		if t := h.lease; t != nil {
			if t.when <= now {
				continue
			}
			exp = t.when
		}
		if !st.Held || h.token > st.Token {
			st.Token, st.Expires = h.token, exp
		}
		st.Held = true
		if h.owned {
			st.Owned, st.Owner = true, h.owner
		}
	}
	st.Shared = st.Held && k.mode == latch.Shared
	return st
}

// AcquireOwned takes every key of names at once for the owner value owner
// (copied when kept), with a lease (0: none), if every key is free now: no
// holder, no waiter and no lock-delay. Otherwise it changes nothing and
// returns ErrOwnedBusy. Owned holds never wait: their clients poll, so a
// busy key is their common case, and it costs no allocation.
func (e *Engine) AcquireOwned(now int64, names []string, owner []byte, lease time.Duration) (Result, []Event, error) {
	e.begin(now)
	req := latch.LockRequest{Keys: names, Lease: lease}
	if err := e.check(&req); err != nil {
		return Result{}, e.events, err
	}
	for i := range e.reqNames {
		if k := e.reqKeys[i]; k != nil && !k.admitsNew(latch.Exclusive, 0) {
			e.clearScratch()
			return Result{}, e.events, ErrOwnedBusy
		}
	}
	for i, name := range e.reqNames {
		if e.reqKeys[i] == nil {
			e.reqKeys[i] = e.newKey(name)
		}
	}
	tok, exp := e.grant(nil, e.reqKeys, latch.Exclusive, 0, lease, false)
	o := string(owner)
	for _, k := range e.reqKeys {
		k.holds.owner, k.holds.owned = o, true
	}
	e.clearScratch()
	return Result{Granted: true, Token: tok, Expires: exp}, e.events, nil
}

// ErrOwnedBusy is AcquireOwned's error when a key is not free: a
// *latch.BusyError wrapping latch.ErrWouldBlock, without the keys.
var ErrOwnedBusy error = &latch.BusyError{Err: latch.ErrWouldBlock}

// ownedHold returns the owned hold of key name, or an error wrapping
// latch.ErrNotHeld when the key has none.
func (e *Engine) ownedHold(op, name string) (*hold, error) {
	if k := e.keys[name]; k != nil && k.nholds == 1 {
		if k.holds.owned {
			return k.holds, nil
		}
	}
	return nil, fmt.Errorf("%s %q: %w: no owned hold", op, name, latch.ErrNotHeld)
}

// ReleaseOwned releases the owned hold of key name, whatever its owner
// value (the caller compares values first). A key without an owned hold
// (free, or held by a session) is left alone and the error wraps
// latch.ErrNotHeld.
func (e *Engine) ReleaseOwned(now int64, name string) ([]Event, error) {
	e.begin(now)
	h, err := e.ownedHold("release", name)
	if err != nil {
		return e.events, err
	}
	e.dropHold(h, DropReleased)
	e.serve()
	return e.events, nil
}

// RenewOwned sets the lease of key name's owned hold to end lease from now
// (0: no lease) and returns its token and the new end. Without an owned
// hold the error wraps latch.ErrNotHeld.
func (e *Engine) RenewOwned(now int64, name string, lease time.Duration) (latch.Token, int64, []Event, error) {
	e.begin(now)
	if lease < 0 {
		return 0, 0, e.events, fmt.Errorf("renew %q: negative lease %v: %w", name, lease, latch.ErrInvalidRequest)
	}
	h, err := e.ownedHold("renew", name)
	if err != nil {
		return 0, 0, e.events, err
	}
	return h.token, e.setLease(h, lease), e.events, nil
}

// ReplaceOwner gives key name's owned hold the owner value owner. A
// takeover (takeover true) is a new grant: the hold gets a new token and
// loses its lease, as a Redis GETSET stores a value without expiry;
// otherwise the token and lease stay. It returns the previous owner value
// and the hold's token. Without an owned hold the error wraps
// latch.ErrNotHeld.
func (e *Engine) ReplaceOwner(now int64, name, owner string, takeover bool) (string, latch.Token, []Event, error) {
	e.begin(now)
	h, err := e.ownedHold("replace owner", name)
	if err != nil {
		return "", 0, e.events, err
	}
	old := h.owner
	e.changeKey(h.k)
	h.owner = owner
	if takeover {
		e.token++
		h.token = e.token
		h.acquired = e.now
		e.dropLease(h)
	}
	return old, h.token, e.events, nil
}
