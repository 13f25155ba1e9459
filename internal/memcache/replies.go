package memcache

import (
	"errors"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/cache"
)

// The answers to item commands that failed, one table per protocol: the
// first entry whose err matches (errors.Is) decides. An error that matches
// no entry, or an empty reply for the command, is the server's own failure:
// the handler returns it and the connection ends.

// textReply is the text protocol's answer to err, per kind of command.
type textReply struct {
	err   error
	store string // set, add, replace, append, prepend
	cas   string
	del   string // delete
	arith string // incr, decr
	lock  string
	// loud replies are sent even with noreply, as memcached's
	// SERVER_ERRORs are, and count as errors.
	loud bool
}

var textReplies = []textReply{
	{err: cache.ErrLocked, store: rLocked, cas: rLocked, del: rLocked, arith: rLocked, lock: rLocked},
	{err: cache.ErrExists, store: rNotStored, cas: rExists},
	{err: cache.ErrNotFound, store: rNotStored, cas: rNotFound, del: rNotFound, arith: rNotFound, lock: rNotFound},
	{err: cache.ErrNotStored, store: rNotStored, cas: rNotFound},
	// A key the text protocol can name but latch refuses (over 250
	// bytes; cache.ErrInvalidKey is latch.ErrInvalidKey): append,
	// prepend and cas find no item, as in yrmcds.
	{err: cache.ErrInvalidKey, store: rNotStored, cas: rNotFound, del: rNotFound, arith: rNotFound, lock: rNotFound},
	{err: cache.ErrNonNumeric, arith: rNonNumeric},
	{err: cache.ErrTooLarge, store: rTooLarge, cas: rTooLarge, loud: true},
	{err: cache.ErrNoMemory, store: rOutOfMemory, cas: rOutOfMemory, arith: rOutOfMemory, loud: true},
	// A cluster node that cannot reach a leader changes nothing; what it
	// was asked may still be applied later (the outcome is unknown).
	{err: latch.ErrUnavailable, store: rUnavailable, cas: rUnavailable, del: rUnavailable, arith: rUnavailable, lock: rUnavailable, loud: true},
}

// rUnavailable answers a change that a cluster node could not commit.
const rUnavailable = "SERVER_ERROR unavailable: this node cannot reach its cluster's leader\r\n"

// unavailable reports whether err says that the cluster could not serve
// the command (latch.ErrUnavailable), which every command answers with
// rUnavailable (binary: stTempFailure), even quiet: never as a miss, nor
// as done. A miss, the usual error of a read, is told apart without
// unwrapping.
func unavailable(err error) bool {
	return err != nil && err != cache.ErrNotFound && errors.Is(err, latch.ErrUnavailable)
}

// textReplyOf returns the entry of textReplies for err, or nil.
func textReplyOf(err error) *textReply {
	for i := range textReplies {
		if errors.Is(err, textReplies[i].err) {
			return &textReplies[i]
		}
	}
	return nil
}

// textFailed answers a text command that failed with err, by the reply
// pick chooses from err's entry, unless quiet silences it. It returns err
// when the table has no answer for it.
func (c *conn) textFailed(err error, quiet bool, pick func(*textReply) string) error {
	rep := textReplyOf(err)
	if rep == nil || pick(rep) == "" {
		return err
	}
	switch {
	case rep.loud:
		c.textError(pick(rep))
	case !quiet:
		c.w.WriteString(pick(rep))
	}
	return nil
}

// binStatuses is the binary protocol's answer to item errors; binCacheError
// has the one exception, Add's invalid key.
var binStatuses = []struct {
	err    error
	status uint16
}{
	{cache.ErrNotFound, stNotFound}, // also an Add with a CAS, as yrmcds answers
	{cache.ErrNotStored, stNotFound},
	{cache.ErrInvalidKey, stNotFound},
	{cache.ErrExists, stExists},
	{cache.ErrLocked, stLocked},
	{cache.ErrNotLocked, stNotLocked},
	{cache.ErrTooLarge, stTooLarge},
	{cache.ErrNonNumeric, stNonNumeric},
	{cache.ErrNoMemory, stOutOfMemory},
	{latch.ErrUnavailable, stTempFailure},
}

// binCacheError answers a request that failed with an item error.
func (c *conn) binCacheError(r *request, err error) {
	s := stInvalid
	for _, e := range binStatuses {
		if errors.Is(err, e.err) {
			s = e.status
			break
		}
	}
	switch {
	case s == stInvalid:
		c.srv.log.Error("memcache: unexpected error", "op", r.op, "err", err)
	case (r.op == opAdd || r.op == opAddQ) && errors.Is(err, cache.ErrInvalidKey):
		s = stNotStored // as yrmcds: Add answers NotStored, never NotFound, to a bad key
	}
	c.binError(r, s)
}
