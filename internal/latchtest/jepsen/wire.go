package jepsen

import (
	"bufio"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/latchd/latch/dlockpb"
	"github.com/latchd/latch/internal/frame"
	"github.com/latchd/latch/internal/latchtest/jepsen/check"
)

// connLocker is a connection-bound lock client: dlock version 2 or the
// memcached protocol with yrmcds's lock extension. Its connection is its
// session; closing it releases its locks. Every call is bounded by a
// deadline; an answer that does not say what happened is Unknown, after
// which the connection must be closed.
type connLocker interface {
	// lock takes key, waiting at most wait where the protocol can wait.
	lock(key string, wait time.Duration) (check.Outcome, error)
	unlock(key string) (check.Outcome, error)
	close()
}

// v2Conn is a dlock version 2 client.
type v2Conn struct {
	c   net.Conn
	r   *frame.Reader
	id  uint64
	buf []byte
}

func dialV2(addr string) (*v2Conn, error) {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return nil, err
	}
	return &v2Conn{c: c, r: frame.NewReader(bufio.NewReader(c), 1<<20)}, nil
}

func (v *v2Conn) roundTrip(req *dlockpb.Request, d time.Duration) (*dlockpb.Response, error) {
	v.id++
	req.Version, req.Id = 2, v.id
	b, err := proto.Marshal(req)
	if err != nil {
		return nil, err
	}
	v.buf = frame.Append(v.buf[:0], b)
	v.c.SetDeadline(time.Now().Add(d))
	if _, err := v.c.Write(v.buf); err != nil {
		return nil, err
	}
	p, err := v.r.Read()
	if err != nil {
		return nil, err
	}
	resp := new(dlockpb.Response)
	if err := proto.Unmarshal(p, resp); err != nil {
		return nil, err
	}
	if resp.GetRequestId() != req.Id {
		return nil, fmt.Errorf("answer to request %d, not %d", resp.GetRequestId(), req.Id)
	}
	return resp, nil
}

func (v *v2Conn) lock(key string, wait time.Duration) (check.Outcome, error) {
	resp, err := v.roundTrip(&dlockpb.Request{Type: dlockpb.RequestType_Lock,
		Lock: &dlockpb.RequestLock{Keys: []string{key}, WaitMicro: uint64(wait / time.Microsecond)}}, wait+callSlack)
	switch {
	case err != nil:
		return check.Unknown, err
	case resp.GetStatus() == dlockpb.ResponseStatus_Ok:
		return check.OK, nil
	case resp.GetStatus() == dlockpb.ResponseStatus_AcquireTimeout:
		return check.Busy, nil
	}
	return check.Unknown, fmt.Errorf("%v: %s", resp.GetStatus(), resp.GetErrorText())
}

func (v *v2Conn) unlock(key string) (check.Outcome, error) {
	resp, err := v.roundTrip(&dlockpb.Request{Type: dlockpb.RequestType_Unlock,
		Lock: &dlockpb.RequestLock{Keys: []string{key}}}, callSlack)
	switch {
	case err != nil:
		return check.Unknown, err
	case resp.GetStatus() == dlockpb.ResponseStatus_Ok:
		return check.OK, nil
	case strings.HasPrefix(resp.GetErrorText(), "NotHeld"):
		return check.Fail, errors.New(resp.GetErrorText())
	}
	return check.Unknown, fmt.Errorf("%v: %s", resp.GetStatus(), resp.GetErrorText())
}

func (v *v2Conn) close() { v.c.Close() }

// mcConn is a memcached text protocol client using yrmcds's lock and
// unlock, which never wait. lock needs the item: it is added first.
type mcConn struct {
	c net.Conn
	r *bufio.Reader
}

func dialMemcache(addr string) (*mcConn, error) {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return nil, err
	}
	return &mcConn{c: c, r: bufio.NewReader(c)}, nil
}

func (m *mcConn) cmd(line string) (string, error) {
	m.c.SetDeadline(time.Now().Add(callSlack))
	if _, err := m.c.Write([]byte(line)); err != nil {
		return "", err
	}
	s, err := m.r.ReadString('\n')
	return strings.TrimRight(s, "\r\n"), err
}

