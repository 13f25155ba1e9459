// Package jepsen is latch's Jepsen-style test: workloads of lock clients
// over the Go client (dlock v3), dlock v2, memcached, Redis and ZooKeeper
// (go-zookeeper) run against a latch cluster while a nemesis kills,
// pauses and partitions its nodes;
// every operation is recorded with its outcome (unknown when no answer
// said what happened), and the history is checked at the end
// (internal/latchtest/jepsen/check): linearizable against a lock model,
// no double grant, no acknowledged write of the fenced register lost.
//
// TestJepsen runs it on real "latch serve" processes in a network
// namespace of its own; "make jepsen" runs it (docs/jepsen.md). The
// package's other tests run the same workloads against an in-process
// server, and the control, which must be caught.
package jepsen

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/latchd/latch/internal/latchtest/jepsen/check"
	"github.com/latchd/latch/internal/latchtest/jepsen/fenced"
)

// config is one run.
type config struct {
	duration time.Duration
	seed     uint64
	fencing  bool // false: the control, whose register trusts every token
	// fencedKeys is how many keys the fenced workload's holders share at
	// a time: with one, a holder's pause past its lease almost always
	// lets another take the lock.
	fencedKeys int
	targets    []Target
	// nemesis injects faults until its context ends, then heals them and
	// returns how many of each kind it injected; nil: none.
	nemesis func(ctx context.Context, w *workers) (map[string]int, error)
	out     string // where the history and visualisations go
	logf    func(format string, args ...any)
}

// result is what a run did and what the checkers found.
type result struct {
	ops     int
	faults  map[string]int
	unknown int
	pauses  int
	locks   check.LockReport
	reg     check.RegisterReport
	// grants counts the granted Acquires of each protocol; lost the holds
	// that ended without their holder asking (a v3 Lock's Done, a closed
	// connection, a Redis request whose outcome was lost).
	grants, lost map[string]int
	redis        redisFigures
	zk           zkFigures
}

// redisFigures are the Redis clients' figures.
type redisFigures struct {
	grants, tokens int // locks granted; those whose token was read
	renewals       int // renewals answered OK
	// leaseEnded counts releases and renewals answered "not held": the
	// lock's lease had ended.
	leaseEnded int
	unknown    int // requests whose outcome stayed unknown
	// known and lua count the releases and renewals answered, by the
	// scripts latch knows and by the hand-written ones it runs in Lua.
	known, lua int64
}

// count counts op in r's figures.
func (r *result) count(op check.Op) {
	if op.Kind == check.Lost {
		r.lost[op.Proto]++
		return // not a request
	}
	r.ops++
	if op.Outcome == check.Unknown {
		r.unknown++
	}
	if op.Kind == check.Acquire && op.Outcome == check.OK {
		r.grants[op.Proto]++
	}
	if op.Proto == "zookeeper" || op.Proto == "register" && strings.HasPrefix(op.Owner, "zookeeper-") {
		r.zk.count(op)
	}
	if op.Proto != "redis" {
		return
	}
	switch {
	case op.Outcome == check.Unknown:
		r.redis.unknown++
	case op.Kind == check.Acquire && op.Outcome == check.OK:
		r.redis.grants++
		if len(op.Tokens) > 0 {
			r.redis.tokens++
		}
	case op.Kind == check.Extend && op.Outcome == check.OK:
		r.redis.renewals++
	case op.Outcome == check.Fail:
		r.redis.leaseEnded++
	}
}

// safe says whether the history is safe.
func (r result) safe() bool { return r.locks.Safe() && r.reg.Safe() }

// summary is the run's one-line summary.
func (r result) summary() string {
	n := 0
	for _, c := range r.faults {
		n += c
	}
	return fmt.Sprintf("jepsen: ops=%d faults=%d double_grants=%d lost_writes=%d linearizable=%t",
		r.ops, n, r.locks.DoubleGrants, r.reg.LostWrites, r.locks.Linearizable)
}

