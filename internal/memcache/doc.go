// Package memcache is latch's memcached front end: the text and binary
// protocols on one port (the first byte of each request decides, so both may
// be mixed on one connection), with yrmcds's lock extension. It is a drop-in
// for Debian's yrmcds 1.1.9, whose replies the differential suite
// (testdata/scenarios) compares with latch's, except for the yrmcds bugs
// latch does not copy, listed in docs/memcached.md and pinned by
// testdata/scenarios_latch.
//
// Each connection is a latch session. Its locks are locks of the one lock
// table every protocol shares (they go through latch.Service), and they are
// released the moment the connection ends, however it ends. The items live
// beside the lock table in the node's state: the front end holds no cache,
// and every change to items is one command of its Service (Service.Do), so
// that a lock takes the key in the lock table and marks the item in one
// step, and whatever ends the lock (unlock, the holder's delete or RaU, the
// end of the session, an operator's force-release) frees both.
//
// One goroutine serves each connection: it parses a request, executes it and
// buffers the reply, and flushes the replies only when it must wait for
// more input, so a pipelined batch costs one write. A plain TCP connection
// that has been idle gives its 4 KiB read and write buffers back while it
// waits for its next request (idleread.Waiter), so that thousands of idle
// connections cost little more than their goroutines.
package memcache
