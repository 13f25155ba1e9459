// Package latchtest is latch's test harness: it starts a whole latch
// server in process for any test (Start: every front end and the admin
// server on free loopback ports, its log in a SyncBuffer), starts the real
// peers that compatibility is proven against (Debian's yrmcds, memcached
// and ZooKeeper) on free loopback ports, and replays scenario transcripts of the memcached
// protocols against any server, recording the replies in a normalized form
// so that two servers' transcripts can be compared byte for byte.
//
// A missing peer is a test failure, never a skip: `make test` installs the
// Debian packages the suite needs.
package latchtest
