package resp

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/latchd/latch/internal/fsm"
	"github.com/latchd/latch/internal/netserve"
)

// Transactions: MULTI queues the lock commands that follow (copies of
// them); EXEC plans them all and has the service apply them as one
// fsm.OpOwnedTx under the WATCHed keys' states, so that they apply
// atomically, or not at all (a nil reply) when a watched key changed.

func cmdMulti(c *conn, _ [][]byte) {
	if c.multi {
		c.w.Error("ERR MULTI calls can not be nested")
		return
	}
	c.multi = true
	c.w.Simple("OK")
}

// endTx ends the transaction and forgets the watches.
func (c *conn) endTx() {
	c.multi, c.dirty = false, false
	clear(c.queued)
	c.queued = c.queued[:0]
	c.watches = c.watches[:0]
}

func cmdDiscard(c *conn, _ [][]byte) {
	if !c.multi {
		c.w.Error("ERR DISCARD without MULTI")
		return
	}
	c.endTx()
	c.w.Simple("OK")
}

func cmdExec(c *conn, _ [][]byte) {
	if !c.multi {
		c.w.Error("ERR EXEC without MULTI")
		return
	}
	defer c.endTx()
	if c.dirty {
		c.w.Error("EXECABORT Transaction discarded because of previous errors.")
		return
	}
	c.subs, c.plans = c.subs[:0], c.plans[:0]
	for _, q := range c.queued {
		n := len(c.plans)
		c.srv.cmds[strings.ToLower(string(q[0]))].plan(c, q)
		if len(c.plans) == n { // cannot happen: every plan answers
			c.fail("ERR latch: internal error: a command planned no answer")
		}
	}
	if (len(c.subs) > 0 || len(c.watches) > 0) && !c.run(true) {
		c.clearPlan()
		c.w.NullArray()
		return
	}
	c.w.Array(len(c.plans))
	for i := range c.plans {
		c.answer(&c.plans[i])
	}
	c.clearPlan()
}

func cmdWatch(c *conn, args [][]byte) {
	if c.multi {
		c.w.Error("ERR WATCH inside MULTI is not allowed")
		return
	}
	for _, a := range args[1:] {
		c.plans = c.plans[:0]
		k, ok := c.key(a)
		if !ok {
			c.answer(&c.plans[0])
			return
		}
		r, _ := c.srv.svc.OwnedGet(k)
		if r.Err != nil {
			// A node that cannot read yet (it has not caught up with its
			// cluster) watches nothing: the keys before this one stay
			// watched, as when a key is refused.
			c.w.Error(errorReply(r.Err))
			return
		}
		c.watches = append(c.watches, fsm.WatchOfResult(k, &r))
	}
	c.w.Simple("OK")
}

func cmdUnwatch(c *conn, _ [][]byte) {
	c.watches = c.watches[:0]
	c.w.Simple("OK")
}

// Connection commands.

func cmdHello(c *conn, args [][]byte) {
	proto := c.w.Proto
	if len(args) > 1 {
		n, ok := parseInt(args[1])
		if !ok {
			c.w.Error("ERR Protocol version is not an integer or out of range")
			return
		}
		if n != 2 && n != 3 {
			c.w.Error("NOPROTO unsupported protocol version")
			return
		}
		proto = int(n)
	}
	name, setName := c.name, false
	for i := 2; i < len(args); i++ {
		switch opt := strings.ToUpper(string(args[i])); {
		case opt == "AUTH" && i+2 < len(args):
			if !c.auth(args[i+2]) {
				c.w.Error("WRONGPASS invalid username-password pair or user is disabled.")
				return
			}
			i += 2
		case opt == "SETNAME" && i+1 < len(args):
			name, setName = string(args[i+1]), true
			i++
		default:
			c.w.Error(fmt.Sprintf("ERR Syntax error in HELLO option '%s'", args[i]))
			return
		}
	}
	if !c.authed {
		c.w.Error("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time")
		return
	}
	if setName {
		if !validName(name) {
			c.w.Error("ERR Client names cannot contain spaces, newlines or special characters.")
			return
		}
		c.name = name
	}
	c.w.Proto = proto
	w := c.w
	w.Map(7)
	w.BulkString("server")
	w.BulkString("redis")
	w.BulkString("version")
	w.BulkString(redisVersion)
	w.BulkString("proto")
	w.Int(int64(proto))
	w.BulkString("id")
	w.Int(c.id)
	w.BulkString("mode")
	w.BulkString("standalone")
	w.BulkString("role")
	w.BulkString("master")
	w.BulkString("modules")
	w.Array(0)
}

