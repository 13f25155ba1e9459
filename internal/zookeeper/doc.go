// Package zookeeper is latch's ZooKeeper front end (placeholder: the front
// end is being written; this branch holds its real-client test harnesses).
package zookeeper
