package raftrep

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/latchd/latch/internal/tlsconf"
	"github.com/latchd/latch/internal/tlsconf/tlstest"
)

// TestMuxDialsFromListenIP: a Mux listening on a specific IP connects to
// the other nodes from that IP (both Raft's connections and forwarding
// ones), so that rules between two nodes' addresses see its traffic; one
// listening on every address leaves the source to the system.
func TestMuxDialsFromListenIP(t *testing.T) {
	a, err := Listen("127.0.0.11:0", "")
	if err != nil {
		t.Skipf("no 127.0.0.11 on this machine: %v", err)
	}
	defer a.Close()
	b, err := Listen("127.0.0.12:0", "")
	if err != nil {
		t.Skipf("no 127.0.0.12 on this machine: %v", err)
	}
	defer b.Close()
	anyIP, err := Listen(":0", "")
	if err != nil {
		t.Fatal(err)
	}
	defer anyIP.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	tests := []struct {
		name string
		dial func() (net.Conn, error)
		ln   net.Listener
		want string // the source IP b sees; "" when not checked
	}{
		{"forward", func() (net.Conn, error) { return a.DialForward(ctx, b.Addr().String()) }, b.ForwardListener(), "127.0.0.11"},
		{"raft", func() (net.Conn, error) {
			return (*muxStream)(a).Dial(raft.ServerAddress(b.Addr().String()), 5*time.Second)
		}, (*muxStream)(b), "127.0.0.11"},
		{"unspecified", func() (net.Conn, error) { return anyIP.DialForward(ctx, b.Addr().String()) }, b.ForwardListener(), "127.0.0.1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := tt.dial()
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			got, err := tt.ln.Accept()
			if err != nil {
				t.Fatal(err)
			}
			defer got.Close()
			if ip := got.RemoteAddr().(*net.TCPAddr).IP.String(); ip != tt.want {
				t.Errorf("source IP %s, want %s", ip, tt.want)
			}
		})
	}
}

func TestDialFrom(t *testing.T) {
	tests := []struct {
		local, addr string
		want        bool
	}{
		{"127.0.0.11", "127.0.0.12:1", true},
		{"127.0.0.11", "localhost:1", true},
		{"127.0.0.11", "10.0.0.2:1", false},
		{"127.0.0.11", "db.example:1", false},
		{"10.0.0.1", "10.0.0.2:1", true},
		{"10.0.0.1", "db.example:1", true},
		{"::1", "[::1]:1", true},
	}
	for _, tt := range tests {
		if got := dialFrom(net.ParseIP(tt.local), tt.addr); got != tt.want {
			t.Errorf("dialFrom(%s, %s) = %v, want %v", tt.local, tt.addr, got, tt.want)
		}
	}
}

// TestMuxPeerTLS: Muxes with peer TLS talk to each other over mutual TLS,
// for Raft and forwarding alike; a peer without TLS, or with TLS but no
// certificate of the cluster's CA, reaches neither.
func TestMuxPeerTLS(t *testing.T) {
	pki := tlstest.New(t)
	sec := &PeerTLS{Server: pki.ServerConfig(true), Client: pki.ClientConfig(true)}
	a, err := ListenTLS("127.0.0.1:0", "", sec)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := ListenTLS("127.0.0.1:0", "", sec)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// Forwarding, then Raft, from a to b.
	c, err := a.DialForward(ctx, b.Addr().String())
	if err != nil {
		t.Fatalf("forward dial over TLS: %v", err)
	}
	defer c.Close()
	go c.Write([]byte("hello"))
	got, err := b.ForwardListener().Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer got.Close()
	buf := make([]byte, 5)
	if _, err := io.ReadFull(got, buf); err != nil || string(buf) != "hello" {
		t.Fatalf("read %q, %v over the forwarded connection", buf, err)
	}
	rc, err := (*muxStream)(a).Dial(raft.ServerAddress(b.Addr().String()), 5*time.Second)
	if err != nil {
		t.Fatalf("raft dial over TLS: %v", err)
	}
	rc.Close()
	if rc, err := (*muxStream)(b).Accept(); err != nil {
		t.Fatalf("raft accept over TLS: %v", err)
	} else {
		rc.Close()
	}

	// Outsiders: plain TCP, and TLS without a client certificate.
	plain, err := Listen("127.0.0.1:0", "")
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	noCert, err := ListenTLS("127.0.0.1:0", "", &PeerTLS{Server: pki.ServerConfig(true), Client: pki.ClientConfig(false)})
	if err != nil {
		t.Fatal(err)
	}
	defer noCert.Close()
	for name, m := range map[string]*Mux{"plain": plain, "no certificate": noCert} {
		c, err := m.DialForward(ctx, b.Addr().String())
		if err == nil {
			// TLS 1.3 reports a refused client certificate on the
			// first read: the server closes the connection.
			c.Write([]byte("a forwarded batch, not a TLS record"))
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			_, err = c.Read(make([]byte, 1))
			c.Close()
		}
		if err == nil {
			t.Errorf("%s: reached the TLS Mux", name)
		}
	}
	if _, err := ListenTLS("127.0.0.1:0", "", &PeerTLS{Server: pki.ServerConfig(false), Client: pki.ClientConfig(true)}); err == nil {
		t.Error("ListenTLS took a server configuration that does not require client certificates")
	}
}

