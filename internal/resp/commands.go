package resp

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/fsm"
	"github.com/latchd/latch/internal/metrics"
)

// command is one Redis command latch answers.
type command struct {
	name  string // lower case
	arity int    // Redis's: n exactly (the name included), -n at least n
	// plan adds a lock command to the connection's plan (lock commands
	// are queued inside MULTI); fn runs a connection command at once.
	plan  func(c *conn, args [][]byte)
	fn    func(c *conn, args [][]byte)
	write bool // changes locks: refused to a read-only token
	// noScript: a script may not call it (noScriptCall), set by New.
	noScript bool
	metric   *metrics.Command
}

// commandTable lists the commands; New indexes it by name.
var commandTable = []command{
	// Lock commands.
	{name: "get", arity: 2, plan: planGet},
	{name: "set", arity: -3, plan: planSet, write: true},
	{name: "setnx", arity: 3, plan: planSetNX, write: true},
	{name: "getset", arity: 3, plan: planGetSet, write: true},
	{name: "del", arity: -2, plan: planDel, write: true},
	{name: "unlink", arity: -2, plan: planDel, write: true},
	{name: "exists", arity: -2, plan: planExists},
	{name: "pexpire", arity: -3, plan: planExpire, write: true},
	{name: "expire", arity: -3, plan: planExpire, write: true},
	{name: "pttl", arity: 2, plan: planTTL},
	{name: "ttl", arity: 2, plan: planTTL},
	{name: "setex", arity: 4, plan: planSetEx, write: true},
	{name: "psetex", arity: 4, plan: planSetEx, write: true},
	{name: "getdel", arity: 2, plan: planGetDel, write: true},
	{name: "getex", arity: -2, plan: planGetEx, write: true},
	{name: "pexpireat", arity: -3, plan: planExpire, write: true},
	{name: "expireat", arity: -3, plan: planExpire, write: true},
	{name: "pexpiretime", arity: 2, plan: planExpireTime},
	{name: "expiretime", arity: 2, plan: planExpireTime},
	{name: "type", arity: 2, plan: planType},
	{name: "latch.token", arity: -2, plan: planToken},
	{name: "eval", arity: -3, plan: planEval, write: true},
	{name: "evalsha", arity: -3, plan: planEval, write: true},
	{name: "eval_ro", arity: -3, fn: cmdEvalLua},
	{name: "evalsha_ro", arity: -3, fn: cmdEvalLua},
	{name: "ping", arity: -1, plan: planPing},
	{name: "echo", arity: 2, plan: planEcho},

	// Transactions.
	{name: "multi", arity: 1, fn: cmdMulti},
	{name: "exec", arity: 1, fn: cmdExec},
	{name: "discard", arity: 1, fn: cmdDiscard},
	{name: "watch", arity: -2, fn: cmdWatch},
	{name: "unwatch", arity: 1, fn: cmdUnwatch},

	// Connection and server commands that clients send.
	{name: "hello", arity: -1, fn: cmdHello},
	{name: "auth", arity: -2, fn: cmdAuth},
	{name: "select", arity: 2, fn: cmdSelect},
	{name: "client", arity: -2, fn: cmdClient},
	{name: "info", arity: -1, fn: cmdInfo},
	{name: "quit", arity: -1, fn: cmdQuit},
	{name: "reset", arity: 1, fn: cmdReset},
	{name: "command", arity: -1, fn: cmdCommand},
	{name: "config", arity: -2, fn: cmdConfig},
	{name: "wait", arity: 3, fn: cmdWait},
	{name: "script", arity: -2, fn: cmdScript},
	{name: "flushall", arity: -1, fn: cmdFlush},
	{name: "subscribe", arity: -2, fn: cmdSubscribe},
	{name: "unsubscribe", arity: -1, fn: cmdSubscribe},
	{name: "psubscribe", arity: -2, fn: cmdSubscribe},
	{name: "punsubscribe", arity: -1, fn: cmdSubscribe},
	{name: "flushdb", arity: -1, fn: cmdFlush},
}

// Versions the front end reports: the Redis protocol level its replies
// follow (HELLO, INFO redis_version).
const redisVersion = "7.0.0"

