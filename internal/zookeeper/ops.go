package zookeeper

import (
	"context"
	"encoding/binary"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/fsm"
	"github.com/latchd/latch/internal/jute"
	"github.com/latchd/latch/internal/znode"
)

// serve handles one request (a frame after the handshake) and queues its
// reply. It returns false when the connection is to close.
func (c *conn) serve(body []byte) bool {
	start := time.Now()
	c.s.stats.received.Add(1)
	c.d.Reset(body)
	var h jute.RequestHeader
	h.Decode(&c.d)
	if c.d.Err() != nil {
		c.s.log.Debug("zookeeper: short request header", "session", c.sess)
		return false
	}
	c.s.touch(c.sess, c.gen)
	m := c.s.command(h.Type)
	if m != nil {
		m.Request()
	}
	if !pipelined(h.Type) {
		// Answered in order after the writes in flight, and reading
		// what they wrote.
		c.settle()
	}
	rep, open := c.handle(h, start)
	if rep.async {
		return open
	}
	if rep.err != jute.OK && m != nil {
		m.Error()
	}
	if rep.skip {
		return open
	}
	c.queueFrame(rep.append(c.frame(), h.Xid))
	c.s.stats.observe(time.Since(start))
	return open
}

// pipelined reports whether requests of op are writes that go to the node
// without waiting for the writes before them: their replies still go out
// in request order (see conn.reserve).
func pipelined(op jute.Op) bool {
	switch op {
	case jute.OpCreate, jute.OpCreate2, jute.OpCreateContainer, jute.OpDelete,
		jute.OpSetData, jute.OpSetACL, jute.OpCheck, jute.OpMulti:
		return true
	}
	return false
}

// append appends the reply to xid to f.
func (r reply) append(f []byte, xid int32) []byte {
	f = (&jute.ReplyHeader{Xid: xid, Zxid: r.zxid, Err: r.err}).Append(f)
	if r.err == jute.OK && r.body != nil {
		f = r.body(f)
	}
	return f
}

// reply is what a request is answered: an error code, or a record that
// body appends; zxid is the tree's zxid to report. skip: no reply. async:
// the reply goes out later, in its place (writeAsync).
type reply struct {
	err   jute.Code
	zxid  int64
	body  func([]byte) []byte
	skip  bool
	async bool
}

