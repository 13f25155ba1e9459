package jepsen

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/latchd/latch/internal/latchtest/jepsen/check"
)

// The ZooKeeper workload's times.
const (
	// zkSessionTimeout is the session timeout its clients ask for (the
	// cluster's tick of 1 s grants it as asked).
	zkSessionTimeout = 3 * time.Second
	// zkPause is how long a paused ZooKeeper holder stops, its
	// connection with it: past its session timeout, so that its session
	// expires and another client may take its lock meanwhile.
	zkPause = 2 * zkSessionTimeout
)

// zkRoot is the znode under which the workload's locks live: one child
// per key, persistent, whose children are the lock nodes.
const zkRoot = "/jepsen"

// zkFigures are the ZooKeeper clients' figures.
type zkFigures struct {
	grants, tokens int // locks granted; those whose czxid was read (all)
	// gone counts releases answered "no node": the lock node had gone
	// with its session.
	gone    int
	unknown int // requests whose outcome stayed unknown
	// acked and refused count the fenced register's writes of ZooKeeper
	// holders that it took, and its reads and writes that it refused as
	// stale.
	acked, refused int
	// expired counts the sessions the clients learned had expired
	// (StateExpired), a paused client's or one whose node held it past
	// its timeout.
	expired int64
}

// zkClient is a worker's ZooKeeper client, as a program using go-zookeeper
// is: one connection given every node's address, which go-zookeeper
// moves to another node when its node dies or stops answering, with the
// session it carries; a new session when the old one expired. It takes
// locks with ZooKeeper's lock recipe by hand (go-zookeeper's Lock, without
// a bound on its wait): an ephemeral sequential node under the key's
// node, named after its owner; the lock is held when it is the lowest;
// otherwise watch the node just below it and look again when it goes.
// The lock node's czxid is the hold's fencing token: zxids only grow, and
// the holders of a key come in the order of their nodes' creation.
//
// Its connection goes through a gate that the fenced workload closes to
// pause it, as a process paused by a collector or a VM would be: no ping
// goes out, and the session expires.
type zkClient struct {
	w     *workers
	id    int
	rng   *rand.Rand
	c     *zk.Conn
	gate  *zkGate
	sess  int64  // the session the owner names
	owner string // the current session's, renamed for each session
	made  map[string]bool
}

// zkHold is a lock a zkClient holds.
type zkHold struct {
	key, path string
	owner     string
	sess      int64
	target    string // the node it was granted through
	token     uint64 // the lock node's czxid
}

func (w *workers) newZKClient(id int) *zkClient {
	return &zkClient{w: w, id: id, rng: rand.New(rand.NewPCG(w.seed, uint64(id))), gate: &zkGate{}}
}

// zkQuiet is go-zookeeper's logger: silent.
type zkQuiet struct{}

func (zkQuiet) Printf(string, ...any) {}

// connect opens a connection with every node's address, starting at a
// random one, and waits for its session; false when the run stopped
// first.
func (z *zkClient) connect() bool {
	for !z.w.stopped() {
		i := z.rng.IntN(len(z.w.targets))
		var addrs []string
		for j := range z.w.targets {
			addrs = append(addrs, z.w.targets[(i+j)%len(z.w.targets)].ZooKeeper)
		}
		c, _, err := zk.Connect(addrs, zkSessionTimeout, zk.WithLogger(zkQuiet{}), zk.WithLogInfo(false),
			zk.WithDialer(z.gate.dial), zk.WithEventCallback(func(ev zk.Event) {
				if ev.Type == zk.EventSession && ev.State == zk.StateExpired {
					z.w.zkExpired.Add(1)
				}
			}))
		if err == nil && z.waitSession(c, 5*time.Second) {
			z.c, z.made = c, map[string]bool{}
			z.session()
			return true
		}
		if c != nil {
			c.Close()
		}
		z.w.sleep(100 * time.Millisecond)
	}
	return false
}

