package admin_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/latchd/latch/internal/admin"
	"github.com/latchd/latch/internal/jute"
)

// zkClient is the least of a ZooKeeper client, over the wire: one
// request at a time, events skipped.
type zkClient struct {
	t    *testing.T
	nc   net.Conn
	r    *bufio.Reader
	sess int64
	xid  int32
}

// dialZK opens a ZooKeeper session of timeout ms at addr.
func dialZK(t *testing.T, addr string, ms int32) *zkClient {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(20 * time.Second))
	c := &zkClient{t: t, nc: nc, r: bufio.NewReader(nc)}
	req := jute.ConnectRequest{TimeOut: ms, Passwd: make([]byte, 16)}
	c.send(req.Append(nil))
	var resp jute.ConnectResponse
	d := jute.NewDecoder(c.read())
	resp.Decode(d)
	if d.Err() != nil || resp.SessionID == 0 {
		t.Fatalf("connect: %+v, %v", resp, d.Err())
	}
	c.sess = resp.SessionID
	return c
}

func (c *zkClient) send(body []byte) {
	c.t.Helper()
	if _, err := c.nc.Write(jute.AppendFrame(nil, body)); err != nil {
		c.t.Fatalf("zookeeper write: %v", err)
	}
}

// read reads one frame; it returns nil once the server closed the
// connection.
func (c *zkClient) read() []byte {
	c.t.Helper()
	var hdr [4]byte
	if _, err := io.ReadFull(c.r, hdr[:]); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
			return nil
		}
		c.t.Fatalf("zookeeper read: %v", err)
	}
	d := jute.NewDecoder(hdr[:])
	body := make([]byte, d.Int())
	if _, err := io.ReadFull(c.r, body); err != nil {
		c.t.Fatalf("zookeeper read: %v", err)
	}
	return body
}

// call sends a request of op with record and returns its reply's error
// code, skipping watch events.
func (c *zkClient) call(op jute.Op, record []byte) jute.Code {
	c.t.Helper()
	c.xid++
	b := (&jute.RequestHeader{Xid: c.xid, Type: op}).Append(nil)
	c.send(append(b, record...))
	for {
		body := c.read()
		if body == nil {
			c.t.Fatalf("%v: the server closed the connection", op)
		}
		var h jute.ReplyHeader
		h.Decode(jute.NewDecoder(body))
		if h.Xid == c.xid {
			return h.Err
		}
	}
}

var zkOpen = []jute.ACL{{Perms: 31, Scheme: "world", ID: "anyone"}}

func (c *zkClient) create(path string, flags int32) {
	c.t.Helper()
	if code := c.call(jute.OpCreate, (&jute.CreateRequest{Path: path, ACL: zkOpen, Flags: flags}).Append(nil)); code != jute.OK {
		c.t.Fatalf("create %s: %v", path, code)
	}
}

