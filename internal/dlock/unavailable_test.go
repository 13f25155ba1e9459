package dlock

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/raft"

	pb "github.com/latchd/latch/dlockpb"
	"github.com/latchd/latch/internal/netserve"
	"github.com/latchd/latch/internal/node"
	"github.com/latchd/latch/internal/replica"
	"github.com/latchd/latch/internal/replica/raftrep"
)

// newCutEnv starts, inside a synctest bubble, a cluster of two nodes in
// memory and a dlock server over pipes on its leader, and returns it with
// a function that cuts the two nodes apart: neither has a majority then.
func newCutEnv(t *testing.T) (*env, func()) {
	t.Helper()
	ids := []string{"n1", "n2"}
	var peers []raftrep.Peer
	trans := make(map[string]*raft.InmemTransport)
	for _, id := range ids {
		peers = append(peers, raftrep.Peer{ID: id, Addr: id})
		_, trans[id] = raft.NewInmemTransport(raft.ServerAddress(id))
	}
	trans["n1"].Connect("n2", trans["n2"])
	trans["n2"].Connect("n1", trans["n1"])
	nodes := make(map[string]*node.Node)
	reps := make(map[string]*raftrep.Replicator)
	for _, id := range ids {
		n, err := node.New(node.Config{
			NodeID: id,
			Replicator: func(sm replica.StateMachine) (replica.Replicator, error) {
				// No forwarding between the nodes: the dlock server is on
				// the leader, which needs none.
				r, err := raftrep.New(raftrep.Config{ID: id, Addr: id, Peers: peers, Transport: trans[id]}, sm)
				reps[id] = r
				return r, err
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		nodes[id] = n
	}
	lead := ""
	for range 100 {
		time.Sleep(100 * time.Millisecond)
		for id, r := range reps {
			if _, self, _ := r.Leader(); self {
				lead = id
			}
		}
		if lead != "" {
			break
		}
	}
	if lead == "" {
		t.Fatal("no leader after 10 s")
	}
	time.Sleep(time.Second) // its promotion
	e := &env{svc: nodes[lead], pl: newPipeListener()}
	srv, err := New(e.svc, testConfig())
	if err != nil {
		t.Fatal(err)
	}
	e.srv = srv
	if err := srv.Serve(e.pl); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		e.shutdown()
		// Bounded: without the leader, a node's last proposals may wait
		// for one forever.
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		for id, n := range nodes {
			if id != lead {
				n.Shutdown(ctx)
			}
		}
	})
	cut := func() {
		trans["n1"].Disconnect("n2")
		trans["n2"].Disconnect("n1")
	}
	return e, cut
}

// A cluster node cut off from the majority answers a version 3 Ping
// Unavailable, not General: it cannot keep the session alive. When it lets
// go of its clients, the waiting Lock of a session with a TTL is answered
// Unavailable (it may still be granted: the session lives on in the
// cluster), and so is every later keepalive, Ping or Session, not
// SessionExpired: the session has not ended, and its client should resume
// it on another server. A connection whose session has no TTL is closed:
// the node proposed the end of its session.
func TestCutOffNodeAnswersUnavailable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, cut := newCutEnv(t)
		c := e.dial(t)
		c.mustV3(sessionReq(1, time.Minute), pb.ResponseStatus_Ok)
		c.mustV3(v3Lock(2, []string{"k"}), pb.ResponseStatus_Ok)
		bound := e.dial(t)
		bound.mustV3(v3Lock(1, []string{"busy"}), pb.ResponseStatus_Ok)
		c.sendPB(v3Lock(3, []string{"busy"}))
		e.waitFor(t, "busy", "a waiter", waiters(1))
		time.Sleep(time.Second) // a heartbeat commits

		cut()
		// Two election timeouts without a leader: proposals are refused.
		time.Sleep(4 * time.Second)
		c.mustV3(v3(4, pb.RequestType_Ping), pb.ResponseStatus_Unavailable)

		// 80% of the node TTL after the last heartbeat that committed,
		// the node lets go of its clients.
		time.Sleep(6 * time.Second)
		r := c.recvPB()
		if r.GetRequestId() != 3 || r.GetStatus() != pb.ResponseStatus_Unavailable {
			t.Fatalf("the waiting Lock answered %v, want Unavailable", r)
		}
		bound.expectEOF()
		for _, req := range []*pb.Request{v3(5, pb.RequestType_Ping), sessionReq(6, time.Minute), v3Lock(7, []string{"x"})} {
			c.mustV3(req, pb.ResponseStatus_Unavailable)
		}
	})
}

