package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Phases of a timed run.
const (
	phaseWarmup int32 = iota
	phaseMeasure
	phaseStop
)

// runner holds what the connections of one run share.
type runner struct {
	cfg    Config
	recipe string
	prefix string // of the run's keys
	value  []byte
	errs   errorLog
	phase  atomic.Int32

	// handoff: the shared, in-process clock and lock state.
	epoch       time.Time
	holder      atomic.Int64 // connection holding the key, or -1
	lastHolder  atomic.Int64 // connection that released it last, or -1
	lastRelease atomic.Int64 // when it did, ns since epoch (0: never)
}

// errorLog counts errors and keeps the first few.
type errorLog struct {
	mu      sync.Mutex
	n       uint64
	samples []string
}

const maxSamples = 5

func (l *errorLog) add(conn int, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n++
	if len(l.samples) < maxSamples {
		l.samples = append(l.samples, fmt.Sprintf("conn %d: %v", conn, err))
	}
}

func (l *errorLog) count() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

// Run runs the benchmark cfg describes and returns its result. A run whose
// connections all fail, or that cannot start, returns an error; unexpected
// replies are counted in Result.Errors.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := &runner{
		cfg:    cfg,
		prefix: "bench:",
		value:  bytes.Repeat([]byte("v"), cfg.ValueSize),
		epoch:  time.Now(),
	}
	res := &Result{
		Target:   cfg.Target,
		Addr:     cfg.Addr,
		Workload: cfg.Workload,
		Conns:    cfg.Conns,
		Pipeline: cfg.Pipeline,
	}
	version, err := r.probe()
	if err != nil {
		return nil, err
	}
	res.Server = version
	if cfg.Target != TargetDLock {
		r.recipe = cfg.Recipe
		if r.recipe == RecipeAuto {
			r.recipe = RecipeAdd
			if strings.Contains(version, "yrmcds") || strings.Contains(version, "latch") {
				r.recipe = RecipeLock
			}
		}
		if cfg.Workload != WorkloadGetSet && cfg.Workload != WorkloadIdle {
			res.Recipe = r.recipe
		}
	}
	switch cfg.Workload {
	case WorkloadIdle:
		err = r.idle(ctx, res)
	case WorkloadHold:
		// Keys of its own, so that the items of an add recipe's earlier
		// hold, which outlive their connections, are not in the way.
		r.prefix = "bench" + strconv.FormatInt(time.Now().UnixNano()%(1<<40), 36) + ":"
		err = r.hold(ctx, res)
	default:
		err = r.timed(ctx, res)
	}
	res.Errors = r.errs.count()
	res.ErrorSamples = r.errs.samples
	if err != nil {
		return res, err
	}
	return res, nil
}

// newCodec returns a codec for the target; lockWait is the dlock Lock's
// wait (0: forever).
func (r *runner) newCodec(lockWait time.Duration) codec {
	switch r.cfg.Target {
	case TargetText:
		return newTextCodec(r.value, r.cfg.Exptime)
	case TargetBinary:
		return newBinaryCodec(r.value, r.cfg.Exptime)
	default:
		return &dlockCodec{protoVersion: uint32(r.cfg.DLockVersion), waitMicro: uint64(lockWait / time.Microsecond)}
	}
}

// probe checks that every server answers, and returns the version of the
// first.
func (r *runner) probe() (string, error) {
	var version string
	for i, addr := range r.cfg.Addrs() {
		v, err := r.probeOne(addr)
		if err != nil {
			return "", err
		}
		if i == 0 {
			version = v
		}
	}
	return version, nil
}

// probeOne checks that the server at addr answers, and returns its version.
func (r *runner) probeOne(addr string) (string, error) {
	w, err := dial(addr, r.cfg.Timeout)
	if err != nil {
		return "", fmt.Errorf("bench: %w", err)
	}
	defer w.close()
	c := r.newCodec(0)
	w.out = c.appendReq(w.out, opPing, nil, 1)
	if err := w.flush(time.Now()); err != nil {
		return "", fmt.Errorf("bench: %s: %w", addr, err)
	}
	v, err := c.version(w.r, 1)
	if err != nil {
		return "", fmt.Errorf("bench: %s does not speak %s: %w", addr, r.cfg.Target, err)
	}
	return v, nil
}

// lockOps returns the requests that take and release a lock.
func (r *runner) lockOps() (lock, unlock op) {
	if r.recipe == RecipeAdd {
		return opAdd, opDelete
	}
	return opLock, opUnlock
}

