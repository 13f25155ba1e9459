package raftrep

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/latchd/latch/internal/fsm"
	"github.com/latchd/latch/internal/replica"
	"github.com/latchd/latch/internal/vfs"
)

// Peer is a member of the initial cluster.
type Peer struct {
	ID   string
	Addr string // the address of its Raft transport
}

// Network carries what a follower forwards to the leader: its batches, and
// membership requests. Mux is the TCP one; tests use pipes.
type Network interface {
	// DialForward connects to the node whose Raft address is addr.
	DialForward(ctx context.Context, addr string) (net.Conn, error)
	// ForwardListener accepts the connections other nodes dialed.
	ForwardListener() net.Listener
}

// Config configures a Replicator.
type Config struct {
	// ID names this node; Addr is its Raft transport's address.
	ID, Addr string
	// Dir holds the log, the stable store and the snapshots; "" keeps them
	// in memory (tests). FS is the file system it is on (nil: vfs.OS).
	Dir string
	FS  vfs.FS
	// Peers is the initial cluster, this node included. A node without
	// state bootstraps a cluster of Peers; a node with state rejoins its
	// own. Empty: a cluster of this node alone.
	Peers []Peer
	// Join makes a node without state wait to be added to a running
	// cluster (AddVoter on one of its members) instead of bootstrapping
	// one: it has no members until the leader reaches it.
	Join bool
	// Transport carries Raft's messages; Network the forwarded batches.
	// Both may be nil for a cluster of one. Close closes them.
	Transport raft.Transport
	Network   Network

	// HeartbeatTimeout and ElectionTimeout are Raft's (0: 1 s each);
	// LeaderLeaseTimeout is half the heartbeat timeout.
	HeartbeatTimeout, ElectionTimeout time.Duration
	// Grace is what a new leader extends every session and lease by
	// (fsm.OpPromote). 0: 2 x (ElectionTimeout + 1 s).
	Grace time.Duration
	// SnapshotThreshold is how many entries since the last snapshot make
	// Raft take one (0: 16384), checked every SnapshotInterval (0: 2
	// minutes); TrailingLogs how many entries a snapshot leaves in the
	// log, for followers that lag (0: 10240).
	SnapshotThreshold uint64
	SnapshotInterval  time.Duration
	TrailingLogs      uint64

	Logger *slog.Logger
}

// Replicator replicates the node's batches through hashicorp/raft: the
// replica.Replicator of a cluster node. See the package documentation.
type Replicator struct {
	cfg  Config
	sm   replica.StateMachine
	raft *raft.Raft
	logs raft.LogStore // Raft's log, read for the term of a committed entry (notify)
	disk *disk         // the data dir, nil for a node in memory
	log  *slog.Logger
	m    *machine
	obs  chan raft.Observation
	// observer puts Raft's observations of the leadership in obs, and
	// drops those that do not fit (watch then goes by Raft's state).
	observer *raft.Observer
	stats    stats

	mu   sync.Mutex
	wake chan struct{} // capacity 1: the sender has work
	stop chan struct{}
	ctx  context.Context // done at Close
	done context.CancelFunc
	wg   sync.WaitGroup

	// origin is the node's (from its batches); outbox holds its batches
	// not yet seen applied, in order, and outbox[:sent] went to the
	// current leader. fwd holds batches other nodes forwarded, waiting for
	// this leader to pack them. Guarded by mu.
	origin  uint64
	outbox  []unit
	sent    int
	fwd     [][]byte
	fwdCmds int    // the commands in fwd
	maxSeen uint64 // the highest Seq of origin applied
	// in holds the connections other nodes forward their batches on. A
	// node applies its batches in the order it proposed them, and a
	// batch applied after one that was lost would leave that one
	// unapplied for ever (its Seq is below the origin's last, so the
	// state machine takes it for a resend): so whenever this node loses a
	// batch it took from a connection, it closes them all (dropForwarded),
	// and their nodes send again everything not yet applied, in order.
	in map[*inConn]struct{}

	// The leadership. epoch counts watch's changes of Raft's state (not
	// Raft's terms): each time Raft makes this node leader starts an
	// epoch, which promote takes up, and each time it makes it anything
	// else starts one in which it leads nothing (demote). leading: promote
	// took up the current epoch's leadership (the node keeps the batches
	// other nodes forward, and stamps its next entries from base); ready:
	// its fsm.OpPromote committed, and the node packs and stamps entries.
	// Only promote sets them, only for the epoch it was started for, and
	// only while that epoch is current; a new epoch clears them. So ready
	// implies leading, and both belong to the current epoch: no late
	// answer of Raft to an earlier promote leaves a node that does not
	// lead "leading" (it would neither forward its batches nor pack them),
	// nor ready before its own OpPromote. Guarded by mu.
	epoch          uint64
	leading, ready bool
	// stepHook, when set, is called by promote and by the sender before
	// each of the steps that depend on the epoch (step; tests:
	// export_test.go).
	stepHook atomic.Pointer[func(step string)]

	// The clock. On the leader: it stamps base + time since promotedAt,
	// never less than last+1. Elsewhere: the last stamp applied, plus the
	// time since it was, at most a heartbeat timeout (past it, the cluster
	// may be without a leader, whose time does not count), and never less
	// than read before (read). Guarded by mu.
	base, last int64
	read       int64
	promotedAt time.Time
	applStamp  int64
	applAt     time.Time
	leaderless time.Time // when the last leader was lost; zero while one is known
	closed     bool
	// refused is set when Raft refused or lost the leader's last entry:
	// the sender packs nothing more until its next tick (send), rather
	// than pack and be refused again at once for as long as a hand-over
	// lasts (or, in a test's bubble of virtual time, forever: time does
	// not pass while the sender spins). Guarded by mu.
	refused bool

	// posIndex and posTerm are the index and term of the last command
	// entry applied (Position); 0 after a snapshot was restored, until
	// the next one. Guarded by mu.
	posIndex, posTerm uint64

	// The follower's connection to the leader it forwards to.
	fwdConn net.Conn
	fwdAddr string

	inflight chan struct{} // capacity 1: the entry applied and not yet committed
	// gathering decides how long the leader's next entry waits (gather).
	// Guarded by mu.
	gathering gathering
	notices   chan uint64 // capacity 1: the index of a commit to tell the others of (notice.go)
}

