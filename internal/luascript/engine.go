package luascript

import (
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	lua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/parse"
)

// Caller runs the Redis commands of a script.
type Caller interface {
	// Call runs one command for the running script: args[0] is its name
	// as the script wrote it. It answers in the RESP version the script
	// chose (resp: 2 or 3, redis.setresp). A refusal or a failure is an
	// Error reply with Redis's text ("ERR Unknown Redis command called
	// from script", "WRONGTYPE ..."): redis.call raises it, redis.pcall
	// returns it. args and the bytes they refer to are the Caller's only
	// until Call returns: the sandbox reuses them.
	Call(args [][]byte, resp int) Reply
}

// Limits bound what a script may use. A run that breaks one is stopped
// with an error.
type Limits struct {
	// Time a run may take (default 5s: Redis's lua-time-limit, after
	// which Redis only starts answering BUSY; latch stops the script).
	Time time.Duration
	// Memory is how much the process heap may grow while a script runs
	// (default 256 MiB), checked every few milliseconds; string.rep is
	// refused a result larger than it.
	Memory int64
	// CallDepth bounds the Lua call stack, in frames (default 200, as
	// Lua 5.1's C-call limit bounds Redis's).
	CallDepth int
	// Scripts bounds the compiled scripts kept by SHA1 (default 4096),
	// and ScriptBytes their total text (default 16 MiB): beyond either,
	// the oldest are forgotten first (EVALSHA of one answers NOSCRIPT).
	Scripts     int
	ScriptBytes int
	// Version is redis.REDIS_VERSION ("7.0.0" if empty).
	Version string
	// Logger receives redis.log's messages (none if nil).
	Logger *slog.Logger
}

func (l *Limits) defaults() {
	if l.Time <= 0 {
		l.Time = 5 * time.Second
	}
	if l.Memory <= 0 {
		l.Memory = 256 << 20
	}
	if l.CallDepth <= 0 {
		l.CallDepth = 200
	}
	if l.Scripts <= 0 {
		l.Scripts = 4096
	}
	if l.ScriptBytes <= 0 {
		l.ScriptBytes = 16 << 20
	}
	if l.Version == "" {
		l.Version = "7.0.0"
	}
	if l.Logger == nil {
		l.Logger = slog.New(slog.DiscardHandler)
	}
}

// Script is a compiled script.
type Script struct {
	SHA  string // the hex SHA1 of its text, lower case
	Body []byte
	// Shebang: the script starts with Redis 7's "#!lua" line; NoWrites:
	// its flags include no-writes (it runs as read-only).
	Shebang, NoWrites bool
	proto             *lua.FunctionProto
	// readsGlobals: no function of the script assigns a global (no
	// SETGLOBAL instruction), so its functions may look globals up in the
	// real table, not through the read-only proxy (sandbox.run).
	readsGlobals bool
}

// setsGlobal reports whether p, or a function defined in it, may assign
// a global: whether its code holds a SETGLOBAL instruction. A word of
// data that reads as one (SETLIST's) only makes the answer cautious.
func setsGlobal(p *lua.FunctionProto) bool {
	for _, inst := range p.Code {
		if int(inst>>26) == lua.OP_SETGLOBAL {
			return true
		}
	}
	for _, f := range p.FunctionPrototypes {
		if setsGlobal(f) {
			return true
		}
	}
	return false
}

// shebangFlags are the flags of a "#!lua flags=..." line Redis 7 knows.
var shebangFlags = map[string]bool{"no-writes": true, "allow-oom": true, "allow-stale": true,
	"no-cluster": true, "allow-cross-slot-keys": true}

// shebang parses a script's first line when it is a shebang ("#!lua
// flags=no-writes,..."), as Redis 7 does: whether it has one, whether
// no-writes is among its flags, and Redis's error for a bad one.
func shebang(body []byte) (has, noWrites bool, err error) {
	if !bytes.HasPrefix(body, []byte("#!")) {
		return false, false, nil
	}
	end := bytes.IndexByte(body, '\n')
	if end < 0 {
		return true, false, &CompileError{"ERR Invalid script shebang"}
	}
	parts := strings.Fields(string(body[:end]))
	if len(parts) == 0 || parts[0] != "#!lua" {
		engine := string(body[:end])
		if len(parts) > 0 {
			engine = parts[0]
		}
		return true, false, &CompileError{"ERR Unexpected engine in script shebang: " + engine}
	}
	for _, p := range parts[1:] {
		flags, ok := strings.CutPrefix(p, "flags=")
		if !ok {
			return true, false, &CompileError{"ERR Unknown lua shebang option: " + p}
		}
		for f := range strings.SplitSeq(flags, ",") {
			switch {
			case f == "":
			case !shebangFlags[f]:
				return true, false, &CompileError{"ERR Unexpected flag in script shebang: " + f}
			case f == "no-writes":
				noWrites = true
			}
		}
	}
	return true, noWrites, nil
}