// auth checks a token, comparing with every one so that the time taken
// does not tell which matched; on a match the connection takes its rights.
func (c *conn) auth(secret []byte) bool {
	match := netserve.Match(c.srv.tokens(), secret)
	if match == nil {
		return false
	}
	c.authed, c.token = true, match
	return true
}

func cmdAuth(c *conn, args [][]byte) {
	if len(args) > 3 {
		c.w.Error("ERR syntax error")
		return
	}
	if len(c.srv.tokens()) == 0 {
		c.w.Error("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?")
		return
	}
	if !c.auth(args[len(args)-1]) {
		c.w.Error("WRONGPASS invalid username-password pair or user is disabled.")
		return
	}
	c.w.Simple("OK")
}

func cmdSelect(c *conn, args [][]byte) {
	n, ok := parseInt(args[1])
	switch {
	case !ok:
		c.w.Error("ERR value is not an integer or out of range")
	case n != 0:
		c.w.Error("ERR DB index is out of range")
	default:
		c.w.Simple("OK")
	}
}

func validName(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '!' || s[i] > '~' {
			return false
		}
	}
	return true
}

func cmdClient(c *conn, args [][]byte) {
	sub := strings.ToUpper(string(args[1]))
	arity := map[string]int{"SETNAME": 3, "GETNAME": 2, "ID": 2, "SETINFO": 4, "NO-EVICT": 3, "NO-TOUCH": 3, "INFO": 2}
	n, ok := arity[sub]
	switch {
	case !ok:
		c.w.Error(fmt.Sprintf("ERR unknown subcommand '%s'. Try CLIENT HELP.", args[1]))
		return
	case len(args) != n:
		c.w.Error(fmt.Sprintf("ERR wrong number of arguments for 'client|%s' command", strings.ToLower(sub)))
		return
	}
	switch sub {
	case "SETNAME":
		if !validName(string(args[2])) {
			c.w.Error("ERR Client names cannot contain spaces, newlines or special characters.")
			return
		}
		c.name = string(args[2])
		c.w.Simple("OK")
	case "GETNAME":
		if c.name == "" {
			c.w.Null()
		} else {
			c.w.BulkString(c.name)
		}
	case "ID":
		c.w.Int(c.id)
	case "INFO":
		c.w.Verbatim(fmt.Sprintf("id=%d addr=%s name=%s db=0 resp=%d lib=latch\n", c.id, c.peer, c.name, c.w.Proto))
	default: // SETINFO, NO-EVICT, NO-TOUCH: nothing to do
		c.w.Simple("OK")
	}
}

func cmdInfo(c *conn, _ [][]byte) {
	s := c.srv
	var b strings.Builder
	line := func(k, v string) { b.WriteString(k + ":" + v + "\r\n") }
	b.WriteString("# Server\r\n")
	line("redis_version", redisVersion)
	line("redis_mode", "standalone")
	line("latch_version", s.cfg.Version)
	line("process_id", strconv.Itoa(os.Getpid()))
	line("run_id", fmt.Sprintf("%040x", s.started.UnixNano()))
	if a := s.Addr(); a != nil {
		line("tcp_port", portOf(a.String()))
	}
	line("uptime_in_seconds", strconv.FormatInt(int64(time.Since(s.started)/time.Second), 10))
	b.WriteString("\r\n# Clients\r\n")
	line("connected_clients", strconv.Itoa(s.clients()))
	b.WriteString("\r\n# Persistence\r\n")
	line("loading", "0")
	line("rdb_bgsave_in_progress", "0")
	line("aof_enabled", "0")
	b.WriteString("\r\n# Replication\r\n")
	line("role", "master")
	line("connected_slaves", "0")
	b.WriteString("\r\n# Keyspace\r\n")
	c.w.Verbatim(b.String())
}

func portOf(addr string) string {
	if i := strings.LastIndexByte(addr, ':'); i >= 0 {
		return addr[i+1:]
	}
	return ""
}

func cmdQuit(c *conn, _ [][]byte) {
	c.w.Simple("OK")
	c.closing = true
}

