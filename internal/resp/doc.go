// Package resp is latch's Redis protocol front end: RESP2 and RESP3 (HELLO),
// inline commands, pipelining, and the commands that Redis lock recipes and
// libraries send, on latch's lock table.
//
// A key is a latch lock. SET key value NX PX ms acquires it with a lease;
// the value is the owner's identity, kept with the hold, so that GET returns
// it while the lock is held (and nil the instant its lease ends), and
// release and renewal compare it. These locks belong to no connection:
// the libraries pool connections and release on whichever is free, so a
// lock is owned by its value and ends by its lease, by a release that names
// its value (or a DEL), or by an operator. They are the same locks memcached
// and dlock clients take: a key held over either protocol is busy to SET NX,
// and the other way round.
//
// A key held over memcached or dlock is a lock without an owner value: to
// a Redis client, a key of another type (TYPE answers "latchlock", as a
// module's type). It exists (EXISTS, SET NX, SETNX, PTTL see it), and what
// reads it as a string answers Redis's own error, "WRONGTYPE Operation
// against a key holding the wrong kind of value": GET, GETSET, and every
// known script that GETs its key, with the suffix Redis 7 adds (" script:
// <sha1>, on @user_script:<line>.", the line of the script's first read).
// A stand-in value would be a value nobody set; WRONGTYPE is what the same
// client meets on a Redis whose key holds a list. The items of
// memcached's store are not Redis keys: GET of one is nil.
//
// Scripts: the scripts that redsync, bsm/redislock, redis-py's Lock and
// node-redlock send are recognised by the SHA1 of their text or of their
// canonical form (Canonical) and each runs as one native lock operation
// (script.go), the cheap path. Any other script runs in Lua (package
// luascript), as a transaction does (lua.go): once, on this node, against
// a scratch view of the keys it touches, read with their watches; its
// write commands are then applied as one fsm.OpOwnedTx under those
// watches, or the script runs again if a key changed.
//
// Every Redis command that changes a lock is one command of the Service
// (fsm.OpOwned), and a MULTI/EXEC transaction is one fsm.OpOwnedTx, applied
// only if the keys it WATCHes have not changed. Reads (GET, PTTL, EXISTS
// outside a transaction) read the state without a command.
//
// A connection is served one of two ways, with the same replies. With
// Config.Loops, a plain TCP connection is handed to an event loop (package
// evloop), which gives it what arrived (conn.Input): the complete requests
// are parsed, executed and answered into one write, and an incomplete one
// is left for the loop to give again, whole, with the rest. Otherwise (TLS,
// a node that answers once replicated, latch.Replicated) one goroutine
// serves each connection: it reads a request (Reader), executes it and
// buffers the reply (Writer), and flushes only when it must wait for more
// input, so a pipelined batch is answered in order in one write. While
// more input is buffered, the lock commands that change locks
// are planned and held back, then applied together as one OpOwnedTx
// without watches (in order, at one instant, in one command of the
// Service) and answered in order, before any other reply, before a read,
// and before the connection waits for input.
package resp
