// Package server builds and runs a whole latch node from a config.Config:
// the lock service (internal/node) and the front ends that serve it to
// clients. It owns the order in which they start and stop, and the graceful
// Shutdown of the whole.
//
// The lock service keeps its state in memory, or, with a data dir, in the
// Raft log and snapshots of internal/replica/raftrep: a durable single node
// (a cluster of one) or, with a node ID, a Raft address and the initial
// cluster, a member of a cluster (cluster.go). Each front end (memcached,
// dlock, Redis, the admin HTTP API) is a component with Start and
// Shutdown; the configuration says which listen, and where. The lock
// service shuts down first, so that the front ends can still answer their
// clients' waiting requests before they close.
package server
