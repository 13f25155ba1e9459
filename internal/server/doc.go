// Package server builds and runs a whole latch node from a config.Config:
// the lock service (internal/node) and the front ends that serve it to
// clients. It owns the order in which they start and stop, and the graceful
// Shutdown of the whole.
//
// Each front end (memcached, dlock, the admin HTTP API) is a component with
// Start and Shutdown; the configuration says which listen, and where. The
// lock service shuts down first, so that the front ends can still answer
// their clients' waiting requests before they close.
package server
