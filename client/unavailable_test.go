package client

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/latchd/latch"
	"github.com/latchd/latch/dlockpb"
	"github.com/latchd/latch/internal/frame"
	"github.com/latchd/latch/internal/latchtest"
)

// cutProxy forwards dlock connections to a server frame by frame and
// answers some requests Unavailable, as a cluster node cut off from the
// majority does: those of the types refuse names, not passed on, and
// those of the types lie names, passed on and handled by the server (the
// outcome the node cannot know: its request may still be applied).
type cutProxy struct {
	*proxy // its connections, each relayed by a cutConn (cut below is not the proxy's)

	rules  sync.Mutex // guards refuse and lie
	refuse map[dlockpb.RequestType]bool
	lie    map[dlockpb.RequestType]bool
}

func startCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	cp := &cutProxy{refuse: map[dlockpb.RequestType]bool{}, lie: map[dlockpb.RequestType]bool{}}
	cp.proxy = listenProxy(t, target, func(_ *proxy, in, out net.Conn) (up, down func()) {
		pc := &cutConn{p: cp, in: in, out: out, lies: map[uint64]bool{}}
		return pc.requests, pc.responses
	})
	return cp
}

// cut makes the proxy answer the requests of the types refused (not
// passed on) and lied about (passed on) Unavailable, from now on.
func (p *cutProxy) cut(refused, liedAbout []dlockpb.RequestType) {
	p.rules.Lock()
	defer p.rules.Unlock()
	for _, typ := range refused {
		p.refuse[typ] = true
	}
	for _, typ := range liedAbout {
		p.lie[typ] = true
	}
}

// cutConn is a client's connection through a cutProxy.
type cutConn struct {
	p       *cutProxy
	in, out net.Conn
	mu      sync.Mutex      // serializes writes to in; guards lies
	lies    map[uint64]bool // ids of requests whose answer becomes Unavailable
}

func unavailable(id uint64) *dlockpb.Response {
	return &dlockpb.Response{Version: 3, RequestId: id, Status: dlockpb.ResponseStatus_Unavailable,
		ErrorText: "replica: no leader: cluster unavailable"}
}

// requests forwards the client's requests, or answers them.
func (pc *cutConn) requests() {
	defer pc.out.Close()
	latchtest.EachMessage(pc.in, func() *dlockpb.Request { return new(dlockpb.Request) }, func(b []byte, req *dlockpb.Request) bool {
		pc.p.rules.Lock()
		refused, lie := pc.p.refuse[req.GetType()], pc.p.lie[req.GetType()]
		pc.p.rules.Unlock()
		if refused {
			pc.answer(unavailable(req.GetId()))
			return true
		}
		if lie {
			pc.mu.Lock()
			pc.lies[req.GetId()] = true
			pc.mu.Unlock()
		}
		_, err := pc.out.Write(frame.Append(nil, b))
		return err == nil
	})
}

// responses forwards the server's answers, Unavailable for the requests
// lied about.
func (pc *cutConn) responses() {
	defer pc.in.Close()
	latchtest.EachMessage(pc.out, func() *dlockpb.Response { return new(dlockpb.Response) }, func(_ []byte, resp *dlockpb.Response) bool {
		pc.mu.Lock()
		lie := pc.lies[resp.GetRequestId()]
		delete(pc.lies, resp.GetRequestId())
		pc.mu.Unlock()
		if lie {
			resp = unavailable(resp.GetRequestId())
		}
		return pc.answer(resp)
	})
}

func (pc *cutConn) answer(resp *dlockpb.Response) bool {
	b, err := proto.Marshal(resp)
	if err != nil {
		panic(err)
	}
	pc.mu.Lock()
	defer pc.mu.Unlock()
	_, err = pc.in.Write(frame.Append(nil, b))
	return err == nil
}

// lockableAgain waits until c takes key with TryLock, as it can once its
// resumed session has given key back (ErrAlreadyHeld until then), and
// fails t on any other error. The lock stays c's.
func lockableAgain(t *testing.T, c *Client, key string) {
	t.Helper()
	eventually(t, key+" can be requested again", func() bool {
		_, err := c.TryLock(context.Background(), []string{key})
		if errors.Is(err, latch.ErrAlreadyHeld) {
			return false // not unreserved yet
		}
		if err != nil {
			t.Fatalf("TryLock(%s) after the resume: %v", key, err)
		}
		return true
	})
}

// A server that answers a keepalive Unavailable (a cluster node cut off
// from the majority: it cannot vouch for the session, which lives on in
// the cluster) is given up at once, before it would count as silent: the
// Client resumes its session on the next server and keeps its locks.
func TestUnavailableServerResumesElsewhere(t *testing.T) {
	srv := startServer(t, 0)
	cutOff, other := startCutProxy(t, srv.addr), startProxy(t, srv.addr)
	c, clk := dialSilent(t, cutOff.addr, other.addr)
	l := mustLock(t, c, "k")
	settle(t, clk, c, silentInterval) // the keepalive answered last was sent now
	acked := time.Unix(0, c.pingsAnswered())

	cutOff.cut([]dlockpb.RequestType{dlockpb.RequestType_Ping}, nil)
	clk.Advance(silentInterval) // the next keepalive, answered Unavailable
	eventually(t, "the session is resumed on the other server, or given up", func() bool {
		return c.server() == other.addr || c.Err() != nil
	})
	if err := c.Err(); err != nil {
		t.Fatalf("the Client gave its session up on an Unavailable keepalive: %v", err)
	}
	if since := clk.Now().Sub(acked); since >= c.silentAfter {
		t.Fatalf("moved %v after the last keepalive answered: as silent, not as unavailable", since)
	}

	settle(t, clk, c, 2*silentTTL)
	checkMoved(t, srv, c, l, "k")
	mustLock(t, c, "k2")
}

