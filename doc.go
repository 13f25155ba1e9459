// Package latch holds the vocabulary shared by every part of the latch lock
// server: keys, lock modes, fencing tokens, requests and grants, the errors a
// lock operation can end with, and the Service interface that the memcached
// and dlock front ends call (and its Admin part, the admin API). The Redis
// front end, whose locks belong to a value rather than a session, reaches
// the same lock table through internal/node, with this package's keys and
// errors. A Service names how it answers (Execution): Inline, a call
// decided before it returns unless it waits in a lock queue, or
// Replicated, a change answered once committed; front ends read it to
// choose how they serve connections.
//
// The package imports nothing from the rest of the module. The lock model it
// names is described in docs/lock-model.md: exclusive and shared locks, FIFO
// wait queues with immediate hand-off, all-or-nothing multi-key requests,
// sessions, leases and a fencing token on every grant.
package latch
