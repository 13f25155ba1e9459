package dlock

import (
	"fmt"
	"strings"
	"testing"

	pb "github.com/latchd/latch/dlockpb"
	"github.com/latchd/latch/internal/netserve"
)

// TestTokenScopes sends requests with tokens of every kind, in both
// versions: version 3 answers Unauthorized, version 2 General
// "Unauthorized: ...", and a refused request changes nothing.
func TestTokenScopes(t *testing.T) {
	scoped := func(c *Config) {
		c.Tokens = []netserve.Token{
			{Value: "root"},
			{Value: "jobs", Prefixes: []string{"jobs/"}},
			{Value: "ci", Prefixes: []string{"jobs/", "ci/"}},
			{Value: "mon", ReadOnly: true},
		}
	}
	type req struct {
		typ   pb.RequestType
		keys  []string
		token string
	}
	tests := []struct {
		name   string
		req    req
		ok     bool
		text   string // in the error_text of a refusal
		locked string // a key held after an Ok Lock
	}{
		{name: "root locks anything", req: req{pb.RequestType_Lock, []string{"deploy/web"}, "root"}, ok: true, locked: "deploy/web"},
		{name: "jobs locks jobs/", req: req{pb.RequestType_Lock, []string{"jobs/nightly"}, "jobs"}, ok: true, locked: "jobs/nightly"},
		{name: "jobs cannot lock deploy/", req: req{pb.RequestType_Lock, []string{"deploy/web"}, "jobs"}, text: `key "deploy/web"`},
		{name: "jobs cannot lock jobs (no slash)", req: req{pb.RequestType_Lock, []string{"jobs"}, "jobs"}, text: "jobs/"},
		{name: "one key out of scope refuses all", req: req{pb.RequestType_Lock, []string{"jobs/a", "deploy/b"}, "jobs"}, text: "deploy/b"},
		{name: "second prefix", req: req{pb.RequestType_Lock, []string{"ci/build", "jobs/a"}, "ci"}, ok: true, locked: "ci/build"},
		{name: "jobs cannot unlock deploy/", req: req{pb.RequestType_Unlock, []string{"deploy/web"}, "jobs"}, text: "deploy/web"},
		{name: "read-only pings", req: req{pb.RequestType_Ping, nil, "mon"}, ok: true},
		{name: "read-only cannot lock", req: req{pb.RequestType_Lock, []string{"jobs/a"}, "mon"}, text: "read-only"},
		{name: "read-only cannot unlock", req: req{pb.RequestType_Unlock, []string{"jobs/a"}, "mon"}, text: "read-only"},
		{name: "bad token", req: req{pb.RequestType_Ping, nil, "guess"}, text: "access_token"},
		{name: "bad token cannot lock", req: req{pb.RequestType_Lock, []string{"jobs/a"}, "jobs-"}, text: "access_token"},
		{name: "no token", req: req{pb.RequestType_Ping, nil, ""}, text: "access_token"},
	}
	for _, version := range []uint32{2, 3} {
		for _, tt := range tests {
			t.Run(fmt.Sprintf("v%d/%s", version, tt.name), func(t *testing.T) {
				e := newEnv(t, scoped)
				c := e.dial(t)
				r := &pb.Request{Version: version, Id: 1, Type: tt.req.typ, AccessToken: tt.req.token}
				if tt.req.keys != nil {
					r.Lock = &pb.RequestLock{Keys: tt.req.keys}
				}
				resp := c.do(r)
				want, wantText := pb.ResponseStatus_Ok, ""
				if !tt.ok {
					want, wantText = pb.ResponseStatus_Unauthorized, tt.text
					if version == 2 {
						want, wantText = pb.ResponseStatus_General, "Unauthorized: "
					}
				}
				if resp.GetStatus() != want || !strings.Contains(resp.GetErrorText(), wantText) || !strings.Contains(resp.GetErrorText(), tt.text) {
					t.Errorf("answer %v %q, want %v with %q and %q", resp.GetStatus(), resp.GetErrorText(), want, wantText, tt.text)
				}
				if tt.locked != "" {
					if _, ok := e.svc.Lock(tt.locked); !ok {
						t.Errorf("%s not held after an Ok Lock", tt.locked)
					}
				}
				for _, k := range tt.req.keys {
					if _, ok := e.svc.Lock(k); ok && !tt.ok {
						t.Errorf("%s held after a refused request", k)
					}
				}
			})
		}
	}
}

// TestReadOnlyTokenSession: a read-only token may open a version 3 session
// and keep it alive, and no more.
func TestReadOnlyTokenSession(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.Tokens = []netserve.Token{{Value: "mon", ReadOnly: true}} })
	c := e.dial(t)
	tok := func(r *pb.Request) *pb.Request { r.AccessToken = "mon"; return r }
	c.mustV3(tok(&pb.Request{Version: 3, Id: 1, Type: pb.RequestType_Session, Session: &pb.RequestSession{TtlMicro: 5e6}}), pb.ResponseStatus_Ok)
	c.mustV3(tok(v3(2, pb.RequestType_Ping)), pb.ResponseStatus_Ok)
	for i, r := range []*pb.Request{
		v3Lock(3, []string{"a"}),
		v3Keys(pb.RequestType_Renew, 4, "a"),
		cancelReq(5, 3),
	} {
		if got := c.do(tok(r)); got.GetStatus() != pb.ResponseStatus_Unauthorized {
			t.Errorf("request %d (%v) with a read-only token: %v, want Unauthorized", i, r.GetType(), got)
		}
	}
}

// TestSetTokens: new tokens apply to the next request, an open
// connection's included; no tokens serve every request; an invalid list
// keeps the tokens in force.
func TestSetTokens(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.Tokens = []netserve.Token{{Value: "old"}} })
	c := e.dial(t)
	ping := func(token string) pb.ResponseStatus {
		return c.do(&pb.Request{Version: 3, Id: 1, Type: pb.RequestType_Ping, AccessToken: token}).GetStatus()
	}
	steps := []struct {
		name    string
		set     []netserve.Token
		err     bool
		allowed map[string]bool // token: served
	}{
		{name: "start", allowed: map[string]bool{"old": true, "new": false, "": false}},
		{name: "rotated", set: []netserve.Token{{Value: "new"}}, allowed: map[string]bool{"old": false, "new": true}},
		{name: "invalid kept", set: []netserve.Token{{Value: "x"}, {Value: "x"}}, err: true, allowed: map[string]bool{"new": true, "x": false}},
		{name: "none", set: []netserve.Token{}, allowed: map[string]bool{"": true, "anything": true}},
	}
	for _, st := range steps {
		if st.set != nil {
			if err := e.srv.SetTokens(st.set); (err != nil) != st.err {
				t.Fatalf("%s: SetTokens() = %v, want error %v", st.name, err, st.err)
			}
		}
		for tok, ok := range st.allowed {
			if got := ping(tok); (got == pb.ResponseStatus_Ok) != ok {
				t.Errorf("%s: ping with %q: %v, want served %v", st.name, tok, got, ok)
			}
		}
	}
}