// unit is one batch of this node, encoded.
type unit struct {
	last uint64 // its highest Seq
	cmds int    // its count of commands
	data []byte
	sent time.Time
}

// maxEntry bounds the batches packed into one entry, in bytes.
const maxEntry = 512 << 10

// New starts a Replicator of sm: it opens the stores (bootstrapping the
// cluster when they are empty), starts Raft, which restores the latest
// snapshot and replays the log into sm, and starts forwarding.
func New(cfg Config, sm replica.StateMachine) (*Replicator, error) {
	if cfg.ID == "" {
		return nil, errors.New("raftrep: a Replicator needs an ID")
	}
	if cfg.Transport == nil {
		if len(cfg.Peers) > 1 {
			return nil, errors.New("raftrep: a cluster of several nodes needs a Transport")
		}
		// A cluster of one: nobody to talk to.
		_, cfg.Transport = raft.NewInmemTransport(raft.ServerAddress(cfg.ID))
	}
	if cfg.HeartbeatTimeout <= 0 {
		cfg.HeartbeatTimeout = time.Second
	}
	if cfg.ElectionTimeout <= 0 {
		cfg.ElectionTimeout = time.Second
	}
	if cfg.Grace <= 0 {
		cfg.Grace = 2 * (cfg.ElectionTimeout + time.Second)
	}
	if cfg.SnapshotThreshold == 0 {
		cfg.SnapshotThreshold = 16384
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	r := &Replicator{
		cfg:      cfg,
		sm:       sm,
		log:      cfg.Logger,
		wake:     make(chan struct{}, 1),
		stop:     make(chan struct{}),
		obs:      make(chan raft.Observation, 64),
		inflight: make(chan struct{}, 1),
		notices:  make(chan uint64, 1),
	}
	r.m = &machine{r: r, halt: haltNewer}
	r.ctx, r.done = context.WithCancel(context.Background())
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.ID)
	rc.HeartbeatTimeout = cfg.HeartbeatTimeout
	rc.ElectionTimeout = cfg.ElectionTimeout
	rc.LeaderLeaseTimeout = cfg.HeartbeatTimeout / 2
	// Followers hear of commits from the leader's notices (notice.go);
	// CommitTimeout, Raft's AppendEntries to an idle follower, is only
	// their fallback, at Raft's default. At 1 ms, as it was before every
	// entry sent notices, an idle 3-node cluster spent a third of a core
	// of this repository's test machine on it (docs/benchmarks-history.md).
	rc.CommitTimeout = commitTimeout
	rc.MaxAppendEntries = 512
	// BatchApplyCh stays off: the sender has one entry in flight, so
	// Raft's buffered apply channel would batch nothing, and an
	// entry left in that buffer when Raft shuts down is never answered
	// (its future waits forever).
	rc.SnapshotThreshold = cfg.SnapshotThreshold
	rc.TrailingLogs = 10240
	if cfg.TrailingLogs > 0 {
		rc.TrailingLogs = cfg.TrailingLogs
	}
	if cfg.SnapshotInterval > 0 {
		rc.SnapshotInterval = cfg.SnapshotInterval
	}
	rc.Logger = newHCLogger(cfg.Logger.With("component", "raft"))

	var logs raft.LogStore
	var stable raft.StableStore
	var snaps raft.SnapshotStore
	if cfg.Dir == "" {
		mem := raft.NewInmemStore()
		logs, stable, snaps = mem, mem, raft.NewInmemSnapshotStore()
	} else {
		fsys := cfg.FS
		if fsys == nil {
			fsys = vfs.OS
		}
		d, err := openDisk(fsys, cfg.Dir, cfg.ID, r.log)
		if err != nil {
			return nil, err
		}
		r.disk = d
		cache, err := raft.NewLogCache(512, d.log)
		if err != nil {
			d.close()
			return nil, fmt.Errorf("raftrep: %w", err)
		}
		logs, stable, snaps = cache, d.stable, d.snaps
	}
	has, err := raft.HasExistingState(logs, stable, snaps)
	if err != nil {
		r.closeStore()
		return nil, fmt.Errorf("raftrep: %w", err)
	}
	if !has && !cfg.Join {
		peers := cfg.Peers
		if len(peers) == 0 {
			peers = []Peer{{ID: cfg.ID, Addr: string(cfg.Transport.LocalAddr())}}
		}
		var conf raft.Configuration
		for _, p := range peers {
			conf.Servers = append(conf.Servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.Addr)})
		}
		if err := raft.BootstrapCluster(rc, logs, stable, snaps, cfg.Transport, conf); err != nil {
			r.closeStore()
			return nil, fmt.Errorf("raftrep: bootstrap: %w", err)
		}
	}
	r.mu.Lock()
	r.leaderless = time.Now()
	r.mu.Unlock()
	r.logs = logs
	ra, err := raft.NewRaft(rc, r.m, logs, stable, snaps, cfg.Transport)
	if err != nil {
		r.closeStore()
		return nil, fmt.Errorf("raftrep: %w", err)
	}
	r.raft = ra
	if has && len(cfg.Peers) > 0 {
		r.checkPeers(cfg.Peers)
	}
	r.observer = raft.NewObserver(r.obs, false, func(o *raft.Observation) bool {
		switch o.Data.(type) {
		case raft.LeaderObservation, raft.RaftState:
			return true
		}
		return false
	})
	ra.RegisterObserver(r.observer)
	r.wg.Add(3)
	go r.watch()
	go r.send()
	go r.notify()
	if cfg.Network != nil {
		r.wg.Add(1)
		go r.accept(cfg.Network.ForwardListener())
	}
	return r, nil
}