// waitSession waits up to d for c to have a session.
func (z *zkClient) waitSession(c *zk.Conn, d time.Duration) bool {
	for end := time.Now().Add(d); time.Now().Before(end) && !z.w.stopped(); {
		if c.State() == zk.StateHasSession {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return c.State() == zk.StateHasSession
}

// reconnect closes the session, which deletes its lock nodes unless it is
// cut off (then its timeout ends it), and opens another.
func (z *zkClient) reconnect() bool {
	z.close()
	return z.connect()
}

func (z *zkClient) close() {
	if z.c != nil {
		z.c.Close()
		z.c = nil
	}
}

// session returns the owner naming the connection's current session: a
// new one once go-zookeeper replaced an expired session.
func (z *zkClient) session() string {
	if id := z.c.SessionID(); id != z.sess || z.owner == "" {
		z.sess, z.owner = id, z.w.owner("zookeeper", z.id)
	}
	return z.owner
}

// target is the ID of the node the connection is on now.
func (z *zkClient) target() string {
	srv := z.c.Server()
	for _, t := range z.w.targets {
		if t.ZooKeeper == srv {
			return t.ID
		}
	}
	return srv
}

// errZKStuck is the error of a request not answered within callSlack.
var errZKStuck = errors.New("zookeeper: no answer within the bound")

// do runs f, a go-zookeeper request (which waits for its answer or its
// connection's end, however long), for up to callSlack: past that the
// connection is closed, which ends f, and do reports errZKStuck.
func (z *zkClient) do(f func(c *zk.Conn) error) error {
	c := z.c
	done := make(chan error, 1)
	go func() { done <- f(c) }()
	select {
	case err := <-done:
		return err
	case <-time.After(callSlack):
		c.Close()
		<-done
		return errZKStuck
	}
}

// ensure creates the persistent node path if this client has not yet.
func (z *zkClient) ensure(path string) error {
	if z.made[path] {
		return nil
	}
	err := z.do(func(c *zk.Conn) error {
		_, err := c.Create(path, nil, 0, zk.WorldACL(zk.PermAll))
		return err
	})
	if err != nil && !errors.Is(err, zk.ErrNodeExists) {
		return err
	}
	z.made[path] = true
	return nil
}

func (z *zkClient) op(kind check.Kind, key, owner string) check.Op {
	return check.Op{Worker: z.id, Owner: owner, Proto: "zookeeper", Node: z.target(), Kind: kind, Keys: []string{key}}
}

// seq is the sequence number of a sequential node's name.
func seq(name string) int64 {
	n, _ := strconv.ParseInt(name[max(len(name)-10, 0):], 10, 64)
	return n
}

// acquire asks for key's lock, waiting up to wait, and records it: OK with
// the lock node's czxid as its token; busy when the wait ran out and the
// client deleted its node; unknown when a request's outcome stayed unknown
// (its node may stay and become the holder until its session ends: the
// client closes the session, and records that the lock may be held until
// the server ends it). Requests other than the lock node's create and
// delete only read, so that any error is taken as the loss of the
// session: a client that gives its node up without knowing whether its
// session still holds it must end the session.
func (z *zkClient) acquire(key string, wait time.Duration) *zkHold {
	parent := zkRoot + "/" + key
	err := z.ensure(zkRoot)
	if err == nil {
		err = z.ensure(parent)
	}
	if err != nil {
		// The node may be down or without a leader: do not spin.
		z.w.sleep(100 * time.Millisecond)
		if errors.Is(err, errZKStuck) {
			z.reconnect()
		}
		return nil
	}
	owner := z.session()
	sess := z.sess
	op := z.op(check.Acquire, key, owner)
	op.Mode = check.Exclusive
	// Busy answers say nothing strict: a waiter that gives up may have
	// been the lowest node just before it deleted its node.
	op.Call = z.w.h.Now()
	end := op.Call + int64(wait)
	fail := func(err error) *zkHold {
		op.Return, op.Outcome, op.Err = z.w.h.Now(), check.Unknown, err.Error()
		if op.Stuck = errors.Is(err, errZKStuck); op.Stuck {
			op.Err += "; " + z.w.lockViews(op.Keys)
		}
		z.w.h.Add(op)
		lost := z.op(check.Lost, key, owner)
		lost.Call, lost.Outcome = op.Call, check.Unknown
		z.w.h.Add(lost)
		z.reconnect()
		return nil
	}
	var path string
	err = z.do(func(c *zk.Conn) (err error) {
		path, err = c.Create(parent+"/"+owner+"-lock-", nil, zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll))
		return err
	})
	if err != nil {
		return fail(fmt.Errorf("create: %w", err))
	}
	name := path[len(parent)+1:]
	for {
		var children []string
		err := z.do(func(c *zk.Conn) (err error) {
			children, _, err = c.Children(parent)
			return err
		})
		if err != nil {
			return fail(fmt.Errorf("children: %w", err))
		}
		slices.SortFunc(children, func(a, b string) int { return int(seq(a) - seq(b)) })
		i := slices.Index(children, name)
		if i < 0 {
			return fail(fmt.Errorf("lock node %s gone", path))
		}
		if i == 0 {
			var stat *zk.Stat
			var ok bool
			err := z.do(func(c *zk.Conn) (err error) {
				ok, stat, err = c.Exists(path)
				return err
			})
			switch {
			case err != nil:
				return fail(fmt.Errorf("exists: %w", err))
			case !ok:
				return fail(fmt.Errorf("lock node %s gone", path))
			}
			op.Return, op.Outcome, op.Tokens = z.w.h.Now(), check.OK, []uint64{uint64(stat.Czxid)}
			z.w.h.Add(op)
			return &zkHold{key: key, path: path, owner: owner, sess: sess, target: op.Node, token: uint64(stat.Czxid)}
		}
		var below bool
		var ch <-chan zk.Event
		err = z.do(func(c *zk.Conn) (err error) {
			below, _, ch, err = c.ExistsW(parent + "/" + children[i-1])
			return err
		})
		if err != nil {
			return fail(fmt.Errorf("exists: %w", err))
		}
		if !below {
			continue
		}
		left := time.Duration(end - z.w.h.Now())
		if left > 0 && !z.w.stopped() {
			t := time.NewTimer(left)
			select {
			case <-ch:
				t.Stop()
				continue
			case <-t.C:
			case <-z.w.stop:
				t.Stop()
			}
		}
		// The wait ran out: give the node up.
		err = z.do(func(c *zk.Conn) error { return c.Delete(path, -1) })
		if err != nil {
			return fail(fmt.Errorf("delete after the wait: %w", err))
		}
		op.Return, op.Outcome = z.w.h.Now(), check.Busy
		z.w.h.Add(op)
		return nil
	}
}

// release deletes h's lock node and records it: OK, or fail when the
// node was gone (its session ended it: the hold ended at a time the
// client cannot know), or unknown, and then the client closes the
// session, which may still hold the node.
//
// A ZooKeeper hold is not watched: the client learns that its session
// expired only when it reaches a node that knows, which may be long after
// (a node cut off from the others still answers its pings), so the hold
// is confirmed only by a release answered OK, as a connection-bound
// dlock v2 or memcached lock is (check.Op.Watched): the lock node was
// there when the delete was applied, and its session with it.
func (z *zkClient) release(h *zkHold) {
	op := z.op(check.Release, h.key, h.owner)
	op.Call = z.w.h.Now()
	err := z.do(func(c *zk.Conn) error { return c.Delete(h.path, -1) })
	op.Return = z.w.h.Now()
	switch {
	case err == nil:
		op.Outcome = check.OK
	case errors.Is(err, zk.ErrNoNode):
		op.Outcome, op.Err = check.Fail, err.Error()
	default:
		op.Outcome, op.Err = check.Unknown, err.Error()
		op.Stuck = errors.Is(err, errZKStuck)
	}
	z.w.h.Add(op)
	if op.Outcome == check.Unknown {
		z.reconnect()
	}
}

// pause stops the client, its connection with it, for zkPause: its
// session expires meanwhile. It then waits (up to a session timeout) for
// go-zookeeper to learn it and open another, so that the release that
// follows is answered rather than lost with the old connection.
func (z *zkClient) pause(sess int64) {
	z.gate.close()
	time.Sleep(zkPause)
	z.gate.open()
	for end := time.Now().Add(zkSessionTimeout); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if z.c.SessionID() != sess && z.c.State() == zk.StateHasSession {
			return
		}
	}
}

