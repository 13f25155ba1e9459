package dlock

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/latchd/latch"
	pb "github.com/latchd/latch/dlockpb"
)

// newResponse starts the answer to the request id (0 for a frame that did
// not decode), read at at.
func newResponse(id uint64, at time.Time, v3 bool) *pb.Response {
	resp := new(pb.Response)
	initResponse(resp, id, at, v3)
	return resp
}

// initResponse makes resp, which may hold an earlier answer, the start of
// the answer to the request id, as newResponse does. It keeps the memory of
// resp's tokens for grantResponse.
func initResponse(resp *pb.Response, id uint64, at time.Time, v3 bool) {
	var version uint32 = 2
	if v3 {
		version = 3
	}
	*resp = pb.Response{
		Version:        version,
		RequestId:      id,
		ServerUnixTime: at.UnixNano(),
		Tokens:         resp.Tokens[:0], // empty: encodes as none
	}
}

// setError makes resp the answer for err.
func setError(resp *pb.Response, err error, v3 bool) {
	resp.Status, resp.ErrorText = statusOf(err, v3)
	resp.Keys, resp.Tokens, resp.LeaseExpires = nil, nil, 0
	var busy *latch.BusyError
	var bad *keyError
	switch {
	case errors.As(err, &busy):
		// The busy keys, sorted, and no text, as the reference server
		// answers.
		resp.Keys = slices.Sorted(slices.Values(busy.Keys))
		resp.ErrorText = ""
	case errors.As(err, &bad):
		resp.Keys = []string{bad.key}
	}
}

// keyError is an invalid key of a request. It wraps latch.ErrInvalidKey.
type keyError struct {
	key string
	err error // from latch.CheckKey
}

func (e *keyError) Error() string {
	k := e.key
	if len(k) > 64 {
		k = k[:64] + "..."
	}
	return fmt.Sprintf("key %q: %v", k, e.err)
}

func (e *keyError) Unwrap() error { return e.err }

// keysOf returns the distinct keys of req's lock argument, in request order,
// or an error if there are none, too many, or an invalid one. op names the
// request in the error.
func (c *conn) keysOf(op string, req *pb.Request) ([]string, error) {
	keys := req.GetLock().GetKeys()
	if len(keys) == 0 {
		return nil, fmt.Errorf("%s: %w", op, latch.ErrNoKeys)
	}
	for _, k := range keys {
		if err := latch.CheckKey(k); err != nil {
			return nil, fmt.Errorf("%s: %w", op, &keyError{key: k, err: err})
		}
	}
	keys = distinct(keys)
	if limit := c.srv.cfg.MaxKeys; limit > 0 && len(keys) > limit {
		return nil, fmt.Errorf("%s: %d keys, at most %d: %w", op, len(keys), limit, latch.ErrTooManyKeys)
	}
	return keys, nil
}

// distinct returns keys without repeats, first occurrences in order. It
// returns keys itself when there are none.
func distinct(keys []string) []string {
	if len(keys) <= 16 {
		for i := 1; i < len(keys); i++ {
			if slices.Contains(keys[:i], keys[i]) {
				out := slices.Clone(keys[:i])
				for _, k := range keys[i+1:] {
					if !slices.Contains(out, k) {
						out = append(out, k)
					}
				}
				return out
			}
		}
		return keys
	}
	seen := make(map[string]struct{}, len(keys))
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		if _, dup := seen[k]; !dup {
			seen[k] = struct{}{}
			out = append(out, k)
		}
	}
	return out
}

// micros converts a count of microseconds to a duration, clamped to the
// longest duration.
func micros(us uint64) time.Duration {
	if us > math.MaxInt64/uint64(time.Microsecond) {
		return math.MaxInt64
	}
	return time.Duration(us) * time.Microsecond
}

// lockRequest converts a Lock request. Version 3 fields count only for v3.
func (c *conn) lockRequest(req *pb.Request, v3 bool) (latch.LockRequest, error) {
	keys, err := c.keysOf("lock", req)
	if err != nil {
		return latch.LockRequest{}, err
	}
	l := req.GetLock()
	lr := latch.LockRequest{
		Keys:   keys,
		Mode:   latch.Exclusive,
		Wait:   latch.WaitForever,
		Lease:  micros(l.GetReleaseMicro()),
		Relock: latch.RelockReuse,
	}
	// wait_micro 0 waits forever; so does a wait too long to represent.
	if w := micros(l.GetWaitMicro()); w > 0 && w < math.MaxInt64 {
		lr.Wait = w
	}
	if v3 {
		switch l.GetMode() {
		case pb.LockMode_Exclusive:
		case pb.LockMode_Shared:
			lr.Mode = latch.Shared
		default:
			return latch.LockRequest{}, fmt.Errorf("lock: unknown mode %d: %w", l.GetMode(), latch.ErrInvalidRequest)
		}
		lr.Limit = l.GetLimit()
		if l.GetTryOnce() {
			lr.Wait = latch.NoWait
		}
	}
	return lr, nil
}

