package resp

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/fsm"
	"github.com/latchd/latch/internal/luascript"
	"github.com/latchd/latch/internal/zset"
)

// Scripts that are not known lock scripts run in Lua (package luascript),
// as latch runs MULTI/EXEC: effects replication guarded by versions. The
// script runs once, on the node that received it, against a scratch view
// of the keys it touches: each key's state is read from the live state
// the first time the script touches it (with its fsm.Watch), redis.call
// answers from and changes the scratch view as the command would the lock
// table, and the write commands it ran are kept in order. At its end the
// writes are proposed as ONE fsm.OpOwnedTx watching every key the script
// read or wrote: applied on every replica as the same commands outside a
// script would be, or not at all if a key changed meanwhile, and then the
// script runs again (maxScriptTries times at most; on a cluster node, for
// up to scriptRetryWindow). A script that writes
// nothing on a cluster node proposes its watches alone (the node's own
// state may be behind its cluster's), so that its answer is of the
// instant the transaction applies, as one that wrote; on a node that
// answers inline it proposes nothing, and when it read several keys,
// they are read again at its end, and it runs again if one changed, so
// that its reads are of one instant. A script that raised an error
// applies nothing.
// Pipelined scripts run as a batch (flushLua): one scratch view, one
// transaction.

// maxScriptTries bounds how often a script runs because the keys it
// touched changed while it ran. On a cluster node, where each run ends
// with a commit (a script that only read validates its reads so), a hot
// key changes at every commit's pace, and the node's clock may run ahead
// of its leader's for a moment after an election (a lease it sees ended
// that the cluster does not): there a script runs again for as long as
// scriptRetryWindow allows, whatever the count.
const (
	maxScriptTries    = 16
	scriptRetryWindow = 2 * time.Second
)

// noScriptCall are the commands latch serves that a script may not call:
// Redis's answer for them is "This Redis command is not allowed from
// script". LATCH.TOKEN is refused too: the token of a grant made by the
// script is not known before the script's effects apply.
var noScriptCall = map[string]bool{
	"eval": true, "evalsha": true, "eval_ro": true, "evalsha_ro": true, "script": true,
	"multi": true, "exec": true, "discard": true, "watch": true, "unwatch": true,
	"hello": true, "auth": true, "client": true, "quit": true, "reset": true,
	"config": true, "wait": true, "latch.token": true,
}

// inLua reports whether a known script of template t runs in Lua all the
// same: redis-py's extend (3.5+) answers 0 and changes nothing on a key
// without a lease, which its native operation would renew.
func inLua(t template) bool { return t == tmplExtendPy }

// scriptLua reports whether an EVAL or EVALSHA request (not queued in
// MULTI) runs in Lua rather than as a known lock script's native
// operation (planEval).
func (c *conn) scriptLua(args [][]byte) bool {
	if len(args) < 3 {
		return false
	}
	s := c.srv
	if len(args[0]) == 4 { // eval
		if s.noTemplates {
			return true
		}
		sha := scriptSHA(args[1])
		if t, _, ok := s.script([]byte(sha)); ok {
			return inLua(t)
		}
		if s.lua.Get(sha) != nil {
			return true
		}
		t := recognise(args[1])
		return t == tmplNone || inLua(t)
	}
	sha := lowerInPlace(args[1])
	if t, _, ok := s.script(sha); ok && !s.noTemplates && !inLua(t) {
		return false
	}
	return s.lua.GetBytes(sha) != nil || !s.noTemplates && knownLua(sha)
}

// knownLua reports whether sha names a known script that runs in Lua
// (inLua): EVALSHA of it runs it, or answers NOSCRIPT until it is loaded.
func knownLua(sha []byte) bool {
	t, ok := knownScripts[string(sha)]
	return ok && inLua(t)
}

// cmdEvalLua runs EVAL, EVALSHA, EVAL_RO or EVALSHA_RO in Lua. While more
// of the connection's input is buffered, the request joins the Lua batch
// (flushLua) instead.
func cmdEvalLua(c *conn, args [][]byte) {
	req := c.prepareLua(args)
	if len(c.luaQ) > 0 || c.more() && c.rd.Held() <= maxBatchHeld {
		c.luaQ = append(c.luaQ, req)
		if c.more() && len(c.luaQ) < maxBatch && c.rd.Held() <= maxBatchHeld {
			c.batch++
			c.rd.Keep(true)
			return
		}
		c.flushLua()
		return
	}
	c.luaQ = append(c.luaQ, req)
	c.flushLua()
}

