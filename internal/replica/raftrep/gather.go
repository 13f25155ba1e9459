package raftrep

import "time"

// gather holds the leader's next entry back, at most half the last
// commit's time (and maxWait), until as many commands wait as that commit
// should bring: those waiting then, and one for each it answered, the
// leader's own and those other nodes forwarded. A client that is answered
// often sends its next request at once (a lock released, the next one
// taken); without the wait it misses the entry that starts at once and
// waits for that one's commit too, and the entries alternate between two
// halves of the clients. An entry costs a sync on each node and Raft's
// messages whatever it carries, so carrying both halves in one is what a
// closed loop of clients needs (docs/benchmarks-history.md). The clients
// of other nodes come back once their node applies the entry: the leader
// tells those nodes of the commit at once (tellCommit).
//
// Clients that do not come back (a lock held while its holder works)
// would make every wait end at its timer; a wait in which nothing came
// makes the next entries go without one (gathering.waited).
func (r *Replicator) gather() {
	r.mu.Lock()
	expect, wait := r.gathering.plan()
	start := r.waiting()
	r.mu.Unlock()
	if expect <= start || wait <= 0 {
		return
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		r.mu.Lock()
		n := r.waiting()
		if n >= expect {
			r.gathering.waited(true)
			r.mu.Unlock()
			return
		}
		r.mu.Unlock()
		select {
		case <-r.wake:
		case <-t.C:
			r.mu.Lock()
			r.gathering.waited(r.waiting() > start)
			r.mu.Unlock()
			return
		case <-r.stop:
			return
		}
	}
}

// waiting is the count of commands not yet packed, this node's and those
// forwarded to it. Called with mu held.
func (r *Replicator) waiting() int {
	n := r.fwdCmds
	for _, u := range r.outbox[r.sent:] {
		n += u.cmds
	}
	return n
}

// gathering is the leader's rule for holding an entry back (gather).
type gathering struct {
	expect int           // the commands the next entry waits for
	last   time.Duration // the last entry's time to commit and apply
	// skip is how many entries go without a wait after one in which
	// nothing came; it doubles with each such wait, up to maxSkip, and
	// ends at a wait that something came in.
	skip, backoff int
}

// maxWait bounds a wait whatever the last commit took: a commit slowed by
// a stall (a disk's, a follower's restart) does not hold the next entry
// back for half of it.
const maxWait = 5 * time.Millisecond

// maxSkip bounds the entries packed without a wait after waits in vain:
// clients that stopped coming back cost one wait in that many entries.
const maxSkip = 64

// committed records an entry's commit: expect commands should wait once
// its clients are answered, and it took d.
func (g *gathering) committed(expect int, d time.Duration) {
	g.expect, g.last = expect, d
}

// plan returns what the next entry waits for, and at most how long: no
// more than one command (nothing to carry together), or no wait, when
// it goes at once.
func (g *gathering) plan() (expect int, wait time.Duration) {
	expect, g.expect = g.expect, 0
	if g.skip > 0 {
		g.skip--
		return 0, 0
	}
	if expect <= 1 {
		return 0, 0
	}
	return expect, min(g.last/2, maxWait)
}

// waited records the end of a wait, and whether any command came in it.
func (g *gathering) waited(came bool) {
	if came {
		g.backoff = 0
		return
	}
	g.backoff = min(max(1, 2*g.backoff), maxSkip)
	g.skip = g.backoff
}
