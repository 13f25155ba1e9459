package raftrep

// The steps of promote at which a hook set with SetPromoteHook is called.
const (
	StepBarrier = stepBarrier // the barrier answered: leading is set next
	StepApplied = stepApplied // the OpPromote committed: ready is set next
)

// SetPromoteHook has r's promote call hook before each of its steps, in
// the goroutine that promotes, so that a test can hold it there while it
// changes the leadership.
func SetPromoteHook(r *Replicator, hook func(step string)) {
	r.promoteHook.Store(&hook)
}

// Promotion reports whether r leads (it took up the leadership of its
// current epoch) and is ready (its OpPromote committed).
func Promotion(r *Replicator) (leading, ready bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.leading, r.ready
}