// luaReq is a Lua script request: its script and arguments, or the error
// that refuses it before it runs (msg); args are kept by the Reader while
// the request waits in a batch.
type luaReq struct {
	name       string
	s          *luascript.Script
	keys, argv [][]byte
	ro         bool
	msg        string
	reply      luascript.Reply
}

// evalName returns the lower-case name of a script command, without
// making a string of a name it knows.
func evalName(b []byte) string {
	for _, n := range [...]string{"evalsha", "eval", "evalsha_ro", "eval_ro"} {
		if len(b) == len(n) && strings.EqualFold(string(b), n) {
			return n
		}
	}
	return strings.ToLower(string(b))
}

// prepareLua checks a script request and finds or compiles its script.
func (c *conn) prepareLua(args [][]byte) luaReq {
	req := luaReq{name: evalName(args[0])}
	req.ro = strings.HasSuffix(req.name, "_ro")
	nk, ok := parseInt(args[2])
	switch {
	case !ok:
		req.msg = "ERR value is not an integer or out of range"
	case nk < 0:
		req.msg = "ERR Number of keys can't be negative"
	case nk > int64(len(args)-3):
		req.msg = "ERR Number of keys can't be greater than number of args"
	}
	if req.msg != "" {
		return req
	}
	// One copy for both, in the batch's arena (its earlier requests keep
	// the array they were given if it grows).
	n := len(c.luaArgs)
	c.luaArgs = append(c.luaArgs, args[3:]...)
	rest := c.luaArgs[n:len(c.luaArgs):len(c.luaArgs)]
	req.keys, req.argv = rest[:nk:nk], rest[nk:]
	for _, k := range req.keys {
		if req.msg = c.checkKey(k); req.msg != "" {
			return req
		}
	}
	if req.name == "eval" || req.name == "eval_ro" {
		var err error
		if req.s, err = c.srv.lua.Load(args[1]); err != nil {
			req.msg = err.Error()
			return req
		}
	} else if req.s = c.srv.lua.GetBytes(lowerInPlace(args[1])); req.s == nil {
		req.msg = "NOSCRIPT No matching script. Please use EVAL."
		return req
	}
	switch {
	case req.ro && req.s.Shebang && !req.s.NoWrites:
		req.msg = "ERR Can not execute a script with write flag using *_ro command."
	case req.s.NoWrites:
		req.ro = true
	}
	return req
}

// flushLua runs the scripts of the Lua batch, in order, each against the
// scratch view the ones before it left, and applies all their writes as
// one transaction under the watches of every key they touched; if a key
// changed, they all run again. A script that raises an error has its
// own writes taken back from the scratch view, and applies nothing. The
// replies are written in order once the transaction is applied.
func (c *conn) flushLua() {
	q := c.luaQ
	run := c.script
	if run == nil {
		run = &scriptRun{c: c}
		c.script = run
	}
	applied := false
	var failed error
	replicated := c.srv.svc.Execution() == latch.Replicated
	var began time.Time
	if replicated {
		began = time.Now()
	}
	try := 0
	for ; !applied && failed == nil && (try < maxScriptTries || replicated && time.Since(began) < scriptRetryWindow); try++ {
		if try > 0 && replicated {
			// A cluster node may read its keys before it has applied what
			// failed the watches: give it the time to catch up (a
			// goroutine's connection: no loop waits).
			time.Sleep(time.Duration(min(try, 10)) * time.Millisecond)
		}
		run.start()
		for i := range q {
			req := &q[i]
			if req.msg != "" {
				continue
			}
			run.ro = req.ro
			run.begin()
			var raised bool
			req.reply, raised = c.srv.lua.Run(req.s, req.keys, req.argv, run, c.w.Proto)
			if raised {
				run.rollback()
			}
		}
		applied, failed = run.commit()
	}
	for i := range q {
		req := &q[i]
		msg := req.msg
		switch {
		case msg != "":
		case failed != nil:
			msg = errorReply(failed)
		case !applied:
			msg = fmt.Sprintf("ERR latch: script %s was not applied: the keys it touched changed each of the %d times it ran", req.s.SHA, try)
		}
		if msg != "" || req.reply.Kind == luascript.Error {
			c.srv.cmds[req.name].metric.Error()
		}
		if msg != "" {
			c.w.Error(msg)
			continue
		}
		c.scriptOut = req.reply.AppendRESP(c.scriptOut[:0], c.w.Proto)
		c.w.Raw(c.scriptOut)
	}
	run.clear()
	clear(c.luaQ)
	c.luaQ = c.luaQ[:0]
	clear(c.luaArgs)
	c.luaArgs = c.luaArgs[:0]
	c.batch = 0
	c.rd.Keep(false)
}

