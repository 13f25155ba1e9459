package resp

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/latchd/latch/internal/evloop"
	"github.com/latchd/latch/internal/fsm"
)

// Client-side caching (CLIENT TRACKING), as Redis 7 does it.
//
// A connection with tracking on is told when a key it may have cached
// changes: in the default mode, the keys it read (GET, EXISTS, TTL...,
// remembered in the tracking table when planned, so that a change between
// the remembering and the read is told too); in BCAST mode, every key
// under its prefixes. It is told by an invalidation message: a RESP3 push
// (>2 invalidate [keys]) on its own connection, or, with REDIRECT, on
// another connection, as a push if that one speaks RESP3, as a message of
// the channel __redis__:invalidate if it speaks RESP2 and has subscribed
// to any channel; a null instead of keys means "forget everything".
//
// The changes come from the lock table itself (Service's optional
// WatchKeys, internal/node): every change to a key's holder, lease or
// owner value that a command applies on this node, whatever proposed it
// (a client of any protocol on any node, an operator, a lease's end),
// in the order applied. A change a connection made itself is not told to
// it with NOLOOP (the node reports which client proposed a command).
//
// Delivery never blocks the lock table: a message is queued on its
// connection (at most maxPending bytes; more becomes one "forget
// everything") and written by the connection's event loop, after the
// replies of the requests it is answering, or, for a connection served by
// its goroutine, between requests (by the goroutine when it flushes, or by
// a writer goroutine of its own while it waits for input).

// maxTrackedKeys bounds the tracking table, as Redis's
// tracking-table-max-keys (whose default it takes): beyond it, keys are
// dropped from the table, and their readers told they changed.
const maxTrackedKeys = 1_000_000

// maxPending bounds the invalidations queued on a connection, in bytes:
// a connection that does not read them gets one null invalidation in
// their place.
const maxPending = 1 << 20

// invalidateChannel is the channel of RESP2 invalidation messages.
const invalidateChannel = "__redis__:invalidate"

// trackState is a connection's CLIENT TRACKING state, guarded by
// tracker.mu (the lock table's changes read it).
type trackState struct {
	on, bcast, optin, optout, noloop bool
	broken                           bool // the redirect target went away
	redirect                         int64
	prefixes                         []string
}

// tracker is the server's tracking table and its connections by id.
type tracker struct {
	mu    sync.Mutex
	conns map[int64]*conn // open connections, for REDIRECT
	// keys, in the default mode: key → its readers' connection ids (not
	// the connections: one closed since is forgotten when the key
	// changes, as Redis does, and its memory is not kept meanwhile).
	keys   map[string][]int64
	prefix map[string][]*conn            // BCAST: prefix → its connections
	on     int                           // connections with tracking on
	active atomic.Bool                   // on > 0: the lock table's news matter
	max    int                           // maxTrackedKeys (tests lower it)
	batch  map[*conn]map[string][]string // scratch: BCAST keys per connection and prefix

	// watch has the service tell changed (on) or stop (syncWatch);
	// nil when the service cannot tell, or once the server shuts down.
	// watch and watching are guarded by watchMu.
	watch    func(on bool)
	watchMu  sync.Mutex
	watching bool
}

// stopWatch has the service stop telling the tracker (the server shuts
// down).
func (t *tracker) stopWatch() {
	t.watchMu.Lock()
	defer t.watchMu.Unlock()
	if t.watching {
		t.watch(false)
		t.watching = false
	}
	t.watch = nil
}

// syncWatch has the service tell the tracker of its changes while some
// connection tracks, and not otherwise, so that a lock table nobody
// caches records nothing. Called without t.mu: the service calls changed
// under its own lock, which it takes before t.mu.
func (t *tracker) syncWatch() {
	t.watchMu.Lock()
	defer t.watchMu.Unlock()
	if t.watch == nil {
		return
	}
	if on := t.active.Load(); on != t.watching {
		t.watch(on)
		t.watching = on
	}
}