// TestMuxPeerTLSRotation: over tlsconf.Files, a peer certificate rotated
// on disk and reloaded is the one both ends of the next connection
// present; a connection made before stays open.
func TestMuxPeerTLSRotation(t *testing.T) {
	pki := tlstest.New(t)
	files := map[*Mux]*tlsconf.Files{}
	mux := func() *Mux {
		f, err := tlsconf.NewFiles("peer-tls", pki.PeerCertFile, pki.PeerKeyFile, pki.CAFile, nil)
		if err != nil {
			t.Fatal(err)
		}
		m, err := ListenTLS("127.0.0.1:0", "", &PeerTLS{Server: f.Server(), ClientConfig: f.Client})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		files[m] = f
		return m
	}
	a, b := mux(), mux()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// serials returns the serial numbers of the certificates a's dialing
	// end and b's accepting end got from each other.
	serials := func() (string, string, net.Conn) {
		t.Helper()
		c, err := a.DialForward(ctx, b.Addr().String())
		if err != nil {
			t.Fatalf("forward dial: %v", err)
		}
		t.Cleanup(func() { c.Close() })
		go c.Write([]byte("x"))
		got, err := b.ForwardListener().Accept()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { got.Close() })
		io.ReadFull(got, make([]byte, 1))
		return c.(*tls.Conn).ConnectionState().PeerCertificates[0].SerialNumber.String(),
			got.(*tls.Conn).ConnectionState().PeerCertificates[0].SerialNumber.String(), c
	}
	first := pki.Peer.Leaf.SerialNumber.String()
	if s1, s2, _ := serials(); s1 != first || s2 != first {
		t.Fatalf("before the rotation: serials %s and %s, want %s", s1, s2, first)
	}
	_, _, before := serials()
	rotated := pki.Reissue(t, true).Leaf.SerialNumber.String()
	for _, m := range []*Mux{a, b} {
		if changed, err := files[m].Reload(); err != nil || !changed {
			t.Fatalf("Reload() = %v, %v", changed, err)
		}
	}
	if s1, s2, _ := serials(); s1 != rotated || s2 != rotated {
		t.Errorf("after the rotation: serials %s and %s, want %s", s1, s2, rotated)
	}
	if _, err := before.Write([]byte("still open")); err != nil {
		t.Errorf("a connection made before the rotation: %v", err)
	}
}

// TestNoHeartbeatFastPath: the Mux's transport hands heartbeats to Raft's
// main loop (Consumer) even when Raft installs its fast-path handler,
// which would run them on the transport's goroutine, racing the leader
// loop (see serialHeartbeats). It keeps the optional interfaces Raft
// looks for.
func TestNoHeartbeatFastPath(t *testing.T) {
	a, err := Listen("127.0.0.1:0", "")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Listen("127.0.0.1:0", "")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	logger := slog.New(slog.DiscardHandler)
	ta, tb := a.Transport(logger), b.Transport(logger)
	for _, tr := range []raft.Transport{ta, tb} {
		if _, ok := tr.(raft.WithPreVote); !ok {
			t.Error("the transport lost pre-vote")
		}
		if c, ok := tr.(raft.WithClose); !ok {
			t.Error("the transport lost Close")
		} else {
			defer c.Close()
		}
	}
	fast := make(chan raft.RPC, 1)
	tb.SetHeartbeatHandler(func(rpc raft.RPC) { fast <- rpc })
	go func() {
		select {
		case rpc := <-tb.Consumer():
			rpc.Respond(&raft.AppendEntriesResponse{Term: 7, Success: true}, nil)
		case rpc := <-fast:
			rpc.Respond(&raft.AppendEntriesResponse{Term: 7, Success: false}, nil)
		case <-time.After(5 * time.Second):
		}
	}()
	heartbeat := &raft.AppendEntriesRequest{
		RPCHeader: raft.RPCHeader{ID: []byte("a"), Addr: []byte(a.Addr().String())},
		Term:      7,
	}
	var resp raft.AppendEntriesResponse
	if err := ta.AppendEntries("b", raft.ServerAddress(b.Addr().String()), heartbeat, &resp); err != nil {
		t.Fatal(err)
	}
	if !resp.Success {
		t.Error("the heartbeat took the fast path, beside Raft's main loop")
	}
}
