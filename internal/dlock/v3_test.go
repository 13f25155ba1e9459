package dlock

import (
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/latchd/latch/dlockpb"
)

// v3 builds a version 3 request.
func v3(id uint64, typ pb.RequestType) *pb.Request {
	return &pb.Request{Version: 3, Id: id, Type: typ}
}

// v3Lock builds a version 3 Lock; opts adjust its lock argument.
func v3Lock(id uint64, keys []string, opts ...func(*pb.RequestLock)) *pb.Request {
	r := v3(id, pb.RequestType_Lock)
	r.Lock = &pb.RequestLock{Keys: keys}
	for _, o := range opts {
		o(r.Lock)
	}
	return r
}

func shared(limit uint32) func(*pb.RequestLock) {
	return func(l *pb.RequestLock) { l.Mode, l.Limit = pb.LockMode_Shared, limit }
}

func tryOnce(l *pb.RequestLock) { l.TryOnce = true }

func lease(d time.Duration) func(*pb.RequestLock) {
	return func(l *pb.RequestLock) { l.ReleaseMicro = uint64(d / time.Microsecond) }
}

func wait(d time.Duration) func(*pb.RequestLock) {
	return func(l *pb.RequestLock) { l.WaitMicro = uint64(d / time.Microsecond) }
}

func v3Keys(typ pb.RequestType, id uint64, keys ...string) *pb.Request {
	r := v3(id, typ)
	r.Lock = &pb.RequestLock{Keys: keys}
	return r
}

func cancelReq(id, target uint64) *pb.Request {
	r := v3(id, pb.RequestType_Cancel)
	r.CancelId = target
	return r
}

// do sends req and returns the next answer (for requests answered at once).
func (c *client) do(req *pb.Request) *pb.Response {
	c.t.Helper()
	c.sendPB(req)
	return c.recvPB()
}

// mustV3 sends req and fails unless the answer has status want.
func (c *client) mustV3(req *pb.Request, want pb.ResponseStatus) *pb.Response {
	c.t.Helper()
	r := c.do(req)
	if r.GetStatus() != want || r.GetRequestId() != req.GetId() || r.GetVersion() != 3 {
		c.t.Fatalf("%v %d: answer %v, want version 3, id %d, %v", req.GetType(), req.GetId(), r, req.GetId(), want)
	}
	return r
}

// recvAll reads n answers and returns them by request id.
func (c *client) recvAll(n int) map[uint64]*pb.Response {
	c.t.Helper()
	m := make(map[uint64]*pb.Response)
	for range n {
		r := c.recvPB()
		m[r.GetRequestId()] = r
	}
	return m
}

func TestV3LockTokens(t *testing.T) {
	e := newEnv(t, nil)
	c := e.dial(t)
	r := c.mustV3(v3Lock(1, []string{"b", "a", "b", "c"}, lease(time.Hour)), pb.ResponseStatus_Ok)
	if !slices.Equal(r.GetKeys(), []string{"b", "a", "c"}) {
		t.Errorf("keys %q, want the distinct keys in request order", r.GetKeys())
	}
	if len(r.GetTokens()) != 3 || r.GetTokens()[0] == 0 {
		t.Fatalf("tokens %v, want one per key", r.GetTokens())
	}
	tok := r.GetTokens()[0]
	if r.GetLeaseExpires() <= time.Now().UnixNano() {
		t.Errorf("lease_expires %d, want a time an hour ahead", r.GetLeaseExpires())
	}
	// Re-locking is idempotent: same token.
	r = c.mustV3(v3Lock(2, []string{"a"}), pb.ResponseStatus_Ok)
	if r.GetTokens()[0] != tok || r.GetLeaseExpires() != 0 {
		t.Errorf("re-lock: token %v lease %d, want the same token %d and no lease", r.GetTokens(), r.GetLeaseExpires(), tok)
	}
	// A later grant gets a larger token.
	c.mustV3(v3Keys(pb.RequestType_Unlock, 3, "a", "b", "c"), pb.ResponseStatus_Ok)
	r = c.mustV3(v3Lock(4, []string{"a"}), pb.ResponseStatus_Ok)
	if r.GetTokens()[0] <= tok {
		t.Errorf("token after re-grant %d, want more than %d", r.GetTokens()[0], tok)
	}
}

