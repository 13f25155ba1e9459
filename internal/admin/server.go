package admin

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/metrics"
)

// Config configures a Server. Start from DefaultConfig. The toml tags name
// the settings of the configuration file's [admin] table (internal/config);
// the fields tagged "-" are set by the program.
type Config struct {
	// Addr is the TCP address Start listens on, for example
	// "127.0.0.1:11280" (port 0: any free port).
	Addr string `toml:"addr"`
	// Service is the lock table to show and act on. Required by New.
	Service latch.Admin `toml:"-"`
	// Cluster, when set, is the cluster of the node (GET /v1/cluster and
	// the membership actions). nil: an in-memory single node.
	Cluster Cluster `toml:"-"`
	// Metrics is the registry /metrics serves and the source of /v1/stats.
	// Required by New.
	Metrics *metrics.Metrics `toml:"-"`
	// Snapshot, when set, takes a backup of the node's committed state
	// for GET /v1/snapshot: the whole file (internal/backup) and a name
	// for it. nil: the endpoint answers 501.
	Snapshot func(ctx context.Context) (file []byte, name string, err error) `toml:"-"`
	// Token, when not empty, is the bearer token admin actions require
	// (SetToken replaces it).
	Token string `toml:"token"`
	// Reload, when set, reloads the server's settings (POST /v1/reload,
	// an admin action) and reports what changed and what was kept. nil:
	// the endpoint answers 501.
	Reload func() Reloaded `toml:"-"`
	// Ready reports whether the server is ready for clients (/readyz): nil
	// when it is, or why not. nil: always ready.
	Ready func() error `toml:"-"`
	// Logger receives lifecycle, admin actions (info) and requests (debug).
	// nil: discard.
	Logger *slog.Logger `toml:"-"`
	// Version is shown on the status page and in /v1/stats.
	Version string `toml:"-"`
	// TLS, when set, makes Start serve HTTPS only, with this
	// configuration.
	TLS *tls.Config `toml:"-"`
	// MaxConns limits the open connections Start accepts; one more is
	// answered 503 (over TLS: closed) at once. 0: no limit.
	MaxConns int `toml:"max-conns"`
	// ReadTimeout bounds the arrival of a whole request; WriteTimeout the
	// writing of its answer (a pprof profile or trace gets its seconds on
	// top). Zero: 30s each.
	ReadTimeout  time.Duration `toml:"-"`
	WriteTimeout time.Duration `toml:"-"`

	// HistoryInterval and HistorySize shape /v1/stats/history: one
	// sample every HistoryInterval, the last HistorySize kept. Zero: 1s
	// and 300 (five minutes).
	HistoryInterval time.Duration `toml:"-"`
	HistorySize     int           `toml:"-"`
}

// DefaultConfig returns the defaults of latch serve: 127.0.0.1:11280, at
// most 256 connections, 30s to read a request and to write an answer, a
// history of five minutes sampled every second. Service and Metrics are
// left for the caller.
func DefaultConfig() Config {
	return Config{
		Addr:            "127.0.0.1:11280",
		MaxConns:        256,
		ReadTimeout:     defaultTimeout,
		WriteTimeout:    defaultTimeout,
		HistoryInterval: time.Second,
		HistorySize:     300,
	}
}

// Validate reports every invalid setting of c, joined into one error. Each
// names its field. It does not check Service and Metrics, which New
// requires.
func (c Config) Validate() error {
	var errs []error
	if c.Addr != "" {
		if _, _, err := net.SplitHostPort(c.Addr); err != nil {
			errs = append(errs, fmt.Errorf("admin: invalid Addr %q: want host:port: %w", c.Addr, err))
		}
	}
	if c.MaxConns < 0 {
		errs = append(errs, fmt.Errorf("admin: invalid MaxConns %d: must not be negative (0: no limit)", c.MaxConns))
	}
	if c.HistorySize < 0 {
		errs = append(errs, fmt.Errorf("admin: invalid HistorySize %d: must not be negative (0: 300)", c.HistorySize))
	}
	for _, v := range []struct {
		name string
		d    time.Duration
	}{
		{"ReadTimeout", c.ReadTimeout},
		{"WriteTimeout", c.WriteTimeout},
		{"HistoryInterval", c.HistoryInterval},
	} {
		if v.d < 0 {
			errs = append(errs, fmt.Errorf("admin: invalid %s %v: must not be negative (0: the default)", v.name, v.d))
		}
	}
	return errors.Join(errs...)
}

