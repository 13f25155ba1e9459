package raftrep

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// Mux shares one TCP port between Raft's transport and forwarding: the
// first byte of each connection says which it is for. It implements
// raft.StreamLayer (Raft's side) and Network (forwarding).
type Mux struct {
	ln        net.Listener
	advertise net.Addr
	// local is the IP connections to the other nodes leave from: the
	// listening IP when it is a specific one, so that a node's traffic
	// comes from the address it is known by (a firewall rule between two
	// nodes' addresses then cuts both directions); nil for the default.
	local net.IP
	// sec, when set, makes every connection mutual TLS.
	sec       *PeerTLS
	raftConns *sub
	fwdConns  *sub
	wg        sync.WaitGroup
}

// The first byte of a connection to a Mux.
const (
	muxRaft    = 'R'
	muxForward = 'F'
)

// PeerTLS secures the connections between nodes: Server for those a Mux
// accepts, Client for those it makes. Server must require and verify a
// client certificate (tls.RequireAndVerifyClientCert), so that only nodes
// holding a certificate of the cluster's CA reach Raft and forwarding:
// forwarded batches change the lock table. Client's ServerName, when
// empty, is the host of the address dialed.
//
// Certificates rotate without a restart when Server picks its
// certificate per handshake (GetConfigForClient, GetCertificate) and
// ClientConfig is set: each connection the Mux makes then takes the
// configuration ClientConfig returns, instead of Client (tlsconf.Files'
// Server and Client).
type PeerTLS struct {
	Server, Client *tls.Config
	// ClientConfig, when set, returns the client configuration of one new
	// connection; the Mux may change what it returns.
	ClientConfig func() *tls.Config
}

// Listen binds addr for a Mux. advertise, when not empty, is the address
// the other nodes reach this one at (the same as addr when empty).
func Listen(addr, advertise string) (*Mux, error) { return ListenTLS(addr, advertise, nil) }

// ListenTLS is Listen for a Mux whose connections are mutual TLS (sec
// nil: plain TCP).
func ListenTLS(addr, advertise string, sec *PeerTLS) (*Mux, error) {
	if sec != nil && (sec.Server == nil || (sec.Client == nil && sec.ClientConfig == nil) || sec.Server.ClientAuth != tls.RequireAndVerifyClientCert) {
		return nil, errors.New("raftrep: peer TLS needs a server configuration that requires client certificates and a client configuration")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("raftrep: listen: %w", err)
	}
	adv := ln.Addr()
	if advertise != "" {
		if adv, err = net.ResolveTCPAddr("tcp", advertise); err != nil {
			ln.Close()
			return nil, fmt.Errorf("raftrep: advertise address: %w", err)
		}
	}
	m := &Mux{ln: ln, advertise: adv, sec: sec}
	if ta, ok := ln.Addr().(*net.TCPAddr); ok && !ta.IP.IsUnspecified() {
		m.local = ta.IP
	}
	m.raftConns = newSub(m)
	m.fwdConns = newSub(m)
	m.wg.Add(1)
	go m.serve()
	return m, nil
}

// Transport returns Raft's transport over the Mux, without the heartbeat
// fast path (serialHeartbeats).
func (m *Mux) Transport(logger *slog.Logger) raft.Transport {
	return serialHeartbeats{raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:  (*muxStream)(m),
		MaxPool: 4,
		Timeout: 5 * time.Second,
		Logger:  newHCLogger(logger.With("component", "raft-net")),
	})}
}

// serialHeartbeats is Raft's network transport with its heartbeat fast
// path turned off, so that heartbeats reach Raft's main loop like every
// other RPC. On the fast path, a heartbeat from a newer leader raises the
// term on the transport's goroutine while a deposed leader's main loop may
// be writing a client's entry: the entry gets the new term, at an index
// where the new leader wrote another entry of that term, and the logs
// diverge while claiming to match (hashicorp/raft issue 695, still open in
// v1.7.3). The Jepsen-style test caught a paused leader doing this: the
// replicas' lock tables diverged and two of them granted one lock. The
// cost: a heartbeat may wait behind the main loop's disk writes.
type serialHeartbeats struct{ *raft.NetworkTransport }

