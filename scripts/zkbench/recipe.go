package main

import (
	"crypto/rand"
	"errors"
	"fmt"
	"log"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
)

// sessionTimeout is what every session asks for: within it a client whose
// server died keeps its session (and its lock nodes) on another.
const sessionTimeout = 10 * time.Second

// watchTimeout bounds the wait for a predecessor's deletion.
const watchTimeout = 30 * time.Second

var acl = zk.WorldACL(zk.PermAll)

// dial opens a session on one of servers (the client's random pick) and
// waits until it has one. The client's log goes to stderr, without its
// info lines.
func dial(servers []string) (*zk.Conn, error) {
	c, events, err := zk.Connect(servers, sessionTimeout,
		zk.WithLogInfo(false), zk.WithLogger(log.New(os.Stderr, "go-zookeeper: ", log.LstdFlags|log.Lmicroseconds)))
	if err != nil {
		return nil, err
	}
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				// The session's later events are not read: the
				// client drops what its channel cannot hold.
				return c, nil
			}
		case <-deadline:
			c.Close()
			return nil, fmt.Errorf("no session on %v within 10 s", servers)
		}
	}
}

// ensure creates the persistent node path and its missing ancestors.
func ensure(c *zk.Conn, path string) error {
	p := ""
	for f := range strings.SplitSeq(strings.TrimPrefix(path, "/"), "/") {
		p += "/" + f
		if _, err := c.Create(p, nil, 0, acl); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("create %s: %w", p, err)
		}
	}
	return nil
}

// locker takes one lock, the directory dir, through the recipe.
type locker struct {
	c    *zk.Conn
	dir  string
	mark string // "_c_<guid>-": the start of this locker's node names
	node string // the node it holds or waits with, or ""
	reqs uint64 // requests answered
}

func newLocker(c *zk.Conn, dir string) *locker {
	var g [16]byte
	rand.Read(g[:])
	return &locker{c: c, dir: dir, mark: fmt.Sprintf("_c_%x-", g)}
}

// seq returns the sequence number of a lock node's name: its last ten
// digits.
func seq(name string) int {
	if len(name) < 10 {
		return -1
	}
	n, err := strconv.Atoi(name[len(name)-10:])
	if err != nil {
		return -1
	}
	return n
}

// create makes the locker's node. A create whose connection failed before
// its reply may have been applied: the locker looks for its node among
// the directory's children before it tries again.
func (l *locker) create() error {
	var err error
	for range 3 {
		var p string
		p, err = l.c.Create(l.dir+"/"+l.mark+"lock-", nil, zk.FlagEphemeral|zk.FlagSequence, acl)
		switch {
		case err == nil:
			l.reqs++
			l.node = p[strings.LastIndexByte(p, '/')+1:]
			return nil
		case errors.Is(err, zk.ErrConnectionClosed):
			if l.find() {
				return nil
			}
		case errors.Is(err, zk.ErrSessionExpired):
		default:
			return err
		}
	}
	return err
}

// find looks for the locker's node among the directory's children.
func (l *locker) find() bool {
	kids, _, err := l.c.Children(l.dir)
	if err != nil {
		return false
	}
	l.reqs++
	for _, k := range kids {
		if strings.HasPrefix(k, l.mark) {
			l.node = k
			return true
		}
	}
	return false
}

// lock runs the recipe up to the grant. waited reports whether it had to
// wait for a predecessor.
func (l *locker) lock() (waited bool, err error) {
	if err := l.create(); err != nil {
		return false, err
	}
	me := seq(l.node)
	for {
		kids, _, err := l.c.Children(l.dir)
		if err != nil {
			return waited, err
		}
		l.reqs++
		pred, ps, found := "", -1, false
		for _, k := range kids {
			s := seq(k)
			if k == l.node {
				found = true
			} else if s < me && s > ps {
				pred, ps = k, s
			}
		}
		if !found {
			return waited, fmt.Errorf("lock node %s/%s is gone", l.dir, l.node)
		}
		if pred == "" {
			return waited, nil
		}
		waited = true
		ok, _, ch, err := l.c.ExistsW(l.dir + "/" + pred)
		if err != nil {
			return waited, err
		}
		l.reqs++
		if !ok {
			continue
		}
		select {
		case ev := <-ch:
			if ev.Err != nil {
				return waited, ev.Err
			}
		case <-time.After(watchTimeout):
			return waited, fmt.Errorf("no watch event on %s within %v", pred, watchTimeout)
		}
	}
}

// unlock deletes the locker's node. A delete whose connection failed is
// sent again: its node may be gone already.
func (l *locker) unlock() error {
	var err error
	for range 3 {
		err = l.c.Delete(l.dir+"/"+l.node, -1)
		if err == nil || errors.Is(err, zk.ErrNoNode) {
			l.reqs++
			l.node = ""
			return nil
		}
		if !errors.Is(err, zk.ErrConnectionClosed) {
			break
		}
	}
	return err
}

// abandon deletes whatever node of the locker's own is left in its
// directory after a failed cycle, so that it blocks no other locker;
// it tries for a session timeout.
func (l *locker) abandon() {
	deadline := time.Now().Add(sessionTimeout)
	for time.Now().Before(deadline) {
		kids, _, err := l.c.Children(l.dir)
		if err == nil {
			left := false
			for _, k := range kids {
				if strings.HasPrefix(k, l.mark) {
					if err := l.c.Delete(l.dir+"/"+k, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
						left = true
					}
				}
			}
			if !left {
				l.node = ""
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
}
