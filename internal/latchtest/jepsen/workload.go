package jepsen

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/latchd/latch"
	"github.com/latchd/latch/client"
	"github.com/latchd/latch/internal/admin"
	"github.com/latchd/latch/internal/latchtest/jepsen/check"
	"github.com/latchd/latch/internal/latchtest/jepsen/fenced"
)

// Target is one server the workloads reach: its dlock, memcached, Redis
// and ZooKeeper addresses.
type Target struct {
	ID                                string
	DLock, Memcache, Redis, ZooKeeper string
	Admin                             string // its admin API, asked what a stuck request's keys look like
}

// Times the workloads use.
const (
	// callSlack bounds a request beyond the wait it asks for: a request
	// not answered by then is stuck (a waiter that never ended). It is
	// far above what a failover, a pause or a partition of this harness
	// takes to end a client's connection or session.
	callSlack = 25 * time.Second
	// sessionTTL is the Go client's session TTL.
	sessionTTL = 3 * time.Second
	// epoch is how long the workloads use one set of keys before they
	// move to fresh ones: every key's history stays short for porcupine.
	epoch = 10 * time.Second
	// lease and pause are the fenced workload's: a holder sometimes
	// stops between its read and its write for longer than its lease, as
	// a process paused by a collector or a VM would.
	lease = 800 * time.Millisecond
	pause = 2 * lease
)

// workers runs the workloads' clients and records what they see.
type workers struct {
	h        *check.History
	targets  []Target
	register *fenced.Register
	seed     uint64
	// fencedKeys is how many keys the fenced workload shares at a time.
	fencedKeys int
	stop       chan struct{} // closed: no new operations
	wg         sync.WaitGroup
	owners     atomic.Int64
	values     atomic.Int64
	zkExpired  atomic.Int64 // ZooKeeper sessions that their clients learned had expired
	// knownScripts and luaScripts count the Redis releases and renewals
	// answered, by the known scripts and by the hand-written ones.
	knownScripts, luaScripts atomic.Int64
	redisHolds               atomic.Int64 // Redis holds taken: one in two is released and renewed by the hand-written scripts

	mu      sync.Mutex
	holding map[int]string // worker: the target it holds a lock through, when known
	pauses  int            // client-side pauses of the fenced workload
}

func newWorkers(h *check.History, targets []Target, register *fenced.Register, seed uint64, fencedKeys int) *workers {
	return &workers{h: h, targets: targets, register: register, seed: seed, fencedKeys: max(fencedKeys, 1), stop: make(chan struct{}), holding: map[int]string{}}
}

func (w *workers) stopped() bool {
	select {
	case <-w.stop:
		return true
	default:
		return false
	}
}

// key names key i of a workload in the current epoch.
func (w *workers) key(prefix string, i int) string {
	return fmt.Sprintf("%s%d-%d", prefix, w.h.Now()/int64(epoch), i)
}

func (w *workers) owner(proto string, worker int) string {
	return fmt.Sprintf("%s-w%d-s%d", proto, worker, w.owners.Add(1))
}

func (w *workers) setHolding(worker int, target string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if target == "" {
		delete(w.holding, worker)
	} else {
		w.holding[worker] = target
	}
}

// holderTarget returns the target through which some worker holds a lock
// now, "" when none is known.
func (w *workers) holderTarget(rng *rand.Rand) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var ts []string
	for _, t := range w.holding {
		ts = append(ts, t)
	}
	if len(ts) == 0 {
		return ""
	}
	return ts[rng.IntN(len(ts))]
}

// sleep waits d, or less if the run stops.
func (w *workers) sleep(d time.Duration) {
	select {
	case <-time.After(d):
	case <-w.stop:
	}
}

// backOff waits a little after a request that was not granted, so that
// try-once requests do not spin.
func (w *workers) backOff(rng *rand.Rand) {
	w.sleep(time.Duration(10+rng.IntN(40)) * time.Millisecond)
}