// pending is a request whose reply has not been read.
type pending struct {
	op  op
	key []byte
	seq uint32
}

// reply is what exchange read for a pending request.
type reply struct {
	out outcome
	err error // an *unexpectedError; already counted
}

// worker is one connection.
type worker struct {
	id   int
	r    *runner
	w    *wire
	c    codec
	seq  uint32
	pend []pending
	rep  []reply
	lat  *Histogram
	rng  uint64

	ops, reqs           uint64
	gets, sets, misses  uint64
	grants, handoffs    uint64
	regrants, wasted    uint64
	handoffLat, waitLat *Histogram
	keys                [][]byte // the connection's own keys (cycle)
	scratch             []byte   // keys built on the fly (hold)
}

// newWorker opens connection id, to the (id mod n)th of the n addresses:
// connections are spread round-robin over a cluster's nodes.
func (r *runner) newWorker(id int, c codec) (*worker, error) {
	addrs := r.cfg.Addrs()
	w, err := dial(addrs[id%len(addrs)], r.cfg.Timeout)
	if err != nil {
		return nil, fmt.Errorf("bench: connection %d: %w", id, err)
	}
	return &worker{
		id:   id,
		r:    r,
		w:    w,
		c:    c,
		pend: make([]pending, 0, r.cfg.Pipeline),
		rep:  make([]reply, 0, r.cfg.Pipeline),
		rng:  r.cfg.Seed*0x9e3779b97f4a7c15 + uint64(id+1)*0xbf58476d1ce4e5b9,
	}, nil
}

// add appends a request to the batch.
func (wk *worker) add(o op, key []byte) {
	wk.seq++
	if wk.seq == 0 {
		wk.seq = 1
	}
	wk.w.out = wk.c.appendReq(wk.w.out, o, key, wk.seq)
	wk.pend = append(wk.pend, pending{op: o, key: key, seq: wk.seq})
}

// exchange writes the batch with one write and reads its replies into
// wk.rep, recording their latencies in lat when it is not nil. Unexpected
// replies are counted; any other error ends the connection.
func (wk *worker) exchange(lat *Histogram) error {
	t0 := time.Now()
	if err := wk.w.flush(t0); err != nil {
		return err
	}
	wk.rep = wk.rep[:0]
	for _, p := range wk.pend {
		out, err := wk.c.readReply(wk.w.r, p.op, p.key, p.seq)
		if err != nil {
			var ue *unexpectedError
			if !errors.As(err, &ue) {
				return err
			}
			wk.r.errs.add(wk.id, err)
		}
		if lat != nil {
			lat.Record(time.Since(t0))
		}
		wk.rep = append(wk.rep, reply{out: out, err: err})
	}
	wk.pend = wk.pend[:0]
	return nil
}

// next returns a pseudo-random number (xorshift64*).
func (wk *worker) next() uint64 {
	x := wk.rng
	x ^= x >> 12
	x ^= x << 25
	x ^= x >> 27
	wk.rng = x
	return x * 0x2545f4914f6cdd1d
}

// key appends the run's key named by parts to dst.
func (r *runner) key(dst []byte, kind string, a, b int) []byte {
	dst = append(dst, r.prefix...)
	dst = append(dst, kind...)
	dst = strconv.AppendInt(dst, int64(a), 10)
	if b >= 0 {
		dst = append(dst, ':')
		dst = strconv.AppendInt(dst, int64(b), 10)
	}
	return dst
}

// setAll sets keys in pipelined batches.
func (wk *worker) setAll(keys [][]byte) error {
	batch := max(wk.r.cfg.Pipeline, 64)
	for i, k := range keys {
		wk.add(opSet, k)
		if len(wk.pend) == batch || i == len(keys)-1 {
			if err := wk.exchange(nil); err != nil {
				return err
			}
		}
	}
	return nil
}

// dialAll opens n connections.
func (r *runner) dialAll(n int, lockWait time.Duration) ([]*worker, error) {
	ws := make([]*worker, 0, n)
	for i := range n {
		wk, err := r.newWorker(i, r.newCodec(lockWait))
		if err != nil {
			closeAll(ws)
			return nil, err
		}
		ws = append(ws, wk)
	}
	return ws, nil
}

func closeAll(ws []*worker) {
	for _, wk := range ws {
		wk.w.close()
	}
}