// acquire takes lr. With tryOnly set, it only tries: a request that
// cannot be granted at once but may wait returns wait = true and nothing
// else happens. Otherwise it waits as lr.Wait allows; parked, when not
// nil, is called with true before waiting and false after.
func acquire(ctx context.Context, sess latch.Session, lr latch.LockRequest, tryOnly bool, parked func(bool)) (g latch.Grant, err error, wait bool) {
	if lr.Wait == latch.NoWait {
		g, err = sess.Acquire(ctx, lr)
		return g, err, false
	}
	try := lr
	try.Wait = latch.NoWait
	g, err = sess.Acquire(ctx, try)
	if !errors.Is(err, latch.ErrWouldBlock) {
		return g, err, false
	}
	if tryOnly {
		return latch.Grant{}, nil, true
	}
	if parked != nil {
		parked(true)
		defer parked(false)
	}
	g, err = sess.Acquire(ctx, lr)
	return g, err, false
}

// grantResponse fills the Ok answer of a Lock.
func grantResponse(resp *pb.Response, g latch.Grant, keys []string, v3 bool) {
	resp.Status = pb.ResponseStatus_Ok
	if !v3 {
		return
	}
	resp.Keys = keys
	resp.Tokens = slices.Grow(resp.Tokens[:0], len(keys))[:len(keys)]
	for i := range resp.Tokens {
		resp.Tokens[i] = uint64(g.Token)
	}
	if !g.Expires.IsZero() {
		resp.LeaseExpires = g.Expires.UnixNano()
	}
}

// sessionErr is the error of a request on a connection whose session has
// ended, or could not open.
func (c *conn) sessionErr(err error) error {
	if err != nil && c.drained.Load() && !errors.Is(err, latch.ErrShutdown) {
		return fmt.Errorf("%w (%w)", err, latch.ErrShutdown)
	}
	return err
}

// handleV2 answers a version 2 request (or a request of an unknown version,
// or a frame that did not decode, all answered in version 2 order) in resp.
// With tryOnly set (the reader's call) it does not wait in a lock queue: a
// Lock that must wait returns wait = true and leaves resp unfinished, to
// be queued.
func (c *conn) handleV2(q queued, tryOnly bool, resp *pb.Response) (wait bool) {
	req := q.req
	initResponse(resp, req.GetId(), q.at, false)
	if req == nil {
		setError(resp, q.err, false)
		return false
	}
	if v := req.GetVersion(); v != 0 && v != 2 {
		resp.Version = 3
		setError(resp, fmt.Errorf("%w %d: this server speaks 2 and 3", errVersion, v), false)
		return false
	}
	if err := c.srv.authorize(req); err != nil {
		setError(resp, err, false)
		return false
	}
	var err error
	switch req.GetType() {
	case pb.RequestType_Ping:
		if sess, ttl := c.openSession(); sess != nil && ttl > 0 {
			sess.KeepAlive() // a version 3 Session set a TTL
		}
	case pb.RequestType_Lock:
		var lr latch.LockRequest
		lr, err = c.lockRequest(req, false)
		if err != nil {
			break
		}
		var sess latch.Session
		sess, err = c.session(0, false)
		if err != nil {
			err = c.sessionErr(err)
			break
		}
		_, err, wait = acquire(context.Background(), sess, lr, tryOnly, c.setParked)
		if wait {
			return true
		}
		err = c.sessionErr(err)
	case pb.RequestType_Unlock:
		_, err = c.unlock(req, nil)
	default:
		err = fmt.Errorf("%w %d for version 2 (Ping 1, Lock 2, Unlock 3)", errInvalidType, req.GetType())
	}
	if err != nil {
		setError(resp, err, false)
	}
	return false
}

// unlock releases the keys of an Unlock request. A version 3 request
// (v3At, when it was read, not nil) to a Replicated service is answered
// later (laterAnswer): unlock then reports later = true.
func (c *conn) unlock(req *pb.Request, v3At *time.Time) (later bool, err error) {
	keys, err := c.keysOf("unlock", req)
	if err != nil {
		return false, err
	}
	sess, _ := c.openSession()
	if sess == nil {
		return false, fmt.Errorf("unlock %q: %w", keys[0], latch.ErrNotHeld)
	}
	if c.srv.exec == latch.Replicated && v3At != nil {
		sess.ReleaseFunc(keys, c.later(req, *v3At).answer)
		return true, nil
	}
	return false, c.sessionErr(sess.Release(keys...))
}

