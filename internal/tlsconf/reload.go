package tlsconf

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// CheckInterval is how often, at most, a Files looks at its files during
// handshakes: a server under load stats them once a second, not once a
// connection.
const CheckInterval = time.Second

// Files is a TLS configuration kept in step with its PEM files: a
// certificate with its key, and optionally a CA file (the CA that client
// certificates must chain to on the server side, and the roots that the
// server's certificate must chain to on the client side, as between
// cluster nodes).
//
// The files are read when the Files is made, again by Reload (SIGHUP),
// and during handshakes: at most once per CheckInterval a handshake
// compares the files' modification times and sizes with those of the last
// load, and reads them again when they differ. A load that fails (a file
// missing, half written or broken, a key that does not match the
// certificate) keeps the configuration in force, so that a bad rotation
// never takes TLS down; the failure is logged once per change of the
// files, and Reload returns it.
//
// Connections already open keep the certificate they were made with. A
// Files is safe for concurrent use.
type Files struct {
	name          string // in logs: "tls", "peer-tls"
	log           *slog.Logger
	now           func() time.Time
	mu            sync.Mutex // held while loading
	cert, key, ca string     // the files; under mu
	cur           atomic.Pointer[loaded]
	nextCheck     atomic.Int64 // unix nanoseconds; 0: check now
	failedStamps  [3]stamp     // of the last failed load, logged; under mu
	serverBase    *tls.Config
	serverOnce    sync.Once
}

// loaded is one load of the files.
type loaded struct {
	stamps [3]stamp // cert, key, ca
	cert   *tls.Certificate
	pool   *x509.CertPool // nil without a CA file
	server *tls.Config
	client *tls.Config // ServerName empty: the host dialed
	id     string      // the certificate, for logs (Describe)
	caSum  [32]byte    // the CA file's SHA-256
}

// stamp is what a check compares of a file.
type stamp struct{ mod, size int64 }

// NewFiles reads certFile, keyFile and, when not empty, caFile, and
// returns a Files over them; name names it in logs ("tls"), log receives
// the reloads made during handshakes (nil: discarded).
func NewFiles(name, certFile, keyFile, caFile string, log *slog.Logger) (*Files, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	f := &Files{name: name, log: log, now: time.Now}
	if err := f.SetFiles(certFile, keyFile, caFile); err != nil {
		return nil, err
	}
	return f, nil
}

// SetFiles reads the files at new paths and, when they load, serves them
// from now on; otherwise it returns why and keeps the files and the
// configuration in force.
func (f *Files) SetFiles(certFile, keyFile, caFile string) error {
	if certFile == "" || keyFile == "" {
		return errors.New("tls: a certificate needs both its file and its key's")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	l, err := load(certFile, keyFile, caFile)
	if err != nil {
		return err
	}
	f.cert, f.key, f.ca = certFile, keyFile, caFile
	f.cur.Store(l)
	f.nextCheck.Store(f.now().Add(CheckInterval).UnixNano())
	return nil
}

// Reload reads the files again, whatever their times say. It reports
// whether the certificate or the CA changed; on error the configuration
// in force stays.
func (f *Files) Reload() (changed bool, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reloadLocked()
}

func (f *Files) reloadLocked() (bool, error) {
	old := f.cur.Load()
	l, err := load(f.cert, f.key, f.ca)
	if err != nil {
		return false, err
	}
	f.cur.Store(l)
	f.nextCheck.Store(f.now().Add(CheckInterval).UnixNano())
	return l.id != old.id || l.caSum != old.caSum, nil
}

// Describe names the certificate in force: its subject, serial number
// and expiry, and its SHA-256 fingerprint's first bytes.
func (f *Files) Describe() string { return f.cur.Load().id }

// current returns the configuration in force, after reading the files
// again if a check is due and finds them changed.
func (f *Files) current() *loaded {
	l := f.cur.Load()
	next := f.nextCheck.Load()
	now := f.now()
	if now.UnixNano() < next || !f.nextCheck.CompareAndSwap(next, now.Add(CheckInterval).UnixNano()) {
		return l // not due, or another handshake checks
	}
	stamps, err := statAll(f.paths())
	if err != nil || stamps == l.stamps {
		return l
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if l = f.cur.Load(); stamps == l.stamps || stamps == f.failedStamps {
		return l
	}
	old := l.id
	if _, err := f.reloadLocked(); err != nil {
		f.failedStamps = stamps
		f.log.Warn(f.name+": certificate files changed but do not load; keeping the certificate in force",
			"err", err, "in_force", old)
		return l
	}
	l = f.cur.Load()
	f.log.Info(f.name+": certificate files changed; new handshakes use them", "old", old, "new", l.id)
	return l
}

// paths returns the files, for a check outside mu.
func (f *Files) paths() [3]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return [3]string{f.cert, f.key, f.ca}
}

// Server returns the configuration of a TLS server presenting the
// certificate in force at each handshake, and requiring a client
// certificate that chains to the CA when there is a CA file. Every call
// returns the same *tls.Config; it must not be changed.
func (f *Files) Server() *tls.Config {
	f.serverOnce.Do(func() {
		l := f.cur.Load()
		f.serverBase = &tls.Config{
			MinVersion: MinVersion,
			// Only the configuration GetConfigForClient returns serves a
			// handshake; GetCertificate and ClientAuth are here for code
			// that inspects the configuration (http.Server.ServeTLS,
			// raftrep.ListenTLS).
			GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
				return f.current().server, nil
			},
			GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
				return f.current().cert, nil
			},
			ClientAuth: l.server.ClientAuth,
		}
	})
	return f.serverBase
}

