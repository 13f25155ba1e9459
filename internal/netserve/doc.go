// Package netserve owns what every front end's server does around its
// protocol: listening (allow-list, TLS), the accept loop with its backoff,
// the connection limit with each protocol's refusal, tracking and counting
// connections, serving each one on an event loop (package evloop) or a
// goroutine of its own, the read path of a goroutine's connection (a flush
// before every read, idle and read deadlines, buffers given back while
// idle), and Shutdown with a drain hook. It is shaped like net/http's
// Server and redcon's split between serving and handling: a front end
// brings its codec, its handlers and its error table (a Protocol), and
// nothing else; no front end listens or accepts by itself.
//
// It also owns what several front ends share in their configuration: the
// Config section each one embeds, and the access tokens (Token) a client
// presents and the file they are loaded from.
package netserve
