// Package dlock serves the lock service over temoto/dlock's wire protocol:
// 4-byte big-endian length-prefixed protobuf frames (internal/frame,
// dlockpb), protocol version 2 as the reference server speaks it, and
// latch's compatible version 3. docs/protocol.md is the specification;
// proto/dlock.proto the schema.
//
// A Server owns a listener and its connections (through internal/netserve).
// Each connection is a client and owns
//
//   - one reader, which reads frames whole, decodes requests (into a
//     record of its own, reused from one request to the next) and
//     dispatches them, and which closes silent connections after the idle
//     timeout (a connection with a request waiting is never idle). On a
//     service that answers at once (latch.Inline: a node in memory), the
//     reader of a plain TCP connection is an event loop (internal/evloop,
//     Config.Loops; loop.go), which never waits: what would wait is
//     answered later through the loop (evloop.Conn.Send), and where the
//     reader would wait for room in the version 2 queue, the loop pauses
//     the connection's input instead. Otherwise (a Replicated service,
//     TLS, Loops -1) the reader is a goroutine of the connection's own; a
//     connection that has been silent a while waits for its next frame
//     without its buffers (internal/idleread);
//   - a session of the lock service (latch.Session, protocol "dlock", peer
//     = the remote address), opened by the connection's first Lock or
//     Session request and closed when the connection ends for any reason,
//     so that its locks without a lease are released at once;
//   - for version 2 requests, an in-order queue served by one goroutine:
//     version 2 answers strictly in request order, so a waiting Lock holds
//     back the answers to every later version 2 request of the connection;
//   - for version 3 requests, no order: a Lock that must wait waits in the
//     lock table (latch.Session.AcquireFunc), cancellable by id, and is
//     answered from the goroutine that ends its wait (a grant from the
//     goroutine that released the lock, without blocking it); the rest
//     are handled as they are read. When the service is Replicated
//     (latch.Execution, read once by New), every version 3 Lock, Unlock,
//     Renew and Ping is answered through a callback once its command is
//     applied, so that the reader goes on while it commits; version 2
//     requests wait for their commits in turn, as their order demands;
//   - one writer, and no goroutine of its own: handlers append encoded
//     answers to a buffer, and the goroutine that finds no write in
//     progress writes what has gathered with one call (answers coalesce
//     whenever more than one is pending; no lock is held while writing),
//     or, on an event loop, hands it to the loop, which writes it.
//     While the reader handles frames it has already read whole, it holds
//     its answers back: the answers to requests that arrived together
//     leave together, before the reader waits for more input.
//
// Every error a request can end with becomes a wire status through one
// table (status.go).
package dlock