// Engine compiles, caches and runs scripts. It is safe for concurrent
// use: each run has a sandbox of its own (kept for the next runs).
type Engine struct {
	lim Limits

	mu      sync.Mutex
	scripts map[string]*Script
	order   []string // SHA1s in load order: the oldest is forgotten first
	size    int      // bytes of text in scripts

	randMu sync.Mutex
	rand   uint64 // math.random's state

	// The sandboxes, and the watchdog that checks their runs (a run's
	// start is its sandbox's, sandbox.start).
	wmu      sync.Mutex
	all      map[*sandbox]struct{} // every sandbox not closed
	idle     []*sandbox            // those between runs, maxIdle at most
	epoch    time.Time             // what sandbox.start counts from
	watching atomic.Bool           // the watchdog's timer is armed
	timer    *time.Timer
	heapBase int64 // the heap when the runs began (-1: not read yet)
}

// maxIdle bounds the sandboxes kept between runs.
const maxIdle = 64

// New returns an engine with the limits lim (zero fields: defaults).
func New(lim Limits) *Engine {
	lim.defaults()
	return &Engine{lim: lim, scripts: make(map[string]*Script), rand: rand48Init, heapBase: -1,
		all: make(map[*sandbox]struct{}), epoch: time.Now()}
}

// SHA1 returns the hex SHA1 of a script's text: its name for EVALSHA.
func SHA1(body []byte) string {
	sum := sha1.Sum(body)
	return hex.EncodeToString(sum[:])
}

// CompileError is a script that does not compile. Its message is Redis's
// reply, "ERR Error compiling script (new function): user_script:<line>: ...".
type CompileError struct{ Msg string }

func (e *CompileError) Error() string { return e.Msg }

// gopher-lua's syntax errors: "user_script line:1(column:9) near 'EOF':
// syntax error", "user_script at EOF:   unterminated string".
var (
	syntaxRE    = regexp.MustCompile(`^user_script line:(\d+)\(column:\d+\) near '(.*)':\s*(.*?)\s*$`)
	syntaxEOFRE = regexp.MustCompile(`^user_script at EOF:\s*(.*?)\s*$`)
)

// Load compiles body and keeps it by its SHA1 (no copy of body is kept
// that the caller may change).
func (e *Engine) Load(body []byte) (*Script, error) {
	sha := SHA1(body)
	if s := e.Get(sha); s != nil {
		return s, nil
	}
	has, noWrites, err := shebang(body)
	if err != nil {
		return nil, err
	}
	src := body
	if has {
		// The shebang line becomes a comment: the lines keep their numbers.
		src = append([]byte("--"), body[2:]...)
	}
	chunk, err := parse.Parse(bytes.NewReader(src), "user_script")
	if err != nil {
		msg := err.Error()
		if m := syntaxRE.FindStringSubmatch(msg); m != nil {
			near := m[2]
			if near == "EOF" {
				near = "<eof>"
			}
			msg = fmt.Sprintf("user_script:%s: %s near '%s'", m[1], m[3], near)
		} else if m := syntaxEOFRE.FindStringSubmatch(msg); m != nil {
			what := m[1]
			if what == "unterminated string" {
				what = "unfinished string" // Lua 5.1's words
			}
			msg = fmt.Sprintf("user_script:%d: %s near '<eof>'", 1+bytes.Count(body, []byte("\n")), what)
		}
		return nil, &CompileError{"ERR Error compiling script (new function): " + oneLine(msg)}
	}
	proto, err := lua.Compile(chunk, "user_script")
	if err != nil {
		return nil, &CompileError{"ERR Error compiling script (new function): " + oneLine(err.Error())}
	}
	// The main chunk takes "...": Lua 5.0's compatible "arg" table would
	// be made for each run, but a main chunk has no local of that name to
	// see it by.
	proto.IsVarArg &^= lua.VarArgNeedsArg
	s := &Script{SHA: sha, Body: bytes.Clone(body), Shebang: has, NoWrites: noWrites, proto: proto, readsGlobals: !setsGlobal(proto)}
	e.mu.Lock()
	defer e.mu.Unlock()
	if old, ok := e.scripts[sha]; ok {
		return old, nil
	}
	for len(e.order) > 0 && (len(e.scripts) >= e.lim.Scripts || e.size+len(body) > e.lim.ScriptBytes) {
		if old, ok := e.scripts[e.order[0]]; ok {
			e.size -= len(old.Body)
			delete(e.scripts, e.order[0])
		}
		e.order = e.order[1:]
	}
	e.scripts[sha] = s
	e.order = append(e.order, sha)
	e.size += len(body)
	return s, nil
}

// Get returns the script named sha (lower-case hex), or nil.
func (e *Engine) Get(sha string) *Script {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.scripts[sha]
}

// GetBytes is Get of a name given as bytes (no string made of it).
func (e *Engine) GetBytes(sha []byte) *Script {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.scripts[string(sha)]
}

// Flush forgets every script (SCRIPT FLUSH).
func (e *Engine) Flush() {
	e.mu.Lock()
	defer e.mu.Unlock()
	clear(e.scripts)
	e.order, e.size = nil, 0
}

// Len returns how many scripts are kept.
func (e *Engine) Len() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.scripts)
}

