// Package luascript runs Redis scripts: Lua 5.1 (on github.com/yuin/gopher-lua)
// in the environment Redis 7 gives EVAL, and the conversions between Lua
// values and Redis replies both ways.
//
// It owns the sandbox (the libraries Redis loads, without os, io, debug,
// dofile, loadfile, print...; globals and library tables read-only, with
// Redis 7's errors; math.random seeded identically for every run, as
// Redis does), the redis table (call, pcall, error_reply, status_reply,
// sha1hex, log, setresp, the log levels and REDIS_VERSION), the cache of
// compiled scripts by SHA1 (bounded), and the limits a run is held to: a
// time limit, a memory limit, and a bounded call stack. A run that breaks
// one ends with an error.
//
// It knows no command: a script's redis.call is handed to a Caller, which
// answers it as a Reply. Package resp implements Caller over latch's lock
// table; what a script changes, and when, is the Caller's business.
package luascript