// A Lock answered Unavailable may have been granted all the same (here
// the server granted it; only the answer says otherwise): it fails with
// an error wrapping latch.ErrUnavailable and ErrConnectionLost, the
// Client resumes its session on the next server and gives the keys back
// there, and then they can be requested again. The other locks stay.
func TestUnavailableLockIsGivenBack(t *testing.T) {
	srv := startServer(t, 0)
	cutOff, other := startCutProxy(t, srv.addr), startProxy(t, srv.addr)
	c, _ := dialSilent(t, cutOff.addr, other.addr)
	held := mustLock(t, c, "held")

	cutOff.cut(nil, []dlockpb.RequestType{dlockpb.RequestType_Lock})
	ctx := context.Background()
	_, err := c.Lock(ctx, []string{"k"})
	if !errorIs(err, latch.ErrUnavailable, ErrConnectionLost) {
		t.Fatalf("Lock answered Unavailable: %v, want ErrUnavailable and ErrConnectionLost", err)
	}
	eventually(t, "the session is resumed on the other server", func() bool { return c.server() == other.addr })
	eventually(t, "k is given back", func() bool { return len(srv.holders("k")) == 0 })
	lockableAgain(t, c, "k")
	checkMoved(t, srv, c, held, "held")
}

// An Unlock answered Unavailable fails with an error wrapping
// latch.ErrUnavailable and ErrConnectionLost: its outcome is unknown (here
// the server released the keys). The Client resumes its session on the
// next server, unlocks the keys there, and they can be requested again.
func TestUnavailableUnlock(t *testing.T) {
	srv := startServer(t, 0)
	cutOff, other := startCutProxy(t, srv.addr), startProxy(t, srv.addr)
	c, _ := dialSilent(t, cutOff.addr, other.addr)
	held, l := mustLock(t, c, "held"), mustLock(t, c, "k")

	cutOff.cut(nil, []dlockpb.RequestType{dlockpb.RequestType_Unlock})
	ctx := context.Background()
	if err := l.Unlock(ctx); !errorIs(err, latch.ErrUnavailable, ErrConnectionLost) {
		t.Fatalf("Unlock answered Unavailable: %v, want ErrUnavailable and ErrConnectionLost", err)
	}
	eventually(t, "the session is resumed on the other server", func() bool { return c.server() == other.addr })
	lockableAgain(t, c, "k")
	if isDone(held.Done()) || c.Err() != nil {
		t.Fatalf("lock lost after the move: %v (Client: %v)", held.Err(), c.Err())
	}
}

// refusingServer starts a dlock server that answers every request with
// status, as a cluster node that cannot take a session does, and returns
// its address.
func refusingServer(t *testing.T, status dlockpb.ResponseStatus) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer conn.Close()
				latchtest.EachMessage(conn, func() *dlockpb.Request { return new(dlockpb.Request) }, func(_ []byte, req *dlockpb.Request) bool {
					resp := unavailable(req.GetId())
					resp.Status = status
					out, err := proto.Marshal(resp)
					if err != nil {
						panic(err)
					}
					_, err = conn.Write(frame.Append(nil, out))
					return err == nil
				})
			})
		}
	})
	return ln.Addr().String()
}

// Dial passes over a server that answers the opening of the session
// Unavailable (a cluster node cut off from the majority, or shutting down
// and leaving its sessions to the cluster) or ShuttingDown, and opens the
// session on the next one. Any other refusal fails Dial.
func TestDialPassesOverUnavailableServer(t *testing.T) {
	srv := startServer(t, 0)
	cutOff, other := startCutProxy(t, srv.addr), startProxy(t, srv.addr)
	cutOff.cut([]dlockpb.RequestType{dlockpb.RequestType_Session}, nil)
	shutting := refusingServer(t, dlockpb.ResponseStatus_ShuttingDown)
	c := dial(t, strings.Join([]string{cutOff.addr, shutting, other.addr}, ","))
	if got := c.server(); got != other.addr {
		t.Fatalf("session opened on %q, want %q", got, other.addr)
	}
	mustLock(t, c, "k")

	refusing := refusingServer(t, dlockpb.ResponseStatus_Unauthorized)
	if c, err := Dial(t.Context(), refusing+","+other.addr); !errors.Is(err, ErrUnauthorized) {
		if err == nil {
			c.Close()
		}
		t.Fatalf("Dial past a server that refused the token: %v, want ErrUnauthorized", err)
	}
}