// scriptRun is one run of a script: its scratch view of the keys it
// touched, and the write commands it ran (luascript.Caller).
type scriptRun struct {
	c  *conn
	ro bool
	at int64 // the script's instant: time stands still while it runs

	keys   map[string]*scratchKey
	free   []*scratchKey // cleared ones, for the next keys read
	order  []string      // the keys in the order first touched
	tx     []fsm.Command // the writes, in order
	txKeys []string      // their keys, one array for them all
	pred   []fsm.Result  // what the scratch view answered for each
	watch  []fsm.Watch
	txCmd  fsm.Command // the transaction proposed (kept: no allocation)
	// txResults is room for its results (fsm.Command.TxResults), reused
	// unless a proposal's outcome was unknown, or it grew past maxBatch.
	txResults []fsm.Result

	// The scratch state of the keys the running script changed, as it
	// was before (begin, rollback), and where its writes start in tx.
	gen   int
	undo  []undoEntry
	first int

	// sc plans the script's commands with the connection's rights, and
	// answers them into out.
	sc  *conn
	out bytes.Buffer
	bw  *bufio.Writer
}

// scratchKey is a key as the script sees it: its state when first read
// (watch) and now (st, as an fsm.OwnedGet result).
type scratchKey struct {
	key   string
	watch fsm.Watch
	st    fsm.Result
	set   *zset.Set // a sorted-set key's members (st.ZKeys 1)
	saved int       // the run's gen when last saved in undo
}

// undoEntry is a key's scratch state before the running script changed it.
type undoEntry struct {
	k   *scratchKey
	st  fsm.Result
	set *zset.Set
}

// begin starts a script of the batch: what it changes can be taken back.
func (r *scriptRun) begin() {
	r.gen++
	clear(r.undo)
	r.undo = r.undo[:0]
	r.first = len(r.tx)
}

// save keeps k's scratch state before the running script changes it.
func (r *scriptRun) save(k *scratchKey) {
	if k.saved == r.gen {
		return
	}
	k.saved = r.gen
	e := undoEntry{k: k, st: k.st}
	if k.set != nil {
		e.set = k.set.Clone() // sorted-set commands change it in place
	}
	r.undo = append(r.undo, e)
}

// rollback takes back what the running script changed in the scratch
// view, and its writes.
func (r *scriptRun) rollback() {
	for i := len(r.undo) - 1; i >= 0; i-- {
		e := &r.undo[i]
		e.k.st, e.k.set = e.st, e.set
	}
	clear(r.tx[r.first:])
	clear(r.pred[r.first:])
	r.tx, r.pred = r.tx[:r.first], r.pred[:r.first]
}

// start readies the run for a try.
func (r *scriptRun) start() {
	r.at = r.c.srv.svc.Now()
	if r.keys == nil {
		r.keys = make(map[string]*scratchKey)
	}
	r.clear()
	if r.sc == nil {
		r.sc = &conn{srv: r.c.srv, authed: true}
		r.bw = bufio.NewWriter(&r.out)
		r.sc.w = NewWriter(r.bw)
	}
	r.sc.token = r.c.token            // the rights of the connection's last AUTH
	r.sc.trackFor, r.sc.srun = r.c, r // the script's reads are tracked for its caller, as in Redis
}

// clear drops what the run refers to, once answered.
func (r *scriptRun) clear() {
	for _, k := range r.keys {
		if len(r.free) < maxFreeKeys {
			*k = scratchKey{}
			r.free = append(r.free, k)
		}
	}
	clear(r.keys)
	clear(r.order)
	clear(r.tx)
	clear(r.txKeys)
	clear(r.pred)
	r.order, r.tx, r.txKeys, r.pred = r.order[:0], r.tx[:0], r.txKeys[:0], r.pred[:0]
	r.watch = r.watch[:0]
	clear(r.undo)
	r.undo, r.first = r.undo[:0], 0
}

