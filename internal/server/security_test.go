package server

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/latchd/latch"
	pb "github.com/latchd/latch/dlockpb"
	"github.com/latchd/latch/internal/frame"
	"github.com/latchd/latch/internal/tlsconf/tlstest"
)

// probeTimeout bounds one probe, so that a server that neither answers nor
// closes fails the test instead of hanging it.
const probeTimeout = 10 * time.Second

// A probe makes one request of a listener's protocol over nc and reports
// whether the right answer came back.
type probe func(nc net.Conn) error

// memcacheProbe asks for the version.
func memcacheProbe(nc net.Conn) error {
	if _, err := io.WriteString(nc, "version\r\n"); err != nil {
		return err
	}
	line, err := bufio.NewReader(nc).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "VERSION ") {
		return fmt.Errorf("answer %q, want VERSION", line)
	}
	return nil
}

// dlockProbe pings in version 3.
func dlockProbe(nc net.Conn) error {
	b, err := proto.Marshal(&pb.Request{Version: 3, Id: 1, Type: pb.RequestType_Ping})
	if err != nil {
		return err
	}
	if _, err := nc.Write(frame.Append(nil, b)); err != nil {
		return err
	}
	body, err := frame.NewReader(bufio.NewReader(nc), 0).Read()
	if err != nil {
		return err
	}
	resp := new(pb.Response)
	if err := proto.Unmarshal(body, resp); err != nil {
		return err
	}
	if resp.GetStatus() != pb.ResponseStatus_Ok {
		return fmt.Errorf("answer %v, want Ok", resp)
	}
	return nil
}

// adminProbe asks for /healthz.
func adminProbe(nc net.Conn) error {
	if _, err := io.WriteString(nc, "GET /healthz HTTP/1.1\r\nHost: latch\r\nConnection: close\r\n\r\n"); err != nil {
		return err
	}
	resp, err := http.ReadResponse(bufio.NewReader(nc), nil)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("answer %s, want 200 OK", resp.Status)
	}
	return nil
}

// listeners are the server's three listeners and their probes.
var listeners = []struct {
	name  string
	addr  func(*Server) net.Addr
	probe probe
}{
	{"memcache", (*Server).MemcacheAddr, memcacheProbe},
	{"dlock", (*Server).DLockAddr, dlockProbe},
	{"admin", (*Server).AdminAddr, adminProbe},
}

// try dials addr, plaintext when tlsCfg is nil, and runs p.
func try(addr net.Addr, tlsCfg *tls.Config, p probe) error {
	d := &net.Dialer{Timeout: probeTimeout}
	var nc net.Conn
	var err error
	if tlsCfg == nil {
		nc, err = d.Dial("tcp", addr.String())
	} else {
		nc, err = tls.DialWithDialer(d, "tcp", addr.String(), tlsCfg)
	}
	if err != nil {
		return err
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(probeTimeout))
	err = p(nc)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("no answer and no close in %v: %w", probeTimeout, err)
	}
	return err
}

// TestTLS runs every listener with TLS, with and without client
// certificates, and tries plaintext and TLS clients on each.
func TestTLS(t *testing.T) {
	pki := tlstest.New(t)
	type client struct {
		name string
		cfg  *tls.Config // nil: plaintext
	}
	plain := client{"plaintext", nil}
	anon := client{"TLS without a client certificate", pki.ClientConfig(false)}
	withCert := client{"TLS with a client certificate", pki.ClientConfig(true)}
	untrusted := client{"TLS not trusting the server's CA", &tls.Config{MinVersion: tls.VersionTLS12}}
	tls11 := client{"TLS 1.1", &tls.Config{RootCAs: pki.Pool(), MaxVersion: tls.VersionTLS11}}

	tests := []struct {
		name     string
		clientCA bool
		ok, fail []client
	}{
		{"server certificate", false, []client{anon, withCert}, []client{plain, untrusted, tls11}},
		{"client certificates required", true, []client{withCert}, []client{plain, anon, untrusted}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.TLS.Cert, cfg.TLS.Key = pki.ServerCertFile, pki.ServerKeyFile
			if tt.clientCA {
				cfg.TLS.ClientCA = pki.CAFile
			}
			s := newServer(t, cfg)
			for _, l := range listeners {
				for _, c := range tt.ok {
					if err := try(l.addr(s), c.cfg, l.probe); err != nil {
						t.Errorf("%s, %s: %v, want an answer", l.name, c.name, err)
					}
				}
				for _, c := range tt.fail {
					if err := try(l.addr(s), c.cfg, l.probe); err == nil {
						t.Errorf("%s, %s: answered, want a failure", l.name, c.name)
					}
				}
			}
		})
	}
}

// TestPlaintextByDefault: without a certificate, every listener speaks
// plaintext and refuses a TLS handshake.
func TestPlaintextByDefault(t *testing.T) {
	pki := tlstest.New(t)
	s := newServer(t, testConfig())
	for _, l := range listeners {
		if err := try(l.addr(s), nil, l.probe); err != nil {
			t.Errorf("%s, plaintext: %v", l.name, err)
		}
		if err := try(l.addr(s), pki.ClientConfig(false), l.probe); err == nil {
			t.Errorf("%s, TLS: answered, want a failure", l.name)
		}
	}
}

