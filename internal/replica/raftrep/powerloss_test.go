package raftrep_test

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/raft"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/replica/raftrep"
	"github.com/latchd/latch/internal/vfs"
	"github.com/latchd/latch/internal/vfs/crashfs"
)

// The power-loss test runs in-process clusters whose nodes keep their
// data dirs on crashable file systems (package crashfs), and kills them,
// cuts their power (dropping what they had not synced, tearing what they
// were writing), fails their disks and partitions them, while clients
// take and release leased locks. It checks what a lock service promises:
//
//   - no double grant: a grant acknowledged while an earlier grant of the
//     same key was held (not released, lease not over);
//   - no token twice: every acknowledged grant has its own token;
//   - no acknowledged grant lost: one that the cluster forgets before its
//     lease ends (a release answered "not held", or a key not held by it
//     at the end);
//   - no node refuses to start, unless its disk failed (then it refuses
//     until an operator clears it, and starts after a power cycle);
//   - at most one leader in a term; no node's term goes back, nor its
//     last vote on disk, whose candidate in a term never changes; the
//     logs agree once the cluster healed; every request is answered.
//
// LATCH_POWERLOSS_SEEDS runs more seeds (the default: 200, 5 under the
// race detector; make powerloss runs the 200),
// from LATCH_POWERLOSS_FIRST (1) on; LATCH_POWERLOSS_SEED runs one.
// LATCH_POWERLOSS_LOG=- logs every node to stderr; LATCH_POWERLOSS_LOG=DIR
// writes the log of each seed that fails into DIR. The control, with syncs that do nothing,
// must be caught.

const (
	plLease = 30 * time.Second
	plKeys  = 3
)

func powerLossSeeds(t *testing.T, def int) []uint64 {
	if s := os.Getenv("LATCH_POWERLOSS_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("LATCH_POWERLOSS_SEED: %v", err)
		}
		return []uint64{seed}
	}
	n := def
	if s := os.Getenv("LATCH_POWERLOSS_SEEDS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil {
			t.Fatalf("LATCH_POWERLOSS_SEEDS: %v", err)
		}
	}
	first := uint64(1)
	if s := os.Getenv("LATCH_POWERLOSS_FIRST"); s != "" {
		var err error
		if first, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("LATCH_POWERLOSS_FIRST: %v", err)
		}
	}
	seeds := make([]uint64, n)
	for i := range seeds {
		seeds[i] = first + uint64(i)
	}
	return seeds
}

func TestPowerLoss(t *testing.T) {
	restore := raftrep.SetExitHalted(func(string) {})
	defer restore()
	seeds := 200
	if raceEnabled {
		seeds = 5
	}
	for _, seed := range powerLossSeeds(t, seeds) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			var r *plResult
			synctest.Test(t, func(t *testing.T) { r = runPowerLoss(t, seed, false) })
			t.Logf("grants=%d schedule:\n%s", r.grants, strings.Join(r.schedule, "\n"))
			if len(r.violations) > 0 {
				t.Fatalf("seed %d (LATCH_POWERLOSS_SEED=%d): %d violations:\n%s\nschedule:\n%s", seed, seed, len(r.violations), strings.Join(r.violations, "\n"), strings.Join(r.schedule, "\n"))
			}
		})
	}
}

// TestPowerLossControl: with syncs that do nothing, the checker must find
// a violation: it would pass a log that syncs nothing otherwise.
func TestPowerLossControl(t *testing.T) {
	restore := raftrep.SetExitHalted(func(string) {})
	defer restore()
	caught := 0
	seeds := []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	if raceEnabled {
		seeds = seeds[:3]
	}
	for _, seed := range seeds {
		var r *plResult
		synctest.Test(t, func(t *testing.T) { r = runPowerLoss(t, seed, true) })
		if len(r.violations) > 0 {
			caught++
			t.Logf("seed %d: caught %d: %s", seed, len(r.violations), strings.Join(r.violations, "; "))
		}
	}
	if caught == 0 {
		t.Fatalf("no violation in %d seeds of a cluster whose syncs do nothing", len(seeds))
	}
}

type plGrant struct {
	key      string
	token    uint64
	client   int
	inv, ack time.Time
	rel      time.Time // when its release was asked for; zero: never
}

type plResult struct {
	violations []string
	schedule   []string
	grants     int
}