// Run runs s with KEYS and ARGV, its commands run by c, for a client of
// RESP version proto (2 or 3), and returns its reply. raised is true when
// the script ended by an error (a Lua error, a redis.call that failed,
// a limit): its reply is then that error, with Redis 7's suffix
// (" script: <sha1>, on @user_script:<line>."). A script that returns an
// error reply (redis.error_reply) has not raised one.
func (e *Engine) Run(s *Script, keys, argv [][]byte, c Caller, proto int) (reply Reply, raised bool) {
	sb := e.get()
	defer e.put(sb)
	return sb.run(s, keys, argv, c, proto)
}

// get returns an idle sandbox, or a new one.
func (e *Engine) get() *sandbox {
	e.wmu.Lock()
	if n := len(e.idle); n > 0 {
		sb := e.idle[n-1]
		e.idle[n-1] = nil
		e.idle = e.idle[:n-1]
		e.wmu.Unlock()
		return sb
	}
	e.wmu.Unlock()
	sb := newSandbox(e)
	e.wmu.Lock()
	e.all[sb] = struct{}{}
	e.wmu.Unlock()
	return sb
}

// put keeps sb for the next runs, or closes it if it may not be reused
// or enough are kept.
func (e *Engine) put(sb *sandbox) {
	keep := sb.reset()
	e.wmu.Lock()
	if keep && len(e.idle) < maxIdle {
		e.idle = append(e.idle, sb)
		e.wmu.Unlock()
		return
	}
	delete(e.all, sb)
	e.wmu.Unlock()
	sb.L.Close()
}

// Stop causes.
var (
	errTime   = errors.New("time limit")
	errMemory = errors.New("memory limit")
	errKilled = errors.New("killed")
)

// Kill stops every script running (SCRIPT KILL) and reports whether there
// was one. A killed script applies nothing: its Caller applies writes only
// after it ends.
func (e *Engine) Kill() bool {
	e.wmu.Lock()
	defer e.wmu.Unlock()
	killed := false
	for sb := range e.all {
		if sb.start.Load() != 0 {
			sb.cancel(errKilled)
			killed = true
		}
	}
	return killed
}

// heapBytes reads the bytes of the heap's objects (live or not yet
// collected).
func heapBytes() int64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return int64(s[0].Value.Uint64())
}

// The watchdog: a timer per engine, armed while scripts run, checks every
// few milliseconds the runs in progress: it stops one past the time
// limit, and, when the process heap has grown by more than the memory
// limit since runs began, the one that has run longest. A run costs it
// two atomic stores, not a timer of its own; no goroutine waits when none
// runs.
const watchEvery = 5 * time.Millisecond

// enter starts sb's run for the watchdog, giving sb a fresh context if
// the last one was stopped.
func (e *Engine) enter(sb *sandbox) {
	if sb.ctx == nil || sb.ctx.Err() != nil {
		e.wmu.Lock()
		sb.ctx, sb.cancel = context.WithCancelCause(context.Background())
		e.wmu.Unlock()
		sb.L.SetContext(sb.ctx)
	}
	// The start first, then the timer: a watchdog that stops its timer
	// looks at the starts again after (watchdog).
	sb.start.Store(int64(time.Since(e.epoch)) + 1)
	if e.watching.Load() {
		return
	}
	e.wmu.Lock()
	defer e.wmu.Unlock()
	if !e.watching.Load() {
		e.watching.Store(true)
		if e.timer == nil {
			e.timer = time.AfterFunc(watchEvery, e.watchdog)
		} else {
			e.timer.Reset(watchEvery)
		}
	}
}

// leave ends sb's run for the watchdog.
func (e *Engine) leave(sb *sandbox) { sb.start.Store(0) }

// oldest returns the run in progress that started first (nil: none), and
// its start. Called with wmu held.
func (e *Engine) oldest() (*sandbox, int64) {
	var old *sandbox
	var since int64
	for sb := range e.all {
		if st := sb.start.Load(); st != 0 && (old == nil || st < since) {
			old, since = sb, st
		}
	}
	return old, since
}

// watchdog is one check; it arms the timer again while runs go on.
func (e *Engine) watchdog() {
	e.wmu.Lock()
	defer e.wmu.Unlock()
	oldest, since := e.oldest()
	if oldest == nil {
		// None runs: the timer stops, unless a run started meanwhile (it
		// saw the timer armed).
		e.watching.Store(false)
		if oldest, since = e.oldest(); oldest == nil {
			e.heapBase = -1
			return
		}
		e.watching.Store(true)
	}
	h := heapBytes()
	if e.heapBase < 0 {
		e.heapBase = h
	}
	now := int64(time.Since(e.epoch)) + 1
	for sb := range e.all {
		if st := sb.start.Load(); st != 0 && time.Duration(now-st) > e.lim.Time {
			sb.cancel(errTime)
		}
	}
	if h-e.heapBase > e.lim.Memory && oldest.start.Load() == since {
		oldest.cancel(errMemory)
		e.heapBase = -1
	}
	e.timer.Reset(watchEvery)
}
