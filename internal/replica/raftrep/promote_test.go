package raftrep_test

import (
	"context"
	"errors"
	"io"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/raft"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/replica/raftrep"
)

// stepHold holds a node at each of the steps it names (promote's, the
// sender's, ...: raftrep.SetStepHook) that the node reaches, so that a test
// changes the leadership while it waits there, whatever the order the
// scheduler would have run them in; other steps go on at once, and once
// let go, every step does.
type stepHold struct {
	at   chan heldStep
	free chan struct{}
}

// heldStep is a step a node waits at until it is released.
type heldStep struct {
	name string
	goOn chan struct{}
}

func (s heldStep) release() { close(s.goOn) }

func holdSteps(t *testing.T, r *raftrep.Replicator, steps ...string) *stepHold {
	h := &stepHold{at: make(chan heldStep), free: make(chan struct{})}
	raftrep.SetStepHook(r, func(step string) {
		if !slices.Contains(steps, step) {
			return
		}
		s := heldStep{name: step, goOn: make(chan struct{})}
		select {
		case h.at <- s:
			select {
			case <-s.goOn:
			case <-h.free:
			}
		case <-h.free:
		}
	})
	t.Cleanup(h.letGo)
	return h
}

// reach waits for the node to reach step, where it holds it.
func (h *stepHold) reach(t *testing.T, step string) heldStep {
	t.Helper()
	select {
	case s := <-h.at:
		if s.name != step {
			t.Fatalf("reached step %s, want %s", s.name, step)
		}
		return s
	case <-time.After(10 * time.Second):
		t.Fatalf("step %s not reached", step)
		return heldStep{}
	}
}

// letGo lets every step, held or to come, go on.
func (h *stepHold) letGo() {
	select {
	case <-h.free:
	default:
		close(h.free)
	}
}

// transfer hands the leadership from node from to node to.
func (c *cluster) transfer(from, to string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.reps[from].Transfer(ctx, to); err != nil {
		c.t.Fatalf("transfer the leadership from %s to %s: %v", from, to, err)
	}
}

// serves checks that node id opens a session and takes a lock through it
// within a second: its batches commit.
func (c *cluster) serves(id, key string) {
	c.t.Helper()
	start := time.Now()
	s, err := c.nodes[id].OpenSession(latch.SessionOptions{Protocol: "test"})
	if err != nil {
		c.t.Fatalf("open a session on %s: %v, after %v", id, err, time.Since(start))
	}
	defer s.Close()
	if _, err := s.Acquire(context.Background(), latch.LockRequest{Keys: []string{key}}); err != nil {
		c.t.Fatalf("acquire %s on %s: %v, after %v", key, id, err, time.Since(start))
	}
	if d := time.Since(start); d > time.Second {
		c.t.Errorf("a session and a lock on %s took %v", id, d)
	}
}

// checkPromotion checks whether node id has taken up the leadership.
func (c *cluster) checkPromotion(id string, want bool) {
	c.t.Helper()
	if leading, ready := raftrep.Promotion(c.reps[id]); leading != want || ready != want {
		c.t.Errorf("%s: leading %v, ready %v; want %v and %v", id, leading, ready, want, want)
	}
}

// TestDemotedWhileTakingUp: a new leader that steps down before it takes
// the leadership up (its barrier answers late: on a long log, once the
// log is applied) forwards its batches to the next leader, and takes up
// its own next leadership. It was left "leading" and not ready, and sent
// nothing, neither its clients' batches nor its node's heartbeats, until
// it next led.
func TestDemotedWhileTakingUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3, false)
		lead := c.leader()
		f := c.other(lead)
		h := holdSteps(t, c.reps[f], raftrep.StepBarrier, raftrep.StepApplied)
		c.transfer(lead, f)
		b := h.reach(t, raftrep.StepBarrier)
		c.transfer(f, lead)
		c.leaderAmong(lead)
		b.release()
		h.letGo()
		time.Sleep(100 * time.Millisecond)
		c.checkPromotion(f, false)
		c.serves(f, "k1")

		c.transfer(lead, f)
		c.leaderAmong(f)
		c.checkPromotion(f, true)
		before := c.reps[f].Counters().Entries
		c.serves(f, "k2")
		c.serves(lead, "k3")
		if c.reps[f].Counters().Entries == before {
			t.Errorf("%s leads and proposed no entry", f)
		}
	})
}

