package raftrep

import "github.com/hashicorp/raft"

// The steps at which a hook set with SetStepHook is called.
const (
	StepBarrier = stepBarrier // promote's barrier answered: leading is set next
	StepApplied = stepApplied // promote's OpPromote committed: ready is set next
	StepPack    = stepPack    // the leader's sender had its turn: it packs an entry next
	StepReceive = stepReceive // a forwarded batch arrived: a leader keeps it next
	StepWatch   = stepWatch   // watch has an observation: it handles it next
)

// SetStepHook has r call hook before each step, in the goroutine that
// takes it (promote's, the sender, a forward connection's, or watch), so
// that a test can hold it there while it changes the leadership.
func SetStepHook(r *Replicator, hook func(step string)) {
	r.stepHook.Store(&hook)
}

// Promotion reports whether r leads (it took up the leadership of its
// current epoch) and is ready (its OpPromote committed).
func Promotion(r *Replicator) (leading, ready bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.leading, r.ready
}

// Forwarded returns the count of the commands forwarded to r that wait
// for it to pack them.
func Forwarded(r *Replicator) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.fwdCmds
}

// FillObservations puts copies of o in r's channel of Raft's observations
// until it is full, as Raft does when watch falls behind, and returns
// how many it put.
func FillObservations(r *Replicator, o raft.Observation) int {
	for n := 0; ; n++ {
		select {
		case r.obs <- o:
		default:
			return n
		}
	}
}
