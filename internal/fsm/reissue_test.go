package fsm

import (
	"testing"
	"time"

	"github.com/latchd/latch"
)

// reissueState returns a state with a session owned by node n1 holding
// "owned" (no lease) and "owned-leased" (a lease), a TTL session of no
// node holding "ttl", an item, and a token counter at 1000.
func reissueState(t *testing.T) (*State, int64) {
	t.Helper()
	s := newState(t)
	now := int64(1_700_000_000) * int64(time.Second)
	var r Result
	apply := func(c Command) Result {
		t.Helper()
		c.At = now
		s.Apply(&c, &r)
		if r.Err != nil {
			t.Fatalf("%v: %v", c.Op, r.Err)
		}
		return r
	}
	apply(Command{Op: OpSeed, Token: 1000})
	owned := apply(Command{Op: OpOpenSession, TTL: 10 * time.Second, Key: []byte("n1")}).Session
	ttl := apply(Command{Op: OpOpenSession, TTL: 30 * time.Second}).Session
	apply(Command{Op: OpAcquire, Session: owned, Req: latch.LockRequest{Keys: []string{"owned"}}})
	apply(Command{Op: OpAcquire, Session: owned, Req: latch.LockRequest{Keys: []string{"owned-leased"}, Lease: time.Minute}})
	apply(Command{Op: OpAcquire, Session: ttl, Req: latch.LockRequest{Keys: []string{"ttl"}}})
	apply(Command{Op: OpItemSet, Key: []byte("item"), Value: []byte("v")})
	return s, now
}

// emptyZnodes counts the znodes of an empty tree (ZooKeeper's own).
func emptyZnodes(t *testing.T) int {
	n, _ := newState(t).Tree().Count()
	return n
}

func TestSummary(t *testing.T) {
	s, now := reissueState(t)
	got := s.Summary()
	want := Summary{Locks: 3, Holds: 3, Leases: 1, Sessions: 2, Owned: 1, Items: 1, Znodes: emptyZnodes(t), Token: 1003, Zxid: got.Zxid, Now: now}
	if got != want {
		t.Errorf("Summary = %+v, want %+v", got, want)
	}
}

func TestReissue(t *testing.T) {
	tests := []struct {
		name      string
		token     latch.Token
		zxid      int64
		wantToken latch.Token
		wantZxid  int64
	}{
		{"raises", 5000, 7 << 32, 5000, 7 << 32},
		{"never lowers", 10, 0, 1003, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, now := reissueState(t)
			zxid := s.Tree().Zxid()
			if ended := s.Reissue(tt.token, tt.zxid); ended != 1 {
				t.Errorf("Reissue ended %d sessions, want 1 (n1's)", ended)
			}
			sum := s.Summary()
			wantZxid := tt.wantZxid
			if wantZxid < 0 {
				wantZxid = zxid
			}
			want := Summary{Locks: 2, Holds: 2, Leases: 1, Sessions: 1, Owned: 0, Items: 1, Znodes: emptyZnodes(t), Token: tt.wantToken, Zxid: wantZxid, Now: now}
			if sum != want {
				t.Errorf("after Reissue: %+v, want %+v", sum, want)
			}
			if _, ok := s.Engine().Key("owned"); ok {
				t.Error("the owned session's lock is still held")
			}
			if len(s.owners.nodes) != 0 {
				t.Errorf("owners %v left", s.owners.nodes)
			}
			// The next grant's token is above the raised counter.
			var r Result
			s.Apply(&Command{Op: OpOpenSession, At: now}, &r)
			s.Apply(&Command{Op: OpAcquire, At: now, Session: r.Session, Req: latch.LockRequest{Keys: []string{"new"}}}, &r)
			if r.Err != nil || r.Token != tt.wantToken+1 {
				t.Errorf("next grant: token %d, err %v; want %d", r.Token, r.Err, tt.wantToken+1)
			}
			// It survives a snapshot.
			back, err := Restore(s.Config(), s.AppendSnapshot(nil))
			if err != nil {
				t.Fatal(err)
			}
			if got := back.Summary(); got.Token != tt.wantToken+1 || got.Owned != 0 {
				t.Errorf("restored: %+v", got)
			}
		})
	}
}