// maxFreeKeys bounds the scratch keys a run keeps for reuse.
const maxFreeKeys = 64

// read returns the scratch state of key, reading it on first touch.
func (r *scriptRun) read(key string) (*scratchKey, error) {
	if k, ok := r.keys[key]; ok {
		return k, nil
	}
	svc := r.c.srv.svc
	res, _ := svc.OwnedGet(key)
	if res.Err != nil {
		return nil, res.Err
	}
	var k *scratchKey
	if n := len(r.free); n > 0 {
		k, r.free = r.free[n-1], r.free[:n-1]
	} else {
		k = new(scratchKey)
	}
	*k = scratchKey{key: key, watch: fsm.WatchOfResult(key, &res), st: res}
	// A sorted set's members, read with the same version as its watch.
	for try := 0; res.ZKeys > 0; try++ {
		z, _ := svc.OwnedZGet(key)
		if z.Err == nil && z.Found == 1 && z.Version == res.Version {
			k.set = z.ZSet
			break
		}
		if try == 8 {
			return nil, fmt.Errorf("script: sorted set %q changes too often to be read", key)
		}
		if res, _ = svc.OwnedGet(key); res.Err != nil {
			return nil, res.Err
		}
		k.watch, k.st = fsm.WatchOfResult(key, &res), res
	}
	r.keys[key] = k
	r.order = append(r.order, key)
	return k, nil
}

// commit applies the run's writes as one OpOwnedTx under the watches of
// every key it touched; done is false when a key changed (the script
// must run again). A run without writes proposes its watches alone on a
// cluster node; on a node that answers inline it checks, when it read
// several keys, that none changed since.
func (r *scriptRun) commit() (done bool, err error) {
	svc := r.c.srv.svc
	if len(r.tx) == 0 && (len(r.order) == 0 || svc.Execution() != latch.Replicated) {
		// A node that answers inline reads the one lock table: a script
		// that read one key read it at one instant.
		if len(r.order) < 2 {
			return true, nil
		}
		for _, key := range r.order {
			res, _ := svc.OwnedGet(key)
			if res.Err != nil {
				return false, res.Err
			}
			if fsm.WatchOfResult(key, &res) != r.keys[key].watch {
				return false, nil
			}
		}
		return true, nil
	}
	// Writes, or, on a cluster node, reads alone: a node reads its own
	// applied state, which may be behind its cluster's, or ahead of its
	// leader's clock (a lease it sees ended that the leader does not), so
	// a script that wrote nothing (a compare-and-delete whose value did
	// not match) proposes its watches with no writes: its answer stands
	// only if what it read is the cluster's state when the transaction
	// applies, as for EXEC after WATCH; otherwise it runs again.
	r.watch = r.watch[:0]
	for _, key := range r.order {
		r.watch = append(r.watch, r.keys[key].watch)
	}
	in := &r.txCmd
	*in = fsm.Command{Op: fsm.OpOwnedTx, Tx: r.tx, Watch: r.watch, Client: r.c.clientTag(), TxResults: r.txResults}
	res := svc.Owned(in)
	*in = fsm.Command{}
	r.c.settle()
	if errors.Is(res.Err, fsm.ErrWatchChanged) {
		return false, nil
	}
	if res.Err != nil {
		// The outcome may be unknown (a cluster that let go of the
		// request may still apply it, into this room): never reuse it.
		r.txResults = nil
		return false, res.Err
	}
	if cap(res.Tx) <= maxBatch {
		r.txResults = res.Tx[:0] // a script's many writes keep none
	}
	defer clear(res.Tx)
	if r.c.srv.scriptCheck != nil {
		r.c.srv.scriptCheck(r.tx, r.pred, res.Tx)
	}
	// The scratch view cannot see the limits on all sorted sets together:
	// a command it applied may fail in the state machine, the others
	// applied.
	for i := range res.Tx {
		if err := res.Tx[i].Err; err != nil && r.pred[i].Err == nil {
			return true, fmt.Errorf("latch: script effect %d of %d failed, the others applied: %w", i+1, len(res.Tx), err)
		}
	}
	return true, nil
}