func newTracker() *tracker {
	return &tracker{conns: make(map[int64]*conn), keys: make(map[string][]int64), prefix: make(map[string][]*conn), max: maxTrackedKeys}
}

// Tracking reports the connections with client-side caching on and the
// keys of the tracking table, for metrics.
func (s *Server) Tracking() (clients, keys int) {
	t := s.track
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.on, len(t.keys)
}

// open registers c, a REDIRECT target from now on.
func (t *tracker) open(c *conn) {
	t.mu.Lock()
	t.conns[c.id] = c
	t.mu.Unlock()
}

// close forgets c, once it is closed.
func (t *tracker) close(c *conn) {
	t.mu.Lock()
	delete(t.conns, c.id)
	t.disable(c)
	t.mu.Unlock()
	t.syncWatch()
	c.endPush()
}

// tracking returns c's state; called with t.mu held.
func (c *conn) trk() *trackState {
	if c.tr == nil {
		c.tr = new(trackState)
	}
	return c.tr
}

// disable turns c's tracking off; called with t.mu held.
func (t *tracker) disable(c *conn) {
	tr := c.tr
	if tr == nil || !tr.on {
		return
	}
	for _, p := range tr.prefixes {
		t.prefix[p] = slices.DeleteFunc(t.prefix[p], func(x *conn) bool { return x == c })
		if len(t.prefix[p]) == 0 {
			delete(t.prefix, p)
		}
	}
	*tr = trackState{}
	t.on--
	if t.on == 0 {
		// Nobody to tell: the table goes, as Redis frees it.
		clear(t.keys)
		t.active.Store(false)
	}
}

// remember records that c reads keys, if c tracks them: called when a
// read of keys is planned, before it reads (Redis's read-only commands:
// GET, EXISTS, TTL, PTTL, TYPE, EXPIRETIME, PEXPIRETIME, LATCH.TOKEN, the
// sorted-set reads; and a script's, for its caller).
//
// A read that follows a write of the same key in the same step (a
// pipelined batch, a transaction, a script), which applies after it, is
// told as Redis tells it: Redis reads after its write, so the write
// invalidates only what was tracked before (and the read tracks the key
// again), and the key stays tracked. The step's own change is recognised
// by the client it names (fsm.Command.Client) until it is applied
// (settle).
func (c *conn) remember(keys ...string) {
	tc := c
	if c.trackFor != nil { // a script's reads: its caller's
		tc = c.trackFor
	}
	if !tc.tracks || (tc.optin && !tc.caching) || (tc.optout && tc.caching) {
		return
	}
	t := c.srv.track
	t.mu.Lock()
	defer t.mu.Unlock()
	if tc.tr == nil || !tc.tr.on || tc.tr.bcast {
		return
	}
	for _, k := range keys {
		ids := t.keys[k]
		in := slices.Contains(ids, tc.id)
		if c.writesKey(k) {
			if tc.own == nil {
				tc.own = make(map[string]bool)
			}
			tc.own[k] = in // in: told of the write, and tracked again
		}
		if !in {
			t.keys[k] = append(ids, tc.id)
		}
	}
	for len(t.keys) > t.max {
		for k, ids := range t.keys { // an arbitrary key, as Redis picks one at random
			delete(t.keys, k)
			for _, id := range ids {
				if x := t.conns[id]; x != nil {
					t.invalidate(x, k, 0)
				}
			}
			break
		}
	}
}

// writesKey reports whether the step being planned writes key before
// the read now planned.
func (c *conn) writesKey(key string) bool {
	subs := c.subs
	if c.srun != nil {
		subs = c.srun.tx
	}
	for i := range subs {
		if k := subs[i].Owned; k != fsm.OwnedGet && k != fsm.OwnedZGet && slices.Contains(subs[i].Req.Keys, key) {
			return true
		}
	}
	return false
}

// clientTag is the fsm.Command.Client of c's commands: its id when the
// changes they make are told to c differently (NOLOOP, remember), else 0.
func (c *conn) clientTag() uint64 {
	if c.noloop || len(c.own) > 0 {
		return uint64(c.id)
	}
	return 0
}