// lockViews describes keys as every target's admin API shows them, for
// the report of a stuck request.
func (w *workers) lockViews(keys []string) string {
	var b strings.Builder
	for _, t := range w.targets {
		if t.Admin == "" {
			continue
		}
		for _, k := range keys {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			l, err := admin.NewClient(t.Admin).Lock(ctx, k)
			cancel()
			fmt.Fprintf(&b, "%s says %s: ", t.ID, k)
			if err != nil {
				fmt.Fprintf(&b, "%v; ", err)
				continue
			}
			fmt.Fprintf(&b, "%s holders %+v waiters %+v; ", l.Mode, l.Holders, l.Waiters)
		}
	}
	return b.String()
}

// spec is one kind of v3 lock request of a workload.
type spec struct {
	keys   []string
	mode   check.Mode
	limit  uint32
	lease  time.Duration
	wait   time.Duration // 0: try once
	strict bool
}

// v3 is a worker's Go client, with the session it carries.
type v3 struct {
	w      *workers
	id     int
	rng    *rand.Rand
	c      *client.Client
	owner  string
	target string // the first address it dialed
	asked  int64  // when the last Lock request was sent (history clock)
}

func (w *workers) newV3(id int) *v3 {
	return &v3{w: w, id: id, rng: rand.New(rand.NewPCG(w.seed, uint64(id)))}
}