// Call runs one of the script's commands (luascript.Caller).
func (r *scriptRun) Call(args [][]byte, proto int) luascript.Reply {
	var lower [32]byte
	name := "" // lower case, if it may name a command
	if len(args[0]) <= len(lower) {
		for i, b := range args[0] {
			if 'A' <= b && b <= 'Z' {
				b += 'a' - 'A'
			}
			lower[i] = b
		}
		name = string(lower[:len(args[0])])
	}
	if name == "time" {
		if len(args) != 1 {
			return luascript.ErrorReply("ERR Wrong number of args calling Redis command from script")
		}
		now := time.Now()
		return luascript.Reply{Kind: luascript.Array, Elems: []luascript.Reply{
			{Kind: luascript.Bulk, Str: strconv.FormatInt(now.Unix(), 10)},
			{Kind: luascript.Bulk, Str: strconv.FormatInt(int64(now.Nanosecond()/1000), 10)},
		}}
	}
	cmd := r.c.srv.cmds[name]
	switch {
	case cmd == nil:
		return luascript.ErrorReply("ERR Unknown Redis command called from script")
	case cmd.noScript:
		return luascript.ErrorReply("ERR This Redis command is not allowed from script")
	case (cmd.arity > 0 && len(args) != cmd.arity) || len(args) < -cmd.arity:
		return luascript.ErrorReply("ERR Wrong number of args calling Redis command from script")
	case r.ro && cmd.write:
		return luascript.ErrorReply("ERR Write commands are not allowed from read-only scripts.")
	}
	if name == "get" {
		return r.get(args[1])
	}
	sc := r.sc
	sc.w.Proto = proto
	r.out.Reset()
	if cmd.fn != nil {
		cmd.fn(sc, args)
	} else {
		sc.subs, sc.plans, sc.names, sc.results = sc.subs[:0], sc.plans[:0], sc.names[:0], sc.results[:0]
		cmd.plan(sc, args)
		p := &sc.plans[0]
		if p.kind != rError {
			for i := p.first; i < p.first+p.n; i++ {
				sub := &sc.subs[i]
				res, err := r.apply(sub)
				if err != nil {
					return luascript.ErrorReply(errorReply(err))
				}
				sc.results = append(sc.results, res)
			}
			p.first = 0
		}
		sc.at = r.at
		if rep, ok := scriptReply(p, sc.results); ok {
			clear(sc.subs)
			clear(sc.plans)
			return rep
		}
		sc.answer(p)
		clear(sc.subs)
		clear(sc.plans)
	}
	r.bw.Flush()
	reply, _ := parseReply(r.out.Bytes())
	return reply
}

// keyString returns key k as a string: the one its scratch view has if
// the script touched it already (no new one made).
func (r *scriptRun) keyString(k []byte) string {
	if sk, ok := r.keys[string(k)]; ok {
		return sk.key
	}
	return string(k)
}

// get is GET in a script, the command lock scripts call most: what
// planGet, apply and scriptReply do, without a plan or a command.
func (r *scriptRun) get(k []byte) luascript.Reply {
	if msg := r.c.checkKey(k); msg != "" {
		return luascript.ErrorReply(msg)
	}
	key := r.keyString(k)
	r.sc.remember(key)
	sk, err := r.read(key)
	switch {
	case err != nil:
		return luascript.ErrorReply(errorReply(err))
	case sk.st.Foreign > 0 || sk.st.ZKeys > 0:
		return luascript.ErrorReply(wrongType)
	case sk.st.Count != 1:
		return luascript.Reply{Kind: luascript.Nil}
	}
	return luascript.Reply{Kind: luascript.Bulk, Str: sk.st.Owner}
}

// scriptReply is the reply of plan p, whose results are rs, to a script,
// for the kinds the lock scripts' commands answer (GET, SET, DEL, EXISTS,
// PEXPIRE, refusals): what conn.answer writes and parseReply would read
// back, without the RESP between. It reports false for the other kinds,
// which go that way.
func scriptReply(p *plan, rs []fsm.Result) (luascript.Reply, bool) {
	switch p.kind {
	case rError, rCount, rGet, rOKOrNull, rExists:
	default:
		return luascript.Reply{}, false
	}
	if msg := p.failure(rs); msg != "" {
		return luascript.ErrorReply(msg), true
	}
	var r fsm.Result
	if len(rs) > 0 {
		r = rs[0]
	}
	switch {
	case p.kind == rCount:
		return luascript.Reply{Kind: luascript.Int, Int: int64(r.Count)}, true
	case p.kind == rExists:
		n := 0
		for i := range rs {
			n += rs[i].Found
		}
		return luascript.Reply{Kind: luascript.Int, Int: int64(n)}, true
	case r.Count != 1:
		return luascript.Reply{Kind: luascript.Nil}, true
	case p.kind == rGet:
		return luascript.Reply{Kind: luascript.Bulk, Str: r.Owner}, true
	}
	return luascript.Reply{Kind: luascript.Status, Str: "OK"}, true
}

