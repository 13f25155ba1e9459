package raftrep

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/latchd/latch/internal/fsm"
	"github.com/latchd/latch/internal/vfs"
)

// RecoverConfig configures Recover.
type RecoverConfig struct {
	// Dir is the stopped node's data dir; FS the file system it is on
	// (nil: vfs.OS).
	Dir string
	FS  vfs.FS
	// ID is the node's ID: "" takes the one the data dir records, and
	// any other must be that one.
	ID string
	// State configures the state the log is replayed into: the node's
	// own settings (memory limit, limits), as the server would build it,
	// so that the state recovered is the one the node would have.
	State fsm.Config
	// Force recovers even when other members answer (see Recover).
	Force bool
	// DryRun changes nothing: Recover only reads the data dir and probes
	// the other members, and reports what it found.
	DryRun bool
	// DialTimeout bounds each probe of another member (0: 2 s).
	DialTimeout time.Duration
	// Dial probes a member's address (nil: a TCP connection; tests
	// replace it).
	Dial   func(ctx context.Context, addr string) error
	Logger *slog.Logger
}

// Recovery is what Recover did, or found.
type Recovery struct {
	// ID and Addr are the node's, the one member of its new configuration.
	ID, Addr string
	// Index and Term are those of the last entry recovered: the state
	// holds everything the node's log held up to it.
	Index, Term uint64
	// Dropped are the members the node's configuration named beside it.
	Dropped []Member
	// Answering are the dropped members whose address took a connection.
	Answering []Member
	// AlreadyAlone: the configuration named this node alone, so Recover
	// changed nothing.
	AlreadyAlone bool
}

// ErrMembersUp is wrapped by Recover's error when another member of the
// node's configuration answers and Force is not set.
var ErrMembersUp = errors.New("raftrep: other members are running")

