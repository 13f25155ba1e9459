package server

import (
	"bufio"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/latchd/latch/dlockpb"
	"github.com/latchd/latch/internal/frame"
)

// dlockCall sends one version 3 request over a new connection and returns
// the answer.
func dlockCall(t *testing.T, addr string, req *pb.Request) *pb.Response {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(20 * time.Second))
	b, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nc.Write(frame.Append(nil, b)); err != nil {
		t.Fatal(err)
	}
	body, err := frame.NewReader(bufio.NewReader(nc), 0).Read()
	if err != nil {
		t.Fatal(err)
	}
	resp := new(pb.Response)
	if err := proto.Unmarshal(body, resp); err != nil {
		t.Fatal(err)
	}
	return resp
}

func TestDLockFrontEnd(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(path, []byte("# dlock tokens\nsecret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig()
	cfg.DLock.TokensFile = path
	cfg.Lock.MaxKeys = 2
	s := newServer(t, cfg)
	addr := s.DLockAddr()
	if addr == nil {
		t.Fatal("DLockAddr() = nil, want the dlock listener's address")
	}

	lock := &pb.Request{Version: 3, Id: 1, Type: pb.RequestType_Lock, AccessToken: "secret",
		Lock: &pb.RequestLock{Keys: []string{"k"}, ReleaseMicro: uint64(time.Hour / time.Microsecond)}}
	if r := dlockCall(t, addr.String(), lock); r.GetStatus() != pb.ResponseStatus_Ok || len(r.GetTokens()) != 1 {
		t.Fatalf("Lock: %v, want Ok with a token", r)
	}
	// The lease outlived the connection, in the one lock table.
	info, ok := s.Service().Lock("k")
	if !ok || len(info.Holders) != 1 {
		t.Errorf("k after the dlock Lock: %+v, want one holder", info)
	}
	lock.AccessToken = "wrong"
	if r := dlockCall(t, addr.String(), lock); r.GetStatus() != pb.ResponseStatus_Unauthorized {
		t.Errorf("Lock with a wrong token: %v, want Unauthorized", r)
	}
	lock.AccessToken = "secret"
	lock.Lock.Keys = []string{"a", "b", "c"}
	if r := dlockCall(t, addr.String(), lock); r.GetStatus() != pb.ResponseStatus_TooManyKeys {
		t.Errorf("Lock of 3 keys with max-keys 2: %v, want TooManyKeys", r)
	}

	var got uint64
	for _, p := range s.Metrics().Snapshot().Protocols {
		if p.Protocol == "dlock" {
			got = p.ConnectionsTotal
		}
	}
	if got != 3 {
		t.Errorf("dlock connections counted: %d, want 3", got)
	}
}

func TestDLockTokensFileMissing(t *testing.T) {
	cfg := testConfig()
	cfg.DLock.TokensFile = filepath.Join(t.TempDir(), "none")
	newFails(t, cfg, "access tokens")
}

func TestDLockDisabled(t *testing.T) {
	cfg := testConfig()
	cfg.DLock.Addr = ""
	cfg.Redis.Addr = ""
	cfg.ZooKeeper.Addr = ""
	if s := newServer(t, cfg); s.DLockAddr() != nil {
		t.Errorf("DLockAddr() = %v with dlock-addr empty, want nil", s.DLockAddr())
	}
}
