// Package admin owns latch's admin HTTP server: the window through which an
// operator sees the lock table and acts on it.
//
// It serves, on one listener (config admin-addr, 127.0.0.1:11280 by
// default):
//
//	GET  /                               the status page (HTML, CSS and JavaScript embedded in the binary)
//	GET  /metrics                        Prometheus metrics (internal/metrics)
//	GET  /v1/locks?prefix=&limit=&after= keys held, waited for or delayed, in key order, paginated
//	GET  /v1/locks/{key...}              one key
//	POST /v1/locks/{key...}/release      force-release a key          (admin token)
//	GET  /v1/sessions                    live sessions, a ZooKeeper session's ephemeral znodes
//	POST /v1/sessions/{id}/end           end a session, ZooKeeper's too (admin token)
//	POST /v1/reload                      reload the settings, as SIGHUP does (admin token)
//	GET  /v1/stats                       counters, gauges and latency summaries as JSON
//	GET  /v1/stats/history?since=        one sample a second for the last minutes, for charts
//	GET  /healthz, /readyz               liveness and readiness
//	GET  /debug/pprof/                   the Go profiler
//
// JSON field names are snake_case and stable; times are RFC 3339 in UTC
// with nine fractional digits; fencing tokens are strings, since they do
// not fit a JavaScript number. Errors are {"error": "..."} with a fitting
// status code.
//
// Admin actions require "Authorization: Bearer TOKEN" when a token is
// configured, compared in constant time, and are refused from other
// origins' pages (net/http's CrossOriginProtection). Each is logged at info
// level with the caller's address and the reason it gives (the reason
// parameter). Reading needs no token: bind the server to an address only
// operators reach.
//
// Client is the Go client of the read API, used by "latch status".
package admin