// TestPromotedForEarlierLeadership: a promote whose OpPromote commits
// after its node lost that leadership, and got the next, sets nothing:
// the node is not ready until its new leadership's own promote is (it
// was set ready at once, and would stamp and pack entries ahead of its
// OpPromote).
func TestPromotedForEarlierLeadership(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3, false)
		lead := c.leader()
		f := c.other(lead)
		h := holdSteps(t, c.reps[f], raftrep.StepBarrier, raftrep.StepApplied)
		c.transfer(lead, f)
		h.reach(t, raftrep.StepBarrier).release()
		first := h.reach(t, raftrep.StepApplied)
		c.transfer(f, lead)
		c.leaderAmong(lead)
		c.transfer(lead, f)
		second := h.reach(t, raftrep.StepBarrier)
		first.release()
		time.Sleep(100 * time.Millisecond)
		c.checkPromotion(f, false)

		second.release()
		h.reach(t, raftrep.StepApplied).release()
		h.letGo()
		time.Sleep(100 * time.Millisecond)
		c.checkPromotion(f, true)
		c.serves(f, "k1")
		c.serves(lead, "k2")
	})
}

// TestPromotedThroughTransfer: a new leader whose OpPromote is refused
// because a leadership transfer is under way (Raft refuses entries until
// it ends), and which stays leader when the transfer fails, takes the
// leadership up once it has. It was left "leading" and not ready: the
// leader of a cluster that packed nothing, for anyone.
func TestPromotedThroughTransfer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3, false)
		lead := c.leader()
		f := c.other(lead)
		x := c.other(lead, f)
		c.net.partition(x)
		h := holdSteps(t, c.reps[f], raftrep.StepBarrier, raftrep.StepApplied)
		c.transfer(lead, f)
		b := h.reach(t, raftrep.StepBarrier)
		// x, cut off, lacks f's first entries: the transfer to it waits
		// for it to catch up, an election timeout, and fails.
		transferred := make(chan error, 1)
		go func() {
			transferred <- c.reps[f].Transfer(context.Background(), x)
		}()
		time.Sleep(10 * time.Millisecond)
		b.release()
		h.letGo()
		if err := <-transferred; err == nil {
			t.Fatalf("the transfer to %s, cut off, succeeded", x)
		}
		time.Sleep(time.Second)
		if _, self, _ := c.reps[f].Leader(); !self {
			t.Fatalf("%s does not lead after the transfer failed", f)
		}
		c.checkPromotion(f, true)
		c.serves(f, "k1")
		c.serves(lead, "k2")
		c.net.heal()
	})
}

// TestPackedForEarlierLeadership: an entry whose turn comes after its
// leader lost the leadership, and got the next, is not packed until the
// new leadership is taken up: its stamp was of the earlier leadership's
// clock, which counted the time without a leader, and it was proposed
// ahead of the new leadership's OpPromote.
func TestPackedForEarlierLeadership(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3, false)
		lead := c.leader()
		h := holdSteps(t, c.reps[lead], raftrep.StepPack, raftrep.StepBarrier)
		opened := make(chan error, 1)
		go func() {
			s, err := c.nodes[lead].OpenSession(latch.SessionOptions{Protocol: "test"})
			if err == nil {
				s.Close()
			}
			opened <- err
		}()
		pack := h.reach(t, raftrep.StepPack)
		f := c.other(lead)
		c.transfer(lead, f)
		c.leaderAmong(f)
		c.transfer(f, lead)
		barrier := h.reach(t, raftrep.StepBarrier)
		before := c.reps[lead].Counters().Entries
		pack.release()
		time.Sleep(100 * time.Millisecond)
		if n := c.reps[lead].Counters().Entries - before; n != 0 {
			t.Errorf("%s proposed %d entries before it took up its leadership", lead, n)
		}
		barrier.release()
		h.letGo()
		if err := <-opened; err != nil {
			t.Fatalf("open a session on %s: %v", lead, err)
		}
		c.checkPromotion(lead, true)
		c.serves(lead, "k1")
		c.serves(f, "k2")
	})
}

