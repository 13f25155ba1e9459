package jepsen

import (
	"bufio"
	"errors"
	"fmt"
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
