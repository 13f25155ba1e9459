// Package znode owns latch's ZooKeeper data tree: the znodes with their data,
// ACLs (stored as given, duplicates dropped as ZooKeeper drops them;
// world:anyone only) and stats, each parent's child-creation counter that
// names sequential znodes, the ZooKeeper sessions that own ephemeral znodes,
// container znodes and their reaping, the zxid, and the watch triggers
// (events) each change produces.
//
// A Tree is a deterministic state machine: it starts no goroutines, reads no
// clock (every write takes now, the proposer's wall-clock Unix milliseconds,
// for ctime and mtime) and draws no random numbers, so every replica that
// applies the same calls in the same order holds the same tree, byte for
// byte in its snapshot. It is changed only through latch's fsm commands, one
// call per command, and it is not safe for concurrent use: the caller holds
// the lock that orders applies and reads.
//
// The zxid counts changes. Each Write, Multi, OpenSession and EndSession of
// a known session consumes exactly one, failed or not, and each container
// ReapContainers deletes consumes one; reads consume none. The rules that
// decide each answer follow ZooKeeper 3.8 (PathUtils, PrepRequestProcessor,
// DataTree): the order in which a request's checks run decides which error
// it gets, and the tests next to the code hold each rule.
//
// Limits (Config) answer QuotaExceeded and change nothing. MaxData defaults
// to DefaultMaxData, 1 MiB less 1 KiB: jute's default maxbuffer is
// 1,048,575 bytes for a whole frame, and the 1 KiB left over carries the
// request's header, path and ACL.
//
// AppendSnapshot encodes the whole tree (zxid, sessions, znodes in a
// depth-first walk with children sorted by name) in one canonical form;
// Restore accepts exactly that form, checks every count, parent, owner and
// ACL, and answers anything else with an error.
//
// The package imports nothing from the rest of the module.
package znode
