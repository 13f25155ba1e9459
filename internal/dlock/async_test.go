package dlock

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/latchd/latch"
	pb "github.com/latchd/latch/dlockpb"
	"github.com/latchd/latch/internal/frame"
	"github.com/latchd/latch/internal/node"
	"github.com/latchd/latch/internal/replica"
	"github.com/latchd/latch/internal/replica/raftrep"
)

// newClusterEnv is newEnv over a cluster node: a one-member Raft cluster
// in memory, which answers once its commands are applied
// (latch.Replicated), as every node of a real cluster does.
func newClusterEnv(t *testing.T) *env {
	t.Helper()
	cfg := testConfig()
	svc, err := node.New(node.Config{
		NodeID: "n1",
		Replicator: func(sm replica.StateMachine) (replica.Replicator, error) {
			return raftrep.New(raftrep.Config{ID: "n1"}, sm)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := svc.Execution(); got != latch.Replicated {
		t.Fatalf("a cluster node's Execution() = %v, want replicated", got)
	}
	e := &env{svc: svc}
	if e.srv, err = New(svc, cfg); err != nil {
		t.Fatalf("New() error = %v", err)
	}
	if err := e.srv.Start(); err != nil {
		t.Fatalf("Start() error = %v", err)
	}
	e.addr = e.srv.Addr().String()
	t.Cleanup(e.shutdown)
	// Wait for the one member to lead: until then requests fail.
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	for {
		if s, err := svc.OpenSession(latch.SessionOptions{}); err == nil {
			s.Close()
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the one-member cluster never took a request")
		case <-time.After(10 * time.Millisecond):
		}
	}
	return e
}

// A cluster node answers a connection's version 3 requests once they are
// applied, without holding up the requests behind them: a pipeline of
// Locks, Unlocks, Renews and Pings is answered in order (each applied in
// turn), and a Lock that waits is answered when another connection
// releases its key.
func TestV3PipelinedOnCluster(t *testing.T) {
	e := newClusterEnv(t)
	c := e.dial(t)
	c.mustV3(v3Lock(1, []string{"held"}), pb.ResponseStatus_Ok)

	w := e.dial(t)
	// Write the whole pipeline at once.
	var b []byte
	var want []uint64
	add := func(req *pb.Request) {
		m, err := proto.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		b = frame.Append(b, m)
		want = append(want, req.GetId())
	}
	for i := range 16 {
		id := uint64(10 + 4*i)
		key := []string{"k" + string(rune('a'+i))}
		add(v3Lock(id, key, lease(time.Minute)))
		add(v3Keys(pb.RequestType_Renew, id+1, key...))
		add(v3(id+2, pb.RequestType_Ping))
		add(v3Keys(pb.RequestType_Unlock, id+3, key...))
	}
	add(v3Keys(pb.RequestType_Unlock, 100, "nothing-held"))
	w.send(b)
	for _, id := range want {
		r := w.recvPB()
		if r.GetRequestId() != id {
			t.Fatalf("answer to %d, want to %d (in order)", r.GetRequestId(), id)
		}
		wantStatus := pb.ResponseStatus_Ok
		if id == 100 {
			wantStatus = pb.ResponseStatus_NotHeld
		}
		if r.GetStatus() != wantStatus {
			t.Fatalf("answer to %d: %v, want %v", id, r, wantStatus)
		}
		if id%4 == 2 && id < 100 && len(r.GetTokens()) != 1 {
			t.Errorf("Lock %d granted without a token: %v", id, r)
		}
	}

	// A Lock that waits, a Cancel of another, then the release.
	w.sendPB(v3Lock(200, []string{"held"}))
	w.sendPB(v3Lock(201, []string{"held"}))
	e.waitFor(t, "held", "two waiters", waiters(2))
	w.sendPB(cancelReq(202, 201))
	got := w.recvAll(2) // in either order
	if r := got[202]; r.GetStatus() != pb.ResponseStatus_Ok {
		t.Fatalf("Cancel answered %v, want Ok", r)
	}
	if r := got[201]; r.GetStatus() != pb.ResponseStatus_Canceled {
		t.Fatalf("cancelled Lock answered %v, want Canceled", r)
	}
	// A Cancel right behind its Lock, in one write: it waits until the
	// Lock is applied (queued), then withdraws it.
	b = nil
	add(v3Lock(203, []string{"held"}))
	add(cancelReq(204, 203))
	w.send(b)
	got = w.recvAll(2)
	if got[204].GetStatus() != pb.ResponseStatus_Ok || got[203].GetStatus() != pb.ResponseStatus_Canceled {
		t.Fatalf("Lock and Cancel in one write answered %v and %v, want Canceled and Ok", got[203], got[204])
	}
	c.mustV3(v3Keys(pb.RequestType_Unlock, 2, "held"), pb.ResponseStatus_Ok)
	if r := w.recvPB(); r.GetRequestId() != 200 || r.GetStatus() != pb.ResponseStatus_Ok {
		t.Fatalf("waiting Lock answered %v, want its grant", r)
	}
}