// plCluster is a cluster on crashable file systems, with what its
// clients and its nemesis share.
type plCluster struct {
	*cluster
	rng     *rand.Rand
	control bool
	res     *plResult
	start   time.Time

	raw map[string]*crashfs.FS // each node's file system, unwrapped (setFS)

	mu     sync.Mutex // guards nodes (through c.nodes), down and terms
	down   map[string]bool
	halted map[string]bool // nodes whose disk was made to fail
	// leaders holds the leader seen in each term; terms the highest term
	// each node was seen in.
	leaders  map[uint64]string
	terms    map[string]uint64
	wentBack map[string]bool
	// votes holds each node's last vote on disk, read after each crash:
	// its term never goes back, and its candidate in a term never changes.
	votes map[string]vote
	// asking holds what each client is asking, for a report of requests
	// left unanswered.
	asking sync.Map
}

func (p *plCluster) logf(format string, args ...any) {
	p.res.schedule = append(p.res.schedule, fmt.Sprintf("%8v ", time.Since(p.start).Round(time.Millisecond))+fmt.Sprintf(format, args...))
}

func (p *plCluster) violate(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.res.violations = append(p.res.violations, fmt.Sprintf(format, args...))
}

func runPowerLoss(t *testing.T, seed uint64, control bool) *plResult {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	n := 3
	if seed%4 == 0 {
		n = 5
	}
	c := makeCluster(t, n, false)
	c.snapshots = true
	c.fss = make(map[string]vfs.FS)
	p := &plCluster{cluster: c, raw: map[string]*crashfs.FS{}, rng: rng, control: control, res: &plResult{}, start: time.Now(), down: map[string]bool{}, halted: map[string]bool{}, leaders: map[uint64]string{}, terms: map[string]uint64{}, wentBack: map[string]bool{}, votes: map[string]vote{}}
	var logBuf *syncBuffer
	switch dest := os.Getenv("LATCH_POWERLOSS_LOG"); dest {
	case "":
	case "-":
		c.logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	default: // a directory: each failing seed's log, in a file of its own
		logBuf = new(syncBuffer)
		c.logger = slog.New(slog.NewTextHandler(logBuf, &slog.HandlerOptions{Level: slog.LevelDebug}))
		defer func() {
			if len(p.res.violations) > 0 {
				name := fmt.Sprintf("%s/powerloss-%d.log", dest, seed)
				if err := os.WriteFile(name, []byte(logBuf.String()+strings.Join(p.res.schedule, "\n")+"\n"+strings.Join(p.res.violations, "\n")), 0o644); err == nil {
					t.Logf("log in %s", name)
				}
			}
		}()
	}
	for _, peer := range c.peers {
		p.setFS(peer.ID, crashfs.New())
	}
	c.startAll()
	c.leader()
	defer func() {
		for id := range c.nodes {
			c.stop(id)
		}
	}()

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		p.watchTerms(ctx)
	}()
	grants := make([][]*plGrant, 4)
	for i := range grants {
		wg.Add(1)
		crng := rand.New(rand.NewPCG(seed, uint64(i)))
		go func() {
			defer wg.Done()
			grants[i] = p.client(ctx, i, crng)
		}()
	}
	for range 8 + rng.IntN(5) {
		time.Sleep(time.Duration(500+rng.IntN(2500)) * time.Millisecond)
		p.fault()
	}
	time.Sleep(2 * time.Second)
	p.healAll()
	cancel()
	// Every request is answered: a client's request may fail while the
	// cluster is broken, never wait for ever once it healed.
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		p.mu.Lock()
		var states []string
		for id, r := range p.reps {
			leading, ready := raftrep.Promotion(r)
			st, _ := r.Status()
			states = append(states, fmt.Sprintf("%s: leading=%v ready=%v state=%s leader=%s term=%d applied=%d", id, leading, ready, st.State, st.Leader, st.Term, st.AppliedIndex))
		}
		p.mu.Unlock()
		slices.Sort(states)
		p.asking.Range(func(_, v any) bool {
			states = append(states, v.(string))
			return true
		})
		p.violate("a request unanswered a minute after the cluster healed; %s", strings.Join(states, "; "))
		for id := range p.nodes {
			p.stop(id) // which answers it, so that the clients end
		}
		<-done
		return p.res
	}
	var all []*plGrant
	for _, g := range grants {
		all = append(all, g...)
	}
	p.res.grants = len(all)
	p.check(all)
	p.checkLogs()
	return p.res
}