func (m *mcConn) lock(key string, _ time.Duration) (check.Outcome, error) {
	// The item must exist; the answer (STORED, NOT_STORED, LOCKED) does
	// not matter, unless it is not an answer.
	if r, err := m.cmd("add " + key + " 0 0 1\r\nx\r\n"); err != nil || strings.HasPrefix(r, "SERVER_ERROR") {
		return check.Fail, fmt.Errorf("add: %q %v", r, err)
	}
	r, err := m.cmd("lock " + key + "\r\n")
	switch {
	case err != nil:
		return check.Unknown, err
	case r == "OK":
		return check.OK, nil
	case r == "LOCKED":
		return check.Busy, nil
	case r == "NOT_FOUND":
		return check.Fail, errors.New(r)
	}
	return check.Unknown, errors.New(r)
}

func (m *mcConn) unlock(key string) (check.Outcome, error) {
	r, err := m.cmd("unlock " + key + "\r\n")
	switch {
	case err != nil:
		return check.Unknown, err
	case r == "OK":
		return check.OK, nil
	}
	// NOT_LOCKED answers every failure, so it does not say whether the
	// lock was held: the hold is left unconfirmed.
	return check.Unknown, errors.New(r)
}

func (m *mcConn) close() { m.c.Close() }

// The Redis lock recipe's scripts, as latch recognises them
// (internal/resp/script.go): compare-and-delete, the Redis documentation's
// release, and compare-and-pexpire, the renewal of redsync and
// bsm/redislock.
const (
	redisRelease = `if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("del",KEYS[1]) else return 0 end`
	redisExtend  = `if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("pexpire",KEYS[1],ARGV[2]) else return 0 end`
)

// The same two operations as a user writes them by hand: scripts that are
// in no table of latch's (internal/resp/testdata/lua has them, and a test
// there checks that they are not recognised), so latch runs them in Lua.
const (
	redisReleaseLua = `local v = redis.call('get', KEYS[1]) if v == ARGV[1] then redis.call('unlink', KEYS[1]) return 1 end return 0`
	redisExtendLua  = `local v = redis.call('get', KEYS[1]) if v == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end return 0`
)

// redisConn is a Redis protocol (RESP2) client of the lock recipe: SET NX
// PX to acquire, scripts to release and renew. Its locks are owned by
// their value, not by the connection: closing it releases nothing. Every
// call is bounded by a deadline; after a failed read or write (not an
// error reply: usable) the connection must be closed, for a late reply
// would answer the next request.
type redisConn struct {
	c   net.Conn
	r   *bufio.Reader
	buf []byte
}

// redisReply is a RESP2 reply.
type redisReply struct {
	kind byte   // '+', '-', ':', '$' or '*'
	str  string // a simple string, an error, a bulk string
	n    int64  // an integer
	null bool   // a null bulk string or array
	arr  []redisReply
}

func (r redisReply) String() string {
	switch {
	case r.null:
		return "(nil)"
	case r.kind == ':':
		return fmt.Sprint(r.n)
	case r.kind == '*':
		return fmt.Sprint(r.arr)
	}
	return string(r.kind) + r.str
}

func dialRedis(addr string) (*redisConn, error) {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return nil, err
	}
	return &redisConn{c: c, r: bufio.NewReader(c)}, nil
}

// cmd sends a command and reads its reply.
func (rc *redisConn) cmd(args ...string) (redisReply, error) {
	rc.buf = fmt.Appendf(rc.buf[:0], "*%d\r\n", len(args))
	for _, a := range args {
		rc.buf = fmt.Appendf(rc.buf, "$%d\r\n%s\r\n", len(a), a)
	}
	rc.c.SetDeadline(time.Now().Add(callSlack))
	if _, err := rc.c.Write(rc.buf); err != nil {
		return redisReply{}, err
	}
	return readRedisReply(rc.r)
}

func readRedisReply(r *bufio.Reader) (redisReply, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return redisReply{}, err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return redisReply{}, errors.New("redis: empty reply line")
	}
	rep := redisReply{kind: line[0]}
	switch rep.kind {
	case '+', '-':
		rep.str = line[1:]
		return rep, nil
	case ':':
		_, err := fmt.Sscan(line[1:], &rep.n)
		return rep, err
	case '$', '*':
		var n int
		if _, err := fmt.Sscan(line[1:], &n); err != nil {
			return rep, err
		}
		if n < 0 {
			rep.null = true
			return rep, nil
		}
		if rep.kind == '*' {
			for range n {
				e, err := readRedisReply(r)
				if err != nil {
					return rep, err
				}
				rep.arr = append(rep.arr, e)
			}
			return rep, nil
		}
		b := make([]byte, n+2)
		if _, err := io.ReadFull(r, b); err != nil {
			return rep, err
		}
		rep.str = string(b[:n])
		return rep, nil
	}
	return rep, fmt.Errorf("redis: reply %q", line)
}