// handleV3 handles a version 3 request: at once, except for a Lock that
// must wait, which waits in a goroutine of its own. Only the reader calls
// it.
func (c *conn) handleV3(req *pb.Request, at time.Time) {
	resp := &c.rresp
	initResponse(resp, req.GetId(), at, true)
	var err error
	if err = c.srv.authorize(req); err != nil {
		setError(resp, err, true)
		c.reply(req, resp)
		return
	}
	switch req.GetType() {
	case pb.RequestType_Ping:
		if sess, _ := c.openSession(); sess != nil {
			if c.srv.exec == latch.Replicated {
				sess.KeepAliveFunc(c.later(req, at).answer)
				return
			}
			err = c.sessionErr(sess.KeepAlive())
		}
	case pb.RequestType_Lock:
		if c.lockV3(req, at, resp) {
			return // answered later
		}
	case pb.RequestType_Unlock:
		var later bool
		if later, err = c.unlock(req, &at); later {
			return
		}
	case pb.RequestType_Renew:
		var later bool
		if later, err = c.renew(req, at, resp); later {
			return
		}
	case pb.RequestType_Cancel:
		err = c.cancel(req)
	case pb.RequestType_Session:
		var sess latch.Session
		sess, err = c.resume(micros(req.GetSession().GetTtlMicro()), true, latch.SessionID(req.GetSession().GetResumeSessionId()))
		if err == nil {
			err = sess.KeepAlive()
			resp.SessionId = uint64(sess.ID())
		}
		err = c.sessionErr(err)
	default:
		err = fmt.Errorf("%w %d", errInvalidType, req.GetType())
	}
	if err != nil {
		setError(resp, err, true)
	}
	c.reply(req, resp)
}

// lockV3 handles a version 3 Lock read at at. It fills resp and returns
// false when the request was answered at once; it returns true when the
// request waits in the lock table, whose end is answered in a Response of
// its own (waitingLock.done).
func (c *conn) lockV3(req *pb.Request, at time.Time, resp *pb.Response) (waiting bool) {
	lr, err := c.lockRequest(req, true)
	if err != nil {
		setError(resp, err, true)
		return false
	}
	id := req.GetId()
	c.wmu.Lock()
	_, dup := c.pending[id]
	full := c.nwait >= c.srv.cfg.MaxPending
	c.wmu.Unlock()
	if dup && id != 0 {
		setError(resp, fmt.Errorf("lock: request id %d is already waiting: %w", id, latch.ErrInvalidRequest), true)
		return false
	}
	sess, err := c.session(0, false)
	if err != nil {
		setError(resp, c.sessionErr(err), true)
		return false
	}
	// Try first: a Lock granted or refused at once needs no record. A
	// Replicated service decides nothing at once: every Lock goes to
	// AcquireFunc, so that the reader goes on while it commits.
	later := c.srv.exec == latch.Replicated
	if !later {
		g, err, wait := acquire(context.Background(), sess, lr, true, nil)
		if !wait {
			if err != nil {
				setError(resp, c.sessionErr(err), true)
			} else {
				grantResponse(resp, g, lr.Keys, true)
			}
			return false
		}
	}
	if full {
		setError(resp, fmt.Errorf("lock: %w (at most %d)", errTooManyPending, c.srv.cfg.MaxPending), true)
		return false
	}

	// It waits. The request is the reader's, reused for the next one:
	// keep what the answer needs. Count it as waiting before it can end,
	// which may happen before AcquireFunc returns.
	w := &waitingLock{c: c, reqID: id, at: at, later: later}
	w.keys = append(w.keyBuf[:0], lr.Keys...)
	w.resp.Tokens = w.tokens[:0]
	c.wmu.Lock()
	c.nwait++
	if id != 0 {
		c.pending[id] = w
	}
	c.wmu.Unlock()
	c.busy.Add(1)
	c.wg.Add(1)
	var g latch.Grant
	g, w.wid, err = sess.AcquireFunc(lr, w.done)
	if w.wid != 0 {
		return true
	}
	// Decided at once after all (released since the try).
	w.forget()
	c.busy.Add(-1)
	c.wg.Done()
	if err != nil {
		setError(resp, c.sessionErr(err), true)
	} else {
		grantResponse(resp, g, lr.Keys, true)
	}
	return false
}