func (r *Replicator) closeStore() {
	if r.disk != nil {
		r.disk.close()
	}
}

// Propose queues b for the leader; see replica.Replicator. It fails with
// replica.ErrUnavailable when the cluster has had no leader for two
// election timeouts.
func (r *Replicator) Propose(b *fsm.Batch) error {
	if len(b.Cmds) == 0 {
		return nil
	}
	data := fsm.AppendBatch(nil, b.Cmds)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return replica.ErrClosed
	}
	if !r.leaderless.IsZero() && time.Since(r.leaderless) > 2*r.cfg.ElectionTimeout {
		return replica.ErrUnavailable
	}
	r.origin = b.Cmds[0].Origin
	r.outbox = append(r.outbox, unit{last: b.Cmds[len(b.Cmds)-1].Seq, cmds: len(b.Cmds), data: data})
	r.kick()
	return nil
}

// kick wakes the sender. Called with mu held or not.
func (r *Replicator) kick() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// applied drops from the outbox the node's batches that b shows applied.
// Called by the machine, with the node's lock held.
func (r *Replicator) applied(b *fsm.Batch) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range b.Cmds {
		c := &b.Cmds[i]
		if c.Origin == r.origin && c.Seq > r.maxSeen {
			r.maxSeen = c.Seq
		}
	}
	n := 0
	for n < len(r.outbox) && r.outbox[n].last <= r.maxSeen {
		n++
	}
	if n > 0 {
		clear(r.outbox[:n])
		r.outbox = r.outbox[n:]
		r.sent = max(r.sent-n, 0)
	}
}

