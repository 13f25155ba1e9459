// Package statuscmd implements "latch status": it reads the holders,
// waiters and sessions of a running server from its admin API
// (internal/admin's Client) and prints them as aligned tables, as JSON, or
// redrawn every interval until interrupted. cmd/latch only parses flags.
package statuscmd