// watchTerms checks, every 50 ms until ctx ends, that no two nodes lead
// in the same term (election safety) and that no node's term goes back,
// across its restarts too: Raft stores a term before it acts in it.
func (p *plCluster) watchTerms(ctx context.Context) {
	for ctx.Err() == nil {
		time.Sleep(50 * time.Millisecond)
		p.mu.Lock()
		for id, r := range p.reps {
			if r == nil {
				continue
			}
			st, err := r.Status()
			if err != nil || st.State == "shutdown" {
				continue
			}
			if st.Term < p.terms[id] && !p.wentBack[id] {
				p.wentBack[id] = true // once a node is enough
				p.res.violations = append(p.res.violations, fmt.Sprintf("%s: term %d, after %d", id, st.Term, p.terms[id]))
			}
			p.terms[id] = max(p.terms[id], st.Term)
			if st.State != "leader" {
				continue
			}
			if l, ok := p.leaders[st.Term]; ok && l != id {
				p.res.violations = append(p.res.violations, fmt.Sprintf("two leaders in term %d: %s and %s", st.Term, l, id))
			}
			p.leaders[st.Term] = id
		}
		p.mu.Unlock()
	}
}

// checkLogs stops every node, then compares their logs: once the cluster
// healed and caught up, they hold the same entries where they overlap.
func (p *plCluster) checkLogs() {
	for id := range p.nodes {
		p.stop(id)
	}
	type log struct {
		id          string
		s           *raftrep.LogStore
		first, last uint64
	}
	var logs []log
	lo, hi := uint64(0), ^uint64(0)
	for _, peer := range p.peers {
		s, err := raftrep.OpenLogOn(p.fss[peer.ID], "/"+peer.ID)
		if err != nil {
			p.res.violations = append(p.res.violations, fmt.Sprintf("%s: open its log after the run: %v", peer.ID, err))
			continue
		}
		defer s.Close()
		first, _ := s.FirstIndex()
		last, _ := s.LastIndex()
		logs = append(logs, log{peer.ID, s, first, last})
		lo, hi = max(lo, first), min(hi, last)
	}
	for i := lo; i <= hi && len(logs) > 1; i++ {
		var want raft.Log
		for j, l := range logs {
			var e raft.Log
			if err := l.s.GetLog(i, &e); err != nil {
				p.res.violations = append(p.res.violations, fmt.Sprintf("%s: entry %d: %v", l.id, i, err))
				return
			}
			if j == 0 {
				want = e
				continue
			}
			if e.Term != want.Term || e.Type != want.Type || !bytes.Equal(e.Data, want.Data) {
				p.res.violations = append(p.res.violations, fmt.Sprintf("entry %d: %s has term %d, %s term %d: the logs diverged", i, logs[0].id, want.Term, l.id, e.Term))
				return
			}
		}
	}
}

// setFS gives node id the file system fsys, made to sync nothing in the
// control.
func (p *plCluster) setFS(id string, fsys *crashfs.FS) {
	p.raw[id] = fsys
	p.fss[id] = fsys
	if p.control {
		p.fss[id] = crashfs.NoSync(fsys)
	}
}

// fault injects one fault: a crash (kill or power loss) of one node, of a
// majority or of all, a disk that fails, or a partition; then heals it.
func (p *plCluster) fault() {
	ids := p.upIDs()
	if len(ids) == 0 {
		p.healAll()
		return
	}
	switch k := p.rng.IntN(10); {
	case k < 2: // kill one
		id := ids[p.rng.IntN(len(ids))]
		p.crash(id, 1)
	case k < 5: // power loss of one
		id := ids[p.rng.IntN(len(ids))]
		p.crash(id, p.keep())
	case k < 6: // power loss of a majority
		p.rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
		for _, id := range ids[:min(len(ids), len(p.peers)/2+1)] {
			p.crash(id, p.keep())
		}
	case k < 7: // power loss of all
		for _, id := range ids {
			p.crash(id, p.keep())
		}
	case k < 8: // a disk that fails its next sync or write
		id := ids[p.rng.IntN(len(ids))]
		p.failDisk(id)
	default: // a partition
		side := []string{ids[p.rng.IntN(len(ids))]}
		p.logf("partition %v", side)
		p.net.partition(side...)
		time.Sleep(time.Duration(1000+p.rng.IntN(3000)) * time.Millisecond)
		p.logf("heal")
		p.net.heal()
		return
	}
	time.Sleep(time.Duration(500+p.rng.IntN(3000)) * time.Millisecond)
	p.healAll()
}

func (p *plCluster) keep() float64 {
	return []float64{0, 0, 0.5, 0.9}[p.rng.IntN(4)]
}

func (p *plCluster) upIDs() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var ids []string
	for _, peer := range p.peers {
		if !p.down[peer.ID] {
			ids = append(ids, peer.ID)
		}
	}
	return ids
}