// replyError is an error reply: the connection stays usable.
type replyError struct{ reply string }

func (e replyError) Error() string { return e.reply }

// usable says whether a connection may be used after err, a redisConn's
// error: after an error reply, not after a failed read or write.
func usable(err error) bool {
	var re replyError
	return err == nil || errors.As(err, &re)
}

// setNX asks for key for the owner value with a lease: OK, or Busy on a
// nil reply (the key is held, over any protocol). An error reply does not
// say whether the request was applied (the node may have forwarded it to
// a leader that will): Unknown.
func (rc *redisConn) setNX(key, value string, lease time.Duration) (check.Outcome, error) {
	r, err := rc.cmd("SET", key, value, "NX", "PX", fmt.Sprint(lease.Milliseconds()))
	switch {
	case err != nil:
		return check.Unknown, err
	case r.kind == '+' && r.str == "OK":
		return check.OK, nil
	case r.null:
		return check.Busy, nil
	}
	return check.Unknown, replyError{fmt.Sprintf("SET NX: %v", r)}
}

// token returns the fencing token of value's hold of key (LATCH.TOKEN
// with the owner value, which answers nil unless value holds the key: the
// token alone could be that of a holder that took the key after value's
// lease ended): 0 when value does not hold key.
func (rc *redisConn) token(key, value string) (uint64, error) {
	r, err := rc.cmd("LATCH.TOKEN", key, value)
	switch {
	case err != nil:
		return 0, err
	case r.null:
		return 0, nil
	case r.kind == ':' && r.n > 0:
		return uint64(r.n), nil
	}
	return 0, replyError{fmt.Sprintf("LATCH.TOKEN: %v", r)}
}

// script runs a script by its SHA1 (EVALSHA), or by its text when the node
// has not seen it (NOSCRIPT), as Redis clients do.
func (rc *redisConn) script(body string, keysAndArgs ...string) (redisReply, error) {
	sum := sha1.Sum([]byte(body))
	r, err := rc.cmd(append([]string{"EVALSHA", hex.EncodeToString(sum[:]), "1"}, keysAndArgs...)...)
	if err == nil && r.kind == '-' && strings.HasPrefix(r.str, "NOSCRIPT") {
		r, err = rc.cmd(append([]string{"EVAL", body, "1"}, keysAndArgs...)...)
	}
	return r, err
}

// scriptOutcome is the outcome of a compare-and-something script: OK for
// :1 (the value held the key), Fail for :0 (it did not) or WRONGTYPE (a
// dlock or memcached client holds the key, which a Redis client sees as a
// key of another type).
func scriptOutcome(r redisReply, err error) (check.Outcome, error) {
	switch {
	case err != nil:
		return check.Unknown, err
	case r.kind == ':' && r.n == 1:
		return check.OK, nil
	case r.kind == ':' && r.n == 0:
		return check.Fail, replyError{"not held"}
	case r.kind == '-' && strings.HasPrefix(r.str, "WRONGTYPE"):
		return check.Fail, replyError{r.str}
	}
	return check.Unknown, replyError{fmt.Sprintf("script: %v", r)}
}

// release deletes key if value holds it (compare-and-delete), with the
// known script, or with the hand-written one (lua).
func (rc *redisConn) release(key, value string, lua bool) (check.Outcome, error) {
	body := redisRelease
	if lua {
		body = redisReleaseLua
	}
	return scriptOutcome(rc.script(body, key, value))
}

// extend sets the lease of value's hold of key (compare-and-pexpire),
// with the known script, or with the hand-written one (lua).
func (rc *redisConn) extend(key, value string, lease time.Duration, lua bool) (check.Outcome, error) {
	body := redisExtend
	if lua {
		body = redisExtendLua
	}
	return scriptOutcome(rc.script(body, key, value, fmt.Sprint(lease.Milliseconds())))
}

func (rc *redisConn) close() { rc.c.Close() }