// SetHeartbeatHandler does not install the fast path.
func (serialHeartbeats) SetHeartbeatHandler(func(raft.RPC)) {}

func (m *Mux) serve() {
	defer m.wg.Done()
	for {
		c, err := m.ln.Accept()
		if err != nil {
			m.raftConns.close()
			m.fwdConns.close()
			return
		}
		go m.route(c)
	}
}

// route hands c to the side its first byte names.
func (m *Mux) route(c net.Conn) {
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if m.sec != nil {
		tc := tls.Server(c, m.sec.Server)
		c.SetWriteDeadline(time.Now().Add(5 * time.Second))
		if err := tc.Handshake(); err != nil {
			c.Close()
			return
		}
		c.SetWriteDeadline(time.Time{})
		c = tc
	}
	var b [1]byte
	if _, err := c.Read(b[:]); err != nil {
		c.Close()
		return
	}
	c.SetReadDeadline(time.Time{})
	switch b[0] {
	case muxRaft:
		m.raftConns.push(c)
	case muxForward:
		m.fwdConns.push(c)
	default:
		c.Close()
	}
}

// Close stops listening; connections accepted stay open.
func (m *Mux) Close() error {
	err := m.ln.Close()
	m.wg.Wait()
	return err
}

// Addr is the address the Mux advertises.
func (m *Mux) Addr() net.Addr { return m.advertise }

func (m *Mux) dial(ctx context.Context, addr string, kind byte) (net.Conn, error) {
	var d net.Dialer
	if m.local != nil && dialFrom(m.local, addr) {
		d.LocalAddr = &net.TCPAddr{IP: m.local}
	}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if m.sec != nil {
		cfg := m.sec.Client
		if m.sec.ClientConfig != nil {
			cfg = m.sec.ClientConfig() // a copy of its own
		}
		if cfg.ServerName == "" {
			host, _, _ := net.SplitHostPort(addr)
			if m.sec.ClientConfig == nil {
				cfg = cfg.Clone()
			}
			cfg.ServerName = host
		}
		tc := tls.Client(c, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			c.Close()
			return nil, fmt.Errorf("raftrep: TLS with %s: %w", addr, err)
		}
		c = tc
	}
	if _, err := c.Write([]byte{kind}); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// dialFrom says whether a connection to addr may leave from local: always,
// except from a loopback IP to a destination that is not a loopback IP
// (such a connection could not be made from it).
func dialFrom(local net.IP, addr string) bool {
	if !local.IsLoopback() {
		return true
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback() || host == "localhost"
}

// DialForward implements Network.
func (m *Mux) DialForward(ctx context.Context, addr string) (net.Conn, error) {
	return m.dial(ctx, addr, muxForward)
}

// ForwardListener implements Network.
func (m *Mux) ForwardListener() net.Listener { return m.fwdConns }

// muxStream is the Mux as Raft's raft.StreamLayer.
type muxStream Mux

func (s *muxStream) Accept() (net.Conn, error) { return s.raftConns.Accept() }
func (s *muxStream) Close() error              { return s.raftConns.Close() }
func (s *muxStream) Addr() net.Addr            { return s.advertise }
func (s *muxStream) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return (*Mux)(s).dial(ctx, string(addr), muxRaft)
}

// sub is one side of a Mux, as a net.Listener.
type sub struct {
	m      *Mux
	conns  chan net.Conn
	once   sync.Once
	closed chan struct{}
}

func newSub(m *Mux) *sub {
	return &sub{m: m, conns: make(chan net.Conn, 16), closed: make(chan struct{})}
}

func (s *sub) push(c net.Conn) {
	select {
	case s.conns <- c:
	case <-s.closed:
		c.Close()
	}
}

var errClosed = errors.New("raftrep: listener closed")

func (s *sub) Accept() (net.Conn, error) {
	select {
	case c := <-s.conns:
		return c, nil
	case <-s.closed:
		return nil, errClosed
	}
}

func (s *sub) close() { s.once.Do(func() { close(s.closed) }) }

func (s *sub) Close() error { s.close(); return nil }

func (s *sub) Addr() net.Addr { return s.m.advertise }