// parallel runs f on every worker at once and returns the number that
// failed; their errors are counted.
func parallel(ws []*worker, f func(*worker) error) int {
	var wg sync.WaitGroup
	var failed atomic.Int64
	for _, wk := range ws {
		wg.Go(func() {
			if err := f(wk); err != nil {
				wk.r.errs.add(wk.id, err)
				failed.Add(1)
			}
		})
	}
	wg.Wait()
	return int(failed.Load())
}

// cycleWait is the wait of a dlock Lock in cycle and hold, whose keys are
// free: it bounds a wait that should not happen.
const cycleWait = 10 * time.Second

// timed runs cycle, getset or handoff for the warm-up and measured time.
func (r *runner) timed(ctx context.Context, res *Result) error {
	lockWait := cycleWait
	if r.cfg.Workload == WorkloadHandoff {
		lockWait = 0 // forever: the server queues the waiters
	}
	ws, err := r.dialAll(r.cfg.Conns, lockWait)
	if err != nil {
		return err
	}
	defer closeAll(ws)

	// Setup: the items the lock recipe needs, the getset key space.
	var setup func(*worker) error
	var loop func(*worker) error
	switch r.cfg.Workload {
	case WorkloadCycle:
		per := max(1, r.cfg.Keys/r.cfg.Conns)
		for _, wk := range ws {
			wk.keys = make([][]byte, per)
			for i := range wk.keys {
				wk.keys[i] = r.key(nil, "c", wk.id, i)
			}
		}
		if r.recipe == RecipeLock {
			setup = func(wk *worker) error { return wk.setAll(wk.keys) }
		}
		loop = (*worker).cycle
	case WorkloadGetSet:
		keys := make([][]byte, r.cfg.Keys)
		for i := range keys {
			keys[i] = r.key(nil, "g", i, -1)
		}
		for _, wk := range ws {
			wk.keys = keys
		}
		setup = func(wk *worker) error {
			var mine [][]byte
			for i := wk.id; i < len(keys); i += len(ws) {
				mine = append(mine, keys[i])
			}
			return wk.setAll(mine)
		}
		loop = (*worker).getset
	case WorkloadHandoff:
		key := r.key(nil, "handoff", 0, -1)
		for _, wk := range ws {
			wk.keys = [][]byte{key}
		}
		if r.recipe == RecipeLock {
			setup = func(wk *worker) error {
				if wk.id > 0 {
					return nil
				}
				return wk.setAll(wk.keys)
			}
		}
		r.holder.Store(-1)
		r.lastHolder.Store(-1)
		if r.cfg.Target == TargetDLock {
			loop = (*worker).handoffQueued
		} else {
			loop = (*worker).handoffPolling
		}
	}
	if setup != nil {
		if parallel(ws, setup) > 0 {
			return errors.New("bench: setup failed")
		}
	}
	for _, wk := range ws {
		wk.lat = new(Histogram)
		if r.cfg.Workload == WorkloadHandoff {
			wk.handoffLat, wk.waitLat = new(Histogram), new(Histogram)
		}
	}

	var wg sync.WaitGroup
	var failed atomic.Int64
	for _, wk := range ws {
		wg.Go(func() {
			if err := loop(wk); err != nil && r.phase.Load() != phaseStop {
				r.errs.add(wk.id, err)
				failed.Add(1)
			}
		})
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()

	sleep(ctx, finished, r.cfg.Warmup)
	cpu0, cpuOK := r.serversCPU()
	r.phase.Store(phaseMeasure)
	start := time.Now()
	sleep(ctx, finished, r.cfg.Duration)
	r.phase.Store(phaseStop)
	elapsed := time.Since(start)
	cpu1, cpuOK1 := r.serversCPU()
	select {
	case <-finished:
	case <-time.After(r.cfg.Timeout):
		// Stuck connections (a server that stopped answering) are
		// closed and counted.
		for _, wk := range ws {
			wk.w.nc.SetDeadline(time.Now())
		}
		<-finished
	}
	if int(failed.Load()) == len(ws) {
		return errors.New("bench: every connection failed")
	}
	r.collect(res, ws, elapsed)
	if cpuOK && cpuOK1 {
		ops := res.Ops
		if res.Handoff != nil {
			ops = res.Handoff.Handoffs
		}
		res.ServerCPU = cpuResult(r.pids(), cpu0, cpu1, ops, res.Requests)
	}
	return ctx.Err()
}

// sleep waits for d, or until ctx is done or finished is closed.
func sleep(ctx context.Context, finished <-chan struct{}, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	case <-finished:
	}
}