func cmdReset(c *conn, _ [][]byte) {
	c.endTx()
	c.name = ""
	c.w.Proto = 2
	c.authed, c.token = len(c.srv.tokens()) == 0, nil
	c.w.Simple("RESET")
}

func cmdCommand(c *conn, args [][]byte) {
	if len(args) == 1 {
		c.w.Array(0)
		return
	}
	switch strings.ToUpper(string(args[1])) {
	case "COUNT":
		c.w.Int(int64(len(c.srv.cmds)))
	case "DOCS":
		c.w.Map(0)
	case "INFO":
		c.w.Array(len(args) - 2)
		for range args[2:] {
			c.w.Null()
		}
	default:
		c.w.Error(fmt.Sprintf("ERR unknown subcommand '%s'. Try COMMAND HELP.", args[1]))
	}
}

// cmdConfig answers CONFIG GET for what benchmark tools and clients ask:
// latch saves nothing to disk. Other parameters are not reported, and
// nothing can be set.
func cmdConfig(c *conn, args [][]byte) {
	if strings.ToUpper(string(args[1])) != "GET" {
		c.w.Error(fmt.Sprintf("ERR latch: CONFIG %s is not supported", args[1]))
		return
	}
	if len(args) < 3 {
		c.w.Error("ERR wrong number of arguments for 'config|get' command")
		return
	}
	known := map[string]string{"save": "", "appendonly": "no"}
	var pairs []string
	for _, a := range args[2:] {
		k := strings.ToLower(string(a))
		if v, ok := known[k]; ok {
			pairs = append(pairs, k, v)
		}
	}
	c.w.Map(len(pairs) / 2)
	for _, p := range pairs {
		c.w.BulkString(p)
	}
}

// cmdWait answers that no replica acknowledged: latch has no Redis
// replicas.
func cmdWait(c *conn, args [][]byte) {
	if _, ok := parseInt(args[1]); !ok {
		c.w.Error("ERR value is not an integer or out of range")
		return
	}
	if _, ok := parseInt(args[2]); !ok {
		c.w.Error("ERR timeout is not an integer or out of range")
		return
	}
	c.w.Int(0)
}

func cmdScript(c *conn, args [][]byte) {
	switch strings.ToUpper(string(args[1])) {
	case "LOAD":
		if len(args) != 3 {
			c.w.Error("ERR wrong number of arguments for 'script|load' command")
			return
		}
		s, err := c.srv.lua.Load(args[2])
		if err != nil {
			c.w.Error(err.Error())
			return
		}
		if t := recognise(args[2]); t != tmplNone {
			c.srv.load(s.SHA, t, args[2])
		}
		c.w.BulkString(s.SHA)
	case "EXISTS":
		if len(args) < 3 {
			c.w.Error("ERR wrong number of arguments for 'script|exists' command")
			return
		}
		c.w.Array(len(args) - 2)
		for _, a := range args[2:] {
			sha := bytes.ToLower(a)
			if _, _, ok := c.srv.script(sha); ok || c.srv.lua.Get(string(sha)) != nil {
				c.w.Int(1)
			} else {
				c.w.Int(0)
			}
		}
	case "KILL":
		// Another connection's script (a loop's own cannot be running
		// while it answers this).
		if !c.srv.lua.Kill() {
			c.w.Error("NOTBUSY No scripts in execution right now.")
			return
		}
		c.w.Simple("OK")
	case "FLUSH":
		if len(args) > 3 || len(args) == 3 && !strings.EqualFold(string(args[2]), "async") && !strings.EqualFold(string(args[2]), "sync") {
			c.w.Error("ERR SCRIPT FLUSH only support SYNC|ASYNC option")
			return
		}
		c.srv.scriptsMu.Lock()
		clear(c.srv.loaded)
		c.srv.scriptsMu.Unlock()
		c.srv.lua.Flush()
		c.w.Simple("OK")
	default:
		c.w.Error(fmt.Sprintf("ERR unknown subcommand '%s'. Try SCRIPT HELP.", args[1]))
	}
}

func cmdFlush(c *conn, args [][]byte) {
	c.w.Error(fmt.Sprintf("ERR latch: %s is not supported: keys are locks; release them one by one, or force-release them over the admin API", strings.ToUpper(string(args[0]))))
}