// TestV3OutOfOrder: one connection waits on one lock while its other
// requests are answered.
func TestV3OutOfOrder(t *testing.T) {
	e := newEnv(t, nil)
	holder, c := e.dial(t), e.dial(t)
	holder.mustV3(v3Lock(1, []string{"a"}), pb.ResponseStatus_Ok)

	c.sendPB(v3Lock(10, []string{"a"}))
	c.sendPB(v3Lock(11, []string{"b"}))
	c.sendPB(v3(12, pb.RequestType_Ping))
	got := c.recvAll(2)
	if got[11].GetStatus() != pb.ResponseStatus_Ok || got[12].GetStatus() != pb.ResponseStatus_Ok {
		t.Fatalf("answers %v, want Lock b and Ping Ok while Lock a waits", got)
	}
	c.sendPB(v3Lock(13, []string{"a"}, wait(time.Hour))) // a second waiter for a on the same connection
	e.waitFor(t, "a", "two waiters", waiters(2))
	holder.mustV3(v3Keys(pb.RequestType_Unlock, 2, "a"), pb.ResponseStatus_Ok)
	// 13 asks for a key its own session holds once 10 is granted: it is
	// granted in the same step (idempotent), with the same token. The two
	// answers come in either order.
	got = c.recvAll(2)
	r10, r13 := got[10], got[13]
	if r10.GetStatus() != pb.ResponseStatus_Ok || r13.GetStatus() != pb.ResponseStatus_Ok || r13.GetTokens()[0] != r10.GetTokens()[0] {
		t.Fatalf("answers %v, want Locks 10 and 13 granted with one token", got)
	}
}

func TestV3Cancel(t *testing.T) {
	e := newEnv(t, nil)
	holder, c := e.dial(t), e.dial(t)
	holder.mustV3(v3Lock(1, []string{"a"}), pb.ResponseStatus_Ok)
	c.sendPB(v3Lock(5, []string{"a", "z"}))
	e.waitFor(t, "a", "queued", waiters(1))
	c.sendPB(cancelReq(6, 5))
	got := c.recvAll(2)
	if got[6].GetStatus() != pb.ResponseStatus_Ok {
		t.Errorf("Cancel: %v, want Ok", got[6])
	}
	if got[5].GetStatus() != pb.ResponseStatus_Canceled || got[5].GetErrorText() == "" {
		t.Errorf("the canceled Lock: %v, want Canceled", got[5])
	}
	e.waitFor(t, "a", "waiter gone", waiters(0))
	if _, ok := e.svc.Lock("z"); ok {
		t.Error("key z is in the table after the Lock was canceled")
	}
	c.mustV3(cancelReq(7, 5), pb.ResponseStatus_NotWaiting)
	c.mustV3(cancelReq(8, 0), pb.ResponseStatus_NotWaiting)
	// The id is free again.
	c.sendPB(v3Lock(5, []string{"a"}))
	e.waitFor(t, "a", "queued again", waiters(1))
	c.mustV3(v3Lock(5, []string{"q"}), pb.ResponseStatus_InvalidRequest) // id 5 is waiting
	holder.nc.Close()
	if r := c.recvPB(); r.GetRequestId() != 5 || r.GetStatus() != pb.ResponseStatus_Ok {
		t.Errorf("answer %v, want Lock 5 granted", r)
	}
}

func TestV3SharedAndLimit(t *testing.T) {
	e := newEnv(t, nil)
	a, b, c, d := e.dial(t), e.dial(t), e.dial(t), e.dial(t)
	ra := a.mustV3(v3Lock(1, []string{"s"}, shared(2)), pb.ResponseStatus_Ok)
	rb := b.mustV3(v3Lock(1, []string{"s"}, shared(2)), pb.ResponseStatus_Ok)
	if ra.GetTokens()[0] == rb.GetTokens()[0] {
		t.Errorf("two shared grants share token %d, want one each", ra.GetTokens()[0])
	}
	r := c.mustV3(v3Lock(1, []string{"s"}, shared(2), tryOnce), pb.ResponseStatus_AcquireTimeout)
	if !slices.Equal(r.GetKeys(), []string{"s"}) {
		t.Errorf("keys %q, want [s]", r.GetKeys())
	}
	c.mustV3(v3Lock(2, []string{"s"}, shared(3)), pb.ResponseStatus_LimitMismatch)
	d.mustV3(v3Lock(1, []string{"s"}, tryOnce), pb.ResponseStatus_AcquireTimeout)
	a.mustV3(v3Lock(2, []string{"s"}), pb.ResponseStatus_ModeMismatch)
	a.mustV3(v3Lock(3, []string{"s"}, func(l *pb.RequestLock) { l.Limit = 2 }), pb.ResponseStatus_InvalidRequest)
	a.mustV3(v3Lock(4, []string{"s"}, func(l *pb.RequestLock) { l.Mode = 7 }), pb.ResponseStatus_InvalidRequest)
	// Unlimited shared holders.
	for i := range uint64(3) {
		a.mustV3(v3Lock(10+i, []string{"u"}, shared(0)), pb.ResponseStatus_Ok)
		b.mustV3(v3Lock(10+i, []string{"u"}, shared(0)), pb.ResponseStatus_Ok)
	}
}