// collect sums the workers' counts into res.
func (r *runner) collect(res *Result, ws []*worker, elapsed time.Duration) {
	var lat, hl, wl Histogram
	var minG, maxG uint64 = math.MaxUint64, 0
	h := &HandoffResult{}
	g := &GetSetResult{}
	for _, wk := range ws {
		res.Ops += wk.ops
		res.Requests += wk.reqs
		lat.Merge(wk.lat)
		g.Gets += wk.gets
		g.Sets += wk.sets
		g.Misses += wk.misses
		if wk.handoffLat != nil {
			hl.Merge(wk.handoffLat)
			wl.Merge(wk.waitLat)
			h.Grants += wk.grants
			h.Handoffs += wk.handoffs
			h.Regrants += wk.regrants
			h.WastedPolls += wk.wasted
			minG, maxG = min(minG, wk.grants), max(maxG, wk.grants)
		}
	}
	secs := elapsed.Seconds()
	res.Seconds = math.Round(secs*1000) / 1000
	res.OpsPerSec = math.Round(float64(res.Ops) / secs)
	res.RequestsPerSec = math.Round(float64(res.Requests) / secs)
	res.Latency = latencyOf(&lat)
	switch r.cfg.Workload {
	case WorkloadGetSet:
		res.GetSet = g
	case WorkloadHandoff:
		h.HandoffsPerSec = math.Round(float64(h.Handoffs) / secs)
		h.WastedPollsPerSec = math.Round(float64(h.WastedPolls) / secs)
		h.HandoffLatency = latencyOf(&hl)
		h.Wait = latencyOf(&wl)
		h.MinGrants, h.MaxGrants = minG, maxG
		h.Fairness = math.Inf(1)
		if minG > 0 {
			h.Fairness = math.Round(float64(maxG)/float64(minG)*1000) / 1000
		}
		res.Handoff = h
	}
}

// measuring reports whether the run is in its measured time, and whether
// it should go on.
func (wk *worker) measuring() (measure, goOn bool) {
	p := wk.r.phase.Load()
	return p == phaseMeasure, p != phaseStop
}

// cycle locks and unlocks the connection's keys in turn, Pipeline requests
// per batch: lock k0, unlock k0, lock k1, ...
func (wk *worker) cycle() error {
	lock, unlock := wk.r.lockOps()
	var i int // position in the sequence of requests
	for {
		measure, goOn := wk.measuring()
		if !goOn {
			if i%2 == 1 {
				// The last lock's unlock was not sent: send it, so
				// that the add recipe leaves no key taken for the
				// next run.
				wk.add(unlock, wk.keys[(i/2)%len(wk.keys)])
				return wk.exchange(nil)
			}
			return nil
		}
		for len(wk.pend) < wk.r.cfg.Pipeline {
			k := wk.keys[(i/2)%len(wk.keys)]
			if i%2 == 0 {
				wk.add(lock, k)
			} else {
				wk.add(unlock, k)
			}
			i++
		}
		var lat *Histogram
		if measure {
			lat = wk.lat
		}
		ops := wk.pend[:len(wk.pend):len(wk.pend)] // exchange empties pend, not the array
		if err := wk.exchange(lat); err != nil {
			return err
		}
		for j, rp := range wk.rep {
			if rp.err != nil {
				continue
			}
			if rp.out != done {
				// A lock refused on the connection's own key.
				wk.r.errs.add(wk.id, &unexpectedError{op: ops[j].op, got: "refused: the connection's own key is taken"})
				continue
			}
			if measure {
				wk.reqs++
				if ops[j].op == unlock {
					wk.ops++
				}
			}
		}
	}
}

// getset makes random gets and sets over the key space.
func (wk *worker) getset() error {
	cfg := &wk.r.cfg
	total := uint64(cfg.GetRatio + cfg.SetRatio)
	n := uint64(len(wk.keys))
	for {
		measure, goOn := wk.measuring()
		if !goOn {
			return nil
		}
		for len(wk.pend) < cfg.Pipeline {
			x := wk.next()
			k := wk.keys[(x>>20)%n]
			if x%total < uint64(cfg.GetRatio) {
				wk.add(opGet, k)
			} else {
				wk.add(opSet, k)
			}
		}
		var lat *Histogram
		if measure {
			lat = wk.lat
		}
		ops := wk.pend[:len(wk.pend):len(wk.pend)]
		if err := wk.exchange(lat); err != nil {
			return err
		}
		if !measure {
			continue
		}
		for j, rp := range wk.rep {
			if rp.err != nil {
				continue
			}
			wk.reqs++
			wk.ops++
			if ops[j].op == opGet {
				wk.gets++
				if rp.out == miss {
					wk.misses++
				}
			} else {
				wk.sets++
			}
		}
	}
}