// do runs one request.
func (c *conn) do(args [][]byte) {
	var lower [32]byte
	name := args[0]
	var cmd *command
	if c.cachingUsed { // CLIENT CACHING's flag was for the command before
		c.caching, c.cachingUsed = false, false
	}
	if len(name) <= len(lower) {
		for i, b := range name {
			if 'A' <= b && b <= 'Z' {
				b += 'a' - 'A'
			}
			lower[i] = b
		}
		cmd = c.srv.cmds[string(lower[:len(name)])]
	}
	lua := false // a script that runs in Lua, not as a known lock script
	if cmd != nil && cmd.plan != nil && (cmd.name == "eval" || cmd.name == "evalsha") && !c.multi && c.scriptLua(args) {
		cmd = &command{name: cmd.name, arity: cmd.arity, fn: cmdEvalLua, write: true, metric: cmd.metric}
		lua = true
	}
	if cmd != nil && (cmd.name == "eval_ro" || cmd.name == "evalsha_ro") && !c.multi {
		lua = true
	}
	// A batch of lock commands, or of Lua scripts (luaQ), is answered
	// before any request that would not join it.
	if c.batch > 0 && (len(c.luaQ) == 0 && !c.plannable(cmd, len(args)) ||
		len(c.luaQ) > 0 && !(lua && c.plannableLua(cmd, len(args)))) {
		c.runBatch() // its replies come first
	}
	if cmd == nil {
		c.srv.unknown.Request()
		if c.multi {
			c.dirty = true
		}
		c.w.Error(unknownCommand(args))
		return
	}
	cmd.metric.Request()
	if c.caching && cmd.name != "client" && cmd.name != "multi" && (!c.multi || cmd.name == "exec" || cmd.name == "discard") {
		c.cachingUsed = true
	}
	if c.nsubs.Load() > 0 && c.w.Proto == 2 && !subscribedCommands[cmd.name] {
		cmd.metric.Error()
		c.w.Error(fmt.Sprintf("ERR Can't execute '%s': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context", cmd.name))
		return
	}
	if (cmd.arity > 0 && len(args) != cmd.arity) || len(args) < -cmd.arity {
		cmd.metric.Error()
		if c.multi {
			c.dirty = true
		}
		c.w.Error(fmt.Sprintf("ERR wrong number of arguments for '%s' command", cmd.name))
		return
	}
	if !c.authed && cmd.name != "auth" && cmd.name != "hello" && cmd.name != "quit" {
		cmd.metric.Error()
		if c.multi {
			c.dirty = true
		}
		c.w.Error("NOAUTH Authentication required.")
		return
	}
	if cmd.write && c.token != nil && c.token.ReadOnly {
		cmd.metric.Error()
		if c.multi {
			c.dirty = true
		}
		c.w.Error(fmt.Sprintf("NOPERM this token is read-only: it cannot run the '%s' command", cmd.name))
		return
	}
	if c.multi && cmd.plan != nil {
		q := make([][]byte, len(args))
		for i, a := range args {
			q[i] = bytes.Clone(a)
		}
		c.queued = append(c.queued, q)
		c.w.Simple("QUEUED")
		return
	}
	if c.multi && cmd.name != "exec" && cmd.name != "discard" && cmd.name != "multi" && cmd.name != "watch" &&
		cmd.name != "quit" && cmd.name != "reset" {
		cmd.metric.Error()
		c.dirty = true
		c.w.Error(fmt.Sprintf("ERR latch: '%s' is not supported inside MULTI", cmd.name))
		return
	}
	if cmd.fn != nil {
		cmd.fn(c, args)
		return
	}
	if c.batch == 0 {
		c.subs, c.plans = c.subs[:0], c.plans[:0]
	}
	first, firstSub := len(c.plans), len(c.subs)
	cmd.plan(c, args)
	for i := first; i < len(c.plans); i++ {
		c.plans[i].metric = cmd.metric
	}
	if c.deferrable(firstSub) {
		c.batch++
		c.rd.Keep(true)
		return
	}
	c.runBatch()
}

// Pipelined lock commands are applied together: while more of a
// connection's input is buffered, a lock command that changes locks is
// planned and its execution deferred (the batch); the batch is applied as
// one fsm.OpOwnedTx without watches (each command in order, at one
// instant: one proposal, one clock reading) and answered in order before
// anything else is answered, before a read, and before the connection
// waits for input. The Reader keeps the deferred requests' arguments.
const (
	maxBatch     = 64       // requests
	maxBatchHeld = 64 << 10 // bytes of their arguments
)

