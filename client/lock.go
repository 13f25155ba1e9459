package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/latchd/latch"
	"github.com/latchd/latch/dlockpb"
)

// Lock is a granted lock request: one or more keys held together, in one
// mode. It stays held until Unlock, until its lease ends (see Lease), or
// until the Client's session ends. Done is closed when it may no longer be
// held. Its methods are safe for concurrent use.
type Lock struct {
	c      *Client
	keys   []string
	tokens []latch.Token
	mode   latch.Mode
	done   chan struct{}

	// Guarded by c.mu.
	err        error     // why Done was closed
	leaseSent  time.Time // when the request that set the lease was sent
	leaseEnd   time.Time // when Done closes for the lease; zero without one
	leaseTimer stopper
}

// Lock takes every key exclusively, all or none, waiting until it can, or
// as long as Wait allows, or until ctx is done. While it waits it holds
// nothing.
//
// It fails with an error wrapping latch.ErrTimeout (a *latch.BusyError) when
// Wait's time ran out, latch.ErrCanceled and ctx.Err() when ctx was done
// (the request is withdrawn from the server's queues first), or
// latch.ErrAlreadyHeld when another Lock of this Client holds or requests
// one of the keys.
//
// Its outcome is unknown when it fails with ErrConnectionLost: the
// connection broke, or was given up, before the answer, or the server
// answered that it cannot reach a majority of its cluster (the error then
// wraps latch.ErrUnavailable too), and the request may still be granted
// in the session. The Client resumes the session on a server, then
// unlocks the keys: until then they stay reserved, and requesting them
// again fails with latch.ErrAlreadyHeld.
func (c *Client) Lock(ctx context.Context, keys []string, opts ...LockOption) (*Lock, error) {
	return c.acquire(ctx, "lock", keys, latch.Exclusive, opts, false)
}

// TryLock takes every key exclusively if it can do so at once, and fails
// otherwise with an error wrapping latch.ErrWouldBlock (a *latch.BusyError
// naming the busy keys). Wait options are ignored.
func (c *Client) TryLock(ctx context.Context, keys []string, opts ...LockOption) (*Lock, error) {
	return c.acquire(ctx, "try lock", keys, latch.Exclusive, opts, true)
}

// RLock takes every key in shared mode: any number of shared holders at
// once (or at most Limit of them), and no exclusive one. Otherwise it is
// Lock.
func (c *Client) RLock(ctx context.Context, keys []string, opts ...LockOption) (*Lock, error) {
	return c.acquire(ctx, "rlock", keys, latch.Shared, opts, false)
}

// TryRLock is RLock without waiting, as TryLock.
func (c *Client) TryRLock(ctx context.Context, keys []string, opts ...LockOption) (*Lock, error) {
	return c.acquire(ctx, "try rlock", keys, latch.Shared, opts, true)
}

func (c *Client) acquire(ctx context.Context, op string, keys []string, mode latch.Mode, opts []LockOption, tryOnce bool) (*Lock, error) {
	lo := lockOptions{wait: -1}
	for _, opt := range opts {
		opt(&lo)
	}
	if tryOnce {
		lo.tryOnce = true
	}
	keys, err := checkRequest(keys, mode, lo)
	if err != nil {
		return nil, fmt.Errorf("client: %s %v: %w", op, keys, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("client: %s %v: %w: %w", op, keys, latch.ErrCanceled, err)
	}
	if err := c.reserve(keys); err != nil {
		return nil, fmt.Errorf("client: %s %v: %w", op, keys, err)
	}
	l, err := c.lock(ctx, keys, mode, lo)
	if err != nil {
		if !errors.Is(err, errLostInFlight) {
			// (A request the lost connection took keeps its keys reserved
			// until the resumed session has given them back.)
			c.unreserve(keys)
		}
		return nil, fmt.Errorf("client: %s %v: %w", op, keys, err)
	}
	return l, nil
}

// errLostInFlight marks the error of a request whose connection was lost
// while it was in flight: its keys are given back when the session is
// resumed (call.cleanup).
var errLostInFlight = errors.New("the request was in flight")

// lostInFlight wraps the error of await for a request sent with cleanup.
func lostInFlight(err error) error {
	if errors.Is(err, ErrConnectionLost) {
		return fmt.Errorf("%w (%w)", err, errLostInFlight)
	}
	return err
}

// checkRequest validates a lock request and returns its keys without
// duplicates.
func checkRequest(keys []string, mode latch.Mode, lo lockOptions) ([]string, error) {
	if len(keys) == 0 {
		return keys, latch.ErrNoKeys
	}
	uniq := make([]string, 0, len(keys))
	for _, k := range keys {
		if err := latch.CheckKey(k); err != nil {
			return keys, err
		}
		if !slices.Contains(uniq, k) {
			uniq = append(uniq, k)
		}
	}
	if lo.limit != 0 && mode != latch.Shared {
		return keys, fmt.Errorf("%w: a limit on an exclusive lock", latch.ErrInvalidRequest)
	}
	if lo.lease < 0 {
		return keys, fmt.Errorf("%w: negative lease %v", latch.ErrInvalidRequest, lo.lease)
	}
	return uniq, nil
}

// reserve claims keys for a lock request of this Client. A session cannot
// hold a key twice: the server would answer a second request for a key the
// session holds with the same hold, which the first Unlock would release
// under the second. So a Client refuses to request a key that one of its
// live locks or requests in flight has.
func (c *Client) reserve(keys []string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return c.err
	}
	for _, k := range keys {
		if c.reserved[k] {
			return fmt.Errorf("%w: key %q is held or requested by another Lock of this Client", latch.ErrAlreadyHeld, k)
		}
	}
	for _, k := range keys {
		c.reserved[k] = true
	}
	return nil
}