// stamped records the stamp of the entry at index, just applied (0 for
// one that carried no batch).
func (r *Replicator) stamped(stamp int64, index uint64) {
	r.mu.Lock()
	if stamp > r.applStamp {
		r.applStamp, r.applAt = stamp, time.Now()
	}
	r.mu.Unlock()
	r.stats.applied(index)
}

// setPosition records the index and term of the entry just applied.
func (r *Replicator) setPosition(index, term uint64) {
	r.mu.Lock()
	r.posIndex, r.posTerm = index, term
	r.mu.Unlock()
}

// Position reports the index and term of the last command entry applied;
// see replica.Positioner. Both are 0 when no command entry was applied
// since the node restored a snapshot (or started).
func (r *Replicator) Position() (index, term uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.posIndex, r.posTerm
}

func (r *Replicator) restoredStamp(stamp int64) {
	r.mu.Lock()
	r.applStamp, r.applAt = stamp, time.Now()
	r.mu.Unlock()
}

func (r *Replicator) appliedStamp() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.applStamp
}

// Now reads the replicated clock; see replica.Replicator.
func (r *Replicator) Now() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.leading && r.ready {
		r.read = max(r.read, r.last, r.base+int64(time.Since(r.promotedAt)))
		return r.read
	}
	if r.applAt.IsZero() {
		return time.Now().UnixNano()
	}
	r.read = max(r.read, r.applStamp+min(int64(time.Since(r.applAt)), int64(r.cfg.HeartbeatTimeout)))
	return r.read
}

// stamp returns the next entry's stamp. Called with mu held, on the
// promoted leader.
func (r *Replicator) stamp() int64 {
	s := max(r.last+1, r.base+int64(time.Since(r.promotedAt)))
	r.last = s
	return s
}

// Leader reports the leader Raft knows; see replica.Replicator.
func (r *Replicator) Leader() (string, bool, bool) {
	_, id := r.raft.LeaderWithID()
	return string(id), id != "" && string(id) == r.cfg.ID, id != ""
}

// Barrier waits until what was committed before it is applied here.
func (r *Replicator) Barrier(ctx context.Context) error {
	if r.raft.State() != raft.Leader {
		return ctx.Err()
	}
	f := r.raft.Barrier(0)
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close stops Raft and the replicator's goroutines, and closes the stores.
// A leader first hands its leadership to another voter (handOver), so that
// a graceful stop (a rolling restart) costs the cluster a round of votes,
// not an election timeout without a leader.
func (r *Replicator) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.mu.Unlock()
	r.handOver()
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	close(r.stop)
	r.done()
	if r.fwdConn != nil {
		r.fwdConn.Close()
	}
	r.mu.Unlock()
	err := r.raft.Shutdown().Error()
	if r.cfg.Network != nil {
		r.cfg.Network.ForwardListener().Close()
	}
	if c, ok := r.cfg.Transport.(io.Closer); ok {
		c.Close()
	}
	r.wg.Wait()
	r.closeStore()
	return err
}

// handOver transfers the leadership to the most up-to-date other voter,
// when this node leads and has one (hasOtherVoter). Raft bounds the
// transfer by an election timeout, and so does handOver (a leader cut off
// from the others gets no answer). A failed transfer only leaves the
// election to the timeouts, as a crash would.
func (r *Replicator) handOver() {
	if r.raft.State() != raft.Leader || !r.hasOtherVoter() {
		return
	}
	f := r.raft.LeadershipTransfer()
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	t := time.NewTimer(r.cfg.ElectionTimeout)
	defer t.Stop()
	select {
	case err := <-done:
		if err != nil {
			r.log.Info("raftrep: leadership not handed over before stopping", "err", err)
			return
		}
		r.log.Info("raftrep: leadership handed over before stopping")
	case <-t.C:
		r.log.Info("raftrep: leadership not handed over before stopping: no answer within an election timeout")
	}
}

// hasOtherVoter reports whether the configuration has a voter besides
// this node (a durable single node has none to hand anything to).
func (r *Replicator) hasOtherVoter() bool {
	f := r.raft.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	for _, s := range f.Configuration().Servers {
		if s.Suffrage == raft.Voter && string(s.ID) != r.cfg.ID {
			return true
		}
	}
	return false
}

var (
	_ replica.Replicator = (*Replicator)(nil)
	_ replica.Positioner = (*Replicator)(nil)
)