// Recover makes the stopped node whose data dir is cfg.Dir a cluster of
// one, for a cluster that lost its quorum for good: it replays the node's
// latest snapshot and whole log into a fresh state, writes a snapshot of
// it whose configuration names this node alone, and empties the log
// (hashicorp/raft's RecoverCluster). Started again, the node elects
// itself and serves everything its log held; the other members are then
// added back as new ones (AddVoter). Every entry of the log counts, even
// one that was never committed: the node's log becomes the cluster's.
//
// Recover refuses a data dir that a process holds (its lock), that a disk
// error halted, that holds no state, or that belongs to another node. It
// also refuses, unless cfg.Force is set, while any other member's Raft
// address takes a TCP connection from here: a member that runs may have a
// leader, or may form a quorum again with this node once it is started,
// and a cluster of one beside a running cluster splits the lock table in
// two. The probe sees only what this host reaches: a network partition
// hides a running majority, so the operator must know the others are gone.
func Recover(cfg RecoverConfig) (Recovery, error) {
	fsys := cfg.FS
	if fsys == nil {
		fsys = vfs.OS
	}
	lg := cfg.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	id, err := recordedID(fsys, cfg.Dir)
	if err != nil {
		return Recovery{}, err
	}
	if cfg.ID != "" && cfg.ID != id {
		return Recovery{}, fmt.Errorf("raftrep: recover: data dir %s belongs to node %s, not %s", cfg.Dir, id, cfg.ID)
	}
	// A node's first start makes its stable store: without one, the dir
	// holds nothing to recover, and opening it would make the stores.
	if _, err := fsys.Stat(filepath.Join(cfg.Dir, stableFile)); errors.Is(err, fs.ErrNotExist) {
		return Recovery{}, fmt.Errorf("raftrep: recover: data dir %s holds no Raft state: nothing to recover", cfg.Dir)
	}
	d, err := openDisk(fsys, cfg.Dir, id, lg)
	if err != nil {
		return Recovery{}, err // it names the data dir, and what is wrong with it
	}
	defer d.close()
	// A failed write leaves the halted mark, and Recover returns its
	// error rather than end the process.
	d.exit = func(string) {}

	has, err := raft.HasExistingState(d.log, d.stable, d.snaps)
	if err != nil {
		return Recovery{}, fmt.Errorf("raftrep: recover: %w", err)
	}
	if !has {
		return Recovery{}, fmt.Errorf("raftrep: recover: data dir %s holds no Raft state: nothing to recover", cfg.Dir)
	}
	conf, last, err := storedConfiguration(d)
	if err != nil {
		return Recovery{}, fmt.Errorf("raftrep: recover: %w", err)
	}
	rec := Recovery{ID: id, Index: last.Index, Term: last.Term}
	for _, s := range conf.Servers {
		m := Member{ID: string(s.ID), Addr: string(s.Address), Voter: s.Suffrage == raft.Voter}
		if m.ID == id {
			rec.Addr = m.Addr
			if !m.Voter {
				return rec, fmt.Errorf("raftrep: recover: node %s is not a voter of its cluster: recover a voter", id)
			}
			continue
		}
		rec.Dropped = append(rec.Dropped, m)
	}
	if rec.Addr == "" {
		return rec, fmt.Errorf("raftrep: recover: node %s is not a member of the configuration its data dir holds (it was removed, or never added): recover another member", id)
	}
	if len(rec.Dropped) == 0 {
		rec.AlreadyAlone = true
		return rec, nil
	}
	rec.Answering = probe(cfg, rec.Dropped)
	if cfg.DryRun {
		return rec, nil
	}
	if len(rec.Answering) > 0 && !cfg.Force {
		var names []string
		for _, m := range rec.Answering {
			names = append(names, m.ID+" ("+m.Addr+")")
		}
		verb := "answer on their Raft addresses"
		if len(names) == 1 {
			verb = "answers on its Raft address"
		}
		return rec, fmt.Errorf("%w: %s %s: the cluster may still have a leader, or regain its quorum once this node starts again. Stop them, or pass --force if they are not members of this cluster any more", ErrMembersUp, strings.Join(names, ", "), verb)
	}

	st, err := fsm.New(cfg.State)
	if err != nil {
		return rec, fmt.Errorf("raftrep: recover: %w", err)
	}
	sm := &recoverState{st: st}
	r := &Replicator{cfg: Config{ID: id}, sm: sm, log: lg}
	var stopped error
	m := &recoverMachine{machine: &machine{r: r, halt: func(index uint64, err error) {
		if stopped == nil {
			stopped = fmt.Errorf("log entry %d: %w", index, err)
		}
	}}, stopped: &stopped}

	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(id)
	rc.Logger = newHCLogger(lg.With("component", "raft"))
	_, trans := raft.NewInmemTransport(raft.ServerAddress(rec.Addr))
	defer trans.Close()
	alone := raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: raft.ServerID(id), Address: raft.ServerAddress(rec.Addr)}}}
	if err := raft.RecoverCluster(rc, m, d.log, d.stable, d.snaps, trans, alone); err != nil {
		return rec, fmt.Errorf("raftrep: recover: %w", err)
	}
	lg.Info("raftrep: recovered a cluster of one", "node", id, "index", rec.Index, "term", rec.Term, "dropped", len(rec.Dropped))
	return rec, nil
}

// recordedID returns the node ID data dir dir records, refusing a dir
// that does not exist or never belonged to a node.
func recordedID(fsys vfs.FS, dir string) (string, error) {
	if dir == "" {
		return "", errors.New("raftrep: recover: no data dir")
	}
	b, err := vfs.ReadFile(fsys, filepath.Join(dir, nodeFile))
	if errors.Is(err, fs.ErrNotExist) {
		if _, serr := fsys.Stat(dir); serr != nil {
			return "", fmt.Errorf("raftrep: recover: data dir: %w", serr)
		}
		return "", fmt.Errorf("raftrep: recover: %s is not the data dir of a node (no %s): nothing to recover", dir, nodeFile)
	}
	if err != nil {
		return "", fmt.Errorf("raftrep: recover: data dir %s: %w", dir, err)
	}
	id := strings.TrimSpace(string(b))
	if id == "" {
		return "", fmt.Errorf("raftrep: recover: data dir %s: %s is empty", dir, nodeFile)
	}
	return id, nil
}