// settle ends what remember recorded of a step once it is applied.
func (c *conn) settle() {
	if len(c.own) == 0 {
		return
	}
	t := c.srv.track
	t.mu.Lock()
	clear(c.own)
	t.mu.Unlock()
}

// changed is what the lock table tells of the keys one command changed
// (node.KeysFunc): keys nil for every key.
func (t *tracker) changed(keys []string, by uint64) {
	if !t.active.Load() {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if keys == nil {
		t.flush()
		return
	}
	for i, k := range keys {
		if i > 0 && slices.Contains(keys[:i], k) {
			continue
		}
		if ids, ok := t.keys[k]; ok {
			delete(t.keys, k)
			var kept []int64
			for _, id := range ids {
				c := t.conns[id]
				if c == nil {
					continue // closed
				}
				told, own := c.own[k]
				if !own || uint64(c.id) != by {
					t.invalidate(c, k, by)
					continue
				}
				// A step of c's own that reads k after writing it.
				if told {
					t.invalidate(c, k, by)
				}
				kept = append(kept, id)
			}
			if kept != nil {
				t.keys[k] = kept
			}
		}
		for p, cs := range t.prefix {
			if !strings.HasPrefix(k, p) {
				continue
			}
			for _, c := range cs {
				if c.tr.noloop && uint64(c.id) == by {
					continue
				}
				if t.batch == nil {
					t.batch = make(map[*conn]map[string][]string)
				}
				m := t.batch[c]
				if m == nil {
					m = make(map[string][]string)
					t.batch[c] = m
				}
				m[p] = append(m[p], k)
			}
		}
	}
	// BCAST: one message per connection and prefix, with its keys.
	for c, m := range t.batch {
		ps := make([]string, 0, len(m))
		for p := range m {
			ps = append(ps, p)
		}
		sort.Strings(ps)
		for _, p := range ps {
			t.send(c, m[p])
		}
		delete(t.batch, c)
	}
}

// flush tells every tracking connection to forget everything: the lock
// table was replaced.
func (t *tracker) flush() {
	clear(t.keys)
	for _, c := range t.conns {
		if c.tr != nil && c.tr.on {
			t.send(c, nil)
		}
	}
}

// invalidate tells c, tracking in the default mode, that key changed
// (by the client numbered by). Called with t.mu held.
func (t *tracker) invalidate(c *conn, key string, by uint64) {
	tr := c.tr
	if tr == nil || !tr.on || tr.bcast || (tr.noloop && uint64(c.id) == by) {
		return
	}
	t.send(c, []string{key})
}

// send sends c's invalidation of keys (nil: everything) to its target.
// Called with t.mu held.
func (t *tracker) send(c *conn, keys []string) {
	target := c
	if r := c.tr.redirect; r != 0 {
		target = t.conns[r]
		if target == nil {
			c.tr.broken = true
			if c.proto.Load() == 3 {
				c.push(appendRedirBroken(nil, r))
			}
			return
		}
	}
	switch {
	case target.proto.Load() == 3:
		target.push(appendInvalidate(nil, keys, 3))
	case target.nsubs.Load() > 0:
		target.push(appendInvalidate(nil, keys, 2))
	}
}

// appendInvalidate appends an invalidation of keys (nil: everything) as
// Redis sends it: a push in RESP3, a message of __redis__:invalidate in
// RESP2.
func appendInvalidate(b []byte, keys []string, proto int) []byte {
	if proto == 3 {
		b = append(b, ">2\r\n$10\r\ninvalidate\r\n"...)
	} else {
		b = append(b, "*3\r\n$7\r\nmessage\r\n$20\r\n"+invalidateChannel+"\r\n"...)
	}
	if keys == nil {
		if proto == 3 {
			return append(b, "_\r\n"...)
		}
		return append(b, "$-1\r\n"...)
	}
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(len(keys)), 10)
	b = append(b, "\r\n"...)
	for _, k := range keys {
		b = append(b, '$')
		b = strconv.AppendInt(b, int64(len(k)), 10)
		b = append(b, "\r\n"...)
		b = append(b, k...)
		b = append(b, "\r\n"...)
	}
	return b
}

