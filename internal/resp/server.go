package resp

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/fsm"
	"github.com/latchd/latch/internal/luascript"
	"github.com/latchd/latch/internal/metrics"
	"github.com/latchd/latch/internal/netserve"
)

// Server serves the Redis protocol over one lock service: its codec,
// commands and replies; package netserve serves its connections.
type Server struct {
	cfg     Config
	svc     Service
	log     *slog.Logger
	started time.Time
	ns      *netserve.Server

	cmds    map[string]*command // by lower-case name
	unknown *metrics.Command

	// loaded holds the scripts SCRIPT LOAD or EVAL recognised, by the SHA1
	// of their text (knownScripts need no loading).
	scriptsMu sync.RWMutex
	loaded    map[string]loadedScript

	// lua compiles, keeps and runs the scripts that are not known lock
	// scripts (lua.go).
	lua *luascript.Engine
	// noTemplates runs every script in Lua, the known ones too (a
	// benchmark's knob); scriptCheck, when set (tests), is given each
	// script transaction, what the scratch view answered for its commands,
	// and what the state machine did.
	noTemplates bool
	scriptCheck func(tx []fsm.Command, pred, got []fsm.Result)

	lastID atomic.Int64 // CLIENT ID

	// track is the client-side caching's tracking table (tracking.go).
	track *tracker

	// toks are the tokens AUTH accepts (Config.Tokens, SetTokens).
	toks atomic.Pointer[[]netserve.Token]
}

// rTooManyConns answers a connection over Config.MaxConns, as Redis does.
const rTooManyConns = "-ERR max number of clients reached\r\n"

// New returns a server for svc; Start makes it listen. It returns
// Validate's error for an invalid cfg. Its plain connections are served by
// event loops (Config.Loops) when svc answers at once (latch.Inline).
func New(svc Service, cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		cfg:     cfg,
		svc:     svc,
		log:     cfg.Logger,
		started: time.Now(),
		loaded:  make(map[string]loadedScript),
		lua:     luascript.New(luascript.Limits{Version: redisVersion, Logger: cfg.Logger}),
		track:   newTracker(),
	}
	if kw, ok := svc.(keyWatcher); ok {
		s.track.watch = func(on bool) {
			if on {
				kw.WatchKeys(s.track.changed)
			} else {
				kw.WatchKeys(nil)
			}
		}
	}
	s.toks.Store(&cfg.Tokens)
	s.cmds = make(map[string]*command, len(commandTable)+len(zcommandTable))
	for _, table := range [][]command{commandTable, zcommandTable} {
		for i := range table {
			c := table[i]
			c.metric = cfg.Metrics.Command(c.name)
			c.noScript = noScriptCall[c.name]
			s.cmds[c.name] = &c
		}
	}
	s.unknown = cfg.Metrics.Command("unknown")
	loops := 0 // a request waits for its commit: a loop would make its other connections wait too
	if svc.Execution() == latch.Inline {
		loops = netserve.DefaultLoops(cfg.Loops, runtime.GOMAXPROCS(0))
	}
	ns, err := netserve.New(s, cfg.Config, loops)
	if err != nil {
		return nil, err
	}
	s.ns = ns
	return s, nil
}

// Name names the front end in logs.
func (s *Server) Name() string { return "redis" }

// Refusal is the answer to a connection over Config.MaxConns.
func (s *Server) Refusal() []byte { return []byte(rTooManyConns) }

// MaxInput bounds the incomplete request an event loop keeps: the Reader
// refuses longer requests before they are complete.
func (s *Server) MaxInput() int {
	lim := s.cfg.Limits
	return max(lim.MaxInline, lim.MaxArgs*(lim.MaxBulk+2*headerMax)) + headerMax
}

// Start listens on the configured address and serves in the background.
func (s *Server) Start() error { return s.ns.Start() }

// Serve serves connections accepted from ln in the background.
func (s *Server) Serve(ln net.Listener) error { return s.ns.Serve(ln) }

// SetTokens replaces the tokens AUTH accepts (Config.Tokens; none: no
// AUTH needed) for the connections made and the AUTHs run from now on. A
// connection authenticated before keeps its rights until it
// authenticates again or RESETs. On an invalid list
// (netserve.CheckTokens) the tokens in force stay.
func (s *Server) SetTokens(toks []netserve.Token) error {
	if err := netserve.CheckTokens(toks); err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	s.toks.Store(&toks)
	return nil
}

// tokens returns the tokens in force.
func (s *Server) tokens() []netserve.Token { return *s.toks.Load() }

// SetAllow replaces the networks served (Config.Allow) for the
// connections accepted from now on; open ones stay (netserve.Server.SetAllow).
func (s *Server) SetAllow(allow string) error { return s.ns.SetAllow(allow) }

// Addr returns the address the server listens on, once started.
func (s *Server) Addr() net.Addr { return s.ns.Addr() }

// Shutdown stops accepting, closes every connection and waits for the
// server's goroutines, or until ctx is done. Locks are not connections':
// they stay in the lock table.
func (s *Server) Shutdown(ctx context.Context) error {
	s.track.stopWatch()
	return s.ns.Shutdown(ctx)
}

// keyWatcher is a Service that tells which of its keys change
// (internal/node): client-side caching's invalidations come from it. f
// hears of the keys each applied command changed, in order, under the
// service's lock (it must not block), with the client that proposed the
// command (fsm.Command.Client) when it was proposed here; keys nil means
// every key (the state was replaced). nil stops it.
type keyWatcher interface {
	WatchKeys(f func(keys []string, client uint64))
}

// clients counts the open connections (INFO).
func (s *Server) clients() int { return s.ns.Stats().Open }

// loadedScript is a recognised script loaded by its text: its template,
// and the line of its first read of a key as a string (readLine).
type loadedScript struct {
	t    template
	line int
}

// script returns the template of the script named sha (lower case), known
// or loaded, and the line of its first string read.
func (s *Server) script(sha []byte) (template, int, bool) {
	if t, ok := knownScripts[string(sha)]; ok {
		return t, knownLines[string(sha)], true
	}
	s.scriptsMu.RLock()
	defer s.scriptsMu.RUnlock()
	l, ok := s.loaded[string(sha)]
	return l.t, l.line, ok
}

// load records a recognised script, body, under the SHA1 of its text and
// returns the line of its first string read.
func (s *Server) load(sha string, t template, body []byte) int {
	if _, ok := knownScripts[sha]; ok {
		return knownLines[sha]
	}
	line := readLine(body)
	s.scriptsMu.Lock()
	defer s.scriptsMu.Unlock()
	if len(s.loaded) < maxLoaded {
		s.loaded[sha] = loadedScript{t, line}
	}
	return line
}

// maxLoaded bounds the recognised scripts remembered by their text's SHA1
// (variants of the known ones); beyond it a variant still runs by EVAL.
const maxLoaded = 4096