func TestV3TryOnce(t *testing.T) {
	e := newEnv(t, nil)
	holder, c := e.dial(t), e.dial(t)
	holder.mustV3(v3Lock(1, []string{"a"}), pb.ResponseStatus_Ok)
	// try_once ignores wait_micro, even 0 (which waits forever otherwise).
	for i, w := range []time.Duration{0, time.Hour} {
		r := c.mustV3(v3Lock(uint64(i+1), []string{"b", "a"}, tryOnce, wait(w)), pb.ResponseStatus_AcquireTimeout)
		if !slices.Equal(r.GetKeys(), []string{"a"}) {
			t.Errorf("keys %q, want [a]", r.GetKeys())
		}
	}
	c.mustV3(v3Lock(3, []string{"b"}, tryOnce), pb.ResponseStatus_Ok)
}

func TestV3UnlockAndRenew(t *testing.T) {
	e := newEnv(t, nil)
	a, b := e.dial(t), e.dial(t)
	a.mustV3(v3Keys(pb.RequestType_Unlock, 1, "k"), pb.ResponseStatus_NotHeld)
	a.mustV3(v3Keys(pb.RequestType_Renew, 2, "k"), pb.ResponseStatus_NotHeld)
	r := a.mustV3(v3Lock(3, []string{"k"}, lease(time.Minute)), pb.ResponseStatus_Ok)
	first := r.GetLeaseExpires()

	renew := v3Keys(pb.RequestType_Renew, 4, "k")
	renew.Lock.ReleaseMicro = uint64(time.Hour / time.Microsecond)
	r = a.mustV3(renew, pb.ResponseStatus_Ok)
	if r.GetLeaseExpires() <= first || !slices.Equal(r.GetKeys(), []string{"k"}) {
		t.Errorf("Renew: %v, want keys [k] and a lease past %d", r, first)
	}
	renew = v3Keys(pb.RequestType_Renew, 5, "k")
	r = a.mustV3(renew, pb.ResponseStatus_Ok)
	if r.GetLeaseExpires() != 0 {
		t.Errorf("Renew with release 0: lease_expires %d, want none", r.GetLeaseExpires())
	}
	if info, _ := e.svc.Lock("k"); !info.Holders[0].Expires.IsZero() {
		t.Errorf("after Renew 0: %+v, want no lease", info)
	}
	b.mustV3(v3Lock(1, []string{"other"}), pb.ResponseStatus_Ok)
	b.mustV3(v3Keys(pb.RequestType_Unlock, 2, "k"), pb.ResponseStatus_NotHeld)
	b.mustV3(v3Keys(pb.RequestType_Renew, 3, "k", "other"), pb.ResponseStatus_NotHeld)
	a.mustV3(v3Keys(pb.RequestType_Unlock, 6, "k"), pb.ResponseStatus_Ok)
	e.waitFor(t, "k", "released", free)
}

func TestV3Statuses(t *testing.T) {
	tests := []struct {
		name string
		cfg  func(*Config)
		req  *pb.Request
		want pb.ResponseStatus
		keys []string
		text string
	}{
		{name: "ping", req: v3(1, pb.RequestType_Ping), want: pb.ResponseStatus_Ok},
		{name: "invalid type", req: v3(1, pb.RequestType_Invalid), want: pb.ResponseStatus_InvalidType},
		{name: "unknown type", req: v3(1, 77), want: pb.ResponseStatus_InvalidType},
		{name: "invalid key", req: v3Lock(1, []string{"ok", "not ok"}), want: pb.ResponseStatus_InvalidKey, keys: []string{"not ok"}},
		{name: "empty key", req: v3Lock(1, []string{""}), want: pb.ResponseStatus_InvalidKey, keys: []string{""}, text: "empty key"},
		{name: "no keys", req: v3Lock(1, nil), want: pb.ResponseStatus_InvalidRequest, text: "no keys"},
		{name: "unlock no keys", req: v3Keys(pb.RequestType_Unlock, 1), want: pb.ResponseStatus_InvalidRequest},
		{name: "too many keys", cfg: maxKeys(1), req: v3Lock(1, []string{"a", "b"}), want: pb.ResponseStatus_TooManyKeys},
		{name: "unauthorized", cfg: tokens("t"), req: v3(1, pb.RequestType_Ping), want: pb.ResponseStatus_Unauthorized},
		{name: "authorized", cfg: tokens("t"), req: &pb.Request{Version: 3, Id: 1, Type: pb.RequestType_Ping, AccessToken: "t"}, want: pb.ResponseStatus_Ok},
		{name: "session", req: &pb.Request{Version: 3, Id: 1, Type: pb.RequestType_Session, Session: &pb.RequestSession{TtlMicro: 1e6}}, want: pb.ResponseStatus_Ok},
		{name: "version 5", req: &pb.Request{Version: 5, Id: 1, Type: pb.RequestType_Ping}, want: pb.ResponseStatus_Version, text: "speaks 2 and 3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, tt.cfg)
			c := e.dial(t)
			r := c.do(tt.req)
			if r.GetStatus() != tt.want || r.GetRequestId() != 1 || r.GetVersion() != 3 {
				t.Errorf("answer %v, want version 3 id 1 %v", r, tt.want)
			}
			if tt.want != pb.ResponseStatus_Ok && r.GetErrorText() == "" {
				t.Errorf("status %v without error_text", r.GetStatus())
			}
			if !strings.Contains(r.GetErrorText(), tt.text) {
				t.Errorf("error_text %q, want it to contain %q", r.GetErrorText(), tt.text)
			}
			if !slices.Equal(r.GetKeys(), tt.keys) {
				t.Errorf("keys %q, want %q", r.GetKeys(), tt.keys)
			}
		})
	}
}

