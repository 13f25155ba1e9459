// Package zookeeper is latch's ZooKeeper front end: it serves the lock
// recipes of unmodified ZooKeeper clients (kazoo, Curator, go-zookeeper,
// node-zookeeper-client, zkCli) on latch's data tree (package znode), in
// the same replicated state as every other protocol.
//
// It owns ZooKeeper's side of a connection: the handshake that opens or
// attaches a session (with the timeout clamped to the tick bounds, the
// password checked, a client from the future turned away), one FIFO of
// requests per connection so that replies go out in request order, the
// opcodes the recipes and zkCli send (the others answered as a stock
// ZooKeeper answers them when they are off), one-shot watches, setWatches
// after a reconnect, and the four-letter words. Package netserve serves
// its connections, each on a goroutine of its own, with a writer
// goroutine that sends its replies and watch events.
//
// Writes are commands (node.Node's ZWrite): the reply of one goes out once
// it is applied on this node. Reads are local, under the node's lock,
// which the tree's changes are applied under too: a watch is registered
// with its read, atomically, and fired as the change that triggers it is
// applied, queued on its connection before the reply of that write and of
// any later read. Sessions outlive connections: a session's liveness is
// the traffic of its connection, carried to the state in one command a
// second for all of them (Config.TouchEvery), and it ends when its
// timeout lapses in the replicated clock, with its ephemerals, or when its
// client closes it. A node that cannot commit those touches (no leader,
// cut off from its cluster) closes the connection of a session whose
// liveness has not reached the cluster for half its timeout, so that its
// client moves it to another node in time.
package zookeeper
