// Package zset owns the sorted set, the value of a Redis sorted-set key in
// latch's replicated state (internal/fsm) and what the Redis front end
// (internal/resp) reads and parses: members (byte strings) with float64
// scores, ordered by score and then by member bytes, with Redis's
// semantics for adding (ZADD's NX, XX, GT, LT, CH and INCR), removing,
// ranks, ranges by rank and by score, and counting; and Redis's parsing of
// scores (ParseScore), of score range bounds (ParseBound) and its
// formatting of scores (FormatScore), each with the error Redis replies.
//
// A Set is a sorted slice of pairs with a map from member to score: ranks
// and ranges are binary searches over the slice, a score lookup is one
// map access, and an insertion or removal moves the tail of the slice.
// That is O(n) per change, which for the sets latch is meant to keep
// (semaphores of up to a few thousand members, bounded by a limit) costs
// less than a skip list's allocation per member, and it makes a Clone two
// flat copies and Equal one walk of the slices.
//
// The package is deterministic and owns no goroutines, timers or clocks.
// A Set is not safe for concurrent use.
package zset