// apply applies an owned-lock command to the scratch view and answers as
// the state machine would (fsm's applyOwned) at the script's instant; a
// write is kept for the transaction.
func (r *scriptRun) apply(sub *fsm.Command) (fsm.Result, error) {
	if sub.OwnedFlags&fsm.OwnedAt == 0 {
		return r.applyLease(sub, sub)
	}
	// A lease's end (fsm.OwnedAt): the scratch view sees it as a lease
	// from the script's instant; the transaction keeps the end.
	rel := *sub
	rel.OwnedFlags &^= fsm.OwnedAt
	rel.Req.Lease = time.Duration(int64(sub.Req.Lease) - r.at)
	if int64(sub.Req.Lease) < 0 && r.at > 0 && rel.Req.Lease > 0 {
		rel.Req.Lease = math.MinInt64
	}
	over := rel.Req.Lease <= 0 && sub.Owned != fsm.OwnedRenew
	if over {
		rel.Req.Lease = 1
	}
	res, err := r.applyLease(&rel, sub)
	if over && err == nil && res.Err == nil && res.Count > 0 {
		// Stored and over at once, as the state machine does.
		for _, k := range sub.Req.Keys {
			if st := &r.keys[k].st; st.Count == 1 && st.Owner == string(sub.Value) {
				*st = fsm.Result{}
			}
		}
	}
	return res, err
}

// applyLease is apply of sub, whose lease is a duration; kept is the
// command the transaction keeps.
func (r *scriptRun) applyLease(sub, kept *fsm.Command) (fsm.Result, error) {
	var res fsm.Result
	keys := sub.Req.Keys
	for _, k := range keys {
		if _, err := r.read(k); err != nil {
			return res, err
		}
	}
	if sub.Owned != fsm.OwnedGet && sub.Owned != fsm.OwnedZGet {
		for _, k := range keys {
			r.save(r.keys[k])
		}
	}
	k0 := r.keys[keys[0]]
	if sub.Owned.IsZSet() {
		res = r.applyZSet(sub, k0)
		r.keep(sub, res)
		return res, nil
	}
	grant := func(k *scratchKey, lease time.Duration) {
		k.st = fsm.Result{Found: 1, Count: 1, Owner: string(sub.Value)}
		if lease > 0 {
			k.st.Expires = r.at + int64(lease)
		}
	}
	// A lock command on a sorted-set key: as the state machine, OwnedGet
	// describes it, OwnedRelease and OwnedRenew act on it, OwnedSet fails,
	// the others change nothing.
	if sub.Owned != fsm.OwnedGet && sub.Owned != fsm.OwnedRelease && sub.Owned != fsm.OwnedRenew {
		for _, k := range keys {
			res.ZKeys += r.keys[k].st.ZKeys
		}
		if res.ZKeys > 0 {
			if sub.Owned == fsm.OwnedSet {
				res.Err = fmt.Errorf("owned %v %q: a sorted set: %w", sub.Owned, keys[0], fsm.ErrWrongType)
			}
			return res, nil
		}
	}
	switch sub.Owned {
	case fsm.OwnedGet:
		return k0.st, nil
	case fsm.OwnedAcquire:
		for _, k := range keys {
			if r.keys[k].st.Found == 1 {
				return res, nil
			}
		}
		for _, k := range keys {
			grant(r.keys[k], sub.Req.Lease)
		}
		res.Count, res.Granted = 1, true
	case fsm.OwnedSet:
		st := &k0.st
		switch {
		case st.Found == 0 && sub.OwnedFlags&fsm.OwnedXX != 0:
		case st.Found == 0:
			grant(k0, sub.Req.Lease)
			res.Count, res.Granted = 1, true
		case st.Count == 1 && st.Owner == string(sub.Value):
			res.Count = 1
			if sub.OwnedFlags&fsm.OwnedKeepTTL == 0 {
				st.Expires = 0
				if sub.Req.Lease > 0 {
					st.Expires = r.at + int64(sub.Req.Lease)
				}
			}
		default:
			res.Foreign = st.Foreign
			res.Err = &latch.BusyError{Err: latch.ErrWouldBlock, Keys: []string{keys[0]}}
		}
	case fsm.OwnedGetSet:
		st := &k0.st
		switch {
		case st.Found == 0:
			grant(k0, 0)
			res.Count, res.Granted = 1, true
		case st.Count == 1:
			res.Found, res.Count, res.Owner, res.Granted = 1, 1, st.Owner, true
			grant(k0, 0)
		default:
			res.Foreign = 1
			res.Err = &latch.BusyError{Err: latch.ErrWouldBlock, Keys: []string{keys[0]}}
		}
	case fsm.OwnedRelease, fsm.OwnedRenew:
		r.releaseOrRenew(sub, &res)
	default:
		return res, fmt.Errorf("script: owned %v: %w", sub.Owned, latch.ErrInvalidRequest)
	}
	r.keep(kept, res)
	return res, nil
}