// plannable reports whether a request for cmd with n arguments would be
// planned, not answered at once (with an error, QUEUED, or by a connection
// command): only those may join the batch.
func (c *conn) plannable(cmd *command, n int) bool {
	return cmd != nil && cmd.plan != nil && !c.multi && c.authed &&
		!((cmd.arity > 0 && n != cmd.arity) || n < -cmd.arity) &&
		!(cmd.write && c.token != nil && c.token.ReadOnly)
}

// plannableLua reports whether a Lua script request for cmd with n
// arguments would run (not be refused at once): only those may join the
// Lua batch.
func (c *conn) plannableLua(cmd *command, n int) bool {
	return c.authed && !((cmd.arity > 0 && n != cmd.arity) || n < -cmd.arity) &&
		!(cmd.write && c.token != nil && c.token.ReadOnly)
}

// deferrable reports whether the request just planned, whose commands
// start at c.subs[firstSub], may wait for the requests buffered after it.
func (c *conn) deferrable(firstSub int) bool {
	if !c.more() || len(c.plans) >= maxBatch || c.rd.Held() > maxBatchHeld {
		return false
	}
	for i := firstSub; i < len(c.subs); i++ {
		if k := c.subs[i].Owned; k == fsm.OwnedGet || k == fsm.OwnedZGet {
			return false // reads are read at once, without a command, unless they follow a batch
		}
	}
	return true
}

// runBatch applies the planned requests and answers them in order.
func (c *conn) runBatch() {
	if len(c.luaQ) > 0 {
		c.flushLua() // a batch is of Lua scripts or of lock commands
		return
	}
	c.batch = 0
	c.rd.Keep(false)
	c.run(false)
	for i := range c.plans {
		if c.answer(&c.plans[i]) {
			c.plans[i].metric.Error()
		}
	}
	c.clearPlan()
}

// clearPlan drops the references of the plan's commands and key lists, once
// answered, and empties the plan.
func (c *conn) clearPlan() {
	c.settle()
	clear(c.subs)
	clear(c.names)
	clear(c.plans)
	c.subs, c.names, c.plans = c.subs[:0], c.names[:0], c.plans[:0]
}

// unknownCommand is Redis's answer to a command it does not know.
func unknownCommand(args [][]byte) string {
	var b strings.Builder
	for _, a := range args[1:] {
		if b.Len() >= 128 {
			break
		}
		b.WriteByte('\'')
		b.Write(a[:min(len(a), 128-b.Len())])
		b.WriteString("' ")
	}
	name := args[0][:min(len(args[0]), 128)]
	return fmt.Sprintf("ERR unknown command '%s', with args beginning with: %s", name, b.String())
}

// The plan of a request: commands for the service and how to answer.

// replyKind says how a plan is answered from its commands' results.
type replyKind uint8

const (
	rError      replyKind = iota // msg
	rSimple                      // +msg
	rBulk                        // $msg
	rOKOrNull                    // Count 1: +OK, else null
	rCount                       // :Count
	rGet                         // the owner value, a stand-in for another protocol's holder, or null
	rGetSet                      // the previous owner value or null
	rExists                      // :number of keys held
	rPTTL                        // :ms left, -1 without a lease, -2 when free
	rTTL                         // as rPTTL in seconds
	rType                        // +string or +none
	rToken                       // :fencing token or null
	rTokenIf                     // :fencing token if the owner value is val, else null
	rCADMissing                  // :-1 when free, else :Count
	rPTTLIf                      // PTTL if the owner value is val, else :-3
	rAllOrZero                   // :arg if Count > 0, else :0
	rPExpireAt                   // :lease end in ms, -1 without a lease, -2 when free
	rExpireAt                    // as rPExpireAt in seconds
	rErrIfFound                  // null when free, else msg
	rSubPong                     // PING subscribed in RESP2: [pong, msg]
	rZRead                       // the sorted-set read zq, from the set read
	rZIncr                       // ZADD INCR: the score as a double, or null
)

// plan is one request's answer to make from the results of its commands,
// c.subs[first:first+n].
type plan struct {
	kind     replyKind
	first, n int
	msg      string
	arg      int64
	val      []byte
	metric   *metrics.Command // the request's command, for its errors
	// typed: the request reads its keys as strings, so a key held by a
	// session (fsm.Result.Foreign) answers WRONGTYPE; for a script, the
	// error names it (sha, lower case) and the line of its read (line).
	typed bool
	sha   []byte
	line  int
	// zq is the query of a sorted-set read (rZRead).
	zq *zquery
}