// now returns the shared clock: nanoseconds since the run's epoch.
func (r *runner) now() int64 { return int64(time.Since(r.epoch)) }

// granted records a grant received at t after asking at asked.
func (wk *worker) granted(t, asked int64, measure bool) {
	r := wk.r
	if prev := r.holder.Swap(int64(wk.id)); prev != -1 {
		r.errs.add(wk.id, fmt.Errorf("mutual exclusion violated: granted while connection %d holds the key", prev))
	}
	if !measure {
		return
	}
	wk.grants++
	wk.reqs++
	wk.ops++
	wk.waitLat.Record(time.Duration(t - asked))
	last, from := r.lastRelease.Load(), r.lastHolder.Load()
	if from == int64(wk.id) || last == 0 {
		wk.regrants++
		return
	}
	wk.handoffs++
	wk.handoffLat.Record(time.Duration(t - last))
}

// releasing records that the connection is about to send its unlock.
func (wk *worker) releasing() {
	r := wk.r
	r.holder.Store(-1)
	r.lastHolder.Store(int64(wk.id))
	r.lastRelease.Store(r.now())
}

// handoffQueued contends for the key over dlock: the server queues the
// Locks, and a holder sends its Unlock and its next Lock together.
func (wk *worker) handoffQueued() error {
	key := wk.keys[0]
	wk.add(opLock, key)
	asked := wk.r.now()
	if err := wk.w.flush(time.Now()); err != nil {
		return err
	}
	for {
		// The grant: the reply to the Lock sent last.
		wk.w.extendDeadline(time.Now())
		p := wk.pend[len(wk.pend)-1]
		out, err := wk.c.readReply(wk.w.r, p.op, p.key, p.seq)
		t := wk.r.now()
		wk.pend = wk.pend[:0]
		if err != nil {
			return err
		}
		if out != done {
			return &unexpectedError{op: opLock, got: "refused while waiting forever"}
		}
		measure, goOn := wk.measuring()
		wk.granted(t, asked, measure)

		wk.add(opUnlock, key)
		if goOn {
			wk.add(opLock, key)
		}
		wk.releasing()
		asked = wk.r.now()
		if err := wk.w.flush(time.Now()); err != nil {
			return err
		}
		u := wk.pend[0]
		if _, err := wk.c.readReply(wk.w.r, u.op, u.key, u.seq); err != nil {
			return err
		}
		if measure {
			wk.reqs++
		}
		if !goOn {
			return nil
		}
		wk.pend[0] = wk.pend[1] // the Lock just sent
		wk.pend = wk.pend[:1]
	}
}

// handoffPolling contends for the key over memcached as the client recipes
// do: a refused lock is retried after the poll interval, and a holder
// that released asks again at once. Taking the key straight back is a
// regrant, counted apart from the hand-offs (granted).
func (wk *worker) handoffPolling() error {
	lock, unlock := wk.r.lockOps()
	key := wk.keys[0]
	poll := wk.r.cfg.PollInterval
	for {
		asked := wk.r.now()
		for {
			if _, goOn := wk.measuring(); !goOn {
				return nil
			}
			wk.add(lock, key)
			if err := wk.exchange(nil); err != nil {
				return err
			}
			rp := wk.rep[0]
			if rp.err == nil && rp.out == done {
				break
			}
			if rp.err == nil {
				if measure, _ := wk.measuring(); measure {
					wk.wasted++
					wk.reqs++
				}
			}
			time.Sleep(poll)
		}
		measure, _ := wk.measuring()
		wk.granted(wk.r.now(), asked, measure)
		wk.releasing()
		wk.add(unlock, key)
		if err := wk.exchange(nil); err != nil {
			return err
		}
		if wk.rep[0].err == nil && measure {
			wk.reqs++
		}
	}
}