// Server is the admin HTTP server. It is a server component: Start, then
// Shutdown.
type Server struct {
	cfg     Config
	log     *slog.Logger
	handler http.Handler
	started time.Time
	history *history

	// token is the SHA-256 of the admin token in force; nil: none.
	token atomic.Pointer[[sha256.Size]byte]

	srv  *http.Server
	ln   net.Listener
	quit chan struct{}
	wg   sync.WaitGroup
}

// New returns a Server for cfg; Start starts it. It returns Validate's
// error for an invalid cfg.
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Service == nil {
		return nil, errors.New("admin: no Service")
	}
	if cfg.Metrics == nil {
		return nil, errors.New("admin: no Metrics")
	}
	if cfg.HistoryInterval <= 0 {
		cfg.HistoryInterval = time.Second
	}
	if cfg.ReadTimeout <= 0 {
		cfg.ReadTimeout = defaultTimeout
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = defaultTimeout
	}
	if cfg.HistorySize <= 0 {
		cfg.HistorySize = 300
	}
	s := &Server{
		cfg:     cfg,
		log:     cfg.Logger,
		started: time.Now(),
		history: newHistory(cfg.HistorySize),
		quit:    make(chan struct{}),
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.SetToken(cfg.Token)
	s.handler = s.routes()
	return s, nil
}

// SetToken replaces the bearer token admin actions require, for the
// requests from now on; "" lets every action through, as an unset Token
// does.
func (s *Server) SetToken(token string) {
	if token == "" {
		s.token.Store(nil)
		return
	}
	// A digest, so that comparing takes the same time whatever the length
	// of what a request sends.
	sum := sha256.Sum256([]byte(token))
	s.token.Store(&sum)
}

// Name implements the server's component interface.
func (s *Server) Name() string { return "admin" }

// Handler returns the server's HTTP handler, for serving it elsewhere (or
// from tests) without Start.
func (s *Server) Handler() http.Handler { return s.handler }

// routes builds the handler: the mux behind the debug-level request log.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.serveIndex)
	mux.Handle("GET /ui/", uiFiles())
	mux.Handle("GET /metrics", s.cfg.Metrics.Handler())

	mux.HandleFunc("GET /v1/locks", s.getLocks)
	mux.HandleFunc("GET /v1/locks/{key...}", s.getLock)
	mux.HandleFunc("GET /v1/sessions", s.getSessions)
	mux.HandleFunc("GET /v1/stats", s.getStats)
	mux.HandleFunc("GET /v1/stats/history", s.getHistory)
	mux.HandleFunc("GET /v1/cluster", s.getCluster)

	// Admin actions: token, then no cross-origin browser requests.
	csrf := http.NewCrossOriginProtection()
	action := func(h http.HandlerFunc) http.Handler { return csrf.Handler(s.authorize(h)) }
	// A {key...} wildcard must end a pattern: the handler checks the
	// "/release" suffix.
	mux.Handle("POST /v1/locks/{key...}", action(s.releaseLock))
	mux.Handle("POST /v1/sessions/{id}/end", action(s.endSession))
	mux.Handle("POST /v1/cluster/members", action(s.clusterAction("add")))
	mux.Handle("POST /v1/cluster/members/{id}/remove", action(s.clusterAction("remove")))
	mux.Handle("POST /v1/cluster/transfer", action(s.clusterAction("transfer")))
	mux.Handle("POST /v1/reload", action(s.reload))
	// A GET, which cross-origin protection lets through: the token alone
	// guards it.
	mux.Handle("GET /v1/snapshot", s.authorize(http.HandlerFunc(s.getSnapshot)))

	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", s.readyz)

	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)

	return s.logRequests(mux)
}