// storedConfiguration returns the latest configuration the data dir holds,
// committed or not (as Raft takes it at start: the newest snapshot's,
// replaced by any configuration entry after it in the log), and the index
// and term of the last entry it holds.
func storedConfiguration(d *disk) (conf raft.Configuration, last raft.Log, err error) {
	metas, err := d.snaps.List()
	if err != nil {
		return conf, last, err
	}
	var confIndex uint64
	if len(metas) > 0 {
		conf, confIndex = metas[0].Configuration, metas[0].ConfigurationIndex
		last.Index, last.Term = metas[0].Index, metas[0].Term
	}
	first, err := d.log.FirstIndex()
	if err != nil {
		return conf, last, err
	}
	lastIndex, err := d.log.LastIndex()
	if err != nil {
		return conf, last, err
	}
	for i := max(first, 1); first != 0 && i <= lastIndex; i++ {
		var e raft.Log
		if err := d.log.GetLog(i, &e); err != nil {
			return conf, last, fmt.Errorf("log entry %d: %w", i, err)
		}
		if e.Index > last.Index {
			last.Index, last.Term = e.Index, e.Term
		}
		if e.Type == raft.LogConfiguration && e.Index > confIndex {
			c, err := decodeConfigEntry(e.Data)
			if err != nil {
				return conf, last, fmt.Errorf("log entry %d: %w", i, err)
			}
			conf, confIndex = c, e.Index
		}
	}
	if len(conf.Servers) == 0 {
		return conf, last, errors.New("the data dir holds no configuration")
	}
	return conf, last, nil
}

// decodeConfigEntry decodes a configuration entry, whose decoder panics on
// what does not decode.
func decodeConfigEntry(b []byte) (c raft.Configuration, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("configuration does not decode: %v", p)
		}
	}()
	return raft.DecodeConfiguration(b), nil
}

// probe returns the members of ms whose address takes a connection.
func probe(cfg RecoverConfig, ms []Member) []Member {
	timeout := cfg.DialTimeout
	if timeout <= 0 {
		timeout = 2 * time.Second
	}
	dial := cfg.Dial
	if dial == nil {
		dial = func(ctx context.Context, addr string) error {
			var d net.Dialer
			c, err := d.DialContext(ctx, "tcp", addr)
			if err == nil {
				c.Close()
			}
			return err
		}
	}
	up := make([]bool, len(ms))
	var wg sync.WaitGroup
	for i, m := range ms {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			up[i] = dial(ctx, m.Addr) == nil
		})
	}
	wg.Wait()
	var out []Member
	for i, m := range ms {
		if up[i] {
			out = append(out, m)
		}
	}
	return out
}

// recoverMachine is the machine Recover replays the log through: it fails
// the snapshot, before anything is written, when an entry could not be
// applied (one of a newer latch).
type recoverMachine struct {
	*machine
	stopped *error
}

func (m *recoverMachine) Snapshot() (raft.FSMSnapshot, error) {
	if *m.stopped != nil {
		return nil, fmt.Errorf("raftrep: recover: cannot apply %w; upgrade latch", *m.stopped)
	}
	return m.machine.Snapshot()
}

// recoverState is the state machine Recover replays into: the replicated
// state alone, without a node to deliver its events to.
type recoverState struct {
	sync.Mutex
	st *fsm.State
}

func (s *recoverState) Apply(b *fsm.Batch) {
	if cap(b.Results) < len(b.Cmds) {
		b.Results = make([]fsm.Result, len(b.Cmds))
	}
	b.Results = b.Results[:len(b.Cmds)]
	for i := range b.Cmds {
		s.st.Apply(&b.Cmds[i], &b.Results[i])
	}
}

func (s *recoverState) Snapshot() *fsm.Capture { return s.st.Capture() }

func (s *recoverState) Restore(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	st, err := fsm.Restore(s.st.Config(), b)
	if err != nil {
		return err
	}
	s.st = st
	return nil
}