func (c *Client) unreserve(keys []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range keys {
		delete(c.reserved, k)
	}
}

// lock sends a Lock request for keys, which the caller has reserved, and
// waits for its answer.
func (c *Client) lock(ctx context.Context, keys []string, mode latch.Mode, lo lockOptions) (*Lock, error) {
	rl := &dlockpb.RequestLock{
		Keys:         keys,
		ReleaseMicro: micros(lo.lease),
		Limit:        lo.limit,
		TryOnce:      lo.tryOnce,
	}
	if mode == latch.Shared {
		rl.Mode = dlockpb.LockMode_Shared
	}
	if !lo.tryOnce && lo.wait > 0 {
		rl.WaitMicro = micros(lo.wait)
	}
	sent := c.clk.Now()
	nc := newCall()
	nc.cleanup = keys
	cl, id, err := c.send(&dlockpb.Request{Type: dlockpb.RequestType_Lock, Lock: rl}, nc)
	if err != nil {
		return nil, err
	}
	resp, err := c.await(ctx, cl)
	if err != nil && ctx.Err() != nil && !errors.Is(err, ErrConnectionLost) {
		return nil, c.withdraw(ctx, id, cl, keys)
	}
	if err != nil {
		return nil, lostInFlight(err)
	}
	if err := answerError(resp, lo.tryOnce, true); err != nil {
		return nil, err
	}

	// A lease runs from the grant, which the Client cannot date better than
	// by the request's send time. If the request waited long, little of the
	// lease is left by that measure: renew it, which dates it anew.
	if lo.lease > 0 {
		window := lo.lease - c.leaseMargin(lo.lease)
		if sent.Add(window).Sub(c.clk.Now()) < window/2 {
			rsent, err := c.renew(ctx, keys, lo.lease)
			if err != nil {
				c.unlock(keys)
				return nil, fmt.Errorf("renewing the lease after a long wait: %w", err)
			}
			sent = rsent
		}
	}

	l := &Lock{c: c, keys: keys, mode: mode, done: make(chan struct{})}
	// The server answers the keys in request order, with their tokens.
	if got := resp.GetKeys(); len(got) == len(keys) {
		l.keys = got
	}
	l.tokens = make([]latch.Token, len(l.keys))
	for i, t := range resp.GetTokens() {
		if i < len(l.tokens) {
			l.tokens[i] = latch.Token(t)
		}
	}
	c.mu.Lock()
	if c.err != nil {
		// Given up while the answer was on its way: the connection's
		// close releases the keys.
		err := c.err
		c.mu.Unlock()
		return nil, err
	}
	c.locks[l] = struct{}{}
	if lo.lease > 0 {
		l.setLeaseLocked(sent, lo.lease)
	}
	c.mu.Unlock()
	return l, nil
}

