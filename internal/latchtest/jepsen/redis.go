package jepsen

import (
	"math/rand/v2"
	"time"

	"github.com/latchd/latch/internal/latchtest/jepsen/check"
)

// redisClient is a worker's Redis lock client, as the Redis lock libraries
// are: a pool of connections (one per node, dialed when first needed), a
// value of its own for each lock it takes, SET NX PX tried again after a
// pause while the key is held, and the compare-and-delete and
// compare-and-pexpire scripts to release and renew: for one hold in two,
// the scripts latch knows from the lock libraries; for the other, scripts
// written by hand, that latch runs in Lua. A lock is its value's,
// not a connection's: it renews and releases one time in three through a
// node drawn at random rather than the one it acquired through.
type redisClient struct {
	w     *workers
	id    int
	rng   *rand.Rand
	conns map[string]*redisConn // by target
}

// redisHold is a lock a redisClient holds.
type redisHold struct {
	key, value string
	lease      time.Duration
	target     Target // the node it was acquired through
	token      uint64 // its fencing token; 0 when not known
	lua        bool   // released and renewed by the hand-written scripts
}

func (w *workers) newRedisClient(id int) *redisClient {
	return &redisClient{w: w, id: id, rng: rand.New(rand.NewPCG(w.seed, uint64(id))), conns: map[string]*redisConn{}}
}

// conn returns the connection to t, dialing it if needed; nil when it
// cannot (after a pause).
func (rc *redisClient) conn(t Target) *redisConn {
	if c := rc.conns[t.ID]; c != nil {
		return c
	}
	c, err := dialRedis(t.Redis)
	if err != nil {
		rc.w.sleep(100 * time.Millisecond)
		return nil
	}
	rc.conns[t.ID] = c
	return c
}

// done closes the connection to t if err leaves it unusable.
func (rc *redisClient) done(t Target, err error) {
	if c := rc.conns[t.ID]; c != nil && !usable(err) {
		c.close()
		delete(rc.conns, t.ID)
	}
}

func (rc *redisClient) close() {
	for _, c := range rc.conns {
		c.close()
	}
}

func (rc *redisClient) target() Target { return rc.w.targets[rc.rng.IntN(len(rc.w.targets))] }

// via returns the node to renew or release h through: one time in three,
// any node.
func (rc *redisClient) via(h *redisHold) Target {
	if rc.rng.IntN(3) == 0 {
		return rc.target()
	}
	return h.target
}

func (rc *redisClient) op(kind check.Kind, key, value string, t Target) check.Op {
	return check.Op{Worker: rc.id, Owner: value, Proto: "redis", Node: t.ID, Kind: kind, Keys: []string{key}}
}

// answered records op's answer out, err: an Unknown outcome not answered
// within callSlack is stuck (a Redis request never waits for a lock).
func (rc *redisClient) answered(op *check.Op, out check.Outcome, err error) {
	op.Return, op.Outcome = rc.w.h.Now(), out
	if err == nil {
		return
	}
	op.Err = err.Error()
	if op.Stuck = out == check.Unknown && time.Duration(op.Return-op.Call) >= callSlack; op.Stuck {
		op.Err += "; " + rc.w.lockViews(op.Keys)
	}
}

// acquire asks for key with a lease through one node, again and again
// while it is held, for up to wait, and records every attempt. A granted
// lock's fencing token is read right after. After an outcome that is
// unknown, it records that the lock may be held until the server ends it
// and gives up: asking again with the same value would be answered nil
// (busy) if the lost request was applied.
func (rc *redisClient) acquire(key string, lease, wait time.Duration) *redisHold {
	value := rc.w.owner("redis", rc.id)
	t := rc.target()
	end := rc.w.h.Now() + int64(wait)
	for {
		c := rc.conn(t)
		if c == nil {
			return nil
		}
		op := rc.op(check.Acquire, key, value, t)
		op.Mode, op.Strict, op.Lease = check.Exclusive, true, int64(lease)
		op.Call = rc.w.h.Now()
		out, err := c.setNX(key, value, lease)
		rc.answered(&op, out, err)
		rc.done(t, err)
		switch out {
		case check.OK:
			h := &redisHold{key: key, value: value, lease: lease, target: t, lua: rc.w.redisHolds.Add(1)%2 == 0}
			tok, err := c.token(key, value)
			rc.done(t, err)
			if err != nil {
				op.Err = "LATCH.TOKEN: " + err.Error()
			}
			if h.token = tok; tok > 0 {
				op.Tokens = []uint64{tok}
			}
			rc.w.h.Add(op)
			return h
		case check.Busy:
			rc.w.h.Add(op)
			if rc.w.h.Now() >= end || rc.w.stopped() {
				return nil
			}
			rc.w.backOff(rc.rng)
		default:
			rc.w.h.Add(op)
			lost := rc.op(check.Lost, key, value, t)
			lost.Call, lost.Outcome = op.Call, check.Unknown
			rc.w.h.Add(lost)
			// The node may be down or without a leader: do not spin.
			rc.w.sleep(100 * time.Millisecond)
			return nil
		}
	}
}

