// Package zset owns the sorted set, the value of a Redis sorted-set key in
// latch's replicated state (internal/fsm) and what the Redis front end
// (internal/resp) reads and parses: members (byte strings) with float64
// scores, ordered by score and then by member bytes, with Redis's
// semantics for adding (ZADD's NX, XX, GT, LT, CH and INCR), removing,
// ranks, ranges by rank and by score, and counting; and Redis's parsing of
// scores (ParseScore), of score range bounds (ParseBound) and its
// formatting of scores (FormatScore), each with the error Redis replies.
//
// A Set is two sorted slices of the same pairs, one by score (then
// member), one by member: ranks and ranges are binary searches over the
// first, a score lookup a binary search over the second, and an insertion
// or removal moves the tails of both. That is O(n) per change (a memmove),
// which for the sets latch is meant to keep (semaphores of up to a few
// thousand members, bounded by a limit) costs less than a skip list's
// allocation per member or a map's hashing; a Clone shares the slices
// until either set changes, which then copies them flat (no map to
// rebuild): the copy a read or a script's scratch view makes costs
// nothing until it is changed. Equal is one walk of a slice.
//
// The package is deterministic and owns no goroutines, timers or clocks.
// A Set is not safe for concurrent use.
package zset