// handle carries out request h (its record in c.d) and returns its reply
// and whether the connection stays open.
func (c *conn) handle(h jute.RequestHeader, start time.Time) (reply, bool) {
	switch h.Type {
	case jute.OpPing:
		return reply{zxid: c.s.zxid()}, true
	case jute.OpCloseSession:
		// Unbound first, so that the session's end, which closes the
		// connection of a session that expires, leaves this one to
		// answer.
		c.s.unbind(c)
		zxid, err := c.s.svc.ZClose(c.sess, c.gen)
		if err != nil {
			return c.fail(err), false
		}
		return reply{zxid: zxid}, false
	case jute.OpCreate, jute.OpCreate2, jute.OpCreateContainer:
		var req jute.CreateRequest
		req.Decode(&c.d)
		if !c.decoded() {
			return reply{err: jute.MarshallingError}, false
		}
		mode, ok := createMode(h.Type, znode.Mode(req.Flags))
		if !ok {
			return c.refuse(h, start, jute.BadArguments)
		}
		op := znode.Op{Kind: znode.OpCreate, Path: req.Path, Data: req.Data, ACL: aclsOf(req.ACL), Mode: mode}
		two := h.Type != jute.OpCreate
		return c.writeOne(h, start, op, func(r znode.Result) func([]byte) []byte {
			if two {
				resp := jute.Create2Response{Path: r.Path, Stat: statOf(r.Stat)}
				return resp.Append
			}
			resp := jute.CreateResponse{Path: r.Path}
			return resp.Append
		})
	case jute.OpCreateTTL:
		var req jute.CreateTTLRequest
		req.Decode(&c.d)
		if !c.decoded() {
			return reply{err: jute.MarshallingError}, false
		}
		// Stock ZooKeeper answers so unless extended types are enabled;
		// a mode that is no TTL's is a bad argument of createTTL.
		if m := znode.Mode(req.Flags); m == ttlMode || m == ttlSequentialMode {
			return c.refuse(h, start, jute.Unimplemented)
		}
		return c.refuse(h, start, jute.BadArguments)
	case jute.OpDelete:
		var req jute.DeleteRequest
		req.Decode(&c.d)
		if !c.decoded() {
			return reply{err: jute.MarshallingError}, false
		}
		return c.writeOne(h, start, znode.Op{Kind: znode.OpDelete, Path: req.Path, Version: req.Version}, nil)
	case jute.OpSetData:
		var req jute.SetDataRequest
		req.Decode(&c.d)
		if !c.decoded() {
			return reply{err: jute.MarshallingError}, false
		}
		return c.writeOne(h, start, znode.Op{Kind: znode.OpSetData, Path: req.Path, Data: req.Data, Version: req.Version}, func(r znode.Result) func([]byte) []byte {
			resp := jute.SetDataResponse{Stat: statOf(r.Stat)}
			return resp.Append
		})
	case jute.OpSetACL:
		var req jute.SetACLRequest
		req.Decode(&c.d)
		if !c.decoded() {
			return reply{err: jute.MarshallingError}, false
		}
		return c.writeOne(h, start, znode.Op{Kind: znode.OpSetACL, Path: req.Path, ACL: aclsOf(req.ACL), Version: req.Version}, func(r znode.Result) func([]byte) []byte {
			resp := jute.SetACLResponse{Stat: statOf(r.Stat)}
			return resp.Append
		})
	case jute.OpCheck:
		var req jute.CheckVersionRequest
		req.Decode(&c.d)
		if !c.decoded() {
			return reply{err: jute.MarshallingError}, false
		}
		return c.writeOne(h, start, znode.Op{Kind: znode.OpCheck, Path: req.Path, Version: req.Version}, nil)
	case jute.OpMulti:
		return c.multi(h, start)
	case jute.OpExists:
		var req jute.ExistsRequest
		req.Decode(&c.d)
		if !c.decoded() {
			return reply{err: jute.MarshallingError}, false
		}
		return c.read(func(t *znode.Tree) reply {
			// ZooKeeper checks an exists' path for a NUL only: any other
			// path that is not valid is missing, and watched.
			if strings.IndexByte(req.Path, 0) >= 0 {
				return reply{err: jute.BadArguments}
			}
			st, ok := t.Exists(req.Path)
			if req.Watch && !c.s.w.add(c, dataWatch, req.Path) {
				return reply{err: errWatchLimit}
			}
			if !ok {
				return reply{err: jute.NoNode}
			}
			resp := jute.ExistsResponse{Stat: statOf(st)}
			return reply{body: resp.Append}
		}), true
	case jute.OpGetData:
		var req jute.GetDataRequest
		req.Decode(&c.d)
		if !c.decoded() {
			return reply{err: jute.MarshallingError}, false
		}
		return c.read(func(t *znode.Tree) reply {
			data, st, code := t.Get(req.Path)
			if code != znode.OK {
				return reply{err: jute.Code(code)}
			}
			if req.Watch && !c.s.w.add(c, dataWatch, req.Path) {
				return reply{err: errWatchLimit}
			}
			resp := jute.GetDataResponse{Data: slices.Clone(data), Stat: statOf(st)}
			if data != nil && resp.Data == nil {
				resp.Data = []byte{}
			}
			return reply{body: resp.Append}
		}), true
	case jute.OpGetACL:
		var req jute.GetACLRequest
		req.Decode(&c.d)
		if !c.decoded() {
			return reply{err: jute.MarshallingError}, false
		}
		return c.read(func(t *znode.Tree) reply {
			acl, st, code := t.GetACL(req.Path)
			if code != znode.OK {
				return reply{err: jute.Code(code)}
			}
			resp := jute.GetACLResponse{ACL: jacls(acl), Stat: statOf(st)}
			return reply{body: resp.Append}
		}), true
	case jute.OpGetChildren, jute.OpGetChildren2:
		var req jute.GetChildrenRequest
		req.Decode(&c.d)
		if !c.decoded() {
			return reply{err: jute.MarshallingError}, false
		}
		two := h.Type == jute.OpGetChildren2
		return c.read(func(t *znode.Tree) reply {
			names, st, code := t.Children(req.Path)
			if code != znode.OK {
				return reply{err: jute.Code(code)}
			}
			if req.Watch && !c.s.w.add(c, childWatch, req.Path) {
				return reply{err: errWatchLimit}
			}
			if two {
				resp := jute.GetChildren2Response{Children: names, Stat: statOf(st)}
				return reply{body: resp.Append}
			}
			resp := jute.GetChildrenResponse{Children: names}
			return reply{body: resp.Append}
		}), true
	case jute.OpSync:
		var req jute.SyncRequest
		req.Decode(&c.d)
		if !c.decoded() {
			return reply{err: jute.MarshallingError}, false
		}
		ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
		zxid, err := c.s.svc.ZSync(ctx)
		cancel()
		if err != nil {
			return c.fail(err), true
		}
		resp := jute.SyncResponse(req)
		return reply{zxid: zxid, body: resp.Append}, true
	case jute.OpSetWatches:
		var req jute.SetWatches
		req.Decode(&c.d)
		if !c.decoded() {
			return reply{err: jute.MarshallingError}, false
		}
		return c.setWatches(&req), true
	case jute.OpCheckWatches, jute.OpRemoveWatches:
		var req jute.CheckWatchesRequest
		req.Decode(&c.d)
		if !c.decoded() {
			return reply{err: jute.MarshallingError}, false
		}
		return c.checkWatches(req.Path, req.Type, h.Type == jute.OpRemoveWatches), true
	case jute.OpAuth:
		// latch has no authentication schemes: a client that asked for
		// one must not run unprotected, unaware (ZooKeeper fails it too,
		// for a scheme it does not know). ZooKeeper's reply to auth
		// carries zxid 0.
		return reply{err: jute.AuthFailed}, false
	case jute.OpReconfig:
		return c.refuse(h, start, jute.ReconfigDisabled)
	case jute.OpMultiRead, jute.OpSetWatches2, jute.OpAddWatch, jute.OpSASL,
		jute.OpGetEphemerals, jute.OpGetAllChildrenNumber, jute.OpWhoAmI:
		return reply{err: jute.Unimplemented, zxid: c.s.zxid()}, true
	}
	// An unknown op: ZooKeeper answers Unimplemented, with zxid -1 (the
	// request never reached its pipeline), and closes.
	return reply{err: jute.Unimplemented, zxid: -1}, false
}