func TestTLSBadFiles(t *testing.T) {
	pki := tlstest.New(t)
	missing := filepath.Join(t.TempDir(), "missing.pem")
	notPEM := filepath.Join(t.TempDir(), "not.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, cert, key, ca string }{
		{"missing certificate", missing, pki.ServerKeyFile, ""},
		{"key of another certificate", pki.ServerCertFile, pki.ClientKeyFile, ""},
		{"missing client CA", pki.ServerCertFile, pki.ServerKeyFile, missing},
		{"client CA not PEM", pki.ServerCertFile, pki.ServerKeyFile, notPEM},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.TLS.Cert, cfg.TLS.Key, cfg.TLS.ClientCA = tt.cert, tt.key, tt.ca
			newFails(t, cfg, "tls")
		})
	}
}

// TestMemcacheAllow: a memcached client from outside memcache-allow is
// closed at once, without an answer; one from inside is served.
func TestMemcacheAllow(t *testing.T) {
	tests := []struct {
		allow string
		ok    bool
	}{
		{"", true},
		{"127.0.0.0/8", true},
		{"10.0.0.0/8, 127.0.0.1", true},
		{"::1/128,127.0.0.1/32", true},
		{"10.0.0.0/8", false},
		{"10.0.0.0/8,192.168.0.0/16,::1", false},
	}
	for _, tt := range tests {
		t.Run(tt.allow, func(t *testing.T) {
			cfg := testConfig()
			cfg.Memcache.Allow = tt.allow
			s := newServer(t, cfg)
			err := try(s.MemcacheAddr(), nil, memcacheProbe)
			if tt.ok && err != nil {
				t.Errorf("memcache-allow %q, client 127.0.0.1: %v, want an answer", tt.allow, err)
			}
			if !tt.ok {
				if err == nil {
					t.Errorf("memcache-allow %q, client 127.0.0.1: answered, want the connection closed", tt.allow)
				} else if !errors.Is(err, io.EOF) && !isReset(err) {
					t.Errorf("memcache-allow %q, client 127.0.0.1: %v, want the connection closed", tt.allow, err)
				}
				// The other listeners do not filter.
				if err := try(s.DLockAddr(), nil, dlockProbe); err != nil {
					t.Errorf("dlock with memcache-allow %q: %v", tt.allow, err)
				}
			}
		})
	}
}

// isReset reports whether err is a connection reset, which a close with
// unread input can cause.
func isReset(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "connection reset") || strings.Contains(err.Error(), "broken pipe"))
}

// TestMemcacheAllowWithTLS: the allow-list applies before the handshake.
func TestMemcacheAllowWithTLS(t *testing.T) {
	pki := tlstest.New(t)
	for _, tt := range []struct {
		allow string
		ok    bool
	}{{"127.0.0.0/8", true}, {"10.0.0.0/8", false}} {
		cfg := testConfig()
		cfg.TLS.Cert, cfg.TLS.Key = pki.ServerCertFile, pki.ServerKeyFile
		cfg.Memcache.Allow = tt.allow
		s := newServer(t, cfg)
		if err := try(s.MemcacheAddr(), pki.ClientConfig(false), memcacheProbe); (err == nil) != tt.ok {
			t.Errorf("memcache-allow %q with TLS: error %v, want success %v", tt.allow, err, tt.ok)
		}
	}
}

// TestAdminTokenFile: the admin token read from admin-token-file guards
// the admin actions, here over HTTPS; reading needs no token.
func TestAdminTokenFile(t *testing.T) {
	pki := tlstest.New(t)
	tokenFile := filepath.Join(t.TempDir(), "admin-token")
	if err := os.WriteFile(tokenFile, []byte("  0p3n-s3same\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig()
	cfg.Admin.TokenFile = tokenFile
	cfg.TLS.Cert, cfg.TLS.Key = pki.ServerCertFile, pki.ServerKeyFile
	s := newServer(t, cfg)
	sess := openSession(t, s.Service())
	if _, err := sess.Acquire(t.Context(), latch.LockRequest{Keys: []string{"stuck"}}); err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: pki.ClientConfig(false)}, Timeout: probeTimeout}
	defer hc.CloseIdleConnections()
	base := "https://" + s.AdminAddr().String()

	do := func(method, path, token string) int {
		t.Helper()
		var body io.Reader
		if method == http.MethodPost {
			body = strings.NewReader(url.Values{"reason": {"test"}}.Encode())
		}
		req, err := http.NewRequestWithContext(t.Context(), method, base+path, body)
		if err != nil {
			t.Fatal(err)
		}
		if body != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	tests := []struct {
		name, method, path, token string
		want                      int
	}{
		{"read without a token", http.MethodGet, "/v1/locks/stuck", "", http.StatusOK},
		{"release without a token", http.MethodPost, "/v1/locks/stuck/release", "", http.StatusUnauthorized},
		{"release with a wrong token", http.MethodPost, "/v1/locks/stuck/release", "0p3n", http.StatusUnauthorized},
		{"release with the token", http.MethodPost, "/v1/locks/stuck/release", "0p3n-s3same", http.StatusOK},
	}
	for _, tt := range tests {
		if got := do(tt.method, tt.path, tt.token); got != tt.want {
			t.Errorf("%s: status %d, want %d", tt.name, got, tt.want)
		}
	}
	if info, ok := s.Service().Lock("stuck"); ok && len(info.Holders) > 0 {
		t.Errorf("stuck after the release: %+v, want free", info)
	}
}