// renew sets the lease of keys the session holds to d, and returns when
// the request was sent.
func (c *Client) renew(ctx context.Context, keys []string, d time.Duration) (time.Time, error) {
	_, sent, err := c.roundTrip(ctx, &dlockpb.Request{
		Type: dlockpb.RequestType_Renew,
		Lock: &dlockpb.RequestLock{Keys: keys, ReleaseMicro: micros(d)},
	})
	return sent, err
}

// unlock releases keys the session holds but no Lock has: granted to a
// request that then failed. Failures are logged: the Client's session, or
// the lease, ends them anyway.
func (c *Client) unlock(keys []string) {
	_, _, err := c.roundTrip(context.Background(), &dlockpb.Request{
		Type: dlockpb.RequestType_Unlock,
		Lock: &dlockpb.RequestLock{Keys: keys},
	})
	if err != nil {
		c.log.Warn("client: giving back keys granted to a failed request", "keys", keys, "err", err)
	}
}

// withdraw cancels the Lock request id, whose caller's ctx is done, and
// returns the error for the caller. If the server granted the request
// before the Cancel reached it, the keys are unlocked.
func (c *Client) withdraw(ctx context.Context, id uint64, cl *call, keys []string) error {
	canceled := fmt.Errorf("%w: %w", latch.ErrCanceled, ctx.Err())
	// The answer to the Cancel says nothing the Lock's answer does not.
	_, _, err := c.send(&dlockpb.Request{Type: dlockpb.RequestType_Cancel, CancelId: id}, &call{})
	if err != nil {
		return err
	}
	// The server answers the Lock at once now (Canceled, or how it ended
	// first); the wait is bounded by the Client's keepalive watch.
	resp, err := c.await(context.Background(), cl)
	if err != nil {
		return lostInFlight(err)
	}
	switch resp.GetStatus() {
	case dlockpb.ResponseStatus_Ok:
		c.unlock(keys)
	case dlockpb.ResponseStatus_Unavailable:
		// Its outcome is unknown: given back once the session is
		// resumed, as for a Lock the connection took with it.
		return answerError(resp, false, true)
	}
	return canceled
}

// leaseMargin returns how long before a lease of d could end, by the
// Client's clock, the Client gives it up.
func (c *Client) leaseMargin(d time.Duration) time.Duration {
	return min(c.margin, d/4)
}

// setLeaseLocked records that the request sent at sent set the lock's lease
// to d (0: no lease), and arms the lease timer. Called with c.mu held.
func (l *Lock) setLeaseLocked(sent time.Time, d time.Duration) {
	if sent.Before(l.leaseSent) {
		return // a later renewal was answered first
	}
	l.leaseSent = sent
	if l.leaseTimer != nil {
		l.leaseTimer.Stop()
		l.leaseTimer = nil
	}
	if d == 0 {
		l.leaseEnd = time.Time{}
		return
	}
	l.leaseEnd = sent.Add(d - l.c.leaseMargin(d))
	l.leaseTimer = l.c.clk.AfterFunc(l.leaseEnd.Sub(l.c.clk.Now()), l.watchLease)
}

// watchLease ends the lock when its lease may end.
func (l *Lock) watchLease() {
	c := l.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if l.err != nil || l.leaseEnd.IsZero() {
		return
	}
	now := c.clk.Now()
	if now.Before(l.leaseEnd) {
		l.leaseTimer = c.clk.AfterFunc(l.leaseEnd.Sub(now), l.watchLease)
		return
	}
	l.finishLocked(ErrLeaseExpired)
	for _, k := range l.keys {
		delete(c.reserved, k)
	}
}

// finishLocked closes Done with err, once. Called with c.mu held.
func (l *Lock) finishLocked(err error) {
	if l.err != nil {
		return
	}
	l.err = err
	close(l.done)
	if l.leaseTimer != nil {
		l.leaseTimer.Stop()
		l.leaseTimer = nil
	}
	delete(l.c.locks, l)
}

// Keys returns the keys of the lock, in request order, without duplicates.
func (l *Lock) Keys() []string { return slices.Clone(l.keys) }

// Mode returns the mode the keys are held in.
func (l *Lock) Mode() latch.Mode { return l.mode }

// Token returns the lock's fencing token: the newest of its keys' tokens,
// which all have the same one unless the server granted some of them
// earlier. Pass it to the resource the lock protects, which should refuse
// a token older than the newest it has seen.
func (l *Lock) Token() latch.Token { return slices.Max(l.tokens) }