// appendRedirBroken appends the push that tells a RESP3 client its
// redirect target, id, is gone.
func appendRedirBroken(b []byte, id int64) []byte {
	b = append(b, ">2\r\n$21\r\ntracking-redir-broken\r\n:"...)
	b = strconv.AppendInt(b, id, 10)
	return append(b, "\r\n"...)
}

// Delivery.

// pushState is what a connection needs to be written to from outside its
// own goroutine or loop.
type pushState struct {
	pmu      sync.Mutex
	pending  []byte      // queued, not yet written
	pushed   atomic.Bool // pending is not empty: read without pmu
	overflow bool        // pending is one null invalidation in place of too many
	inInput  bool        // an event loop's Input runs: it writes pending at its end
	closed   bool
	lc       *evloop.Conn // the event loop's connection (Attach)

	// A goroutine's connection: wmu serializes writes to its socket, busy
	// says the goroutine serves a request (it writes pending when it
	// flushes), and the writer goroutine (started at the first push)
	// writes pending while the connection waits.
	wmu  sync.Mutex
	busy bool
	wake chan struct{}
	quit chan struct{}
}

// Attach keeps the event loop's connection (evloop.Attacher), to which
// invalidations are sent.
func (c *conn) Attach(lc *evloop.Conn) {
	c.pmu.Lock()
	c.lc = lc
	c.pmu.Unlock()
}

// push queues b for c (never blocking).
func (c *conn) push(b []byte) {
	c.pmu.Lock()
	if c.closed {
		c.pmu.Unlock()
		return
	}
	if c.lc != nil && !c.inInput {
		lc := c.lc
		c.pmu.Unlock()
		lc.Send(b)
		return
	}
	switch {
	case c.overflow:
		// What is queued says "forget everything": nothing to add until
		// it is written.
	case len(c.pending)+len(b) > maxPending:
		// Too much unread: forget everything instead.
		c.pending = appendInvalidate(c.pending[:0], nil, int(c.proto.Load()))
		c.overflow = true
	default:
		c.pending = append(c.pending, b...)
	}
	c.pushed.Store(true)
	if c.lc == nil && c.nc != nil {
		if c.wake == nil {
			c.wake, c.quit = make(chan struct{}, 1), make(chan struct{})
			go c.writer()
		}
		select {
		case c.wake <- struct{}{}:
		default:
		}
	}
	c.pmu.Unlock()
}

// writePushes writes what was pushed to c before the request it is about
// to serve, unless replies held back (a batch) must go first: Redis's
// order, where a change's invalidation follows the reply of the command
// that made it.
func (c *conn) writePushes() {
	if c.batch > 0 || !c.pushed.Load() {
		return
	}
	c.pmu.Lock()
	if len(c.pending) > 0 {
		c.writePending()
	}
	c.pmu.Unlock()
}

// takePending returns what is queued, and forgets it.
func (c *conn) takePending(dst []byte) []byte {
	c.pmu.Lock()
	dst = append(dst, c.pending...)
	c.pending, c.overflow = c.pending[:0], false
	c.pushed.Store(false)
	c.pmu.Unlock()
	return dst
}

// endPush stops the delivery to c.
func (c *conn) endPush() {
	c.pmu.Lock()
	defer c.pmu.Unlock()
	if c.closed {
		return
	}
	c.closed = true
	c.pending = nil
	if c.quit != nil {
		close(c.quit)
	}
}

