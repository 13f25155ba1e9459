package server

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/latchd/latch/dlockpb"
	"github.com/latchd/latch/internal/config"
	"github.com/latchd/latch/internal/frame"
	"github.com/latchd/latch/internal/tlsconf/tlstest"
)

// dlockPing pings over nc with token and returns the answer's status.
func dlockPing(nc net.Conn, token string) (pb.ResponseStatus, error) {
	b, err := proto.Marshal(&pb.Request{Version: 3, Id: 1, Type: pb.RequestType_Ping, AccessToken: token})
	if err != nil {
		return 0, err
	}
	if _, err := nc.Write(frame.Append(nil, b)); err != nil {
		return 0, err
	}
	body, err := frame.NewReader(bufio.NewReader(nc), 0).Read()
	if err != nil {
		return 0, err
	}
	resp := new(pb.Response)
	if err := proto.Unmarshal(body, resp); err != nil {
		return 0, err
	}
	return resp.GetStatus(), nil
}

// TestReload reloads a running server step by step: each step changes the
// files or the configuration that Load reads, and checks the report, the
// one log line, and what the listeners now do. A connection opened at the
// start is served after every step.
func TestReload(t *testing.T) {
	pki := tlstest.New(t)
	dir := t.TempDir()
	write := func(name, content string) string {
		t.Helper()
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	dlockToks := write("dlock-tokens", "d1\n")
	adminTok := write("admin-token", "a1\n")
	redisToks := write("redis-tokens", "r1\n")

	cfg := testConfig()
	cfg.TLS.Cert, cfg.TLS.Key = pki.ServerCertFile, pki.ServerKeyFile
	cfg.DLock.TokensFile = dlockToks
	cfg.Redis.TokensFile = redisToks
	cfg.Admin.TokenFile = adminTok
	level := new(slog.LevelVar)
	cfg.Server.LogLevel = level
	next := cfg // what Load returns
	var loadErr error
	cfg.Server.Load = func() (config.Config, error) { return next, loadErr }
	logs := new(syncBuffer)
	s, err := New(cfg, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: level})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown(t.Context()) })

	cli := pki.ClientConfig(false)
	open, err := tls.Dial("tcp", s.MemcacheAddr().String(), cli)
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	serial := func() string {
		t.Helper()
		c, err := tls.Dial("tcp", s.MemcacheAddr().String(), cli)
		if err != nil {
			t.Fatalf("TLS handshake: %v", err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	dlockOK := func(token string) bool {
		t.Helper()
		c, err := tls.Dial("tcp", s.DLockAddr().String(), cli)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(probeTimeout))
		st, err := dlockPing(c, token)
		if err != nil {
			t.Fatal(err)
		}
		return st == pb.ResponseStatus_Ok
	}
	adminOK := func(token string) bool {
		t.Helper()
		conn, err := tls.Dial("tcp", s.AdminAddr().String(), cli)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		// An action with no effect: ending a session that does not exist
		// is 404 once the token passes, 401 before.
		fmt.Fprintf(conn, "POST /v1/sessions/999999/end HTTP/1.1\r\nHost: latch\r\nAuthorization: Bearer %s\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", token)
		line, _ := bufio.NewReader(conn).ReadString('\n')
		return !strings.Contains(line, " 401 ")
	}
	redisAuth := func(token string) bool {
		t.Helper()
		c, err := tls.Dial("tcp", s.RedisAddr().String(), cli)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(probeTimeout))
		fmt.Fprintf(c, "AUTH %s\r\n", token)
		line, _ := bufio.NewReader(c).ReadString('\n')
		return line == "+OK\r\n"
	}
	memcacheRefused := func() bool {
		t.Helper()
		err := try(s.MemcacheAddr(), cli, memcacheProbe)
		return err != nil
	}

	first := serial()
	var rotated string
	steps := []struct {
		name    string
		do      func()
		changed []string // in Changed, each
		kept    []string // in Kept, each
		restart []string // in Restart, each
		check   func() error
	}{
		{name: "nothing changed", do: func() {}, check: func() error {
			if got := serial(); got != first {
				return fmt.Errorf("serial %s, want %s", got, first)
			}
			return nil
		}},
		{name: "certificate rotated", do: func() { rotated = pki.Reissue(t, false).Leaf.SerialNumber.String() },
			changed: []string{"tls certificate"}, check: func() error {
				if got := serial(); got != rotated {
					return fmt.Errorf("serial %s, want the rotated %s", got, rotated)
				}
				return nil
			}},
		{name: "broken certificate kept", do: func() {
			write("server-cert-broken", "x")
			copyFile(t, filepath.Join(dir, "server-cert-broken"), pki.ServerCertFile)
		},
			kept: []string{"tls: ", "still serving"}, check: func() error {
				if got := serial(); got != rotated {
					return fmt.Errorf("serial %s, want the one in force %s", got, rotated)
				}
				return nil
			}},
		{name: "dlock tokens rotated", do: func() {
			pki.Reissue(t, false) // repairs the certificate
			write("dlock-tokens", "d2\nd3 read\n")
			write("redis-tokens", "r2\n")
		}, changed: []string{"tls certificate", "dlock-tokens-file: 2 tokens", "redis-tokens-file: 1 token"}, check: func() error {
			if dlockOK("d1") || !dlockOK("d2") {
				return fmt.Errorf("d1 served %v, d2 %v; want d2 only", dlockOK("d1"), dlockOK("d2"))
			}
			if redisAuth("r1") || !redisAuth("r2") {
				return fmt.Errorf("Redis AUTH: want r2 only")
			}
			return nil
		}},
		{name: "broken tokens file kept", do: func() { write("dlock-tokens", "d4 admin\n") },
			kept: []string{"dlock-tokens-file", "keeping the 2 tokens"}, check: func() error {
				if !dlockOK("d2") {
					return fmt.Errorf("d2 refused after a broken tokens file")
				}
				return nil
			}},
		{name: "admin token, allow-list, log level", do: func() {
			write("dlock-tokens", "d2\nd3 read\n")
			write("admin-token", "a2\n")
			next.Memcache.Allow = "10.0.0.0/8"
			next.Log.Level = "debug"
		}, changed: []string{"admin token", "memcache-allow 10.0.0.0/8", "log-level debug (was info)"}, check: func() error {
			if level.Level() != slog.LevelDebug {
				return fmt.Errorf("log level %v, want debug", level.Level())
			}
			if !memcacheRefused() {
				return fmt.Errorf("memcache served a client outside its new allow-list")
			}
			if adminOK("a1") || !adminOK("a2") {
				return fmt.Errorf("admin actions: want a2 only")
			}
			return nil
		}},
		{name: "empty admin token file kept", do: func() { write("admin-token", "\n") },
			kept: []string{"admin token", "is empty"}, check: func() error {
				if !adminOK("a2") {
					return fmt.Errorf("a2 refused after an empty admin token file")
				}
				return nil
			}},
		{name: "settings that need a restart", do: func() {
			write("admin-token", "a2\n")
			next.Memcache.Allow = ""
			next.Lock.MaxKeys = 7
			next.Log.Format = "json"
			next.TLS.Cert, next.TLS.Key = "", ""
		}, changed: []string{"memcache-allow all"}, restart: []string{"max-keys", "log-format", "tls-cert (TLS on or off)"}, check: func() error {
			if memcacheRefused() {
				return fmt.Errorf("memcache refused a client with no allow-list")
			}
			return nil
		}},
		{name: "access control is not lowered", do: func() {
			next = s.cfg
			next.DLock.TokensFile = ""
			next.Admin.TokenFile = ""
			next.TLS.ClientCA = pki.CAFile
		}, restart: []string{"dlock-tokens-file (tokens off)", "admin-token (admin actions open)", "tls-client-ca (client certificates on or off)"}, check: func() error {
			if dlockOK("") || !dlockOK("d2") {
				return fmt.Errorf("dlock served a request without a token")
			}
			if adminOK("") {
				return fmt.Errorf("an admin action without a token passed")
			}
			return nil
		}},
		{name: "configuration that does not load", do: func() {
			next = s.cfg
			loadErr = fmt.Errorf("config: bad.toml: unknown key")
		}, kept: []string{"every setting: config: bad.toml"}},
	}
	reloadLine := regexp.MustCompile(`msg="?reload`)
	for _, st := range steps {
		logged := len(logs.String())
		st.do()
		r := s.Reload()
		report := fmt.Sprintf("%+v", r)
		for _, want := range st.changed {
			if !strings.Contains(strings.Join(r.Changed, "\n"), want) {
				t.Errorf("%s: report %s, want %q changed", st.name, report, want)
			}
		}
		for _, want := range st.kept {
			if !strings.Contains(strings.Join(r.Kept, "\n"), want) {
				t.Errorf("%s: report %s, want %q kept", st.name, report, want)
			}
		}
		for _, want := range st.restart {
			if !strings.Contains(strings.Join(r.Restart, "\n"), want) {
				t.Errorf("%s: report %s, want %q needing a restart", st.name, report, want)
			}
		}
		if len(st.changed) == 0 && len(r.Changed) != 0 || len(st.kept) == 0 && len(r.Kept) != 0 || len(st.restart) == 0 && len(r.Restart) != 0 {
			t.Errorf("%s: report %s, want only what the step lists", st.name, report)
		}
		if r.OK != (len(st.kept) == 0 && len(st.restart) == 0) {
			t.Errorf("%s: OK %v in %s", st.name, r.OK, report)
		}
		if n := len(reloadLine.FindAllString(logs.String()[logged:], -1)); n != 1 {
			t.Errorf("%s: %d reload log lines, want 1:\n%s", st.name, n, logs.String()[logged:])
		}
		if st.check != nil {
			if err := st.check(); err != nil {
				t.Errorf("%s: %v", st.name, err)
			}
		}
		open.SetDeadline(time.Now().Add(probeTimeout))
		if err := memcacheProbe(open); err != nil {
			t.Fatalf("%s: the connection opened at the start: %v", st.name, err)
		}
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	f, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out, err := os.Create(to)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	if _, err := io.Copy(out, f); err != nil {
		t.Fatal(err)
	}
}

// syncBuffer is a log that the server writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