// Tokens returns the fencing token of each key, in the order of Keys.
func (l *Lock) Tokens() []latch.Token { return slices.Clone(l.tokens) }

// Done returns a channel that is closed when the lock is released or may
// have been lost: after Unlock, when the Client stops (closed, or its
// keepalives went unanswered so long that the server may end the session,
// no server having taken it back after its connection broke or fell
// silent, or a server answered that the session ended), or when a lease
// was not renewed in time.
// Unless Unlock closed it, the server may grant the keys to someone else
// from then on, after at most the safety margin (see SafetyMargin): stop
// using what the lock protects. A leased lock's Done closes too when the
// Client stops, although the server keeps the lease until it ends: the
// Client can no longer renew or release it.
func (l *Lock) Done() <-chan struct{} { return l.done }

// Err returns nil while Done is open, then why it was closed: ErrUnlocked,
// ErrClosed, ErrLeaseExpired, a *SessionLostError (wrapping
// latch.ErrSessionEnded), or an error wrapping latch.ErrNotHeld when a
// renewal found the lock gone.
func (l *Lock) Err() error {
	l.c.mu.Lock()
	defer l.c.mu.Unlock()
	return l.err
}

// Unlock releases the lock. Done is closed when Unlock begins. The keys can
// be requested again by this Client once the server has answered, even if
// ctx ended Unlock's wait before. Unlocking a lock that is no longer held
// fails with an error wrapping latch.ErrNotHeld, or why it was lost.
func (l *Lock) Unlock(ctx context.Context) error {
	c := l.c
	c.mu.Lock()
	if l.err != nil {
		err := l.err
		c.mu.Unlock()
		if err == ErrUnlocked || err == ErrLeaseExpired {
			return fmt.Errorf("client: unlock %v: %w: %w", l.keys, latch.ErrNotHeld, err)
		}
		return fmt.Errorf("client: unlock %v: %w", l.keys, err)
	}
	l.finishLocked(ErrUnlocked)
	c.mu.Unlock()

	cl := newCall()
	cl.onResp = func(r *dlockpb.Response) {
		// Unavailable: the outcome is unknown; the keys are given back,
		// then unreserved, once the session is resumed (cleanup).
		if r.GetStatus() != dlockpb.ResponseStatus_Unavailable {
			c.unreserve(l.keys)
		}
	}
	cl.cleanup = l.keys
	cl, _, err := c.send(&dlockpb.Request{Type: dlockpb.RequestType_Unlock, Lock: &dlockpb.RequestLock{Keys: l.keys}}, cl)
	if err != nil {
		return fmt.Errorf("client: unlock %v: %w", l.keys, err)
	}
	resp, err := c.await(ctx, cl)
	if err == nil {
		err = answerError(resp, false, true)
	}
	if err != nil {
		return fmt.Errorf("client: unlock %v: %w", l.keys, err)
	}
	return nil
}

// Renew sets the lease of the lock to d from now: a positive d makes a lock
// without a lease a leased one, 0 turns a lease back into a lock held until
// Unlock or the session's end. A lock the server no longer holds (its lease
// ended) fails with an error wrapping latch.ErrNotHeld, and is done.
func (l *Lock) Renew(ctx context.Context, d time.Duration) error {
	c := l.c
	if d < 0 {
		return fmt.Errorf("client: renew %v: %w: negative lease %v", l.keys, latch.ErrInvalidRequest, d)
	}
	if err := l.Err(); err != nil {
		return fmt.Errorf("client: renew %v: %w: %w", l.keys, latch.ErrNotHeld, err)
	}
	sent, err := c.renew(ctx, l.keys, d)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		if errors.Is(err, latch.ErrNotHeld) {
			l.finishLocked(fmt.Errorf("renew: %w", err))
			for _, k := range l.keys {
				delete(c.reserved, k)
			}
		}
		return fmt.Errorf("client: renew %v: %w", l.keys, err)
	}
	if l.err != nil {
		// Given up (or unlocked) while the renewal was on its way.
		return fmt.Errorf("client: renew %v: %w: %w", l.keys, latch.ErrNotHeld, l.err)
	}
	l.setLeaseLocked(sent, d)
	return nil
}