// errWatchLimit answers a read that would set a watch past
// Config.MaxWatches: ZooKeeper has no code of its own for it.
const errWatchLimit = jute.QuotaExceeded

// decoded reports whether the request's record decoded.
func (c *conn) decoded() bool {
	if err := c.d.Err(); err != nil {
		c.s.log.Debug("zookeeper: bad request", "session", c.sess, "err", err)
		return false
	}
	return true
}

// The TTL create modes, which stock ZooKeeper (and latch) answer
// Unimplemented.
const (
	ttlMode           znode.Mode = 5
	ttlSequentialMode znode.Mode = 6
)

// createMode returns the mode of the znode that create op (create,
// create2, createContainer) with flags makes, as ZooKeeper's
// PrepRequestProcessor decides: the tree answers modes that are not
// valid (BadArguments) and TTL modes (Unimplemented). create and create2
// with the container flag make a persistent znode (a CreateTxn, which is
// never a container); createContainer makes a container whatever its
// flags say of ephemerality. ok is false for a createContainer with a
// sequential flag, which ZooKeeper takes as a sequential container and
// latch, whose containers have no sequence, refuses (no client sends
// one).
func createMode(op jute.Op, flags znode.Mode) (mode znode.Mode, ok bool) {
	switch {
	case flags < znode.Persistent || flags > znode.Container:
		return flags, true
	case op != jute.OpCreateContainer:
		if flags == znode.Container {
			return znode.Persistent, true
		}
		return flags, true
	case flags == znode.PersistentSequential || flags == znode.EphemeralSequential:
		return flags, false
	}
	return znode.Container, true
}

// refuse answers code to request h, a write that ZooKeeper refuses in
// its pipeline, where the refusal is a transaction of its own (an error
// txn): it consumes a zxid, which the reply carries. latch consumes one
// the same way, with a write that fails (a check of no path), answered in
// its place among the connection's replies.
func (c *conn) refuse(h jute.RequestHeader, start time.Time, code jute.Code) (reply, bool) {
	return c.writeAsync(h, start, []znode.Op{{Kind: znode.OpCheck}}, false, func(_ []znode.Result, zxid int64) reply {
		return reply{err: code, zxid: zxid}
	})
}

// read calls f with the tree under the node's lock, and returns its reply
// with the tree's zxid.
func (c *conn) read(f func(t *znode.Tree) reply) reply {
	var r reply
	if err := c.s.svc.ZRead(func(t *znode.Tree) {
		r = f(t)
		r.zxid = t.Zxid()
	}); err != nil {
		return c.fail(err)
	}
	return r
}

