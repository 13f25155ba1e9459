package raftrep

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/cache"
	"github.com/latchd/latch/internal/fsm"
	"github.com/latchd/latch/internal/vfs"
	"github.com/latchd/latch/internal/vfs/crashfs"
)

// TestRecoverPowerCut cuts the power before each file operation of
// Recover in turn, on the data dir of a node of a 3-node cluster whose
// state is a snapshot (locks k0 to k4, the token counter seeded) and log
// entries after it (locks k5 to k9). What a power loss leaves is either a
// dir that Recover, run again, recovers, or one that Recover refuses with
// an error that the node's start would meet too; a recovered dir holds,
// as the node started on it would load it (its newest snapshot, then its
// log after it), the whole state, every lock with its token, the token
// counter and the token offset, and a configuration of this node alone.
// Never a dir that starts with less state, or with the old configuration
// in part. Once Recover returned, the dir is recovered whatever the power
// loss.
func TestRecoverPowerCut(t *testing.T) {
	const (
		dir      = "/n1"
		snapAt   = 10 // the snapshot's index; the log holds 11 to 15
		floor    = 1_000_000
		tokenOff = 4321
	)
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).UnixNano()
	cfg := fsm.Config{Cache: cache.DefaultConfig()}
	want, err := fsm.New(cfg) // the state the node held: snapshot, then log
	if err != nil {
		t.Fatal(err)
	}
	apply := func(c fsm.Command) fsm.Result {
		var r fsm.Result
		want.Apply(&c, &r)
		if r.Err != nil {
			t.Fatalf("%v: %v", c.Op, r.Err)
		}
		return r
	}
	apply(fsm.Command{Op: fsm.OpSeed, At: t0, Token: floor})
	sid := apply(fsm.Command{Op: fsm.OpOpenSession, At: t0, TTL: time.Hour}).Session
	acquire := func(i int, at int64) fsm.Command {
		return fsm.Command{Op: fsm.OpAcquire, At: at, Session: sid, Gen: fsm.AnyGen,
			Req: latch.LockRequest{Keys: []string{fmt.Sprintf("k%d", i)}, Lease: time.Hour}}
	}
	for i := range 5 {
		if r := apply(acquire(i, t0)); !r.Granted {
			t.Fatalf("k%d not granted", i)
		}
	}
	snapState := want.AppendSnapshot(nil)
	var entries []*raft.Log
	for i := 5; i < 10; i++ {
		at := t0 + int64(i)*int64(time.Millisecond)
		c := acquire(i, at)
		if r := apply(c); !r.Granted {
			t.Fatalf("k%d not granted", i)
		}
		data := appendUnit(appendEntryHeader(nil, at, 1), fsm.AppendBatch(nil, []fsm.Command{c}))
		entries = append(entries, &raft.Log{Index: uint64(snapAt + i - 4), Term: 1, Type: raft.LogCommand, Data: data})
	}
	wantSum := want.Summary()
	if wantSum.Locks != 10 || wantSum.Token <= floor {
		t.Fatalf("the state to recover: %+v; want 10 locks, tokens above %d", wantSum, floor)
	}

	// The data dir, durable: n1 of n1, n2, n3.
	base := crashfs.New()
	if err := SeedDir(Seed{Dir: dir, FS: base, ID: "n1", Index: snapAt, Stamp: t0, State: snapState, TokenOffset: tokenOff,
		Peers: []Peer{{ID: "n1", Addr: "a:1"}, {ID: "n2", Addr: "b:1"}, {ID: "n3", Addr: "c:1"}}}); err != nil {
		t.Fatal(err)
	}
	d, err := openDisk(base, dir, "n1", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.log.StoreLogs(entries); err != nil {
		t.Fatal(err)
	}
	d.close()
	base = base.CrashClone(nil, 0) // what is durable of it, all of it

	down := func(context.Context, string) error { return errors.New("connection refused") }
	recoverDir := func(fsys vfs.FS) (Recovery, error) {
		return Recover(RecoverConfig{Dir: dir, FS: fsys, State: cfg, Dial: down})
	}
	// check fails the test unless fsys holds the recovered dir: one
	// member, the whole state, as a start would load it.
	check := func(fsys vfs.FS, where string) {
		t.Helper()
		d, err := openDisk(fsys, dir, "n1", slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatalf("%s: open: %v", where, err)
		}
		defer d.close()
		conf, last, err := storedConfiguration(d)
		if err != nil {
			t.Fatalf("%s: configuration: %v", where, err)
		}
		if len(conf.Servers) != 1 || conf.Servers[0].ID != "n1" || conf.Servers[0].Address != "a:1" || conf.Servers[0].Suffrage != raft.Voter {
			t.Fatalf("%s: configuration %+v; want n1 alone", where, conf)
		}
		if last.Index != snapAt+5 {
			t.Fatalf("%s: last entry %+v; want index %d", where, last, snapAt+5)
		}
		// As a start loads it: the newest snapshot, then the log after it.
		metas, err := d.snaps.List()
		if err != nil || len(metas) == 0 {
			t.Fatalf("%s: snapshots %v, %v", where, metas, err)
		}
		_, rc, err := d.snaps.Open(metas[0].ID)
		if err != nil {
			t.Fatalf("%s: open snapshot: %v", where, err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatalf("%s: read snapshot: %v", where, err)
		}
		_, n := binary.Varint(b)
		if n <= 0 {
			t.Fatalf("%s: snapshot without its stamp", where)
		}
		st, err := fsm.Restore(cfg, b[n:])
		if err != nil {
			t.Fatalf("%s: restore snapshot: %v", where, err)
		}
		lastIndex, err := d.log.LastIndex()
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		for i := metas[0].Index + 1; i <= lastIndex; i++ {
			var e raft.Log
			if err := d.log.GetLog(i, &e); err != nil {
				t.Fatalf("%s: log entry %d: %v", where, i, err)
			}
			if e.Type != raft.LogCommand {
				continue
			}
			err := decodeEntry(e.Data, func(at int64, batch []byte) {
				var bt fsm.Batch
				if err := fsm.DecodeBatch(batch, &bt); err != nil {
					t.Fatalf("%s: log entry %d: %v", where, i, err)
				}
				for j := range bt.Cmds {
					bt.Cmds[j].At = at
					var r fsm.Result
					st.Apply(&bt.Cmds[j], &r)
				}
			})
			if err != nil {
				t.Fatalf("%s: log entry %d: %v", where, i, err)
			}
		}
		if got := st.Summary(); got != wantSum {
			t.Fatalf("%s: state %+v; want %+v", where, got, wantSum)
		}
		for _, k := range want.Engine().Keys("", "", 0) {
			got := st.Engine().Keys(k.Key, "", 1)
			if len(got) != 1 || got[0].Key != k.Key || len(got[0].Holders) != 1 || got[0].Holders[0].Token != k.Holders[0].Token {
				t.Fatalf("%s: %s = %+v; want held with token %d", where, k.Key, got, k.Holders[0].Token)
			}
		}
		if off, err := tokenOffset(fsys, dir); err != nil || off != tokenOff {
			t.Fatalf("%s: token offset %d, %v; want %d", where, off, err, tokenOff)
		}
	}

	// Uncut, Recover recovers, and a second run has nothing to do.
	whole := base.CrashClone(nil, 0)
	if rec, err := recoverDir(whole); err != nil || len(rec.Dropped) != 2 || rec.Index != snapAt+5 {
		t.Fatalf("Recover: %+v, %v; want n2 and n3 dropped, index %d", rec, err, snapAt+5)
	}
	check(whole, "uncut")
	ops := whole.Ops()
	if rec, err := recoverDir(whole); err != nil || !rec.AlreadyAlone {
		t.Fatalf("Recover again: %+v, %v; want nothing to do", rec, err)
	}

	// As crashfs.Cuts, on a copy of the dir: the power cut before the
	// k-th operation.
	refused, again, alone := 0, 0, 0
	for k := 1; k <= ops+1; k++ {
		fsys := base.CrashClone(nil, 0)
		fsys.SetFault(func(ev crashfs.Event) error {
			if ev.Seq >= k {
				return crashfs.ErrPowerCut
			}
			return nil
		})
		_, rerr := recoverDir(fsys)
		for i, keep := range []float64{0, 0.5, 0.5, 1} {
			c := fsys.CrashClone(rand.New(rand.NewPCG(uint64(k), uint64(i))), keep)
			where := fmt.Sprintf("power cut before op %d of %d (Recover returned %v), keep %v", k, ops, rerr, keep)
			rec, err := recoverDir(c)
			if err != nil {
				// Refused: the node must not start on it either.
				if _, oerr := openDisk(c, dir, "n1", slog.New(slog.DiscardHandler)); oerr == nil {
					t.Fatalf("%s: Recover again: %v, but the dir opens", where, err)
				}
				if rerr == nil {
					t.Fatalf("%s: Recover returned, then the dir was refused: %v", where, err)
				}
				t.Logf("%s: refused: %v", where, err)
				refused++
				continue
			}
			if rerr == nil && !rec.AlreadyAlone {
				t.Fatalf("%s: Recover returned, then Recover again recovered: %+v", where, rec)
			}
			if rec.AlreadyAlone {
				alone++
			} else {
				again++
			}
			check(c, where)
		}
	}
	t.Logf("%d cut points: of the states a power loss left, %d recovered again, %d already recovered, %d refused", ops+1, again, alone, refused)
	if again == 0 || alone == 0 {
		t.Fatalf("no cut point left the dir to recover again (%d), or recovered (%d): the cuts missed Recover's writes", again, alone)
	}
}
