package raftrep

import (
	"context"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/raft"
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