// A cluster node shutting down leaves its sessions with a TTL to the
// cluster, as one cut off from the majority does: their waiting Lock and
// their later requests are answered Unavailable, not ShuttingDown, and so
// is a Session request resuming one, so that the client resumes its
// session on another node; the session lives on in the lock table. A new
// session is refused ShuttingDown, and a session without a TTL ends: its
// connection closes, as on a single node.
func TestShuttingDownNodeAnswersUnavailable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, _ := newCutEnv(t)
		c := e.dial(t)
		r := c.mustV3(sessionReq(1, time.Minute), pb.ResponseStatus_Ok)
		id := r.GetSessionId()
		c.mustV3(v3Lock(2, []string{"k"}), pb.ResponseStatus_Ok)
		bound := e.dial(t)
		bound.mustV3(v3Lock(1, []string{"busy"}), pb.ResponseStatus_Ok)
		c.sendPB(v3Lock(3, []string{"busy"}))
		e.waitFor(t, "busy", "a waiter", waiters(1))

		e.svc.Shutdown(context.Background())
		if r := c.recvPB(); r.GetRequestId() != 3 || r.GetStatus() != pb.ResponseStatus_Unavailable {
			t.Fatalf("the waiting Lock answered %v, want Unavailable", r)
		}
		c.mustV3(v3(4, pb.RequestType_Ping), pb.ResponseStatus_Unavailable)
		resume := &pb.Request{Version: 3, Id: 1, Type: pb.RequestType_Session,
			Session: &pb.RequestSession{TtlMicro: uint64(time.Minute / time.Microsecond), ResumeSessionId: id}}
		e.dial(t).mustV3(resume, pb.ResponseStatus_Unavailable)
		e.dial(t).mustV3(sessionReq(1, time.Minute), pb.ResponseStatus_ShuttingDown)
		sessions := e.svc.Sessions()
		if len(sessions) != 1 || uint64(sessions[0].ID) != id {
			t.Errorf("sessions after the shutdown = %+v, want the one with a TTL (%d) only", sessions, id)
		}

		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		if err := e.srv.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		c.expectEOF()
		bound.expectEOF()
	})
}

// A connection that resumed a session and went away without another
// request leaves the session rather than end it: its client may have
// given that resume up as late and taken the session back elsewhere,
// where ending it would end it. A connection that made a request after
// its resume ends the session when it goes, as any connection does.
func TestResumedUnusedSessionLeft(t *testing.T) {
	e := newEnv(t, nil)
	resume := func(id uint64) *pb.Request {
		return &pb.Request{Version: 3, Id: 1, Type: pb.RequestType_Session,
			Session: &pb.RequestSession{TtlMicro: uint64(time.Minute / time.Microsecond), ResumeSessionId: id}}
	}
	// gone closes c and waits until the server has finished with it.
	gone := func(c *client) {
		t.Helper()
		peer := c.peer()
		c.nc.Close()
		for deadline := time.Now().Add(testTimeout); ; time.Sleep(time.Millisecond) {
			open := false
			e.srv.ns.Range(func(nc *netserve.Conn) bool {
				open = open || nc.RemoteAddr().String() == peer
				return true
			})
			if !open {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("connection %s not finished", peer)
			}
		}
	}
	first := e.dial(t)
	id := first.mustV3(sessionReq(1, time.Minute), pb.ResponseStatus_Ok).GetSessionId()
	first.mustV3(v3Lock(2, []string{"k"}), pb.ResponseStatus_Ok)

	unused := e.dial(t)
	unused.mustV3(resume(id), pb.ResponseStatus_Ok)
	gone(unused)
	if ki, ok := e.svc.Lock("k"); !ok || len(ki.Holders) != 1 || uint64(ki.Holders[0].Session) != id {
		t.Fatalf("k after the unused resume's connection went: %+v, want held by session %d", ki, id)
	}

	used := e.dial(t)
	used.mustV3(resume(id), pb.ResponseStatus_Ok)
	used.mustV3(v3(2, pb.RequestType_Ping), pb.ResponseStatus_Ok)
	gone(used)
	if ki, ok := e.svc.Lock("k"); ok && len(ki.Holders) > 0 {
		t.Errorf("k after the used resume's connection went: %+v, want released with its session", ki)
	}
	e.dial(t).mustV3(resume(id), pb.ResponseStatus_SessionExpired)
}