// waitingLock is a version 3 Lock that waits in the lock table.
type waitingLock struct {
	c     *conn
	reqID uint64 // Request.id
	at    time.Time
	keys  []string
	// wid is the lock service's id of the request, for Cancel. Only the
	// reader sets and reads it.
	wid latch.WaitID
	// later is set when the service is Replicated: the answer is written
	// with the others of the same applied batch (writer.postLater).
	later bool
	// The answer, and room for the key and the token of a one-key grant:
	// one allocation for the common waiting Lock.
	resp   pb.Response
	keyBuf [1]string
	tokens [1]uint64
}

// done answers the Lock with its end. The lock service calls it from the
// goroutine that ended the request (the releaser of a lock it waited for,
// a timer, the connection's end): it must not block, so the answer is
// posted to the writer, which writes it at once if the socket takes it.
func (w *waitingLock) done(g latch.Grant, err error) {
	c := w.c
	w.forget()
	resp := &w.resp
	initResponse(resp, w.reqID, w.at, true)
	if err != nil {
		setError(resp, c.sessionErr(err), true)
	} else {
		grantResponse(resp, g, w.keys, true)
	}
	c.count(pb.RequestType_Lock, resp)
	if w.later {
		c.out.postLater(resp)
	} else {
		c.out.post(resp)
	}
	c.answered()
	c.wg.Done()
}

// forget removes the Lock from its connection's waiting ones.
func (w *waitingLock) forget() {
	c := w.c
	c.wmu.Lock()
	if w.reqID != 0 && c.pending[w.reqID] == w {
		delete(c.pending, w.reqID)
	}
	c.nwait--
	c.wmu.Unlock()
}

// renew handles a version 3 Renew read at at, answering it in resp, or
// later (later = true) on a Replicated service.
func (c *conn) renew(req *pb.Request, at time.Time, resp *pb.Response) (later bool, err error) {
	keys, err := c.keysOf("renew", req)
	if err != nil {
		return false, err
	}
	sess, _ := c.openSession()
	if sess == nil {
		return false, fmt.Errorf("renew %q: %w", keys[0], latch.ErrNotHeld)
	}
	lease := micros(req.GetLock().GetReleaseMicro())
	if c.srv.exec == latch.Replicated {
		a := c.later(req, at)
		a.keys = slices.Clone(keys)
		sess.RenewFunc(lease, keys, a.renewed)
		return true, nil
	}
	g, err := sess.Renew(lease, keys...)
	if err != nil {
		return false, c.sessionErr(err)
	}
	resp.Keys = keys
	if !g.Expires.IsZero() {
		resp.LeaseExpires = g.Expires.UnixNano()
	}
	return false, nil
}

// cancel handles a version 3 Cancel.
func (c *conn) cancel(req *pb.Request) error {
	id := req.GetCancelId()
	c.wmu.Lock()
	w, ok := c.pending[id]
	c.wmu.Unlock()
	sess, _ := c.openSession()
	if !ok || id == 0 || sess == nil {
		return fmt.Errorf("cancel %d: %w", id, errNotWaiting)
	}
	// False when the Lock's end won the race: its answer is on its way.
	sess.Cancel(w.wid)
	return nil
}

// laterAnswer is the answer to a version 3 Unlock, Renew or Ping to a
// Replicated service: the lock service reports the outcome from its own
// goroutine (answer), and the reader goes on to the next request
// meanwhile. A connection has at most maxLater of them in flight: the
// reader waits for room beyond.
type laterAnswer struct {
	c    *conn
	typ  pb.RequestType
	keys []string // a Renew's, for its answer
	resp pb.Response
}

// maxLater bounds a connection's laterAnswers in flight.
const maxLater = 1024

// later starts the answer to req, read at at, counting it as a request in
// flight until answer is called. Only the reader calls it.
func (c *conn) later(req *pb.Request, at time.Time) *laterAnswer {
	c.inflight <- struct{}{} // room for one more; waits while full
	a := &laterAnswer{c: c, typ: req.GetType()}
	initResponse(&a.resp, req.GetId(), at, true)
	c.busy.Add(1)
	c.wg.Add(1)
	return a
}

// answer posts the answer for err to the writer. It never blocks.
func (a *laterAnswer) answer(err error) {
	c := a.c
	if err != nil {
		setError(&a.resp, c.sessionErr(err), true)
	}
	c.count(a.typ, &a.resp)
	c.out.postLater(&a.resp)
	<-c.inflight
	c.answered()
	c.wg.Done()
}

// renewed answers a Renew with its grant or error.
func (a *laterAnswer) renewed(g latch.Grant, err error) {
	if err == nil {
		a.resp.Keys = a.keys
		if !g.Expires.IsZero() {
			a.resp.LeaseExpires = g.Expires.UnixNano()
		}
	}
	a.answer(err)
}
