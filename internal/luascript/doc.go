// Package luascript runs Redis scripts: Lua 5.1 (on github.com/yuin/gopher-lua)
// in the environment Redis 7 gives EVAL, and the conversions between Lua
// values and Redis replies both ways.
//
// It owns the sandbox: the libraries Redis loads (bit among them, not
// cjson, struct or cmsgpack), without what Redis removes (os, io, debug,
// dofile, loadfile, print...); globals and library tables read-only, with
// Redis 7's errors; math.random on Redis's 48-bit generator, one per
// engine, going on from run to run as in Redis 7. It owns the redis table
// (call, pcall, error_reply, status_reply, sha1hex, log, setresp, the log
// levels and REDIS_VERSION), Redis 7's "#!lua" shebang, the cache of
// compiled scripts by SHA1 (bounded), and the limits a run is held to: a
// time limit, a memory limit, and a bounded call stack, watched by a
// timer while scripts run. A run that breaks one ends with an error.
//
// It knows no command: a script's redis.call is handed to a Caller, which
// answers it as a Reply. Package resp implements Caller over latch's lock
// table; what a script changes, and when, is the Caller's business.
package luascript