// writer writes what is queued for a goroutine's connection while it
// waits for input.
func (c *conn) writer() {
	nc := c.nc.NetConn()
	for {
		select {
		case <-c.wake:
		case <-c.quit:
			return
		}
		c.wmu.Lock()
		if !c.busy {
			if b := c.takePending(nil); len(b) > 0 {
				if d := c.srv.cfg.WriteTimeout; d > 0 {
					nc.SetWriteDeadline(time.Now().Add(d))
				}
				_, err := nc.Write(b)
				nc.SetWriteDeadline(time.Time{})
				if err != nil {
					c.nc.Close()
				}
			}
		}
		c.wmu.Unlock()
	}
}

// Commands.

// syncTracking copies what the connection's own requests need of its
// tracking state; called with the tracker's lock held.
func (c *conn) syncTracking() {
	tr := c.tr
	c.tracks = tr != nil && tr.on && !tr.bcast
	c.optin = c.tracks && tr.optin
	c.optout = c.tracks && tr.optout
	c.noloop = tr != nil && tr.on && tr.noloop
}

// resetTracking turns tracking off and ends the subscriptions (RESET).
func (c *conn) resetTracking() {
	t := c.srv.track
	t.mu.Lock()
	t.disable(c)
	c.syncTracking()
	t.mu.Unlock()
	t.syncWatch()
	c.caching, c.cachingUsed = false, false
	clear(c.channels)
	clear(c.patterns)
	c.nsubs.Store(0)
}

// clientTracking is CLIENT TRACKING on|off [REDIRECT id] [PREFIX p]...
// [BCAST] [OPTIN] [OPTOUT] [NOLOOP].
func (c *conn) clientTracking(args [][]byte) {
	var opt trackState
	var redirect int64
	var prefixes []string
	for i := 3; i < len(args); i++ {
		more := i+1 < len(args)
		switch a := strings.ToUpper(string(args[i])); {
		case a == "REDIRECT" && more:
			i++
			if redirect != 0 {
				c.w.Error("ERR A client can only redirect to a single other client")
				return
			}
			n, ok := parseInt(args[i])
			if !ok {
				c.w.Error("ERR value is not an integer or out of range")
				return
			}
			c.srv.track.mu.Lock()
			_, exists := c.srv.track.conns[n]
			c.srv.track.mu.Unlock()
			if !exists {
				c.w.Error("ERR The client ID you want redirect to does not exist")
				return
			}
			redirect = n
		case a == "BCAST":
			opt.bcast = true
		case a == "OPTIN":
			opt.optin = true
		case a == "OPTOUT":
			opt.optout = true
		case a == "NOLOOP":
			opt.noloop = true
		case a == "PREFIX" && more:
			i++
			prefixes = append(prefixes, string(args[i]))
		default:
			c.w.Error("ERR syntax error")
			return
		}
	}
	t := c.srv.track
	defer t.syncWatch() // once t.mu is let go, before the reply is sent
	t.mu.Lock()
	defer t.mu.Unlock()
	tr := c.trk()
	switch strings.ToUpper(string(args[2])) {
	case "ON":
	case "OFF":
		t.disable(c)
		c.caching = false
		c.syncTracking()
		c.w.Simple("OK")
		return
	default:
		c.w.Error("ERR syntax error")
		return
	}
	switch {
	case !opt.bcast && len(prefixes) > 0:
		c.w.Error("ERR PREFIX option requires BCAST mode to be enabled")
		return
	case tr.on && tr.bcast != opt.bcast:
		c.w.Error("ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode.")
		return
	case opt.bcast && (opt.optin || opt.optout):
		c.w.Error("ERR OPTIN and OPTOUT are not compatible with BCAST")
		return
	case opt.optin && opt.optout:
		c.w.Error("ERR You can't specify both OPTIN mode and OPTOUT mode")
		return
	case tr.on && ((opt.optin && tr.optout) || (opt.optout && tr.optin)):
		c.w.Error("ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode.")
		return
	}
	if opt.bcast {
		for i, p := range prefixes {
			for _, q := range sortedStrings(tr.prefixes) {
				if strings.HasPrefix(p, q) || strings.HasPrefix(q, p) {
					c.w.Error(fmt.Sprintf("ERR Prefix '%s' overlaps with an existing prefix '%s'. Prefixes for a single client must not overlap.", p, q))
					return
				}
			}
			for _, q := range prefixes[i+1:] {
				if strings.HasPrefix(p, q) || strings.HasPrefix(q, p) {
					c.w.Error(fmt.Sprintf("ERR Prefix '%s' overlaps with another provided prefix '%s'. Prefixes for a single client must not overlap.", p, q))
					return
				}
			}
		}
		if len(prefixes) == 0 {
			prefixes = []string{""}
		}
	}
	if !tr.on {
		t.on++
		t.active.Store(true)
	}
	tr.on, tr.broken, tr.redirect = true, false, redirect
	tr.bcast, tr.optin, tr.optout, tr.noloop = opt.bcast, opt.optin, opt.optout, opt.noloop
	for _, p := range prefixes {
		if slices.Contains(tr.prefixes, p) {
			continue
		}
		tr.prefixes = append(tr.prefixes, p)
		t.prefix[p] = append(t.prefix[p], c)
	}
	c.syncTracking()
	c.w.Simple("OK")
}