// wrongType is Redis's error for a command on a key of another type: here
// a key held over memcached or dlock, a lock without an owner value, a
// sorted set to a lock command, or a lock to a sorted-set command.
const wrongType = "WRONGTYPE Operation against a key holding the wrong kind of value"

// typeOfSession is what TYPE answers for a key held over memcached or
// dlock: not a string, since it has no value to GET. As a Redis module's
// type, its name is 9 characters.
const typeOfSession = "latchlock"

// wrongTypeError is the error of a request whose key is held by a session.
func (p *plan) wrongTypeError() string {
	if p.sha == nil {
		return wrongType
	}
	return fmt.Sprintf("%s script: %s, on @user_script:%d.", wrongType, p.sha, p.line)
}

// fail adds a plan answered by an error.
func (c *conn) fail(msg string) { c.plans = append(c.plans, plan{kind: rError, msg: msg}) }

// add adds a plan of kind over the commands added since first.
func (c *conn) add(kind replyKind, first int) *plan {
	c.plans = append(c.plans, plan{kind: kind, first: first, n: len(c.subs) - first})
	return &c.plans[len(c.plans)-1]
}

// sub adds an owned-lock command to the plan.
func (c *conn) sub(kind fsm.OwnedKind, flags fsm.OwnedFlags, value []byte, lease time.Duration, keys ...string) *fsm.Command {
	c.subs = append(c.subs, fsm.Command{Op: fsm.OpOwned, Owned: kind, OwnedFlags: flags, Value: value,
		Req: latch.LockRequest{Keys: keys, Lease: lease}})
	return &c.subs[len(c.subs)-1]
}

// checkKey checks a key a request names: a valid latch key that the
// connection's token allows. It returns the error message, or "".
func (c *conn) checkKey(k []byte) string {
	if err := latch.CheckKey(string(k)); err != nil {
		return "ERR " + err.Error() + " (latch keys are 1 to 250 bytes without space, CR or LF)"
	}
	if c.token != nil && !c.token.AllowsKey(string(k)) {
		return fmt.Sprintf("NOPERM this token cannot access key '%s'", k)
	}
	return ""
}

// key checks a key a request names (checkKey) and returns it as a string;
// on failure it adds the error plan.
func (c *conn) key(k []byte) (string, bool) {
	if msg := c.checkKey(k); msg != "" {
		c.fail(msg)
		return "", false
	}
	if c.srun != nil {
		return c.srun.keyString(k), true
	}
	return string(k), true
}

// keys checks every key of ks and returns them, in c.names.
func (c *conn) keys(ks [][]byte) ([]string, bool) {
	start := len(c.names)
	for _, k := range ks {
		s, ok := c.key(k)
		if !ok {
			c.names = c.names[:start]
			return nil, false
		}
		c.names = append(c.names, s)
	}
	return c.names[start:len(c.names):len(c.names)], true
}

// one returns the key list of one key, k, in c.names.
func (c *conn) one(k string) []string {
	c.names = append(c.names, k)
	return c.names[len(c.names)-1 : len(c.names) : len(c.names)]
}

// value checks an owner value's size.
func (c *conn) value(v []byte) bool {
	if len(v) > c.srv.cfg.MaxValue {
		c.fail(fmt.Sprintf("ERR latch: value of %d bytes, at most %d: a lock's value is its owner's identity", len(v), c.srv.cfg.MaxValue))
		return false
	}
	return true
}

