package tlsconf_test

import (
	"bytes"
	"crypto/tls"
	"log/slog"
	"math/big"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latchd/latch/internal/tlsconf"
	"github.com/latchd/latch/internal/tlsconf/tlstest"
)

// clock is a settable time for Files' checks.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// served returns the serial number of the certificate a handshake with
// srv gets, or the handshake's error.
func served(t *testing.T, srv *tls.Config, cli *tls.Config) (*big.Int, error) {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", srv)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan error, 1)
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		defer nc.Close()
		done <- nc.(*tls.Conn).Handshake()
	}()
	cc, err := tls.Dial("tcp", ln.Addr().String(), cli)
	if err != nil {
		<-done
		return nil, err
	}
	defer cc.Close()
	if err := <-done; err != nil {
		return nil, err
	}
	return cc.ConnectionState().PeerCertificates[0].SerialNumber, nil
}

// TestFilesRotation: a certificate replaced on disk is served by the
// handshakes after the next check, not before it; a broken one is not
// served, the one in force stays, and the failure is logged once.
func TestFilesRotation(t *testing.T) {
	pki := tlstest.New(t)
	var logs bytes.Buffer
	var logMu sync.Mutex
	log := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		logMu.Lock()
		defer logMu.Unlock()
		return logs.Write(p)
	}), nil))
	f, err := tlsconf.NewFiles("tls", pki.ServerCertFile, pki.ServerKeyFile, pki.CAFile, log)
	if err != nil {
		t.Fatal(err)
	}
	clk := &clock{t: time.Now()}
	f.SetClock(clk.now)
	cli := pki.ClientConfig(true)
	cli.ServerName = "localhost"

	want := func(step string, serial *big.Int) {
		t.Helper()
		got, err := served(t, f.Server(), cli)
		if err != nil {
			t.Fatalf("%s: handshake: %v", step, err)
		}
		if got.Cmp(serial) != 0 {
			t.Fatalf("%s: served serial %v, want %v", step, got, serial)
		}
	}
	first := pki.Server.Leaf.SerialNumber
	want("start", first)

	second := pki.Reissue(t, false).Leaf.SerialNumber
	want("rotated, before the check is due", first)
	clk.add(tlsconf.CheckInterval)
	want("rotated, check due", second)
	if !strings.Contains(f.Describe(), "serial "+second.String()) {
		t.Errorf("Describe() = %q, want serial %v", f.Describe(), second)
	}

	// Broken files: a truncated certificate, a key of another certificate.
	good, err := os.ReadFile(pki.ServerCertFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name   string
		break_ func()
	}{
		{"truncated certificate", func() { writeFile(t, pki.ServerCertFile, good[:len(good)/2]) }},
		{"key of another certificate", func() {
			writeFile(t, pki.ServerCertFile, good)
			key, _ := os.ReadFile(pki.ClientKeyFile)
			writeFile(t, pki.ServerKeyFile, key)
		}},
		{"missing key", func() { os.Remove(pki.ServerKeyFile) }},
	} {
		tt.break_()
		if changed, err := f.Reload(); err == nil || changed {
			t.Errorf("%s: Reload() = %v, %v; want an error", tt.name, changed, err)
		}
		clk.add(tlsconf.CheckInterval)
		want(tt.name+", check due", second)
		want(tt.name+", again", second)
	}
	logMu.Lock()
	n := strings.Count(logs.String(), "do not load")
	logMu.Unlock()
	if n != 2 { // the missing key fails its stat: nothing to load
		t.Errorf("logged %d failed loads, want 2 (one per change of the files):\n%s", n, logs.String())
	}

	third := pki.Reissue(t, false).Leaf.SerialNumber
	if changed, err := f.Reload(); err != nil || !changed {
		t.Fatalf("Reload() of a good certificate = %v, %v; want true, nil", changed, err)
	}
	want("reloaded", third)
	if changed, err := f.Reload(); err != nil || changed {
		t.Errorf("Reload() of the same files = %v, %v; want false, nil", changed, err)
	}

	// The client side: a connection made from Client presents the
	// certificate in force.
	cc := f.Client()
	if cc.RootCAs == nil || len(cc.Certificates) != 1 || cc.Certificates[0].Leaf.SerialNumber.Cmp(third) != 0 {
		t.Errorf("Client() = %d certificates, roots %v; want the certificate in force and the CA", len(cc.Certificates), cc.RootCAs != nil)
	}
}

// TestFilesSetFiles: moving to other files that do not load keeps the
// files and the certificate in force.
func TestFilesSetFiles(t *testing.T) {
	pki := tlstest.New(t)
	f, err := tlsconf.NewFiles("tls", pki.ServerCertFile, pki.ServerKeyFile, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	before := f.Describe()
	if err := f.SetFiles(pki.ServerCertFile, pki.ClientKeyFile, ""); err == nil {
		t.Fatal("SetFiles(a key of another certificate) = nil")
	}
	if f.Describe() != before {
		t.Errorf("after a failed SetFiles: %s, want %s", f.Describe(), before)
	}
	if err := f.SetFiles(pki.PeerCertFile, pki.PeerKeyFile, pki.CAFile); err != nil {
		t.Fatal(err)
	}
	// The CA file came with the new files: a client must now present a
	// certificate.
	if _, err := served(t, f.Server(), pki.ClientConfig(false)); err == nil {
		t.Error("a handshake without a client certificate passed after SetFiles with a CA")
	}
	if _, err := served(t, f.Server(), pki.ClientConfig(true)); err != nil {
		t.Errorf("a handshake with a client certificate: %v", err)
	}
	if !strings.Contains(f.Describe(), "latch-test-peer") {
		t.Errorf("after SetFiles: %s, want the peer certificate", f.Describe())
	}
}

type writerFunc func([]byte) (int, error)

func (w writerFunc) Write(p []byte) (int, error) { return w(p) }

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestFilesCheckRate: handshakes under load look at the files at most once
// per CheckInterval, however many there are, and concurrent handshakes
// during rotations and reloads all succeed.
func TestFilesCheckRate(t *testing.T) {
	pki := tlstest.New(t)
	f, err := tlsconf.NewFiles("tls", pki.ServerCertFile, pki.ServerKeyFile, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	clk := &clock{t: time.Now()}
	f.SetClock(clk.now)
	var stats atomic.Int64
	defer tlsconf.CountStats(&stats)()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", f.Server())
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer nc.Close()
				nc.(*tls.Conn).Handshake()
			}()
		}
	}()
	handshakes := func(n int) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for range n {
			wg.Go(func() {
				c, err := tls.Dial("tcp", ln.Addr().String(), pki.ClientConfig(false))
				if err != nil {
					errs <- err
					return
				}
				c.Close()
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("handshake: %v", err)
		}
	}
	handshakes(50)
	if n := stats.Load(); n != 0 {
		t.Errorf("%d stats for 50 handshakes before a check was due, want 0", n)
	}
	for i := range 3 {
		clk.add(tlsconf.CheckInterval)
		pki.Reissue(t, false)
		if i == 1 {
			f.Reload()
		}
		handshakes(50)
	}
	// Three checks of two files, and the loads' own stats: a reload
	// (SIGHUP's) and the loads of the changed files stat them once each.
	if n := stats.Load(); n > 3*2+3*2 {
		t.Errorf("%d stats for 150 handshakes over 3 check intervals, want at most %d", n, 3*2+3*2)
	}
}