// connect dials a new session, with every target's address, starting at
// a random one; false when the run stopped first.
func (v *v3) connect() bool {
	for !v.w.stopped() {
		i := v.rng.IntN(len(v.w.targets))
		var addrs []string
		for j := range v.w.targets {
			addrs = append(addrs, v.w.targets[(i+j)%len(v.w.targets)].DLock)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		c, err := client.Dial(ctx, strings.Join(addrs, ","), client.SessionTTL(sessionTTL), client.DialTimeout(2*time.Second))
		cancel()
		if err == nil {
			v.c, v.owner, v.target = c, v.w.owner("v3", v.id), v.w.targets[i].ID
			return true
		}
		v.w.sleep(100 * time.Millisecond)
	}
	return false
}

func (v *v3) reconnect() bool {
	if v.c != nil {
		v.c.Close()
		v.c = nil
	}
	return v.connect()
}

func (v *v3) close() {
	if v.c != nil {
		v.c.Close()
	}
}

func (v *v3) op(kind check.Kind, s spec) check.Op {
	return check.Op{Worker: v.id, Owner: v.owner, Proto: "v3", Node: v.target, Kind: kind, Keys: s.keys,
		Mode: s.mode, Limit: s.limit, Watched: true, Strict: s.strict}
}

// acquire asks for s and records it. It returns the lock when granted.
// After an outcome that is unknown, it records that the lock may be held
// until the server ends it, and moves to a new session.
func (v *v3) acquire(s spec) *client.Lock {
	op := v.op(check.Acquire, s)
	var opts []client.LockOption
	if s.limit > 0 {
		opts = append(opts, client.Limit(s.limit))
	}
	if s.lease > 0 {
		opts = append(opts, client.Lease(s.lease))
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.wait+callSlack)
	defer cancel()
	op.Call = v.w.h.Now()
	v.asked = op.Call
	var l *client.Lock
	var err error
	switch {
	case s.wait == 0 && s.mode == check.Shared:
		l, err = v.c.TryRLock(ctx, s.keys, opts...)
	case s.wait == 0:
		l, err = v.c.TryLock(ctx, s.keys, opts...)
	case s.mode == check.Shared:
		l, err = v.c.RLock(ctx, s.keys, append(opts, client.Wait(s.wait))...)
	default:
		l, err = v.c.Lock(ctx, s.keys, append(opts, client.Wait(s.wait))...)
	}
	op.Return = v.w.h.Now()
	switch {
	case err == nil:
		op.Outcome = check.OK
		for _, t := range l.Tokens() {
			op.Tokens = append(op.Tokens, uint64(t))
		}
	case errors.Is(err, latch.ErrWouldBlock) || errors.Is(err, latch.ErrTimeout):
		op.Outcome = check.Busy
	default:
		op.Outcome, op.Err = check.Unknown, err.Error()
		if op.Stuck = ctx.Err() != nil; op.Stuck {
			op.Err += "; " + v.w.lockViews(s.keys)
		}
	}
	v.w.h.Add(op)
	if op.Outcome == check.Unknown {
		lost := v.op(check.Lost, s)
		lost.Call, lost.Outcome = op.Call, check.Unknown
		v.w.h.Add(lost)
		v.reconnect()
	}
	return l
}

// release gives l back and records it, or records that it was lost at
// lostAt (when l's Done closed, as watched by watchDone) if it was.
//
// A leased lock is confirmed at most until its request was sent plus the
// lease: the server cannot end it sooner, and a client starved of CPU may
// see Done close later than that (which is what fencing is for).
func (v *v3) release(l *client.Lock, s spec, lostAt func() int64) {
	if at := lostAt(); at >= 0 {
		if s.lease > 0 {
			at = min(at, v.asked+int64(s.lease))
		}
		op := v.op(check.Lost, s)
		op.Call, op.Outcome, op.Err = at, check.Unknown, fmt.Sprint(l.Err())
		v.w.h.Add(op)
		v.reconnect()
		return
	}
	op := v.op(check.Release, s)
	ctx, cancel := context.WithTimeout(context.Background(), callSlack)
	defer cancel()
	op.Call = v.w.h.Now()
	err := l.Unlock(ctx)
	op.Return = v.w.h.Now()
	switch {
	case err == nil:
		op.Outcome = check.OK
	case errors.Is(err, latch.ErrNotHeld):
		op.Outcome, op.Err = check.Fail, err.Error()
	default:
		op.Outcome, op.Err = check.Unknown, err.Error()
		op.Stuck = ctx.Err() != nil
	}
	v.w.h.Add(op)
	if op.Outcome != check.OK {
		v.reconnect()
	}
}

// watchDone returns a function that tells when l's Done closed (on the
// history's clock), or -1 while it is open.
func (v *v3) watchDone(l *client.Lock) func() int64 {
	var at atomic.Int64
	at.Store(-1)
	stop := make(chan struct{})
	go func() {
		select {
		case <-l.Done():
			at.Store(v.w.h.Now())
		case <-stop:
		}
	}()
	return func() int64 {
		select {
		case <-l.Done():
			// Give the watcher the instant it saw.
			for at.Load() < 0 {
				time.Sleep(time.Millisecond)
			}
		default:
			close(stop)
		}
		return at.Load()
	}
}

// runV3 runs a v3 worker: next picks each request, and work is what it
// does while it holds the lock it was granted.
func (w *workers) runV3(id int, next func(rng *rand.Rand) spec, work func(v *v3, s spec, l *client.Lock)) {
	defer w.wg.Done()
	v := w.newV3(id)
	defer v.close()
	if !v.connect() {
		return
	}
	for !w.stopped() {
		s := next(v.rng)
		l := v.acquire(s)
		if l == nil {
			if v.c == nil {
				return
			}
			w.backOff(v.rng)
			continue
		}
		lostAt := v.watchDone(l)
		w.setHolding(id, v.target)
		work(v, s, l)
		w.setHolding(id, "")
		v.release(l, s, lostAt)
		if v.c == nil {
			return
		}
	}
}

// holdUpTo is the work of a v3 lock workload: keep the lock for up to d,
// or less if it is lost first.
func holdUpTo(d time.Duration) func(v *v3, s spec, l *client.Lock) {
	return func(v *v3, _ spec, l *client.Lock) {
		select {
		case <-time.After(time.Duration(v.rng.Int64N(int64(d) + 1))):
		case <-l.Done():
		}
	}
}

// runFenced runs a worker of the fenced register: under a leased lock,
// read the key's list with the lock's token, sometimes pause past the
// lease, write the list back with a value appended, unlock.
func (w *workers) runFenced(id int, keys int) {
	w.runV3(id, func(rng *rand.Rand) spec {
		return spec{keys: []string{w.key("f", rng.IntN(keys))}, mode: check.Exclusive, lease: lease, wait: 2 * time.Second, strict: true}
	}, func(v *v3, s spec, l *client.Lock) {
		w.updateRegister(id, v.owner, s.keys[0], uint64(l.Token()), v.rng)
	})
}

// updateRegister is the fenced workload's work under a lock of key with
// token: read the key's list with the token, sometimes pause past the
// lease, write the list back with a value appended.
func (w *workers) updateRegister(id int, owner, key string, token uint64, rng *rand.Rand) {
	w.updateRegisterPausing(id, owner, key, token, rng, func() { time.Sleep(pause) })
}

// updateRegisterPausing is updateRegister, with stall as the holder's
// pause.
func (w *workers) updateRegisterPausing(id int, owner, key string, token uint64, rng *rand.Rand, stall func()) {
	keys := []string{key}
	rd := check.Op{Worker: id, Owner: owner, Proto: "register", Kind: check.Read, Keys: keys, Token: token, Call: w.h.Now()}
	list, err := w.register.Read(key, token)
	rd.Return, rd.Value, rd.Outcome = w.h.Now(), list, check.OK
	if err != nil {
		rd.Outcome, rd.Err = check.Fail, err.Error()
	}
	w.h.Add(rd)
	if err != nil {
		return
	}
	if rng.IntN(4) == 0 {
		// The holder stops, its lease runs out, and another holder may
		// take the lock meanwhile.
		w.mu.Lock()
		w.pauses++
		w.mu.Unlock()
		stall()
	}
	add := int(w.values.Add(1))
	list = append(list, add)
	wr := check.Op{Worker: id, Owner: owner, Proto: "register", Kind: check.Write, Keys: keys, Token: token, Value: list, Add: add, Call: w.h.Now()}
	err = w.register.Write(key, token, owner, list, add)
	wr.Return, wr.Outcome = w.h.Now(), check.OK
	if err != nil {
		wr.Outcome, wr.Err = check.Fail, err.Error()
	}
	w.h.Add(wr)
}

// runConn runs a worker over a connection-bound protocol (dlock v2 or
// memcached) on the mutex keys, on one target per connection.
func (w *workers) runConn(id int, proto string, keys int) {
	defer w.wg.Done()
	rng := rand.New(rand.NewPCG(w.seed, uint64(id)))
	dial := func(t Target) (connLocker, error) {
		if proto == "v2" {
			return dialV2(t.DLock)
		}
		return dialMemcache(t.Memcache)
	}
	var conn connLocker
	var owner, target string
	connect := func() bool {
		if conn != nil {
			conn.close()
			conn = nil
		}
		for !w.stopped() {
			t := w.targets[rng.IntN(len(w.targets))]
			if c, err := dial(t); err == nil {
				conn, owner, target = c, w.owner(proto, id), t.ID
				return true
			}
			w.sleep(100 * time.Millisecond)
		}
		return false
	}
	if !connect() {
		return
	}
	defer func() {
		if conn != nil {
			conn.close()
		}
	}()
	newOp := func(kind check.Kind, key string) check.Op {
		return check.Op{Worker: id, Owner: owner, Proto: proto, Node: target, Kind: kind, Keys: []string{key}}
	}
	for !w.stopped() {
		key := w.key("m", rng.IntN(keys))
		// dlock v2 has no try-once (a wait of 0 waits forever); memcached's
		// lock never waits.
		wait := time.Duration(1+rng.IntN(3)) * 200 * time.Millisecond
		op := newOp(check.Acquire, key)
		op.Mode, op.Strict = check.Exclusive, true
		op.Call = w.h.Now()
		out, err := conn.lock(key, wait)
		op.Return, op.Outcome = w.h.Now(), out
		if err != nil {
			op.Err = err.Error()
			if op.Stuck = out == check.Unknown && time.Duration(op.Return-op.Call) >= wait+callSlack; op.Stuck {
				op.Err += fmt.Sprintf(" (wait %v); %s", wait, w.lockViews(op.Keys))
			}
		}
		w.h.Add(op)
		if out == check.Unknown {
			lost := newOp(check.Lost, key)
			lost.Call, lost.Outcome = op.Call, check.Unknown
			w.h.Add(lost)
		}
		if out != check.OK {
			if out != check.Busy {
				// The node may be down or without a leader: do not spin.
				w.sleep(100 * time.Millisecond)
				if !connect() {
					return
				}
			}
			w.backOff(rng)
			continue
		}
		w.setHolding(id, target)
		time.Sleep(time.Duration(rng.IntN(200)) * time.Millisecond)
		w.setHolding(id, "")
		rel := newOp(check.Release, key)
		rel.Call = w.h.Now()
		out, err = conn.unlock(key)
		rel.Return, rel.Outcome = w.h.Now(), out
		if err != nil {
			rel.Err = err.Error()
		}
		w.h.Add(rel)
		if out != check.OK && !connect() {
			return
		}
	}
}

// workloads starts every worker: the mutex over v3, v2, memcached and
// Redis, the fenced register over v3 and Redis, semaphores, shared locks
// and multi-key locks; and ZooKeeper's mutex and fenced register, on keys
// of their own (a ZooKeeper lock is a znode: it excludes only ZooKeeper
// clients).
func (w *workers) start() {
	id := 0
	spawn := func(f func(id int)) {
		w.wg.Add(1)
		go f(id)
		id++
	}
	const mutexKeys = 2
	fencedKeys := w.fencedKeys
	spawn(func(id int) {
		w.runV3(id, func(rng *rand.Rand) spec {
			return spec{keys: []string{w.key("m", rng.IntN(mutexKeys))}, mode: check.Exclusive,
				wait: time.Duration(rng.IntN(3)) * 300 * time.Millisecond, strict: true}
		}, holdUpTo(200*time.Millisecond))
	})
	for range 2 {
		spawn(func(id int) { w.runConn(id, "v2", mutexKeys) })
	}
	for range 2 {
		spawn(func(id int) { w.runConn(id, "memcache", mutexKeys) })
	}
	for range 2 {
		spawn(func(id int) { w.runRedisMutex(id, mutexKeys) })
	}
	for range 2 {
		spawn(func(id int) { w.runFenced(id, fencedKeys) })
	}
	spawn(func(id int) { w.runRedisFenced(id, fencedKeys) })
	for range 3 {
		spawn(func(id int) { w.runZKMutex(id, mutexKeys) })
	}
	for range 3 {
		spawn(func(id int) { w.runZKFenced(id, fencedKeys) })
	}
	for range 3 {
		spawn(func(id int) {
			w.runV3(id, func(rng *rand.Rand) spec {
				return spec{keys: []string{w.key("sem", 0)}, mode: check.Shared, limit: 2, wait: time.Second}
			}, holdUpTo(200*time.Millisecond))
		})
	}
	for range 3 {
		spawn(func(id int) {
			w.runV3(id, func(rng *rand.Rand) spec {
				if rng.IntN(3) == 0 {
					return spec{keys: []string{w.key("rw", 0)}, mode: check.Exclusive, wait: time.Second, strict: true}
				}
				return spec{keys: []string{w.key("rw", 0)}, mode: check.Shared, wait: time.Second}
			}, holdUpTo(150*time.Millisecond))
		})
	}
	for range 3 {
		spawn(func(id int) {
			w.runV3(id, func(rng *rand.Rand) spec {
				all := []int{0, 1, 2, 3}
				rng.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
				var keys []string
				for _, i := range all[:2+rng.IntN(2)] {
					keys = append(keys, w.key("mk", i))
				}
				return spec{keys: keys, mode: check.Exclusive, wait: 2 * time.Second}
			}, holdUpTo(100*time.Millisecond))
		})
	}
}