// run has the service apply the plan's commands and keeps their results in
// c.results. In a transaction (tx) they are one fsm.OpOwnedTx under the
// connection's watches, and run reports false when a watched key changed.
// Otherwise reads are read without a command.
func (c *conn) run(tx bool) bool {
	c.results = c.results[:0]
	svc := c.srv.svc
	if !tx {
		if len(c.subs) == 0 {
			return true
		}
		reads := true
		for i := range c.subs {
			k := c.subs[i].Owned
			reads = reads && (k == fsm.OwnedGet || k == fsm.OwnedZGet)
		}
		if reads {
			for i := range c.subs {
				read := svc.OwnedGet
				if c.subs[i].Owned == fsm.OwnedZGet {
					read = svc.OwnedZGet
				}
				r, at := read(c.subs[i].Req.Keys[0])
				c.results = append(c.results, r)
				c.at = at
			}
			return true
		}
		if len(c.subs) == 1 {
			c.subs[0].Client = c.clientTag()
			c.results = append(c.results, svc.Owned(&c.subs[0]))
			c.settle()
			c.readClock()
			return true
		}
	}
	// A transaction, or a batch of pipelined requests (then without the
	// watches, which are EXEC's).
	if c.txResults == nil {
		c.txResults = make([]fsm.Result, 0, maxBatch)
	}
	in := fsm.Command{Op: fsm.OpOwnedTx, Tx: c.subs, TxResults: c.txResults}
	in.Client = c.clientTag()
	if tx {
		in.Watch = c.watches
	}
	r := svc.Owned(&in)
	c.settle()
	c.readClock()
	if r.Err != nil {
		// The outcome may be unknown (a cluster that let go of the
		// request may still apply it, into this room): never reuse it.
		c.txResults = nil
	} else {
		defer clear(r.Tx) // copied into c.results below
	}
	if errors.Is(r.Err, fsm.ErrWatchChanged) {
		return false
	}
	if r.Err != nil {
		for range c.subs {
			c.results = append(c.results, fsm.Result{Err: r.Err})
		}
		return true
	}
	c.results = append(c.results, r.Tx...)
	return true
}

// readClock sets c.at, the instant results are read at, for the plans
// that answer a lease left (PTTL, TTL): a clock reading costs as much as a
// small lock command, so only they pay for it.
func (c *conn) readClock() {
	for i := range c.plans {
		switch c.plans[i].kind {
		case rPTTL, rTTL, rPTTLIf:
			c.at = c.srv.svc.Now()
			return
		}
	}
}

// failure is the error that plan p, whose results are rs, answers: its
// own (rError), WRONGTYPE for a typed command on a key of another kind,
// or the first result's error; "" when it answers a value.
func (p *plan) failure(rs []fsm.Result) string {
	if p.kind == rError {
		return p.msg
	}
	if p.typed {
		for i := range rs {
			if rs[i].Foreign > 0 || rs[i].ZKeys > 0 {
				return p.wrongTypeError()
			}
		}
	}
	for i := range rs {
		if rs[i].Err != nil {
			return errorReply(rs[i].Err)
		}
	}
	return ""
}

// answer writes the reply of p and reports whether it was an error.
func (c *conn) answer(p *plan) bool {
	w := c.w
	var rs []fsm.Result
	if p.kind != rError {
		rs = c.results[p.first : p.first+p.n]
	}
	if msg := p.failure(rs); msg != "" {
		w.Error(msg)
		return true
	}
	var r fsm.Result
	if len(rs) > 0 {
		r = rs[0]
	}
	switch p.kind {
	case rSimple:
		w.Simple(p.msg)
	case rBulk:
		w.BulkString(p.msg)
	case rOKOrNull:
		if r.Count == 1 {
			w.Simple("OK")
		} else {
			w.Null()
		}
	case rCount:
		w.Int(int64(r.Count))
	case rGet:
		if r.Count == 1 {
			w.BulkString(r.Owner)
		} else {
			w.Null()
		}
	case rGetSet:
		if r.Found == 1 {
			w.BulkString(r.Owner)
		} else {
			w.Null()
		}
	case rExists:
		n := 0
		for i := range rs {
			n += rs[i].Found
		}
		w.Int(int64(n))
	case rPTTL:
		w.Int(c.pttl(&r))
	case rTTL:
		ms := c.pttl(&r)
		if ms > 0 {
			ms = (ms + 500) / 1000
		}
		w.Int(ms)
	case rType:
		switch {
		case r.ZKeys == 1:
			w.Simple("zset")
		case r.Foreign == 1:
			w.Simple(typeOfSession)
		case r.Found == 1:
			w.Simple("string")
		default:
			w.Simple("none")
		}
	case rToken, rTokenIf:
		if r.Found == 1 && r.ZKeys == 0 && (p.kind == rToken || r.Count == 1 && r.Owner == string(p.val)) {
			w.Int(int64(r.Token))
		} else {
			w.Null()
		}
	case rCADMissing:
		if r.Found == 0 {
			w.Int(-1)
		} else {
			w.Int(int64(r.Count))
		}
	case rPTTLIf:
		if r.Count == 1 && r.Owner == string(p.val) {
			w.Int(c.pttl(&r))
		} else {
			w.Int(-3)
		}
	case rPExpireAt:
		w.Int(expireTimeOf(&r))
	case rExpireAt:
		ms := expireTimeOf(&r)
		if ms > 0 {
			ms /= 1000
		}
		w.Int(ms)
	case rSubPong:
		w.Array(2)
		w.BulkString("pong")
		w.BulkString(p.msg)
	case rErrIfFound:
		if r.Found == 0 {
			w.Null()
		} else {
			w.Error(p.msg)
			return true
		}
	case rAllOrZero:
		if r.Count > 0 {
			w.Int(p.arg)
		} else {
			w.Int(0)
		}
	case rZRead:
		c.answerZRead(p.zq, r.ZSet)
	case rZIncr:
		if r.Count == 1 {
			w.Double(r.Score)
		} else {
			w.Null()
		}
	}
	return false
}