func sortedStrings(s []string) []string {
	s = slices.Clone(s)
	sort.Strings(s)
	return s
}

// clientCaching is CLIENT CACHING yes|no: whether the next command's reads
// are tracked (OPTIN, OPTOUT).
func (c *conn) clientCaching(arg []byte) {
	if !c.trackingOn() {
		c.w.Error("ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled")
		return
	}
	switch strings.ToLower(string(arg)) {
	case "yes":
		if !c.optin {
			c.w.Error("ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.")
			return
		}
	case "no":
		if !c.optout {
			c.w.Error("ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.")
			return
		}
	default:
		c.w.Error("ERR syntax error")
		return
	}
	c.caching = true
	c.w.Simple("OK")
}

// trackingOn reports whether c tracks, in any mode.
func (c *conn) trackingOn() bool {
	t := c.srv.track
	t.mu.Lock()
	defer t.mu.Unlock()
	return c.tr != nil && c.tr.on
}

// clientGetRedir is CLIENT GETREDIR.
func (c *conn) clientGetRedir() {
	t := c.srv.track
	t.mu.Lock()
	r := int64(-1)
	if c.tr != nil && c.tr.on {
		r = c.tr.redirect
	}
	t.mu.Unlock()
	c.w.Int(r)
}

// clientTrackingInfo is CLIENT TRACKINGINFO.
func (c *conn) clientTrackingInfo() {
	t := c.srv.track
	t.mu.Lock()
	var tr trackState
	if c.tr != nil {
		tr = *c.tr
		tr.prefixes = sortedStrings(c.tr.prefixes)
	}
	t.mu.Unlock()
	var flags []string
	redirect := int64(-1)
	if !tr.on {
		flags = append(flags, "off")
	} else {
		redirect = tr.redirect
		flags = append(flags, "on")
		if tr.bcast {
			flags = append(flags, "bcast")
		}
		if tr.optin {
			flags = append(flags, "optin")
			if c.caching {
				flags = append(flags, "caching-yes")
			}
		}
		if tr.optout {
			flags = append(flags, "optout")
			if c.caching {
				flags = append(flags, "caching-no")
			}
		}
		if tr.noloop {
			flags = append(flags, "noloop")
		}
		if tr.broken {
			flags = append(flags, "broken_redirect")
		}
	}
	w := c.w
	w.Map(3)
	w.BulkString("flags")
	w.Set(len(flags))
	for _, f := range flags {
		w.BulkString(f)
	}
	w.BulkString("redirect")
	w.Int(redirect)
	w.BulkString("prefixes")
	w.Array(len(tr.prefixes))
	for _, p := range tr.prefixes {
		w.BulkString(p)
	}
}

// writePending buffers what was pushed to c (invalidations) for its next
// write, and forgets it. Called with c.pmu held.
func (c *conn) writePending() {
	c.bw.Write(c.pending)
	c.pending, c.overflow = c.pending[:0], false
	c.pushed.Store(false)
}