// runZK runs a ZooKeeper worker: acquire asks for each lock (nil: not
// granted), and work is what it does while it holds it.
func (w *workers) runZK(id int, acquire func(z *zkClient) *zkHold, work func(z *zkClient, h *zkHold)) {
	defer w.wg.Done()
	z := w.newZKClient(id)
	defer z.close()
	if !z.connect() {
		return
	}
	for !w.stopped() {
		h := acquire(z)
		if z.c == nil {
			return // stopped while reconnecting
		}
		if h == nil {
			w.backOff(z.rng)
			continue
		}
		w.setHolding(id, h.target)
		work(z, h)
		w.setHolding(id, "")
		z.release(h)
		if z.c == nil {
			return
		}
	}
}

// runZKMutex runs a ZooKeeper worker on its mutex keys: lock (try once or
// wait up to 0.6 s), hold up to 200 ms, unlock.
func (w *workers) runZKMutex(id int, keys int) {
	w.runZK(id, func(z *zkClient) *zkHold {
		return z.acquire(w.key("zm", z.rng.IntN(keys)), time.Duration(z.rng.IntN(3))*300*time.Millisecond)
	}, func(z *zkClient, h *zkHold) {
		time.Sleep(time.Duration(z.rng.IntN(200)) * time.Millisecond)
	})
}