// pttl is Redis's PTTL of a read key: the milliseconds left of its lease,
// rounded up; -1 without a lease, -2 when it is free.
func (c *conn) pttl(r *fsm.Result) int64 {
	switch {
	case r.Found == 0:
		return -2
	case r.Expires == 0:
		return -1
	}
	left := r.Expires - c.at
	if left <= 0 {
		return 1
	}
	return (left + int64(time.Millisecond) - 1) / int64(time.Millisecond)
}

// errorReply is the reply to a failed command.
func errorReply(err error) string {
	if msg, ok := zsetErrorReply(err); ok {
		return msg
	}
	switch {
	case errors.Is(err, latch.ErrWouldBlock):
		return "LOCKED latch: the key is held by another owner; only SET NX takes a free key, and only its owner's value changes it"
	case errors.Is(err, latch.ErrShutdown):
		return "ERR latch: server shutting down"
	}
	return "ERR " + err.Error()
}

// Lock commands.

// readKey plans a read of key k (a tracked one): an OwnedGet, whose
// index in c.subs it returns, or false when k is refused (the plan has
// failed).
func (c *conn) readKey(k []byte) (first int, ok bool) {
	key, ok := c.key(k)
	if !ok {
		return 0, false
	}
	c.remember(key)
	first = len(c.subs)
	c.sub(fsm.OwnedGet, 0, nil, 0, c.one(key)...)
	return first, true
}

func planGet(c *conn, args [][]byte) {
	first, ok := c.readKey(args[1])
	if !ok {
		return
	}
	c.add(rGet, first).typed = true
}

func planType(c *conn, args [][]byte) {
	first, ok := c.readKey(args[1])
	if !ok {
		return
	}
	c.add(rType, first)
}

// planToken plans LATCH.TOKEN key [value]: the fencing token of the key's
// hold; with value, only if value owns it (nil otherwise), so that a client
// reading it after its SET NX cannot read the token of a holder that took
// the key once its own lease ended.
func planToken(c *conn, args [][]byte) {
	if len(args) > 3 {
		c.fail("ERR syntax error")
		return
	}
	first, ok := c.readKey(args[1])
	if !ok {
		return
	}
	if len(args) == 3 {
		c.add(rTokenIf, first).val = args[2]
		return
	}
	c.add(rToken, first)
}

func planTTL(c *conn, args [][]byte) {
	first, ok := c.readKey(args[1])
	if !ok {
		return
	}
	if len(args[0]) == 4 { // pttl
		c.add(rPTTL, first)
	} else {
		c.add(rTTL, first)
	}
}

func planExists(c *conn, args [][]byte) {
	first := len(c.subs)
	for _, a := range args[1:] {
		k, ok := c.key(a)
		if !ok {
			c.subs = c.subs[:first]
			return
		}
		c.remember(k)
		c.sub(fsm.OwnedGet, 0, nil, 0, c.one(k)...)
	}
	c.add(rExists, first)
}

// lease converts a Redis expire time, n units of unit, to a lease; ok is
// false when it overflows.
func lease(n int64, unit time.Duration) (time.Duration, bool) {
	if n > math.MaxInt64/int64(unit) || n < math.MinInt64/int64(unit) {
		return 0, false
	}
	return time.Duration(n) * unit, true
}