// Client returns the configuration of a TLS client presenting the
// certificate in force, trusting the CA file's certificates (the system's
// roots without one), for one new connection; ServerName is empty (the
// host dialed). Callers may change the copy they get.
func (f *Files) Client() *tls.Config { return f.current().client.Clone() }

// load reads the files into a new configuration.
func load(certFile, keyFile, caFile string) (*loaded, error) {
	// Stamp first: a file changed while it is read then differs from its
	// stamp at the next check, and is read again.
	stamps, err := statAll([3]string{certFile, keyFile, caFile})
	if err != nil {
		return nil, err
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("tls: loading %s and %s: %w", certFile, keyFile, err)
	}
	if cert.Leaf == nil { // x509keypairleaf=0
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, fmt.Errorf("tls: %s: %w", certFile, err)
		}
	}
	l := &loaded{stamps: stamps, cert: &cert, id: describe(cert.Leaf)}
	l.server = &tls.Config{MinVersion: MinVersion, Certificates: []tls.Certificate{cert}}
	l.client = &tls.Config{MinVersion: MinVersion, Certificates: []tls.Certificate{cert}}
	if caFile != "" {
		data, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("tls: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(data) {
			return nil, fmt.Errorf("tls: %s holds no PEM certificate", caFile)
		}
		l.pool, l.caSum = pool, sha256.Sum256(data)
		l.server.ClientCAs, l.server.ClientAuth = pool, tls.RequireAndVerifyClientCert
		l.client.RootCAs = pool
	}
	return l, nil
}

// describe names a certificate in logs.
func describe(c *x509.Certificate) string {
	sum := sha256.Sum256(c.Raw)
	return fmt.Sprintf("%q serial %s expires %s sha256 %s", c.Subject.CommonName, c.SerialNumber,
		c.NotAfter.UTC().Format(time.RFC3339), hex.EncodeToString(sum[:8]))
}

// stat is os.Stat; tests count its calls.
var stat = os.Stat

// statAll stamps the files; an empty path gets the zero stamp.
func statAll(paths [3]string) ([3]stamp, error) {
	var st [3]stamp
	for i, p := range paths {
		if p == "" {
			continue
		}
		fi, err := stat(p)
		if err != nil {
			return st, fmt.Errorf("tls: %w", err)
		}
		st[i] = stamp{mod: fi.ModTime().UnixNano(), size: fi.Size()}
	}
	return st, nil
}