// writeAsync proposes ops on behalf of the connection's session, and
// answers request h with what build makes of their results once they are
// applied, in its place among the connection's replies: the reader goes
// on with the next request meanwhile.
func (c *conn) writeAsync(h jute.RequestHeader, start time.Time, ops []znode.Op, multi bool, build func([]znode.Result, int64) reply) (reply, bool) {
	sl := c.reserve()
	m := c.s.command(h.Type)
	c.s.svc.ZWriteFunc(c.sess, c.gen, ops, multi, func(rs []znode.Result, zxid int64, err error) {
		var rep reply
		superseded := errors.Is(err, fsm.ErrSuperseded)
		if err != nil {
			rep = c.fail(err)
		} else {
			rep = build(rs, zxid)
		}
		if rep.err != jute.OK && m != nil {
			m.Error()
		}
		var f []byte
		if !rep.skip {
			f = rep.append(make([]byte, 4, 64), h.Xid)
			binary.BigEndian.PutUint32(f, uint32(len(f)-4))
		}
		c.complete(sl, f, superseded)
		c.s.stats.observe(time.Since(start))
	})
	return reply{async: true}, true
}

// writeOne proposes op alone and answers its result: body, when not nil,
// makes the record of a success.
func (c *conn) writeOne(h jute.RequestHeader, start time.Time, op znode.Op, body func(znode.Result) func([]byte) []byte) (reply, bool) {
	return c.writeAsync(h, start, []znode.Op{op}, false, func(rs []znode.Result, zxid int64) reply {
		r := rs[0]
		if r.Code != znode.OK {
			return reply{err: jute.Code(r.Code), zxid: zxid}
		}
		rep := reply{zxid: zxid}
		if body != nil {
			rep.body = body(r)
		}
		return rep
	})
}

// fail is the reply to a request the node could not carry out.
func (c *conn) fail(err error) reply {
	zxid := c.s.zxid()
	switch {
	case errors.Is(err, fsm.ErrSuperseded):
		return reply{err: jute.SessionMoved, zxid: zxid}
	case errors.Is(err, fsm.ErrZSession), errors.Is(err, latch.ErrNoSession):
		return reply{err: jute.SessionExpired, zxid: zxid}
	case errors.Is(err, context.DeadlineExceeded):
		return reply{err: jute.OperationTimeout, zxid: zxid}
	}
	// Unavailable, shutting down: the client is to try another node; a
	// ZooKeeper client takes a connection loss as that.
	c.s.log.Debug("zookeeper: request failed", "session", c.sess, "err", err)
	c.closeFor(err.Error())
	return reply{skip: true}
}

// multi carries out a multi: its writes in one command, all or nothing.
func (c *conn) multi(h jute.RequestHeader, start time.Time) (reply, bool) {
	var req jute.MultiRequest
	req.Decode(&c.d)
	if !c.decoded() {
		return reply{err: jute.MarshallingError}, false
	}
	ops := make([]znode.Op, 0, len(req.Ops))
	// Each op's type, as ZooKeeper reads it (req borrows the frame, which
	// the next request reuses).
	types := make([]jute.Op, len(req.Ops))
	for i := range req.Ops {
		o := &req.Ops[i]
		types[i] = o.Type
		op := znode.Op{Path: o.Path, Data: o.Data, Version: o.Version}
		switch o.Type {
		case jute.OpCreate, jute.OpCreate2, jute.OpCreateContainer:
			// ZooKeeper reads each create of a multi as its flags say
			// (Op.create): createContainer for the container flag,
			// create for any other (a mode that is not valid fails in
			// the tree), whatever the op's type.
			op.Kind, op.ACL, op.Mode = znode.OpCreate, aclsOf(o.ACL), znode.Mode(o.Flags)
			types[i] = jute.OpCreate
			if op.Mode == znode.Container {
				types[i] = jute.OpCreateContainer
			}
		case jute.OpDelete:
			op.Kind = znode.OpDelete
		case jute.OpSetData:
			op.Kind = znode.OpSetData
		case jute.OpCheck:
			op.Kind = znode.OpCheck
		default:
			// Reads and createTTL do not mix with writes here.
			return c.multiRefused(req.Ops, i, jute.Unimplemented), true
		}
		ops = append(ops, op)
	}
	return c.writeAsync(h, start, ops, true, func(rs []znode.Result, zxid int64) reply {
		failed := slices.ContainsFunc(rs, func(r znode.Result) bool { return r.Code != znode.OK })
		resp := jute.MultiResponse{Results: make([]jute.MultiResult, len(rs))}
		for i, r := range rs {
			mr := &resp.Results[i]
			if failed {
				// ZooKeeper answers a failed multi with an error result
				// per op: OK before the one that failed, its error, and
				// RuntimeInconsistency after it.
				mr.Type, mr.Err = jute.OpError, jute.Code(r.Code)
				continue
			}
			mr.Type, _ = jute.MultiResultType(types[i])
			mr.Path, mr.Stat = r.Path, statOf(r.Stat)
		}
		return reply{zxid: zxid, body: resp.Append}
	})
}