// upperOption returns a SET or GETEX option in upper case, without
// allocating for the options they know.
func upperOption(b []byte) string {
	for _, o := range [...]string{"NX", "XX", "EX", "PX", "KEEPTTL", "EXAT", "PXAT", "GET", "PERSIST"} {
		if bytes.EqualFold(b, []byte(o)) {
			return o
		}
	}
	return strings.ToUpper(string(b))
}

// lowerInPlace turns b to lower case where it is, and returns it: a
// script SHA1 as EVALSHA names it, without allocating.
func lowerInPlace(b []byte) []byte {
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return b
}

func planSetNX(c *conn, args [][]byte) {
	k, ok := c.key(args[1])
	if !ok || !c.value(args[2]) {
		return
	}
	first := len(c.subs)
	c.sub(fsm.OwnedAcquire, 0, args[2], 0, c.one(k)...)
	c.add(rCount, first)
}

func planGetSet(c *conn, args [][]byte) {
	k, ok := c.key(args[1])
	if !ok || !c.value(args[2]) {
		return
	}
	first := len(c.subs)
	c.sub(fsm.OwnedGetSet, 0, args[2], 0, c.one(k)...)
	c.add(rGetSet, first).typed = true
}

func planDel(c *conn, args [][]byte) {
	ks, ok := c.keys(args[1:])
	if !ok {
		return
	}
	first := len(c.subs)
	c.sub(fsm.OwnedRelease, 0, nil, 0, ks...)
	c.add(rCount, first)
}

func planPing(c *conn, args [][]byte) {
	if c.nsubs.Load() > 0 && c.w.Proto == 2 && len(args) <= 2 {
		p := plan{kind: rSubPong}
		if len(args) == 2 {
			p.msg = string(args[1])
		}
		c.plans = append(c.plans, p)
		return
	}
	switch len(args) {
	case 1:
		c.plans = append(c.plans, plan{kind: rSimple, msg: "PONG"})
	case 2:
		c.plans = append(c.plans, plan{kind: rBulk, msg: string(args[1])})
	default:
		c.fail("ERR wrong number of arguments for 'ping' command")
	}
}

func planEcho(c *conn, args [][]byte) {
	c.plans = append(c.plans, plan{kind: rBulk, msg: string(args[1])})
}

// Scripts.

// scriptInMulti answers a script queued in MULTI that is not a known lock
// script: Lua runs outside transactions only.
func scriptInMulti(sha string) string {
	return fmt.Sprintf("ERR latch: script %s cannot run inside MULTI: only the known lock scripts of the Redis lock libraries do (see docs/redis.md); run it outside a transaction", sha)
}

// planEval plans a known lock script (template) as its native operation;
// any other script runs in Lua (cmdEvalLua), outside MULTI.
func planEval(c *conn, args [][]byte) {
	var t template
	var sha []byte
	var line int
	if len(args[0]) == 4 { // eval
		t = recognise(args[1])
		s := scriptSHA(args[1])
		if t == tmplNone {
			c.fail(scriptInMulti(s))
			return
		}
		line = c.srv.load(s, t, args[1])
		sha = []byte(s)
	} else {
		var ok bool
		sha = lowerInPlace(args[1])
		if t, line, ok = c.srv.script(sha); !ok {
			if c.srv.lua.Get(string(sha)) != nil {
				c.fail(scriptInMulti(string(sha)))
				return
			}
			c.fail("NOSCRIPT No matching script. Please use EVAL.")
			return
		}
	}
	nk, ok := parseInt(args[2])
	switch {
	case !ok:
		c.fail("ERR value is not an integer or out of range")
		return
	case nk < 0:
		c.fail("ERR Number of keys can't be negative")
		return
	case nk > int64(len(args)-3):
		c.fail("ERR Number of keys can't be greater than number of args")
		return
	}
	keys, ok := c.keys(args[3 : 3+nk])
	if !ok {
		return
	}
	argv := args[3+nk:]
	n := len(c.plans)
	c.runTemplate(t, keys, argv)
	if len(c.plans) > n && t != tmplAcquireAll { // every other script GETs its keys
		p := &c.plans[len(c.plans)-1]
		p.typed, p.sha, p.line = true, sha, line
	}
}

