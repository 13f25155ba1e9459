package raftrep

// TakeSnapshot has r's Raft take a snapshot now and waits for it.
func TakeSnapshot(r *Replicator) error { return r.raft.Snapshot().Error() }

// ObserveSnapshotSteps has f called before each step of a snapshot's
// Persist, under the node's lock, and what it returns after the step,
// until the returned function is called.
func ObserveSnapshotSteps(f func() (stepped func())) (restore func()) {
	observeStep = f
	return func() { observeStep = nil }
}
