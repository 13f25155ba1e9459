package fsm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/engine"
	"github.com/latchd/latch/internal/znode"
)

// The ZooKeeper commands: the data tree's (znode.Tree), by ZooKeeper
// sessions. A ZooKeeper session is a lock-table session with a TTL (the
// negotiated timeout), resumable like any other, that the tree also
// knows: its password and its ephemeral znodes, which end with it in the
// same command, whatever ends it (OpEndSession, an expiry in a tick,
// OpEndOwner).

var (
	// ErrZSession is the result of an OpZAttach or OpZWrite whose session
	// the tree does not know (it expired, or never was) or whose password
	// does not match: ZooKeeper's "session expired".
	ErrZSession = errors.New("fsm: no such ZooKeeper session")
	// ErrZOps is the result of an OpZWrite whose Value is not an
	// encoding of znode operations (AppendZOps).
	ErrZOps = errors.New("fsm: malformed znode operations")
)

// PasswordLen is the length of a ZooKeeper session's password.
const PasswordLen = 16

// zxidSeed is the zxid a state seeded with token t starts from (OpSeed):
// the seconds of t, taken as Unix nanoseconds, since zxidEpoch, in the
// high 32 bits, as ZooKeeper's epoch is, so that zxids keep growing across
// in-memory restarts as tokens do, and stay positive (clients keep only a
// positive zxid) until 2088.
func zxidSeed(t latch.Token) int64 {
	s := int64(uint64(t) / uint64(time.Second))
	if s <= zxidEpoch {
		return 0
	}
	return (s - zxidEpoch) << 32
}

// zxidEpoch is where zxidSeed counts seconds from: 2020-01-01 UTC.
const zxidEpoch = 1577836800

// applyZ applies the ZooKeeper command c at now, and what the lock table
// reported by then (expiries included, whose sessions' item locks and
// ephemerals it ends).
func (s *State) applyZ(c *Command, r *Result, now int64) []engine.Event {
	ticked := s.eng.Tick(now) // a session that lapsed by now does nothing
	s.expired(now, ticked)
	// The lock table's events of two calls, each valid until the next.
	s.evs = append(s.evs[:0], ticked...)
	evs := s.evs
	switch c.Op {
	case OpZOpen:
		if len(c.Value) != PasswordLen || c.TTL <= 0 || c.TTL/time.Millisecond > math.MaxInt32 {
			r.Err = fmt.Errorf("open ZooKeeper session: password of %d bytes, timeout %v: %w", len(c.Value), c.TTL, latch.ErrInvalidRequest)
			return evs
		}
		var more []engine.Event
		r.Session, more = s.eng.OpenSession(now, engine.SessionOptions{TTL: c.TTL})
		s.evs = append(s.evs, more...) // no expiries: the state is at now
		evs = s.evs
		s.tree.OpenSession(int64(r.Session), [PasswordLen]byte(c.Value), int32(c.TTL/time.Millisecond), c.Exptime)
		r.Zxid = s.tree.Zxid()
		return evs
	case OpZAttach:
		passwd, timeout, ok := s.tree.Session(int64(c.Session))
		if !ok || len(c.Value) != PasswordLen || [PasswordLen]byte(c.Value) != passwd {
			r.Err = fmt.Errorf("attach ZooKeeper session %#x: %w", uint64(c.Session), ErrZSession)
			r.Zxid = s.tree.Zxid()
			return evs
		}
		more, err := s.eng.Resume(now, c.Session)
		s.evs = append(s.evs, more...) // aborts of waiters: none for a ZooKeeper session
		evs = s.evs
		if err != nil {
			r.Err = fmt.Errorf("attach ZooKeeper session %#x: %w", uint64(c.Session), err)
		} else {
			s.gens[c.Session]++
			r.Count = int(s.gens[c.Session])
			r.TTL = time.Duration(timeout) * time.Millisecond
		}
		r.Zxid = s.tree.Zxid()
		return evs
	case OpZWrite:
		if _, _, ok := s.tree.Session(int64(c.Session)); !ok {
			r.Err = fmt.Errorf("write by ZooKeeper session %#x: %w", uint64(c.Session), ErrZSession)
			r.Zxid = s.tree.Zxid()
			return evs
		}
		ops, err := DecodeZOps(c.Value, nil)
		if err != nil {
			r.Err = err
			r.Zxid = s.tree.Zxid()
			return evs
		}
		if c.Flags&ZMulti != 0 {
			r.Z = s.tree.Multi(int64(c.Session), c.Exptime, ops)
		} else if len(ops) == 1 {
			r.Z = []znode.Result{s.tree.Write(int64(c.Session), c.Exptime, ops[0])}
		} else {
			r.Err = fmt.Errorf("write of %d znode operations, not a multi: %w", len(ops), ErrZOps)
		}
		r.Zxid = s.tree.Zxid()
		return evs
	case OpZReap:
		r.Count = s.tree.ReapContainers(c.Exptime)
		r.Zxid = s.tree.Zxid()
	}
	return evs
}