// templateArgs are the KEYS (1: one, 0: one or more) and the fewest ARGV
// each template takes.
var templateArgs = map[template][2]int{
	tmplCAD: {1, 1}, tmplCADMissing: {1, 1}, tmplCAPX: {1, 2}, tmplCAPXOrSetNX: {1, 2},
	tmplExtendPy: {1, 3}, tmplExtendPyAdd: {1, 2}, tmplObtain: {1, 3}, tmplPTTLIf: {1, 1},
	tmplAcquireAll: {0, 2}, tmplReleaseCount: {0, 1}, tmplExtendAll: {0, 2},
}

// runTemplate plans template t over KEYS and ARGV.
func (c *conn) runTemplate(t template, keys []string, argv [][]byte) {
	need := templateArgs[t]
	if (need[0] == 1 && len(keys) != 1) || len(keys) == 0 || len(argv) < need[1] {
		c.fail(fmt.Sprintf("ERR latch: script %q takes %s and at least %d ARGV, got %d KEYS and %d ARGV",
			t.String(), map[int]string{0: "one or more KEYS", 1: "one KEY"}[need[0]], need[1], len(keys), len(argv)))
		return
	}
	if !c.value(argv[0]) {
		return
	}
	ms := func(i int) (time.Duration, bool) {
		n, ok := parseInt(argv[i])
		if !ok {
			c.fail(fmt.Sprintf("ERR latch: script %q: ARGV[%d] is not an integer", t.String(), i+1))
			return 0, false
		}
		d, ok := lease(n, time.Millisecond)
		if !ok {
			c.fail(fmt.Sprintf("ERR latch: script %q: ARGV[%d] is out of range", t.String(), i+1))
		}
		return d, ok
	}
	positive := func(d time.Duration) bool {
		if d <= 0 {
			c.fail(fmt.Sprintf("ERR latch: script %q: invalid expire time", t.String()))
			return false
		}
		return true
	}
	first := len(c.subs)
	switch t {
	case tmplCAD, tmplCADMissing:
		c.sub(fsm.OwnedRelease, fsm.OwnedMatch, argv[0], 0, keys...)
		if t == tmplCAD {
			c.add(rCount, first)
		} else {
			c.add(rCADMissing, first)
		}
	case tmplCAPX, tmplExtendPy, tmplExtendPyAdd:
		d, ok := ms(1)
		if !ok {
			return
		}
		flags := fsm.OwnedMatch
		if t == tmplExtendPyAdd || (t == tmplExtendPy && string(argv[2]) == "0") {
			flags |= fsm.OwnedAdd
		}
		c.sub(fsm.OwnedRenew, flags, argv[0], d, keys...)
		c.add(rCount, first)
	case tmplCAPXOrSetNX:
		d, ok := ms(1)
		if !ok || !positive(d) {
			return
		}
		c.sub(fsm.OwnedObtain, fsm.OwnedMatch, argv[0], d, keys...)
		c.add(rCount, first)
	case tmplObtain:
		n, ok := parseInt(argv[1])
		if !ok || n < 0 || n > math.MaxUint32 {
			c.fail(fmt.Sprintf("ERR latch: script %q: ARGV[2] is not a length", t.String()))
			return
		}
		d, ok := ms(2)
		if !ok || !positive(d) {
			return
		}
		c.sub(fsm.OwnedObtain, 0, argv[0], d, keys...).Prefix = uint32(n)
		c.add(rOKOrNull, first)
	case tmplPTTLIf:
		c.sub(fsm.OwnedGet, 0, nil, 0, keys...)
		c.add(rPTTLIf, first).val = argv[0]
	case tmplAcquireAll:
		d, ok := ms(1)
		if !ok || !positive(d) {
			return
		}
		c.sub(fsm.OwnedAcquire, 0, argv[0], d, keys...)
		c.add(rAllOrZero, first).arg = int64(len(keys))
	case tmplReleaseCount:
		c.sub(fsm.OwnedRelease, fsm.OwnedMatch, argv[0], 0, keys...)
		c.add(rCount, first)
	case tmplExtendAll:
		d, ok := ms(1)
		if !ok || !positive(d) {
			return
		}
		c.sub(fsm.OwnedRenew, fsm.OwnedMatch|fsm.OwnedAll, argv[0], d, keys...)
		c.add(rAllOrZero, first).arg = int64(len(keys))
	default:
		c.fail("ERR latch: internal error: unknown script template")
	}
}