// Start listens on cfg.Addr and serves in the background, and starts
// sampling the history.
func (s *Server) Start() error {
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("admin: %w", err)
	}
	if s.cfg.MaxConns > 0 {
		// Below TLS, so that http.Server still sees a *tls.Conn.
		ln = newLimitListener(ln, s.cfg.MaxConns, s.cfg.TLS != nil, s.log)
	}
	if s.cfg.TLS != nil {
		ln = tls.NewListener(ln, s.cfg.TLS)
	}
	s.Serve(ln)
	return nil
}

// Serve serves connections accepted from ln in the background, and starts
// sampling the history. Shutdown stops both.
func (s *Server) Serve(ln net.Listener) {
	s.ln = ln
	s.srv = &http.Server{
		Handler:           withWriteDeadline(s.handler, s.cfg.WriteTimeout),
		ReadHeaderTimeout: min(10*time.Second, s.cfg.ReadTimeout),
		ReadTimeout:       s.cfg.ReadTimeout,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	scheme := "http://"
	if s.cfg.TLS != nil {
		scheme = "https://"
	}
	s.log.Info("admin: listening", "addr", ln.Addr().String(), "url", scheme+ln.Addr().String()+"/",
		"token", s.token.Load() != nil)
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("admin: serving stopped", "err", err)
		}
	}()
	go func() {
		defer s.wg.Done()
		s.sample()
	}()
}

// defaultTimeout is Config.ReadTimeout's and WriteTimeout's default.
const defaultTimeout = 30 * time.Second

// withWriteDeadline bounds the time h's answer may take to be written to
// writeTimeout, so that a client that never reads holds a goroutine that
// long at most. http.Server's WriteTimeout would do it for every request
// but also cut off /debug/pprof/profile, which runs for ?seconds=.
func withWriteDeadline(h http.Handler, writeTimeout time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.NewResponseController(w).SetWriteDeadline(time.Now().Add(writeTimeout + pprofTime(r)))
		h.ServeHTTP(w, r)
	})
}

// pprofTime is how long a pprof request runs before it answers: its
// seconds (a profile: 30 by default), 0 for any other request.
func pprofTime(r *http.Request) time.Duration {
	if !strings.HasPrefix(r.URL.Path, "/debug/pprof/") {
		return 0
	}
	if sec, err := strconv.ParseFloat(r.URL.Query().Get("seconds"), 64); err == nil && sec > 0 {
		return time.Duration(min(sec, 24*3600) * float64(time.Second))
	}
	if r.URL.Path == "/debug/pprof/profile" {
		return 30 * time.Second
	}
	return 0
}

// Addr returns the address the server listens on, nil before Start.
func (s *Server) Addr() net.Addr {
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

// Shutdown stops accepting, lets requests in flight finish until ctx is
// done, then closes what is left.
func (s *Server) Shutdown(ctx context.Context) error {
	select {
	case <-s.quit:
		return nil
	default:
		close(s.quit)
	}
	var err error
	if s.srv != nil {
		if err = s.srv.Shutdown(ctx); err != nil {
			s.srv.Close()
			err = fmt.Errorf("admin: %w", err)
		}
	}
	s.wg.Wait()
	return err
}

// sample records a history sample every HistoryInterval until Shutdown.
func (s *Server) sample() {
	t := time.NewTicker(s.cfg.HistoryInterval)
	defer t.Stop()
	s.history.record(s.cfg.Metrics.Snapshot())
	for {
		select {
		case <-s.quit:
			return
		case <-t.C:
			s.history.record(s.cfg.Metrics.Snapshot())
		}
	}
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if s.cfg.Ready != nil {
		if err := s.cfg.Ready(); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "not ready: %v\n", err)
			return
		}
	}
	fmt.Fprintln(w, "ready")
}

// statusRecorder remembers the status code a handler wrote.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer (pprof
// sets write deadlines).
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// logRequests logs every request at debug level, and nothing else: it
// costs one Enabled check when debug is off.
func (s *Server) logRequests(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.log.Enabled(r.Context(), slog.LevelDebug) {
			h.ServeHTTP(w, r)
			return
		}
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w}
		h.ServeHTTP(rec, r)
		s.log.Debug("admin: request", "method", r.Method, "path", r.URL.Path,
			"status", rec.status, "remote", r.RemoteAddr, "duration", time.Since(start))
	})
}