// ZMulti is the Flags bit of an OpZWrite whose operations are a multi:
// all or nothing, one result per operation.
const ZMulti = 1

// endZ ends session id in the tree, if it is a ZooKeeper session: its
// ephemeral znodes are deleted, and the session is recorded as ended
// (TakeZEnded).
func (s *State) endZ(now int64, id latch.SessionID) {
	if _, _, ok := s.tree.Session(int64(id)); !ok {
		return
	}
	s.tree.EndSession(int64(id), now/int64(time.Millisecond))
	s.zEnded = append(s.zEnded, id)
}

// Tree returns the ZooKeeper data tree, for reads only, as Engine.
func (s *State) Tree() *znode.Tree { return s.tree }

// ZPending reports whether TakeZ has anything to take: most commands
// (every memcached one) change nothing of the tree, and its caller skips
// the call then.
func (s *State) ZPending() bool { return len(s.zEnded) > 0 || s.tree.HasEvents() }

// TakeZ appends to evs the watch triggers of the data tree's changes, and
// to ended the ZooKeeper sessions that ended, since the last call, in the
// order they happened, and forgets them.
func (s *State) TakeZ(evs []znode.Event, ended []latch.SessionID) ([]znode.Event, []latch.SessionID) {
	evs = s.tree.TakeEvents(evs)
	ended = append(ended, s.zEnded...)
	s.zEnded = s.zEnded[:0]
	return evs, ended
}

// The encoding of znode operations, OpZWrite's Value: a uvarint count,
// then per operation its kind as a byte, its path (uvarint length and
// bytes), its data (a byte: 0 for nil, 1 for present, then uvarint length
// and bytes), its ACL (uvarint count, then per entry perms as a uvarint,
// scheme and id as length and bytes), its mode as a varint and its
// version as a varint.

// AppendZOps appends the encoding of ops to dst.
func AppendZOps(dst []byte, ops []znode.Op) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(ops)))
	for i := range ops {
		op := &ops[i]
		dst = append(dst, byte(op.Kind))
		dst = appendString(dst, op.Path)
		if op.Data == nil {
			dst = append(dst, 0)
		} else {
			dst = append(dst, 1)
			dst = binary.AppendUvarint(dst, uint64(len(op.Data)))
			dst = append(dst, op.Data...)
		}
		dst = binary.AppendUvarint(dst, uint64(len(op.ACL)))
		for _, a := range op.ACL {
			dst = binary.AppendUvarint(dst, uint64(uint32(a.Perms)))
			dst = appendString(dst, a.Scheme)
			dst = appendString(dst, a.ID)
		}
		dst = binary.AppendVarint(dst, int64(op.Mode))
		dst = binary.AppendVarint(dst, int64(op.Version))
	}
	return dst
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// DecodeZOps decodes the encoding of AppendZOps in b, appending the
// operations to ops. Data slices alias b. It rejects malformed input
// with an error wrapping ErrZOps.
func DecodeZOps(b []byte, ops []znode.Op) ([]znode.Op, error) {
	d := &decoder{b: b}
	n := d.count("ops", "operations", 6)
	for range n {
		if d.err != nil {
			break
		}
		var op znode.Op
		op.Kind = znode.OpKind(d.byte("kind"))
		op.Path = string(d.bytes("path"))
		switch d.byte("data") {
		case 0:
		case 1:
			op.Data = d.bytes("data")
			if op.Data == nil {
				op.Data = []byte{}
			}
		default:
			d.fail("data", "invalid presence byte")
		}
		nacl := d.count("acl", "entries", 3)
		for range nacl {
			if d.err != nil {
				break
			}
			a := znode.ACL{Perms: int32(d.uint32("perms"))}
			a.Scheme = string(d.bytes("scheme"))
			a.ID = string(d.bytes("id"))
			op.ACL = append(op.ACL, a)
		}
		mode := d.varint("mode")
		version := d.varint("version")
		if mode < math.MinInt32 || mode > math.MaxInt32 || version < math.MinInt32 || version > math.MaxInt32 {
			d.fail("mode", "out of range")
		}
		op.Mode, op.Version = znode.Mode(mode), int32(version)
		ops = append(ops, op)
	}
	if d.err == nil && d.off != len(b) {
		d.fail("ops", "%d trailing bytes", len(b)-d.off)
	}
	if d.err != nil {
		return ops, fmt.Errorf("%w: %w", ErrZOps, d.err)
	}
	return ops, nil
}