// extend renews h's lease to lease and records it; false when the answer
// says that h was not held.
func (rc *redisClient) extend(h *redisHold, lease time.Duration) bool {
	t := rc.via(h)
	c := rc.conn(t)
	if c == nil {
		return true
	}
	op := rc.op(check.Extend, h.key, h.value, t)
	op.Lease = int64(lease)
	op.Call = rc.w.h.Now()
	out, err := c.extend(h.key, h.value, lease, h.lua)
	rc.answered(&op, out, err)
	rc.w.countScript(h.lua, out)
	rc.done(t, err)
	rc.w.h.Add(op)
	return out != check.Fail
}

// release gives h back and records it. When it cannot reach a node, it
// records nothing: the lease ends the hold.
func (rc *redisClient) release(h *redisHold) {
	t := rc.via(h)
	c := rc.conn(t)
	if c == nil {
		return
	}
	op := rc.op(check.Release, h.key, h.value, t)
	op.Call = rc.w.h.Now()
	out, err := c.release(h.key, h.value, h.lua)
	rc.answered(&op, out, err)
	rc.w.countScript(h.lua, out)
	rc.done(t, err)
	rc.w.h.Add(op)
}

// runRedis runs a Redis worker: acquire asks for each lock (nil: not
// granted), and work is what it does while it holds it; false when an
// answer said the lock was no longer held, which is then not released.
func (w *workers) runRedis(id int, acquire func(rc *redisClient) *redisHold, work func(rc *redisClient, h *redisHold) bool) {
	defer w.wg.Done()
	rc := w.newRedisClient(id)
	defer rc.close()
	for !w.stopped() {
		h := acquire(rc)
		if h == nil {
			w.backOff(rc.rng)
			continue
		}
		w.setHolding(id, h.target.ID)
		held := work(rc, h)
		w.setHolding(id, "")
		if held {
			rc.release(h)
		}
	}
}

// runRedisMutex runs a Redis worker on the mutex keys: acquire with a
// lease of 0.3 to 1 s, trying for up to 0.6 s; hold up to 200 ms, and one
// time in five past the lease, as a paused client would (another client
// may take the key meanwhile, and the release is then answered 0); renew
// the lease halfway one time in three; release.
func (w *workers) runRedisMutex(id int, keys int) {
	w.runRedis(id, func(rc *redisClient) *redisHold {
		lease := time.Duration(300+rc.rng.IntN(700)) * time.Millisecond
		return rc.acquire(w.key("m", rc.rng.IntN(keys)), lease, time.Duration(rc.rng.IntN(3))*300*time.Millisecond)
	}, func(rc *redisClient, h *redisHold) bool {
		d := time.Duration(rc.rng.IntN(200)) * time.Millisecond
		if rc.rng.IntN(5) == 0 {
			d = h.lease + time.Duration(rc.rng.IntN(300))*time.Millisecond
		}
		if rc.rng.IntN(3) == 0 {
			time.Sleep(d / 2)
			if !rc.extend(h, h.lease) {
				return false
			}
			d -= d / 2
		}
		time.Sleep(d)
		return true
	})
}

// runRedisFenced runs a Redis worker of the fenced register: under a lock
// with the fenced workload's lease, acquired by trying for up to 2 s, it
// updates the register with the token LATCH.TOKEN gave (when it gave one:
// a lock whose lease ended before the token was read has none), then
// releases.
func (w *workers) runRedisFenced(id int, keys int) {
	w.runRedis(id, func(rc *redisClient) *redisHold {
		return rc.acquire(w.key("f", rc.rng.IntN(keys)), lease, 2*time.Second)
	}, func(rc *redisClient, h *redisHold) bool {
		if h.token > 0 {
			w.updateRegister(id, h.value, h.key, h.token, rc.rng)
		}
		return true
	})
}

// countScript counts a release or renewal that a script answered (OK, or
// not held), by the kind of script.
func (w *workers) countScript(lua bool, out check.Outcome) {
	if out == check.Unknown {
		return
	}
	if lua {
		w.luaScripts.Add(1)
	} else {
		w.knownScripts.Add(1)
	}
}