// TestForwardedToEarlierLeadership: a batch forwarded to a leader that is
// demoted as it arrives is dropped, as those that arrived before were
// (their nodes send them again to the next leader): it was kept, for the
// node to pack when, if ever, it next led.
func TestForwardedToEarlierLeadership(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3, false)
		lead := c.leader()
		f := c.other(lead)
		h := holdSteps(t, c.reps[lead], raftrep.StepReceive)
		opened := make(chan error, 1)
		go func() {
			s, err := c.nodes[f].OpenSession(latch.SessionOptions{Protocol: "test"})
			if err == nil {
				s.Close()
			}
			opened <- err
		}()
		received := h.reach(t, raftrep.StepReceive)
		c.transfer(lead, f)
		c.leaderAmong(f)
		received.release()
		h.letGo()
		time.Sleep(100 * time.Millisecond)
		if n := raftrep.Forwarded(c.reps[lead]); n != 0 {
			t.Errorf("%s, demoted, keeps %d forwarded commands", lead, n)
		}
		if err := <-opened; err != nil {
			t.Fatalf("open a session on %s: %v", f, err)
		}
		c.serves(f, "k1")
		c.serves(lead, "k2")
	})
}

// TestObservationsDropped: a node whose watcher falls behind, so that
// Raft drops the observations that find its channel full, follows Raft's
// state once it catches up: made leader unseen, it takes the leadership
// up. It was left the leader of a cluster that packed nothing, for
// anyone.
func TestObservationsDropped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3, false)
		lead := c.leader()
		f := c.other(lead)
		h := holdSteps(t, c.reps[f], raftrep.StepWatch)
		stale := raft.Observation{Data: raft.LeaderObservation{LeaderID: raft.ServerID(lead), LeaderAddr: raft.ServerAddress(lead)}}
		raftrep.FillObservations(c.reps[f], stale)
		watching := h.reach(t, raftrep.StepWatch)
		raftrep.FillObservations(c.reps[f], stale)
		c.transfer(lead, f)
		watching.release()
		h.letGo()
		c.leaderAmong(f)
		c.checkPromotion(f, true)
		c.serves(f, "k1")
		c.serves(lead, "k2")
	})
}

// TestForwardedDropCloses: a node that drops a batch forwarded to it (it
// does not lead) closes the connection, and takes nothing more from it.
// It dropped the batch and went on reading: a node made leader again
// before the next batch on that connection applied the next batch
// without the one it dropped, whose proposer, never told, waited for it
// for ever (the state machine takes an earlier Seq for a resend), and
// the follower, its Raft seeing the same leader throughout, never sent
// it again.
func TestForwardedDropCloses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3, false)
		lead := c.leader()
		f := c.other(lead)
		_, end := c.net.add("x")
		conn, err := end.DialForward(context.Background(), c.addr(f))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		go conn.Write([]byte{'B', 1, 'a', 1, 'b'}) // two batches of a byte
		time.Sleep(100 * time.Millisecond)
		if n := raftrep.Forwarded(c.reps[f]); n != 0 {
			t.Errorf("%s, a follower, keeps %d forwarded commands", f, n)
		}
		conn.SetReadDeadline(time.Now().Add(time.Second))
		if _, err := conn.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
			t.Errorf("read after %s dropped a batch: %v; want it closed (EOF)", f, err)
		}
	})
}
