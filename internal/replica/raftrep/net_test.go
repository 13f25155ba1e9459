package raftrep_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// pipeNet is an in-memory network of nodes for tests inside a synctest
// bubble: Raft's InmemTransports, and net.Pipe connections for forwarding,
// with partitions that cut both.
type pipeNet struct {
	mu    sync.Mutex
	trans map[string]*raft.InmemTransport
	lns   map[string]*pipeListener
	cut   map[[2]string]bool
	conns map[[2]string][]net.Conn
}

func newPipeNet() *pipeNet {
	return &pipeNet{
		trans: make(map[string]*raft.InmemTransport),
		lns:   make(map[string]*pipeListener),
		cut:   make(map[[2]string]bool),
		conns: make(map[[2]string][]net.Conn),
	}
}

// add makes the transport and listener of the node at addr and connects
// it to every node not cut off from it.
func (p *pipeNet) add(addr string) (*raft.InmemTransport, *pipeEnd) {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, t := raft.NewInmemTransport(raft.ServerAddress(addr))
	p.trans[addr] = t
	ln := &pipeListener{addr: addr, conns: make(chan net.Conn, 16), closed: make(chan struct{})}
	p.lns[addr] = ln
	for other, ot := range p.trans {
		if other == addr || p.cut[pair(addr, other)] {
			continue
		}
		t.Connect(raft.ServerAddress(other), ot)
		ot.Connect(raft.ServerAddress(addr), t)
	}
	return t, &pipeEnd{p: p, addr: addr, ln: ln}
}

func pair(a, b string) [2]string {
	if a > b {
		a, b = b, a
	}
	return [2]string{a, b}
}

// partition cuts every node of side off from every node not in it.
func (p *pipeNet) partition(side ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	in := make(map[string]bool)
	for _, a := range side {
		in[a] = true
	}
	for a, ta := range p.trans {
		for b := range p.trans {
			if a == b || in[a] == in[b] {
				continue
			}
			k := pair(a, b)
			p.cut[k] = true
			ta.Disconnect(raft.ServerAddress(b))
			for _, c := range p.conns[k] {
				c.Close()
			}
			delete(p.conns, k)
		}
	}
}

// heal removes every cut.
func (p *pipeNet) heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	clear(p.cut)
	for a, ta := range p.trans {
		for b, tb := range p.trans {
			if a != b {
				ta.Connect(raft.ServerAddress(b), tb)
			}
		}
	}
}

// remove takes a node's transport out: nothing reaches it, nothing it
// sends reaches anyone, and its forwarding connections are closed.
func (p *pipeNet) remove(addr string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for other, ot := range p.trans {
		if other != addr {
			ot.Disconnect(raft.ServerAddress(addr))
			k := pair(addr, other)
			for _, c := range p.conns[k] {
				c.Close()
			}
			delete(p.conns, k)
		}
	}
	if t := p.trans[addr]; t != nil {
		t.DisconnectAll()
	}
	delete(p.trans, addr)
	delete(p.lns, addr)
}

// pipeEnd is one node's side of the network (raftrep.Network).
type pipeEnd struct {
	p    *pipeNet
	addr string
	ln   *pipeListener
}

var errCut = errors.New("pipenet: no route")

func (e *pipeEnd) DialForward(ctx context.Context, addr string) (net.Conn, error) {
	e.p.mu.Lock()
	defer e.p.mu.Unlock()
	ln := e.p.lns[addr]
	k := pair(e.addr, addr)
	if ln == nil || e.p.cut[k] {
		return nil, errCut
	}
	a, b := net.Pipe()
	select {
	case ln.conns <- b:
	case <-ln.closed:
		return nil, errCut
	default:
		return nil, errCut
	}
	e.p.conns[k] = append(e.p.conns[k], a, b)
	return a, nil
}

func (e *pipeEnd) ForwardListener() net.Listener { return e.ln }

type pipeListener struct {
	addr   string
	conns  chan net.Conn
	once   sync.Once
	closed chan struct{}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr(l.addr) }

type pipeAddr string

func (a pipeAddr) Network() string { return "pipe" }
func (a pipeAddr) String() string  { return string(a) }

// slowTransport delays every AppendEntries by a latency (in the bubble's
// time), so that a commit takes time, and counts them in sent when it is
// set. It has no pipeline: each AppendEntries waits for its answer.
type slowTransport struct {
	*raft.InmemTransport
	latency time.Duration
	sent    *atomic.Int64
}

func (s slowTransport) AppendEntriesPipeline(raft.ServerID, raft.ServerAddress) (raft.AppendPipeline, error) {
	return nil, raft.ErrPipelineReplicationNotSupported
}

func (s slowTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	if s.sent != nil {
		s.sent.Add(1)
	}
	time.Sleep(s.latency)
	return s.InmemTransport.AppendEntries(id, target, args, resp)
}