// releaseOrRenew is OwnedRelease and OwnedRenew on the scratch view, as
// the state machine's.
func (r *scriptRun) releaseOrRenew(sub *fsm.Command, res *fsm.Result) {
	keys, fl := sub.Req.Keys, sub.OwnedFlags
	chosen := func(st *fsm.Result) bool {
		return st.Count == 1 && (fl&fsm.OwnedMatch == 0 || st.Owner == string(sub.Value))
	}
	for _, key := range keys {
		st := &r.keys[key].st
		res.Found += st.Found
		if st.ZKeys > 0 {
			res.ZKeys++
			if fl&fsm.OwnedMatch != 0 && fl&fsm.OwnedAll != 0 {
				return
			}
			continue
		}
		res.Foreign += st.Foreign
		if !chosen(st) && fl&fsm.OwnedAll != 0 {
			return
		}
	}
	for i, key := range keys {
		st := &r.keys[key].st
		if slices.Contains(keys[:i], key) || st.ZKeys == 0 && !chosen(st) || st.ZKeys > 0 && fl&fsm.OwnedMatch != 0 {
			continue
		}
		if fl&fsm.OwnedPersist != 0 {
			if (sub.Owned == fsm.OwnedRenew || st.ZKeys > 0) && st.Expires != 0 {
				st.Expires = 0
				res.Count++
			}
			continue
		}
		lease := sub.Req.Lease
		if sub.Owned == fsm.OwnedRenew && fl&fsm.OwnedAdd != 0 && st.Expires > r.at {
			lease += time.Duration(st.Expires - r.at)
		}
		if sub.Owned == fsm.OwnedRelease || lease <= 0 {
			*st = fsm.Result{}
			r.keys[key].set = nil
		} else {
			st.Expires = r.at + int64(lease)
		}
		res.Count++
	}
}

// applyZSet applies a sorted-set command to the scratch view, as the
// state machine's applyZSet.
func (r *scriptRun) applyZSet(sub *fsm.Command, k *scratchKey) fsm.Result {
	var res fsm.Result
	key := sub.Req.Keys[0]
	if k.st.Found == 1 && k.st.ZKeys == 0 {
		res.Foreign = k.st.Foreign
		res.Err = fmt.Errorf("owned %v %q: a lock: %w", sub.Owned, key, fsm.ErrWrongType)
		return res
	}
	a := &sub.ZSet
	describe := func() {
		if k.set == nil || k.set.Card() == 0 {
			k.set, k.st = nil, fsm.Result{}
			return
		}
		if k.st.ZKeys == 0 {
			k.st = fsm.Result{Found: 1, ZKeys: 1}
		}
		res.Found, res.ZKeys, res.Expires, res.Version = 1, 1, k.st.Expires, k.st.Version
	}
	switch sub.Owned {
	case fsm.OwnedZGet:
		if k.set != nil {
			res.Found, res.ZKeys, res.Expires, res.Version = 1, 1, k.st.Expires, k.st.Version
			res.ZSet = k.set.Clone()
		}
		return res
	case fsm.OwnedZAdd:
		if err := a.Flags.Check(len(a.Pairs)); err != nil {
			res.Err = fmt.Errorf("owned %v %q: %w", sub.Owned, key, err)
			return res
		}
		if k.set == nil {
			k.set = &zset.Set{}
		}
		ar, err := k.set.Add(a.Flags, a.Pairs...)
		if err != nil {
			res.Err = fmt.Errorf("owned %v %q: %w", sub.Owned, key, err)
			break
		}
		if a.Flags&zset.INCR != 0 {
			if ar.Done {
				res.Count, res.Score = 1, ar.Score
			}
		} else {
			res.Count = ar.Count
		}
	case fsm.OwnedZRem:
		if k.set != nil {
			res.Count = k.set.Rem(a.Members...)
		}
	case fsm.OwnedZRemRangeByScore:
		if k.set != nil {
			res.Count = k.set.RemRangeByScore(a.Range)
		}
	case fsm.OwnedZRemRangeByRank:
		if k.set != nil {
			res.Count = k.set.RemRangeByRank(a.Start, a.Stop)
		}
	case fsm.OwnedZExpire:
		if k.set == nil {
			return res
		}
		switch {
		case sub.OwnedFlags&fsm.OwnedPersist != 0:
			if k.st.Expires != 0 {
				res.Count = 1
				k.st.Expires = 0
			}
		case sub.Req.Lease <= 0:
			res.Count = 1
			k.set = nil
		default:
			res.Count = 1
			k.st.Expires = r.at + int64(sub.Req.Lease)
		}
	case fsm.OwnedZDel:
		if k.set != nil {
			res.Count = 1
			k.set = nil
		}
	default:
		res.Err = fmt.Errorf("script: owned %v: %w", sub.Owned, latch.ErrInvalidRequest)
		return res
	}
	describe()
	return res
}