// runZKFenced runs a ZooKeeper worker of the fenced register on keys of
// its own (a ZooKeeper lock excludes only ZooKeeper clients): under a lock
// waited for up to 2 s, it updates the register with the lock node's
// czxid; when it pauses between its read and its write, its connection
// stops too, for twice its session timeout.
func (w *workers) runZKFenced(id int, keys int) {
	w.runZK(id, func(z *zkClient) *zkHold {
		return z.acquire(w.key("zf", z.rng.IntN(keys)), 2*time.Second)
	}, func(z *zkClient, h *zkHold) {
		w.updateRegisterPausing(id, h.owner, h.key, h.token, z.rng, func() { z.pause(h.sess) })
	})
}

// zkGate is a gate on a client's connections: closed, their reads, writes
// and dials wait until it opens.
type zkGate struct {
	mu   sync.Mutex
	wait chan struct{} // nil while open
}

func (g *zkGate) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.wait == nil {
		g.wait = make(chan struct{})
	}
}

func (g *zkGate) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.wait != nil {
		close(g.wait)
		g.wait = nil
	}
}

// pass waits while the gate is closed.
func (g *zkGate) pass() {
	g.mu.Lock()
	ch := g.wait
	g.mu.Unlock()
	if ch != nil {
		<-ch
	}
}

// dial is go-zookeeper's dialer through the gate.
func (g *zkGate) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	g.pass()
	c, err := net.DialTimeout(network, addr, timeout)
	if err != nil {
		return nil, err
	}
	return &gatedConn{Conn: c, g: g}, nil
}

type gatedConn struct {
	net.Conn
	g *zkGate
}

func (c *gatedConn) Read(b []byte) (int, error) {
	c.g.pass()
	return c.Conn.Read(b)
}

func (c *gatedConn) Write(b []byte) (int, error) {
	c.g.pass()
	return c.Conn.Write(b)
}

// count counts op, a ZooKeeper client's or a ZooKeeper holder's
// register operation, in the figures.
func (f *zkFigures) count(op check.Op) {
	switch {
	case op.Proto == "register" && op.Outcome == check.Fail:
		f.refused++
	case op.Proto == "register" && op.Kind == check.Write && op.Outcome == check.OK:
		f.acked++
	case op.Proto == "register":
	case op.Outcome == check.Unknown:
		f.unknown++
	case op.Kind == check.Acquire && op.Outcome == check.OK:
		f.grants++
		if len(op.Tokens) > 0 {
			f.tokens++
		}
	case op.Kind == check.Release && op.Outcome == check.Fail:
		f.gone++
	}
}

// String is the figures' line in the details.
func (f zkFigures) String() string {
	return fmt.Sprintf("zookeeper: grants=%d tokens=%d released_gone=%d sessions_expired=%d unknown_outcomes=%d register_acked=%d refused_stale=%d",
		f.grants, f.tokens, f.gone, f.expired, f.unknown, f.acked, f.refused)
}