// TestZooKeeperSessions checks what the admin API shows of a ZooKeeper
// session and its znodes, that /metrics counts its requests by op, and
// that the end-session action ends it: its ephemeral goes and its
// connection is closed.
func TestZooKeeperSessions(t *testing.T) {
	e := start(t, "tok")
	zk := dialZK(t, e.srv.ZooKeeperAddr().String(), 10000)
	zk.create("/app", 0)
	zk.create("/app/lock", 1) // ephemeral
	if code := zk.call(jute.OpExists, (&jute.ExistsRequest{Path: "/missing", Watch: true}).Append(nil)); code != jute.NoNode {
		t.Fatalf("exists /missing: %v, want NoNode", code)
	}
	dl := e.open("dlock", "10.0.0.9:9", 0)

	var list admin.SessionList
	e.getJSON("/v1/sessions", http.StatusOK, &list)
	var zs, ds *admin.Session
	for i := range list.Sessions {
		switch list.Sessions[i].ID {
		case uint64(zk.sess):
			zs = &list.Sessions[i]
		case uint64(dl.ID()):
			ds = &list.Sessions[i]
		}
	}
	if zs == nil || zs.Protocol != "zookeeper" || zs.TTLSeconds != 10 || !slices.Equal(zs.Ephemerals, []string{"/app/lock"}) {
		t.Errorf("ZooKeeper session = %+v, want protocol zookeeper, TTL 10s and ephemeral /app/lock", zs)
	}
	if ds == nil || ds.Ephemerals != nil {
		t.Errorf("dlock session = %+v, want no ephemerals", ds)
	}
	// The field is there for a ZooKeeper session, and only for one.
	_, body := e.do(http.MethodGet, "/v1/sessions", "", nil)
	if n := strings.Count(string(body), `"ephemerals":`); n != 1 {
		t.Errorf("GET /v1/sessions has %d ephemerals fields, want 1: %s", n, body)
	}

	var st admin.Stats
	e.getJSON("/v1/stats", http.StatusOK, &st)
	z := st.ZooKeeper
	if z.Sessions != 1 || z.Znodes != 6 || z.Ephemerals != 1 || z.Watches != 1 || z.Zxid == 0 {
		t.Errorf("/v1/stats zookeeper = %+v, want 1 session, 6 znodes, 1 ephemeral, 1 watch, a zxid", z)
	}
	if _, body := e.do(http.MethodGet, "/v1/stats", "", nil); !strings.Contains(string(body), `"zxid":"`+strconv.FormatInt(z.Zxid, 10)+`"`) {
		t.Errorf("/v1/stats: zxid is not a string: %s", body)
	}

	fams := e.scrape()
	for _, w := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"latch_requests_total", []string{"protocol=zookeeper", "command=create"}, 2},
		{"latch_requests_total", []string{"protocol=zookeeper", "command=exists"}, 1},
		{"latch_request_errors_total", []string{"protocol=zookeeper", "command=exists"}, 1},
		{"latch_request_errors_total", []string{"protocol=zookeeper", "command=create"}, 0},
		{"latch_connections_open", []string{"protocol=zookeeper"}, 1},
		{"latch_zookeeper_sessions", nil, 1},
		{"latch_zookeeper_znodes", nil, 6},
		{"latch_zookeeper_ephemerals", nil, 1},
		{"latch_zookeeper_watches", nil, 1},
		{"latch_zookeeper_zxid_counter", nil, float64(z.Zxid & 0xffffffff)},
	} {
		if got := metric(fams, w.name, w.labels...); got != w.want {
			t.Errorf("%s%v = %v, want %v", w.name, w.labels, got, w.want)
		}
	}

	// Creating /missing fires the watch, which goes.
	zk.create("/missing", 0)
	e.getJSON("/v1/stats", http.StatusOK, &st)
	if z := st.ZooKeeper; z.Watches != 0 || z.Znodes != 7 {
		t.Errorf("/v1/stats zookeeper after the watch fired = %+v, want no watch, 7 znodes", z)
	}
	if code := zk.call(jute.OpExists, (&jute.ExistsRequest{Path: "/app", Watch: true}).Append(nil)); code != jute.OK {
		t.Fatalf("exists /app: %v", code)
	}

	path := "/v1/sessions/" + strconv.FormatInt(zk.sess, 10) + "/end"
	if status, body := e.do(http.MethodPost, path, "tok", nil); status != http.StatusOK {
		t.Fatalf("POST %s = %d %s", path, status, body)
	}
	for zk.read() != nil { // the connection closes
	}
	e.eventually("the closed connection's watch to go", func() bool {
		var st admin.Stats
		e.getJSON("/v1/stats", http.StatusOK, &st)
		return st.ZooKeeper.Watches == 0
	})
	e.getJSON("/v1/stats", http.StatusOK, &st)
	if z := st.ZooKeeper; z.Sessions != 0 || z.Znodes != 6 || z.Ephemerals != 0 {
		t.Errorf("/v1/stats zookeeper after the end = %+v, want no session and /app/lock gone", z)
	}
	if status, _ := e.do(http.MethodPost, path, "tok", nil); status != http.StatusNotFound {
		t.Errorf("POST %s again = %d, want 404", path, status)
	}
}
