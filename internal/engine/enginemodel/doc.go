// Package enginemodel is the model-based randomized test of the lock table
// (package engine), as a package that tests import, like net/http/httptest:
// the engine's TestModel and FuzzEngine drive an Engine with it directly,
// and the fsm package's TestModel and FuzzModel drive the same checks
// through commands. Nothing else should import it.
//
// A harness drives the lock table under test (through a Driver) and a
// reference model with the same random sequence of operations: sessions
// opened (with and without TTL and lock-delay), acquired keys (shared and
// exclusive, with limits, waits, leases and both re-lock policies),
// releases, renewals, keepalives, cancellations, ended sessions, forced
// releases, and time that stands still, creeps, lands exactly on pending
// instants or jumps past many. After every step it checks
//
//   - the engine against the model: the result of the call, the events it
//     reported, and the table it left (Keys, Key, Sessions, Session, Held,
//     Stats, NextDeadline, Now);
//   - invariants that must hold whatever the model says (checkInvariants),
//     computed from the engine's answers alone;
//
// and it ends every sequence by draining the table (drain), which checks
// that no request stays queued once nothing holds it back.
//
// The model is a plain restatement of the rules in the engine's doc.go:
// slices scanned from the start for every question, no indexes, no
// incremental state. Where doc.go leaves a choice open, the model either
// accepts every answer or follows the engine:
//
//   - which error a call reports when several apply: the model gives the
//     set of acceptable ones;
//   - the order of the events of one call: they are compared as a multiset
//     (each event carries its instant), and their order is checked by
//     invariants (checkTime);
//   - which request goes first when several become grantable at once: the
//     model grants first the one the engine reported first (refModel.hint),
//     falling back to arrival order, and never grants a request the rules do
//     not allow. The order matters: it decides the tokens, and the token a
//     session's hold ends up with when two of its requests share a key;
//   - the order in which an ending session releases its keys, which decides
//     how its lock-delays tie: newest hold first, as the engine does.
//
// With those, tokens, leases and the table are compared exactly.
//
// The harness sees the table under test only through a Driver: Run to make
// one call (an Op) and learn its answer (an Outcome), Engine for the reads.
// Direct calls the engine's methods; the fsm package's driver turns every
// Op into one command.
//
// Running it (the same with ./internal/fsm/ and FuzzModel):
//
//	go test ./internal/engine/ -run 'TestModel$'                          # the default sequences
//	LATCH_MODEL_ITERS=200000 go test ./internal/engine/ -run 'TestModel$' # a longer run, random base seed
//	go test ./internal/engine/ -run 'TestModel$' -v -model.seed=N         # replay one sequence, with its log
//	LATCH_MODEL_SEED=N go test ./internal/engine/ -run 'TestModel$' -v    # the same
//	go test ./internal/engine/ -run '^$' -fuzz FuzzEngine                 # coverage-guided
//
// A failure prints the seed, the operations so far with the engine's
// answers, and what differed.
package enginemodel