// details are the figures behind the summary, one per line.
func (r result) details() []string {
	var faults, grants, lost []string
	for _, k := range slices.Sorted(maps.Keys(r.faults)) {
		faults = append(faults, fmt.Sprintf("%s=%d", k, r.faults[k]))
	}
	for _, k := range slices.Sorted(maps.Keys(r.grants)) {
		grants = append(grants, fmt.Sprintf("%s=%d", k, r.grants[k]))
	}
	for _, k := range slices.Sorted(maps.Keys(r.lost)) {
		lost = append(lost, fmt.Sprintf("%s=%d", k, r.lost[k]))
	}
	d := []string{
		fmt.Sprintf("faults: %s", strings.Join(faults, " ")),
		fmt.Sprintf("locks: keys=%d grants=%d unknown_outcomes=%d token_regressions=%d partial_grants=%d stuck=%d",
			r.locks.Keys, r.locks.Grants, r.unknown, r.locks.TokenRegressions, r.locks.PartialGrants, r.locks.Stuck),
		fmt.Sprintf("grants: %s", strings.Join(grants, " ")),
		fmt.Sprintf("holds lost without their holder asking: %s", strings.Join(lost, " ")),
		fmt.Sprintf("redis: grants=%d tokens=%d renewals=%d lease_ended=%d unknown_outcomes=%d scripts_known=%d scripts_lua=%d",
			r.redis.grants, r.redis.tokens, r.redis.renewals, r.redis.leaseEnded, r.redis.unknown, r.redis.known, r.redis.lua),
		r.zk.String(),
		fmt.Sprintf("register: writes=%d acked=%d refused_stale=%d client_pauses=%d lost_writes=%d token_violations=%d",
			r.reg.Writes, r.reg.Acked, r.reg.Rejected, r.pauses, r.reg.LostWrites, r.reg.TokenViolations),
	}
	for _, p := range append(r.locks.Problems, r.reg.Problems...) {
		d = append(d, "problem: "+p)
	}
	return d
}

// run runs the workloads against cfg.targets for cfg.duration under
// cfg.nemesis, lets every client finish, checks the history and writes it
// to cfg.out.
func run(cfg config) (result, error) {
	h := check.NewHistory()
	reg := fenced.New(cfg.fencing)
	w := newWorkers(h, cfg.targets, reg, cfg.seed, cfg.fencedKeys)
	w.start()
	ctx, cancel := context.WithTimeout(context.Background(), cfg.duration)
	defer cancel()
	res := result{faults: map[string]int{}, grants: map[string]int{}, lost: map[string]int{}}
	var nemErr error
	if cfg.nemesis != nil {
		res.faults, nemErr = cfg.nemesis(ctx, w)
	}
	<-ctx.Done()
	close(w.stop)
	done := make(chan struct{})
	go func() { w.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(callSlack + 2*sessionTTL + 10*time.Second):
		// Every request is bounded by callSlack: a worker still busy is
		// stuck outside any request, a bug of the harness.
		return res, fmt.Errorf("jepsen: workers did not end")
	}
	if nemErr != nil {
		return res, fmt.Errorf("jepsen: nemesis: %w", nemErr)
	}

	ops := h.Ops()
	for _, op := range ops {
		res.count(op)
	}
	res.pauses = w.pauses
	res.zk.expired = w.zkExpired.Load()
	res.redis.known, res.redis.lua = w.knownScripts.Load(), w.luaScripts.Load()
	var err error
	cfg.logf("checking %d operations", len(ops))
	start := time.Now()
	if res.locks, err = check.Locks(ops, 5*time.Minute, cfg.out); err != nil {
		return res, err
	}
	cfg.logf("locks checked in %v", time.Since(start).Round(time.Millisecond))
	final, accepted := reg.State()
	res.reg = check.Register(ops, final, accepted)
	err = check.WriteJSON(filepath.Join(cfg.out, "history.json"), struct {
		Seed     uint64                      `json:"seed"`
		Fencing  bool                        `json:"fencing"`
		Summary  string                      `json:"summary"`
		Details  []string                    `json:"details"`
		Ops      []check.Op                  `json:"ops"`
		Register map[string][]int            `json:"register"`
		Accepted map[string][]check.Accepted `json:"accepted"`
	}{cfg.seed, cfg.fencing, res.summary(), res.details(), ops, final, accepted})
	return res, err
}