// crash stops node id as a crash does: nothing it does from now on
// reaches the others or its disk, and its disk keeps what it had synced
// plus, of the rest, a share keep of the sectors and directory changes
// (1: a kill, which keeps the page cache).
func (p *plCluster) crash(id string, keep float64) {
	p.mu.Lock()
	p.logf("crash %s keep=%v", id, keep)
	p.net.remove(p.addr(id))
	old := p.raw[id]
	old.Kill()
	p.setFS(id, old.CrashClone(p.rng, keep))
	p.checkVote(id)
	n := p.nodes[id]
	delete(p.nodes, id)
	delete(p.reps, id)
	p.down[id] = true
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	n.Shutdown(ctx)
}

type vote struct {
	term uint64
	cand string
}

// checkVote reads the last vote on node id's disk, as a crash left it,
// and checks it against the last one read. Called with mu held.
func (p *plCluster) checkVote(id string) {
	term, cand, err := raftrep.StoredVote(p.fss[id], "/"+id)
	if err != nil {
		return // a stable store a crash left unreadable: the start says so
	}
	v, ok := p.votes[id]
	switch {
	case !ok:
	case term < v.term:
		p.res.violations = append(p.res.violations, fmt.Sprintf("%s: its last vote on disk went back from term %d to %d", id, v.term, term))
	case term == v.term && cand != v.cand:
		p.res.violations = append(p.res.violations, fmt.Sprintf("%s: its vote in term %d changed from %s to %s", id, term, v.cand, cand))
	}
	p.votes[id] = vote{term, cand}
}

// failDisk makes node id's disk fail its next write or sync: the node
// halts, and is restarted by healAll after a power cycle, once an
// operator cleared its halt.
func (p *plCluster) failDisk(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.logf("fail the disk of %s", id)
	p.halted[id] = true
	fsys := p.raw[id]
	var once sync.Once
	fsys.SetFault(func(ev crashfs.Event) error {
		switch ev.Op {
		case crashfs.OpWriteAt, crashfs.OpDatasync, crashfs.OpSync:
			if !strings.Contains(ev.Name, "/log/") {
				return nil
			}
			var err error
			once.Do(func() { err = errors.New("input/output error") })
			return err
		}
		return nil
	})
}

// healAll restarts every node that is down (and power-cycles those whose
// disk failed, clearing their halt), and heals the network.
func (p *plCluster) healAll() {
	p.net.heal()
	for _, peer := range p.peers {
		id := peer.ID
		p.mu.Lock()
		halted := p.halted[id]
		p.mu.Unlock()
		if halted && !p.down[id] {
			p.crash(id, 0)
			fsys := p.raw[id]
			fsys.SetFault(nil)
		}
		p.mu.Lock()
		if !p.down[id] {
			p.mu.Unlock()
			continue
		}
		err := p.tryStart(id)
		if halted && errors.Is(err, raftrep.ErrHalted) {
			p.logf("%s refuses to start, halted; cleared", id)
			if _, err := raftrep.ClearHaltOn(p.fss[id], "/"+id); err != nil {
				p.t.Fatalf("clear the halt of %s: %v", id, err)
			}
			err = p.tryStart(id)
		}
		delete(p.halted, id)
		if err != nil {
			p.res.violations = append(p.res.violations, fmt.Sprintf("%s refused to start: %v", id, err))
			p.mu.Unlock()
			continue
		}
		p.logf("start %s", id)
		p.down[id] = false
		p.mu.Unlock()
	}
}