// multiRefused answers a multi refused before it is proposed, at op bad
// with code: as a multi that failed there.
func (c *conn) multiRefused(ops []jute.MultiOp, bad int, code jute.Code) reply {
	resp := jute.MultiResponse{Results: make([]jute.MultiResult, len(ops))}
	for i := range resp.Results {
		resp.Results[i] = jute.MultiResult{Type: jute.OpError, Err: jute.RuntimeInconsistency}
		if i < bad {
			resp.Results[i].Err = jute.OK
		}
	}
	resp.Results[bad].Err = code
	return reply{zxid: c.s.zxid(), body: resp.Append}
}

// setWatches re-arms the watches a client had before it reconnected,
// against what changed since relativeZxid: a watch whose change happened
// since fires at once, as ZooKeeper's DataTree.setWatches decides.
func (c *conn) setWatches(req *jute.SetWatches) reply {
	return c.read(func(t *znode.Tree) reply {
		rel := req.RelativeZxid
		for _, p := range req.DataWatches {
			st, ok := t.Exists(p)
			switch {
			case !ok:
				c.event(znode.NodeDeleted, p)
			case st.Mzxid > rel:
				c.event(znode.NodeDataChanged, p)
			default:
				c.s.w.add(c, dataWatch, p)
			}
		}
		for _, p := range req.ExistWatches {
			if _, ok := t.Exists(p); ok {
				c.event(znode.NodeCreated, p)
			} else {
				c.s.w.add(c, dataWatch, p)
			}
		}
		for _, p := range req.ChildWatches {
			st, ok := t.Exists(p)
			switch {
			case !ok:
				c.event(znode.NodeDeleted, p)
			case st.Pzxid > rel:
				c.event(znode.NodeChildrenChanged, p)
			default:
				c.s.w.add(c, childWatch, p)
			}
		}
		return reply{}
	})
}

// checkWatches answers checkWatches and removeWatches: whether the
// connection holds a watch of type typ on path (NoWatcher if not), and,
// for remove, drops it.
func (c *conn) checkWatches(path string, typ jute.WatcherType, remove bool) reply {
	var kinds []int
	switch typ {
	case jute.WatcherChildren:
		kinds = []int{childWatch}
	case jute.WatcherData:
		kinds = []int{dataWatch}
	case jute.WatcherAny:
		kinds = []int{dataWatch, childWatch}
	default:
		return reply{err: jute.BadArguments, zxid: c.s.zxid()}
	}
	found := false
	for _, k := range kinds {
		if remove {
			found = c.s.w.remove(c, k, path) || found
		} else {
			found = c.s.w.has(c, k, path) || found
		}
	}
	if !found {
		return reply{err: jute.NoWatcher, zxid: c.s.zxid()}
	}
	return reply{zxid: c.s.zxid()}
}

// zxid returns the tree's zxid on this node.
func (s *Server) zxid() int64 {
	var z int64
	s.svc.ZRead(func(t *znode.Tree) { z = t.Zxid() })
	return z
}

func statOf(st znode.Stat) jute.Stat { return jute.Stat(st) }

func aclsOf(in []jute.ACL) []znode.ACL {
	out := make([]znode.ACL, len(in))
	for i, a := range in {
		out[i] = znode.ACL{Perms: a.Perms, Scheme: a.Scheme, ID: a.ID}
	}
	return out
}

func jacls(in []znode.ACL) []jute.ACL {
	out := make([]jute.ACL, len(in))
	for i, a := range in {
		out[i] = jute.ACL{Perms: a.Perms, Scheme: a.Scheme, ID: a.ID}
	}
	return out
}