// hold takes cfg.Locks locks spread over the connections, then samples
// the server's memory.
func (r *runner) hold(ctx context.Context, res *Result) error {
	s := newSampler(&r.cfg)
	ws, err := r.dialAll(r.cfg.Conns, cycleWait)
	if err != nil {
		return err
	}
	defer closeAll(ws)
	m := &MemoryResult{Locks: r.cfg.Locks, Conns: len(ws), Source: s.source()}
	res.Memory = m
	sample := func() (Memory, error) {
		if !s.enabled() {
			return Memory{RSS: -1, Heap: -1}, nil
		}
		return s.sample(ctx)
	}
	if m.Before, err = sample(); err != nil {
		return err
	}
	share := func(wk *worker) (from, to int) {
		n := r.cfg.Locks / len(ws)
		extra := r.cfg.Locks % len(ws)
		from = wk.id*n + min(wk.id, extra)
		to = from + n
		if wk.id < extra {
			to++
		}
		return from, to
	}
	// each makes request o on every key of the connection's share.
	each := func(o op) func(*worker) error {
		return func(wk *worker) error {
			from, to := share(wk)
			batch := wk.r.cfg.Pipeline
			for i := from; i < to; {
				for ; i < to && len(wk.pend) < batch; i++ {
					wk.scratch = r.key(wk.scratch[:0], "h", i, -1)
					wk.add(o, wk.scratch)
					// appendReq copied the key, and no reply to o
					// needs it: the scratch buffer can move on.
					wk.pend[len(wk.pend)-1].key = nil
				}
				if err := wk.exchange(nil); err != nil {
					return err
				}
				for _, rp := range wk.rep {
					if rp.err == nil {
						if rp.out != done {
							wk.r.errs.add(wk.id, &unexpectedError{op: o, got: "refused: a fresh key is taken"})
							continue
						}
						if o != opSet {
							wk.ops++
						}
					}
				}
			}
			return nil
		}
	}
	lock, _ := r.lockOps()
	start := time.Now()
	if r.cfg.Target != TargetDLock && r.recipe == RecipeLock {
		if parallel(ws, each(opSet)) > 0 {
			return errors.New("bench: setting the items failed")
		}
		items, err := sample()
		if err != nil {
			return err
		}
		m.Items = &items
	}
	if parallel(ws, each(lock)) > 0 {
		return errors.New("bench: taking the locks failed")
	}
	m.Seconds = math.Round(time.Since(start).Seconds()*1000) / 1000
	if m.After, err = sample(); err != nil {
		return err
	}
	for _, wk := range ws {
		res.Ops += wk.ops
	}
	res.Requests = res.Ops
	m.PerUnitRSS = perUnit(m.After.RSS, m.Before.RSS, r.cfg.Locks)
	m.PerUnitHeap = perUnit(m.After.Heap, m.Before.Heap, r.cfg.Locks)
	if m.Items != nil {
		m.PerLockOnlyRSS = perUnit(m.After.RSS, m.Items.RSS, r.cfg.Locks)
		m.PerLockHeap = perUnit(m.After.Heap, m.Items.Heap, r.cfg.Locks)
	}
	sleep(ctx, nil, r.cfg.HoldFor)
	return nil
}

// idle opens cfg.Conns connections, makes one request on each, and samples
// the server's memory.
func (r *runner) idle(ctx context.Context, res *Result) error {
	s := newSampler(&r.cfg)
	m := &MemoryResult{Conns: r.cfg.Conns, Source: s.source(), Before: Memory{RSS: -1, Heap: -1}, After: Memory{RSS: -1, Heap: -1}}
	res.Memory = m
	var err error
	if s.enabled() {
		if m.Before, err = s.sample(ctx); err != nil {
			return err
		}
	}
	start := time.Now()
	ws, err := r.dialAll(r.cfg.Conns, cycleWait)
	if err != nil {
		return err
	}
	defer closeAll(ws)
	for _, wk := range ws {
		wk.add(opPing, nil)
		if err := wk.w.flush(time.Now()); err != nil {
			return fmt.Errorf("bench: connection %d: %w", wk.id, err)
		}
	}
	for _, wk := range ws {
		p := wk.pend[0]
		wk.pend = wk.pend[:0]
		if _, err := wk.c.readReply(wk.w.r, p.op, p.key, p.seq); err != nil {
			var ue *unexpectedError
			if !errors.As(err, &ue) {
				return fmt.Errorf("bench: connection %d: %w", wk.id, err)
			}
			r.errs.add(wk.id, err)
			continue
		}
		res.Ops++
	}
	res.Requests = res.Ops
	m.Seconds = math.Round(time.Since(start).Seconds()*1000) / 1000
	if s.enabled() {
		if m.After, err = s.sample(ctx); err != nil {
			return err
		}
	}
	m.PerUnitRSS = perUnit(m.After.RSS, m.Before.RSS, len(ws))
	m.PerUnitHeap = perUnit(m.After.Heap, m.Before.Heap, len(ws))
	return nil
}
