package raftrep_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/cache"
	"github.com/latchd/latch/internal/fsm"
	"github.com/latchd/latch/internal/replica/raftrep"
	"github.com/latchd/latch/internal/vfs"
)

// Probes of the other members for Recover: every one down, or every one up.
var (
	allDown = func(context.Context, string) error { return errors.New("connection refused") }
	allUp   = func(context.Context, string) error { return nil }
	n3Up    = func(_ context.Context, addr string) error {
		if addr == "n3" {
			return nil
		}
		return errors.New("connection refused")
	}
)

// TestRecover: a node of a 3-node cluster that lost the other two is made
// a cluster of one by Recover, from its snapshots and its log: started
// again alone, it leads and holds every lock it had, with its token and
// its lease; a new member added to it catches up, and the next token is
// above every one before. Recover refuses what it must not recover.
func TestRecover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := makeCluster(t, 3, true)
		c.snapshots = true // snapshots, and entries after the last
		c.startAll()
		lead := c.leader()
		s := c.open(lead, latch.SessionOptions{Protocol: "test", TTL: time.Minute})
		tokens := map[string]latch.Token{}
		var top latch.Token
		for i := range 20 {
			key := fmt.Sprintf("k%d", i)
			g, err := s.Acquire(context.Background(), latch.LockRequest{Keys: []string{key}, Lease: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			tokens[key], top = g.Token, max(top, g.Token)
		}
		expires := map[string]time.Time{}
		for key := range tokens {
			info, _ := c.nodes[lead].Lock(key)
			expires[key] = info.Holders[0].Expires
		}
		time.Sleep(2 * time.Second) // applied everywhere
		for _, id := range []string{"n1", "n2", "n3"} {
			c.stop(id)
		}
		state := fsm.Config{Cache: cache.DefaultConfig()}

		empty := t.TempDir()
		halted := c.dirs["n3"]
		if err := os.WriteFile(filepath.Join(halted, "halted"), []byte("a test\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		locked := t.TempDir()
		for _, f := range []string{"node-id", "stable"} {
			if err := os.WriteFile(filepath.Join(locked, f), []byte("n9\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		noState := t.TempDir()
		if err := os.WriteFile(filepath.Join(noState, "node-id"), []byte("n9\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		l, err := vfs.OS.Lock(filepath.Join(locked, "lock"))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		for _, tt := range []struct {
			name string
			cfg  raftrep.RecoverConfig
			want string
			is   error
		}{
			{"members up", raftrep.RecoverConfig{Dir: c.dirs["n1"], Dial: allUp}, "n2 (n2), n3 (n3) answer on their Raft addresses", raftrep.ErrMembersUp},
			{"a member up", raftrep.RecoverConfig{Dir: c.dirs["n1"], Dial: n3Up}, "n3 (n3) answers on its Raft address", raftrep.ErrMembersUp},
			{"another node's", raftrep.RecoverConfig{Dir: c.dirs["n1"], ID: "n2", Dial: allDown}, "belongs to node n1, not n2", nil},
			{"halted", raftrep.RecoverConfig{Dir: halted, Dial: allDown}, "clear-halt", raftrep.ErrHalted},
			{"in use", raftrep.RecoverConfig{Dir: locked, Dial: allDown}, "in use by another process", nil},
			{"not a data dir", raftrep.RecoverConfig{Dir: empty, Dial: allDown}, "not the data dir of a node", nil},
			{"no state", raftrep.RecoverConfig{Dir: noState, Dial: allDown}, "holds no Raft state", nil},
			{"no dir", raftrep.RecoverConfig{Dir: filepath.Join(empty, "none"), Dial: allDown}, "no such file", nil},
		} {
			// (t.Run is not allowed in a synctest bubble.)
			tt.cfg.State = state
			_, err := raftrep.Recover(tt.cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) || tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("%s: Recover: %v; want an error with %q", tt.name, err, tt.want)
			}
		}
		if left, _ := os.ReadDir(noState); len(left) != 1 {
			t.Errorf("a refused Recover left %v in a data dir with no state; want node-id alone", left)
		}
		// A dry run reports, and changes nothing.
		dry, err := raftrep.Recover(raftrep.RecoverConfig{Dir: c.dirs["n1"], State: state, Dial: allUp, DryRun: true})
		if err != nil || len(dry.Answering) != 2 || len(dry.Dropped) != 2 || dry.Index == 0 {
			t.Fatalf("dry run: %+v, %v; want 2 members answering and the last entry", dry, err)
		}
		// Forced, a node recovers though the others answer.
		rec, err := raftrep.Recover(raftrep.RecoverConfig{Dir: c.dirs["n2"], State: state, Dial: allUp, Force: true})
		if err != nil || len(rec.Answering) != 2 {
			t.Fatalf("forced Recover: %+v, %v; want it done, with 2 members answering", rec, err)
		}

		if snaps, err := os.ReadDir(filepath.Join(c.dirs["n1"], "snap")); err != nil || len(snaps) == 0 {
			t.Fatalf("n1's snapshots: %v, %v; want some to recover from", snaps, err)
		}
		rec, err = raftrep.Recover(raftrep.RecoverConfig{Dir: c.dirs["n1"], State: state, Dial: allDown})
		if err != nil {
			t.Fatalf("Recover: %v", err)
		}
		t.Logf("recovered: %+v", rec)
		if rec.ID != "n1" || rec.Addr != "n1" || len(rec.Dropped) != 2 || len(rec.Answering) != 0 || rec.Index != dry.Index || rec.Term != dry.Term {
			t.Fatalf("Recover = %+v", rec)
		}
		if again, err := raftrep.Recover(raftrep.RecoverConfig{Dir: c.dirs["n1"], State: state, Dial: allUp}); err != nil || !again.AlreadyAlone {
			t.Fatalf("Recover again: %+v, %v; want nothing to do", again, err)
		}

		c.start("n1")
		if got := c.leader(); got != "n1" {
			t.Fatalf("leader after the recovery %s, want n1", got)
		}
		if st, err := c.reps["n1"].Status(); err != nil || len(st.Members) != 1 {
			t.Fatalf("n1 after the recovery: %+v, %v; want it the one member", st, err)
		}
		for key, tok := range tokens {
			info, ok := c.nodes["n1"].Lock(key)
			if !ok || len(info.Holders) != 1 || info.Holders[0].Token != tok || info.Holders[0].Expires.Before(expires[key]) {
				t.Errorf("%s after the recovery = %+v, %v; want held with token %d, its lease to %v or later", key, info, ok, tok, expires[key])
			}
		}

		// n2 comes back as a new member, with an empty data dir.
		c.dirs["n2"] = t.TempDir()
		c.joining = map[string]bool{"n2": true}
		c.start("n2")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.reps["n1"].AddVoter(ctx, "n2", "n2"); err != nil {
			t.Fatalf("add n2: %v", err)
		}
		time.Sleep(3 * time.Second)
		if info, ok := c.nodes["n2"].Lock("k0"); !ok || len(info.Holders) != 1 || info.Holders[0].Token != tokens["k0"] {
			t.Errorf("k0 on the new member = %+v, %v; want held with token %d", info, ok, tokens["k0"])
		}
		s2 := c.open("n2", latch.SessionOptions{Protocol: "test"})
		g, err := s2.Acquire(context.Background(), latch.LockRequest{Keys: []string{"new"}})
		if err != nil || g.Token <= top {
			t.Fatalf("acquire after the recovery: %+v, %v; want a token above %d", g, err, top)
		}
		s2.Close()
		s.Close()
	})
}
