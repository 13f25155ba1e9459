//go:build unix

package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/latchd/latch/client"
	"github.com/latchd/latch/internal/admin"
	"github.com/latchd/latch/internal/tlsconf/tlstest"
)

// reloadSettings are the settings of TestReload's TOML file, which a
// step changes before it sends SIGHUP.
type reloadSettings struct {
	level, dlockAllow, memcacheAllow string
}

// TestReload runs "latch serve" with TLS on its listeners, peer TLS on
// its Raft port (a one-node cluster), dlock tokens and an admin token
// file, and reloads it, mostly by SIGHUP, step by step: a rotated
// certificate is what the next handshake gets, on both; a broken one is
// refused with a log line and the one in force stays, and a good one
// written over it is picked up by a handshake without a signal; token
// files, the admin token, the allow-lists and the log level follow their
// files; SIGHUP, SIGUSR1 and SIGPIPE never end the process; and a dlock
// client that holds a lock from the start keeps it, on the connection it
// opened, to the end.
func TestReload(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin, err := builtLatch()
	if err != nil {
		t.Fatal(err)
	}
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
	dlockTokens := write("dlock-tokens", "keep\nold\n")
	adminToken := write("admin-token", "a1\n")
	settings := func(s reloadSettings) {
		t.Helper()
		write("latch.toml", fmt.Sprintf(`[log]
level = %q
format = "json"

[dlock]
tokens-file = %q
allow = %q

[memcache]
allow = %q

[admin]
token-file = %q
`, s.level, dlockTokens, s.dlockAllow, s.memcacheAllow, adminToken))
	}
	settings(reloadSettings{level: "info"})

	ports := freePorts(t, 4)
	dlockAddr, mcAddr, adminAddr, raftAddr := ports[0], ports[1], ports[2], ports[3]
	logPath := filepath.Join(dir, "latch.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd := exec.Command(bin, "serve", "--config", filepath.Join(dir, "latch.toml"),
		"--dlock-addr", dlockAddr, "--memcache-addr", mcAddr, "--admin-addr", adminAddr,
		"--redis-addr=", "--zookeeper-addr=",
		"--tls-cert", pki.ServerCertFile, "--tls-key", pki.ServerKeyFile,
		"--data-dir", filepath.Join(dir, "data"), "--node-id", "n1", "--raft-addr", raftAddr,
		"--initial-cluster", "n1="+raftAddr, "--election-timeout", "200ms",
		"--peer-tls-cert", pki.PeerCertFile, "--peer-tls-key", pki.PeerKeyFile, "--peer-tls-ca", pki.CAFile)
	cmd.Env = cleanEnv()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{}) // closed once exitErr is set
	var exitErr error
	go func() {
		exitErr = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("latch serve's log:\n%s", b)
		}
	})

	// The log, read on from where the last wait stopped.
	var logOff int64
	waitLog := func(what string, match func(logEntry) bool) logEntry {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for ended := false; ; {
			if ended {
				t.Fatalf("latch serve exited (%v) before logging %s", exitErr, what)
			}
			// Before reading: a line written before the exit is read
			// once more after it.
			select {
			case <-exited:
				ended = true
			default:
			}
			f, err := os.Open(logPath)
			if err != nil {
				t.Fatal(err)
			}
			f.Seek(logOff, io.SeekStart)
			br := bufio.NewReader(f)
			for {
				line, err := br.ReadString('\n')
				if err != nil {
					break // a partial line is read again next time
				}
				logOff += int64(len(line))
				var e logEntry
				if json.Unmarshal([]byte(line), &e) != nil {
					continue
				}
				e.raw = line
				if match(e) {
					f.Close()
					return e
				}
			}
			f.Close()
			if !ended {
				time.Sleep(20 * time.Millisecond)
			}
			if time.Now().After(deadline) {
				t.Fatalf("latch serve did not log %s in 20 s", what)
			}
		}
	}
	reloaded := func(what string, check func(logEntry) bool) logEntry {
		t.Helper()
		return waitLog(what, func(e logEntry) bool {
			return strings.HasPrefix(e.Msg, "reload") && check(e)
		})
	}
	signal := func(sig syscall.Signal) {
		t.Helper()
		if err := cmd.Process.Signal(sig); err != nil {
			t.Fatalf("%v: %v", sig, err)
		}
	}

	// Clients: TLS trusting the test CA; the admin API over HTTPS.
	cliTLS := pki.ClientConfig(false)
	httpc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: cliTLS}}
	adminURL := "https://" + adminAddr
	ready := false
	for range 400 {
		if resp, err := httpc.Get(adminURL + "/readyz"); err == nil {
			resp.Body.Close()
			if ready = resp.StatusCode == http.StatusOK; ready {
				break
			}
		}
		time.Sleep(25 * time.Millisecond)
	}
	if !ready {
		t.Fatal("latch serve not ready in 10 s")
	}
	serial := func(addr string, cfg *tls.Config) string {
		t.Helper()
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
		if err != nil {
			t.Fatalf("TLS handshake with %s: %v", addr, err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	peerTLS := pki.ClientConfig(true) // the Raft port wants a certificate of the CA
	listenerSerial := func() string { return serial(dlockAddr, cliTLS) }
	peerSerial := func() string { return serial(raftAddr, peerTLS) }
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dial := func(token string) (*client.Client, error) {
		dctx, dcancel := context.WithTimeout(ctx, 5*time.Second)
		defer dcancel()
		return client.Dial(dctx, dlockAddr, client.TLS(cliTLS), client.AccessToken(token))
	}

	// The lock held across every reload, on one connection.
	holder, err := dial("keep")
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	held, err := holder.Lock(ctx, []string{"held"})
	if err != nil {
		t.Fatal(err)
	}
	holderOK := func(step string) {
		t.Helper()
		select {
		case <-held.Done():
			t.Fatalf("%s: the lock held from the start is lost: %v", step, holder.Err())
		default:
		}
		l, err := holder.TryLock(ctx, []string{"probe"})
		if err != nil {
			t.Fatalf("%s: a request on the holder's connection: %v", step, err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
	}

	t.Run("certificates rotated", func(t *testing.T) {
		first, firstPeer := listenerSerial(), peerSerial()
		if first != pki.Server.Leaf.SerialNumber.String() || firstPeer != pki.Peer.Leaf.SerialNumber.String() {
			t.Fatalf("serials at the start %s and %s", first, firstPeer)
		}
		rotated := pki.Reissue(t, false).Leaf.SerialNumber.String()
		rotatedPeer := pki.Reissue(t, true).Leaf.SerialNumber.String()
		signal(syscall.SIGHUP)
		e := reloaded("the certificates' reload", func(e logEntry) bool { return e.Changed != "" || e.Kept != "" })
		if !strings.Contains(e.Changed, "tls certificate") || !strings.Contains(e.Changed, "peer-tls certificate") || e.Kept != "" {
			t.Errorf("reload logged %s, want both certificates changed", e.raw)
		}
		if got := listenerSerial(); got != rotated {
			t.Errorf("listener serves serial %s, want the rotated %s", got, rotated)
		}
		if got := peerSerial(); got != rotatedPeer {
			t.Errorf("Raft port serves serial %s, want the rotated %s", got, rotatedPeer)
		}
		holderOK("certificates rotated")
	})

	t.Run("broken certificate refused, then picked up per handshake", func(t *testing.T) {
		inForce := listenerSerial()
		write("broken.pem", "not a certificate\n")
		if err := os.Rename(filepath.Join(dir, "broken.pem"), pki.ServerCertFile); err != nil {
			t.Fatal(err)
		}
		signal(syscall.SIGHUP)
		e := reloaded("the refused certificate", func(e logEntry) bool { return e.Kept != "" })
		if e.Level != "WARN" || !strings.Contains(e.Kept, "tls: ") || !strings.Contains(e.Kept, "still serving") {
			t.Errorf("reload logged %s, want the certificate kept, with why", e.raw)
		}
		if got := listenerSerial(); got != inForce {
			t.Errorf("after a broken certificate: serial %s, want the one in force %s", got, inForce)
		}
		// A good certificate over it: a handshake picks it up, no signal.
		fixed := pki.Reissue(t, false).Leaf.SerialNumber.String()
		deadline := time.Now().Add(10 * time.Second)
		for listenerSerial() != fixed {
			if time.Now().After(deadline) {
				t.Fatalf("the certificate written over the broken one was not served in 10 s")
			}
			time.Sleep(100 * time.Millisecond)
		}
		waitLog("the handshake's reload", func(e logEntry) bool {
			return e.Msg == "tls: certificate files changed; new handshakes use them"
		})
		holderOK("broken certificate")
	})

	t.Run("token files", func(t *testing.T) {
		write("dlock-tokens", "keep\nnew\n")
		signal(syscall.SIGHUP)
		e := reloaded("the tokens' reload", func(e logEntry) bool { return e.Changed != "" || e.Kept != "" })
		if !strings.Contains(e.Changed, "dlock-tokens-file: 2 tokens") {
			t.Errorf("reload logged %s, want the dlock tokens changed", e.raw)
		}
		if c, err := dial("old"); err == nil {
			c.Close()
			t.Error("a client with the removed token was served")
		}
		c, err := dial("new")
		if err != nil {
			t.Fatalf("a client with the new token: %v", err)
		}
		c.Close()

		write("dlock-tokens", "new admin\n") // no such rights
		signal(syscall.SIGHUP)
		e = reloaded("the refused tokens", func(e logEntry) bool { return e.Kept != "" })
		if !strings.Contains(e.Kept, "dlock-tokens-file") || !strings.Contains(e.Kept, "keeping the 2 tokens") {
			t.Errorf("reload logged %s, want the tokens kept, with why", e.raw)
		}
		if c, err := dial("new"); err != nil {
			t.Errorf("after a broken tokens file, the token in force: %v", err)
		} else {
			c.Close()
		}
		write("dlock-tokens", "keep\nnew\n")
		holderOK("token files")
	})

	t.Run("log level and allow-lists", func(t *testing.T) {
		settings(reloadSettings{level: "debug", dlockAllow: "10.0.0.0/8", memcacheAllow: "10.0.0.0/8"})
		signal(syscall.SIGHUP)
		e := reloaded("the settings' reload", func(e logEntry) bool { return e.Changed != "" || e.Kept != "" })
		for _, want := range []string{"log-level debug (was info)", "dlock-allow 10.0.0.0/8", "memcache-allow 10.0.0.0/8"} {
			if !strings.Contains(e.Changed, want) {
				t.Errorf("reload logged %s, want %q", e.raw, want)
			}
		}
		if c, err := dial("new"); err == nil {
			c.Close()
			t.Error("a dlock client from outside the new allow-list was served")
		}
		holderOK("allow-list") // opened before: untouched
		signal(syscall.SIGHUP)
		waitLog("a debug line", func(e logEntry) bool { return e.Level == "DEBUG" })
		reloaded("the reload with nothing changed", func(e logEntry) bool { return e.Msg == "reload: nothing changed" })

		settings(reloadSettings{level: "info"})
		signal(syscall.SIGHUP)
		reloaded("the settings back", func(e logEntry) bool { return strings.Contains(e.Changed, "dlock-allow all") })
		c, err := dial("new")
		if err != nil {
			t.Fatalf("with no allow-list: %v", err)
		}
		c.Close()
	})

	t.Run("admin token and POST /v1/reload", func(t *testing.T) {
		post := func(token string) (int, admin.Reloaded) {
			t.Helper()
			req, _ := http.NewRequest(http.MethodPost, adminURL+"/v1/reload", nil)
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := httpc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var r admin.Reloaded
			json.NewDecoder(resp.Body).Decode(&r)
			return resp.StatusCode, r
		}
		write("admin-token", "a2\n")
		if code, _ := post("a2"); code != http.StatusUnauthorized {
			t.Errorf("POST /v1/reload with the token not yet read: %d, want 401", code)
		}
		code, r := post("a1")
		if code != http.StatusOK || !r.OK || len(r.Changed) != 1 || r.Changed[0] != "admin token" {
			t.Errorf("POST /v1/reload with the token in force: %d %+v, want the admin token changed", code, r)
		}
		reloaded("the admin token's reload", func(e logEntry) bool { return e.Changed == "admin token" })
		if code, _ := post("a1"); code != http.StatusUnauthorized {
			t.Errorf("the old admin token: %d, want 401", code)
		}
		if code, r := post("a2"); code != http.StatusOK || !r.OK {
			t.Errorf("the new admin token: %d %+v", code, r)
		}
	})

	t.Run("signals never end the node", func(t *testing.T) {
		for _, sig := range []syscall.Signal{syscall.SIGUSR1, syscall.SIGPIPE, syscall.SIGHUP, syscall.SIGUSR1, syscall.SIGPIPE, syscall.SIGHUP} {
			signal(sig)
		}
		waitLog("SIGUSR1's line", func(e logEntry) bool { return e.Msg == "SIGUSR1 ignored" })
		time.Sleep(200 * time.Millisecond)
		select {
		case <-exited:
			t.Fatalf("latch serve exited: %v", exitErr)
		default:
		}
		resp, err := httpc.Get(adminURL + "/healthz")
		if err != nil {
			t.Fatalf("healthz after the signals: %v", err)
		}
		resp.Body.Close()
		holderOK("signals")
	})

	// The lock taken at the start is still the holder's, and it unlocks.
	ac := admin.NewClient(adminURL)
	ac.HTTP = httpc
	if info, err := ac.Lock(ctx, "held"); err != nil || len(info.Holders) != 1 || info.Holders[0].Session != uint64(holder.SessionID()) {
		t.Errorf("held: %+v, %v; want held by the holder's session %d", info, err, holder.SessionID())
	}
	if err := held.Unlock(ctx); err != nil {
		t.Errorf("unlocking the lock held from the start: %v", err)
	}
	holder.Close()
	signal(syscall.SIGTERM)
	waitLog("shut down cleanly", func(e logEntry) bool { return e.Msg == "shut down cleanly" })
	select {
	case <-exited:
		if exitErr != nil {
			t.Errorf("latch serve exited with %v, want 0", exitErr)
		}
	case <-time.After(20 * time.Second):
		t.Error("latch serve did not exit in 20 s after its last line")
	}
}

// logEntry is one line of latch serve's JSON log, with the fields of the
// reload's line.
type logEntry struct {
	Level   string `json:"level"`
	Msg     string `json:"msg"`
	Changed string `json:"changed"`
	Kept    string `json:"kept"`
	Restart string `json:"restart_needed"`
	raw     string
}

// TestServeClosedStderr: latch serve whose standard error is a pipe whose
// reader went away (a log collector gone) goes on serving when it logs:
// the write's SIGPIPE does not end it. SIGHUP makes it log.
func TestServeClosedStderr(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin, err := builtLatch()
	if err != nil {
		t.Fatal(err)
	}
	ports := freePorts(t, 1)
	cmd := exec.Command(bin, "serve", "--memcache-addr=", "--dlock-addr=", "--redis-addr=", "--zookeeper-addr=", "--admin-addr", ports[0])
	cmd.Env = cleanEnv()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	sc := bufio.NewScanner(stderr)
	for sc.Scan() && !strings.Contains(sc.Text(), "msg=serving") {
	}
	stderr.Close() // the reader goes away
	for range 3 {
		cmd.Process.Signal(syscall.SIGHUP) // each reload logs a line
		time.Sleep(50 * time.Millisecond)
	}
	resp, err := http.Get("http://" + ports[0] + "/healthz")
	if err != nil {
		t.Fatalf("latch serve with its standard error closed, after logging: %v", err)
	}
	resp.Body.Close()
	cmd.Process.Signal(syscall.SIGTERM)
	err = cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		t.Fatalf("latch serve ended by %v, want an exit", ws.Signal())
	}
	_ = err // the shutdown's log lines fail to be written; the exit code may say so
}