// keep records a write command and the scratch view's result of it, if
// it changed something: one that did not would change nothing in the
// transaction either, under its watches.
func (r *scriptRun) keep(sub *fsm.Command, res fsm.Result) {
	switch {
	case res.Err != nil || sub.Owned == fsm.OwnedGet || sub.Owned == fsm.OwnedZGet:
		return
	case res.Count == 0 && sub.Owned != fsm.OwnedZAdd: // ZADD may change scores only
		return
	}
	c := *sub
	at := len(r.txKeys)
	r.txKeys = append(r.txKeys, sub.Req.Keys...)
	c.Req.Keys = r.txKeys[at:len(r.txKeys):len(r.txKeys)]
	c.Value = bytes.Clone(sub.Value)
	r.tx = append(r.tx, c)
	r.pred = append(r.pred, res)
}

// parseReply reads one reply that this package wrote.
func parseReply(b []byte) (luascript.Reply, []byte) {
	i := bytes.IndexByte(b, '\n')
	if i < 1 {
		return luascript.ErrorReply("ERR latch: internal error: a script's command answered nothing"), nil
	}
	line, rest := string(b[1:i-1]), b[i+1:]
	n, _ := strconv.ParseInt(line, 10, 64)
	switch b[0] {
	case '+':
		return luascript.Reply{Kind: luascript.Status, Str: line}, rest
	case '-':
		return luascript.ErrorReply(line), rest
	case ':':
		return luascript.Reply{Kind: luascript.Int, Int: n}, rest
	case '_':
		return luascript.Reply{Kind: luascript.Nil}, rest
	case '#':
		r := luascript.Reply{Kind: luascript.Bool}
		if line == "t" {
			r.Int = 1
		}
		return r, rest
	case ',':
		f, _ := strconv.ParseFloat(line, 64)
		return luascript.Reply{Kind: luascript.Double, Num: f}, rest
	case '$', '=':
		if n < 0 {
			return luascript.Reply{Kind: luascript.Nil}, rest
		}
		s := string(rest[:n])
		if b[0] == '=' && len(s) >= 4 {
			return luascript.Reply{Kind: luascript.Verbatim, Format: s[:3], Str: s[4:]}, rest[n+2:]
		}
		return luascript.Reply{Kind: luascript.Bulk, Str: s}, rest[n+2:]
	case '*', '~', '%':
		if n < 0 {
			return luascript.Reply{Kind: luascript.NilArray}, rest
		}
		k := luascript.Array
		switch b[0] {
		case '~':
			k = luascript.Set
		case '%':
			k, n = luascript.Map, 2*n
		}
		r := luascript.Reply{Kind: k, Elems: make([]luascript.Reply, n)}
		for j := range r.Elems {
			r.Elems[j], rest = parseReply(rest)
		}
		return r, rest
	}
	return luascript.ErrorReply("ERR latch: internal error: a script's command answered " + strconv.Quote(string(b[:i]))), nil
}