func TestV3TooManyPending(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxPending = 2 })
	holder, c := e.dial(t), e.dial(t)
	holder.mustV3(v3Lock(1, []string{"a"}), pb.ResponseStatus_Ok)
	c.sendPB(v3Lock(1, []string{"a"}))
	c.sendPB(v3Lock(2, []string{"a"}))
	e.waitFor(t, "a", "2 waiters", waiters(2))
	c.mustV3(v3Lock(3, []string{"a"}), pb.ResponseStatus_TooManyPending)
	c.mustV3(v3Lock(4, []string{"b"}), pb.ResponseStatus_Ok) // granted at once: not pending
}

func TestV3Session(t *testing.T) {
	e := newEnv(t, nil)
	c := e.dial(t)
	sessReq := func(id uint64, ttl time.Duration) *pb.Request {
		r := v3(id, pb.RequestType_Session)
		r.Session = &pb.RequestSession{TtlMicro: uint64(ttl / time.Microsecond)}
		return r
	}
	r := c.mustV3(sessReq(1, time.Hour), pb.ResponseStatus_Ok)
	if r.GetSessionId() == 0 {
		t.Fatal("Session answered no session_id")
	}
	sessions := e.svc.Sessions()
	if len(sessions) != 1 || uint64(sessions[0].ID) != r.GetSessionId() || sessions[0].TTL != time.Hour ||
		sessions[0].Protocol != "dlock" || sessions[0].Peer != c.peer() {
		t.Errorf("sessions %+v, want one dlock session of %s with TTL 1h and id %d", sessions, c.peer(), r.GetSessionId())
	}
	c.mustV3(sessReq(2, time.Hour), pb.ResponseStatus_Ok) // same TTL: a keepalive
	c.mustV3(sessReq(3, time.Minute), pb.ResponseStatus_InvalidRequest)

	// A Lock opens a session without TTL; a Session asking for one after
	// it is refused.
	d := e.dial(t)
	d.mustV3(v3Lock(1, []string{"x"}), pb.ResponseStatus_Ok)
	d.mustV3(sessReq(2, time.Second), pb.ResponseStatus_InvalidRequest)
	d.mustV3(sessReq(3, 0), pb.ResponseStatus_Ok)
}

// TestMixedVersions: a connection may mix versions; version 2 answers keep
// their order among themselves while version 3 answers do not wait.
func TestMixedVersions(t *testing.T) {
	e := newEnv(t, nil)
	holder, c := e.dial(t), e.dial(t)
	lockOK(t, holder, 1, "k")
	c.sendMsg(v2Lock(1, 0, 0, "k")) // waits
	e.waitFor(t, "k", "queued", waiters(1))
	c.sendMsg(v2(2, tPing)) // behind it
	b, _ := proto.Marshal(v3(3, pb.RequestType_Ping))
	c.sendMsg(b)
	if r := c.recv(); r.id != 3 || r.version != 3 {
		t.Fatalf("answer %s, want the version 3 Ping first", r.shape())
	}
	holder.nc.Close()
	for id := uint64(1); id <= 2; id++ {
		if r := c.recv(); r.id != id || r.status != sOk || r.version != 2 {
			t.Fatalf("answer %s, want version 2 id %d Ok", r.shape(), id)
		}
	}
}
