// Package server builds and runs a whole latch node from a config.Config:
// the lock service (internal/node) and the front ends that serve it to
// clients. It owns the order in which they start and stop, and the graceful
// Shutdown of the whole.
//
// Each front end (memcached, dlock, the admin HTTP API) is a component with
// Start and Shutdown, added to the server as its protocol arrives. Today the
// server runs the lock service alone: it has no listener yet.
package server