// client takes and releases leased locks through sessions on node
// (i mod n), until ctx ends; it returns the grants it was answered.
func (p *plCluster) client(ctx context.Context, i int, rng *rand.Rand) []*plGrant {
	var out []*plGrant
	var s latch.Session
	home := p.peers[i%len(p.peers)].ID
	drop := func() {
		if s != nil {
			s.Close()
			s = nil
		}
	}
	defer drop()
	for ctx.Err() == nil {
		time.Sleep(time.Duration(50+rng.IntN(300)) * time.Millisecond)
		if s == nil {
			p.mu.Lock()
			n := p.nodes[home]
			p.mu.Unlock()
			if n == nil {
				continue
			}
			var err error
			p.asking.Store(i, fmt.Sprintf("client %d: open a session on %s at %v", i, home, time.Since(p.start)))
			s, err = n.OpenSession(latch.SessionOptions{Protocol: "test"})
			p.asking.Delete(i)
			if err != nil {
				s = nil
				continue
			}
		}
		key := fmt.Sprintf("k%d", rng.IntN(plKeys))
		g := &plGrant{key: key, client: i, inv: time.Now()}
		p.asking.Store(i, fmt.Sprintf("client %d: acquire %s on %s at %v", i, key, home, time.Since(p.start)))
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		grant, err := s.Acquire(actx, latch.LockRequest{Keys: []string{key}, Lease: plLease, Wait: latch.NoWait})
		cancel()
		p.asking.Delete(i)
		g.ack = time.Now()
		if errors.Is(err, latch.ErrWouldBlock) {
			continue
		}
		if err != nil {
			drop()
			continue
		}
		g.token = uint64(grant.Token)
		out = append(out, g)
		time.Sleep(time.Duration(rng.IntN(1500)) * time.Millisecond)
		if ctx.Err() != nil {
			break // held at the end: checked then
		}
		g.rel = time.Now()
		p.asking.Store(i, fmt.Sprintf("client %d: release %s on %s at %v", i, key, home, time.Since(p.start)))
		err = s.Release(key)
		p.asking.Delete(i)
		if errors.Is(err, latch.ErrNotHeld) && time.Since(g.inv) < plLease {
			p.violate("%s token %d, granted at %v, released at %v: not held (acknowledged grant lost before its lease ended)", key, g.token, g.ack.Sub(p.start), g.rel.Sub(p.start))
		}
		if err != nil {
			drop()
		}
	}
	return out
}

// check checks the grants the clients were answered, and the cluster's
// state once it healed.
func (p *plCluster) check(grants []*plGrant) {
	tokens := map[uint64]*plGrant{}
	byKey := map[string][]*plGrant{}
	for _, g := range grants {
		if o := tokens[g.token]; o != nil {
			p.violate("token %d granted twice: %s at %v and %s at %v", g.token, o.key, o.ack.Sub(p.start), g.key, g.ack.Sub(p.start))
		}
		tokens[g.token] = g
		byKey[g.key] = append(byKey[g.key], g)
	}
	// A grant is held from its application, before it was answered, at
	// least until its release was asked for and its lease, counted from
	// when it was asked for, ended. One granted later (a larger token) and
	// answered while an earlier one was held is a double grant.
	for key, gs := range byKey {
		slices.SortFunc(gs, func(a, b *plGrant) int { return cmp.Compare(a.token, b.token) })
		for i, a := range gs {
			end := a.inv.Add(plLease)
			if !a.rel.IsZero() && a.rel.Before(end) {
				end = a.rel
			}
			for _, b := range gs[i+1:] {
				if b.ack.Before(end) {
					p.violate("%s granted twice: token %d (asked %v, answered %v, released %v) and token %d answered %v", key, a.token, a.inv.Sub(p.start), a.ack.Sub(p.start), a.rel.Sub(p.start), b.token, b.ack.Sub(p.start))
				}
			}
		}
	}
	// Every grant still held at the end, lease not over, is held by every
	// node once it caught up.
	defer func() {
		if len(p.res.violations) == 0 {
			return
		}
		for id, r := range p.reps {
			st, err := r.Status()
			p.logf("status of %s: %+v %v", id, st, err)
		}
	}()
	lead := p.waitLeader()
	if lead == "" {
		p.violate("no leader once the cluster healed")
		return
	}
	// Caught up: every node applied what the leader had committed when
	// the clients stopped. A node that was sent a snapshot while it was
	// cut off may wait out the snapshot's RPC timeout first (10 s on
	// Raft's in-memory transport).
	st, err := p.reps[lead].Status()
	if err != nil {
		p.violate("leader %s: %v", lead, err)
		return
	}
	for id, r := range p.reps {
		for deadline := time.Now().Add(30 * time.Second); ; {
			s, err := r.Status()
			if err == nil && s.AppliedIndex >= st.CommitIndex {
				break
			}
			if time.Now().After(deadline) {
				p.violate("%s did not catch up with the leader %s in 30 s: applied %d of %d", id, lead, s.AppliedIndex, st.CommitIndex)
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	for _, g := range grants {
		if !g.rel.IsZero() || time.Since(g.inv) >= plLease {
			continue
		}
		for id, n := range p.nodes {
			info, ok := n.Lock(g.key)
			if !ok || len(info.Holders) != 1 || uint64(info.Holders[0].Token) != g.token {
				p.violate("%s token %d (answered %v) lost: node %s (leader %s) has %+v", g.key, g.token, g.ack.Sub(p.start), id, lead, info)
			}
		}
	}
}
