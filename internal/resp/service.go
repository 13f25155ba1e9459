package resp

import (
	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/fsm"
)

// Service is the lock service the front end serves: owned locks of the one
// lock table every protocol shares. internal/node implements it.
type Service interface {
	// Execution says how the service answers (latch.Inline or
	// latch.Replicated): the server serves connections from event loops
	// only when it answers inline.
	Execution() latch.Execution
	// Now reads the service's clock, in nanoseconds: the clock leases run
	// on.
	Now() int64
	// Owned applies the owned-lock command c (fsm.OpOwned or
	// fsm.OpOwnedTx, with the fields it reads set) and returns its result.
	// c is borrowed for the call only.
	Owned(c *fsm.Command) fsm.Result
	// OwnedGet reads key's holder as an fsm.OwnedGet command would answer,
	// without changing anything; at is the instant it read.
	OwnedGet(key string) (r fsm.Result, at int64)
	// OwnedZGet reads key's sorted set as an fsm.OwnedZGet command would
	// answer (Result.ZSet a copy the caller owns), without changing
	// anything; at is the instant it read.
	OwnedZGet(key string) (r fsm.Result, at int64)
}
