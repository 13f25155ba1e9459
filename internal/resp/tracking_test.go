package resp

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"weak"
)

// trackEnv is a server over an in-memory node whose connections the test
// drives through Input (as an event loop would), and whose invalidations
// stay queued on them (no loop to send them to) for the test to read.
type trackEnv struct {
	t     *testing.T
	s     *Server
	conns map[string]*conn
}

func newTrackEnv(t *testing.T) *trackEnv {
	t.Helper()
	_, s := newMemServer(t)
	return &trackEnv{t: t, s: s, conns: map[string]*conn{}}
}

// conn returns the connection named name, opened on first use.
func (e *trackEnv) conn(name string) *conn {
	c := e.conns[name]
	if c == nil {
		c = newLoopConn(e.s, new(benchConn).RemoteAddr())
		e.conns[name] = c
	}
	return c
}

// do sends an inline request on name's connection and returns what it
// wrote: the replies, then the invalidations queued meanwhile. "$id:x"
// in the request becomes connection x's id.
func (e *trackEnv) do(name, req string) string {
	for n, c := range e.conns {
		req = strings.ReplaceAll(req, "$id:"+n, fmt.Sprint(c.id))
	}
	out, _, _ := e.conn(name).Input([]byte(req+"\r\n"), nil)
	return string(out)
}

// inv is the RESP3 push invalidating keys.
func inv(keys ...string) string { return string(appendInvalidate(nil, keys, 3)) }

// TestTrackingTable: what each tracking mode is told, step by step, as
// redis-server 7 tells it (see TestDifferentialTracking for the bytes
// compared with a real one). Each step is "conn: request" with the
// replies and pushes it wrote, or "conn?" with what was queued on conn.
func TestTrackingTable(t *testing.T) {
	hello3 := "HELLO 3 SETNAME x"
	tests := []struct {
		name  string
		steps [][2]string
	}{
		{"default mode: the keys read, told once", [][2]string{
			{"a: " + hello3, ""},
			{"a: CLIENT TRACKING ON", "+OK\r\n"},
			{"a: GET k", "_\r\n"},
			{"a: EXISTS j", ":0\r\n"},
			{"b: SET k v NX", "+OK\r\n"},
			{"a?", inv("k")},
			{"b: DEL k", ":1\r\n"},
			{"a?", ""},
			{"a: PTTL k", ":-2\r\n"},
			{"a: SET k mine NX", "+OK\r\n" + inv("k")},
			{"b: SET j v NX PX 100000", "+OK\r\n"},
			{"a?", inv("j")},
		}},
		{"NOLOOP: not told of its own changes", [][2]string{
			{"a: " + hello3, ""},
			{"a: CLIENT TRACKING ON NOLOOP", "+OK\r\n"},
			{"a: GET k", "_\r\n"},
			{"a: SET k mine NX", "+OK\r\n"},
			{"a?", ""},
			{"b: DEL k", ":1\r\n"},
			{"a?", ""}, // the key left the table with the change, as in Redis
			{"a: GET k", "_\r\n"},
			{"b: SET k v NX", "+OK\r\n"},
			{"a?", inv("k")},
		}},
		{"BCAST: every key under the prefixes, one message per prefix", [][2]string{
			{"a: " + hello3, ""},
			{"a: CLIENT TRACKING ON BCAST PREFIX p: PREFIX q:", "+OK\r\n"},
			{"b: MULTI", "+OK\r\n"},
			{"b: SET p:1 v NX", "+QUEUED\r\n"},
			{"b: SET q:1 v NX", "+QUEUED\r\n"},
			{"b: SET p:2 v NX", "+QUEUED\r\n"},
			{"b: SET r:1 v NX", "+QUEUED\r\n"},
			{"b: EXEC", "*4\r\n+OK\r\n+OK\r\n+OK\r\n+OK\r\n"},
			{"a?", inv("p:1", "p:2") + inv("q:1")},
			{"b: DEL r:1", ":1\r\n"},
			{"a?", ""},
			{"a: CLIENT TRACKING ON BCAST PREFIX p:x", "-ERR Prefix 'p:x' overlaps with an existing prefix 'p:'. Prefixes for a single client must not overlap.\r\n"},
			{"a: CLIENT TRACKING OFF", "+OK\r\n"},
			{"b: DEL p:1", ":1\r\n"},
			{"a?", ""},
		}},
		{"OPTIN: only after CLIENT CACHING yes, for one command or a transaction", [][2]string{
			{"a: " + hello3, ""},
			{"a: CLIENT TRACKING ON OPTIN", "+OK\r\n"},
			{"a: GET k", "_\r\n"},
			{"b: SET k v NX", "+OK\r\n"},
			{"a?", ""},
			{"a: CLIENT CACHING yes", "+OK\r\n"},
			{"a: MULTI", "+OK\r\n"},
			{"a: GET k", "+QUEUED\r\n"},
			{"a: EXEC", "*1\r\n$1\r\nv\r\n"},
			{"a: GET j", "_\r\n"},
			{"b: DEL k", ":1\r\n"},
			{"b: SET j v NX", "+OK\r\n"},
			{"a?", inv("k")},
		}},
		{"OPTOUT: all but after CLIENT CACHING no", [][2]string{
			{"a: " + hello3, ""},
			{"a: CLIENT TRACKING ON OPTOUT", "+OK\r\n"},
			{"a: CLIENT CACHING no", "+OK\r\n"},
			{"a: GET k", "_\r\n"},
			{"a: GET j", "_\r\n"},
			{"b: SET k v NX", "+OK\r\n"},
			{"b: SET j v NX", "+OK\r\n"},
			{"a?", inv("j")},
			{"a: CLIENT CACHING yes", "-ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.\r\n"},
		}},
		{"REDIRECT to a RESP2 subscriber", [][2]string{
			{"r: SUBSCRIBE __redis__:invalidate", "*3\r\n$9\r\nsubscribe\r\n$20\r\n__redis__:invalidate\r\n:1\r\n"},
			{"a: CLIENT TRACKING ON REDIRECT $id:r", "+OK\r\n"},
			{"a: CLIENT GETREDIR", ":$id:r\r\n"},
			{"a: GET k", "$-1\r\n"},
			{"b: SET k v NX", "+OK\r\n"},
			{"a?", ""},
			{"r?", "*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n*1\r\n$1\r\nk\r\n"},
			{"r: GET k", "-ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n"},
			{"r: PING", "*2\r\n$4\r\npong\r\n$0\r\n\r\n"},
		}},
		{"RESET: tracking off, subscriptions ended", [][2]string{
			{"a: " + hello3, ""},
			{"a: CLIENT TRACKING ON BCAST", "+OK\r\n"},
			{"a: RESET", "+RESET\r\n"},
			{"a: CLIENT GETREDIR", ":-1\r\n"},
			{"b: SET k v NX", "+OK\r\n"},
			{"a?", ""},
			{"r: SUBSCRIBE x", "*3\r\n$9\r\nsubscribe\r\n$1\r\nx\r\n:1\r\n"},
			{"r: RESET", "+RESET\r\n"},
			{"r: GET k", "$1\r\nv\r\n"},
		}},
		{"REDIRECT to a RESP2 connection without subscriptions: nothing", [][2]string{
			{"r: PING", "+PONG\r\n"},
			{"a: CLIENT TRACKING ON REDIRECT $id:r", "+OK\r\n"},
			{"a: GET k", "$-1\r\n"},
			{"b: SET k v NX", "+OK\r\n"},
			{"r?", ""},
		}},
		{"REDIRECT to a connection that went away", [][2]string{
			{"r: PING", "+PONG\r\n"},
			{"a: " + hello3, ""},
			{"a: CLIENT TRACKING ON REDIRECT $id:r", "+OK\r\n"},
			{"a: GET k", "_\r\n"},
			{"r: QUIT", "+OK\r\n"},
			{"b: SET k v NX", "+OK\r\n"},
			{"a?", ">2\r\n$21\r\ntracking-redir-broken\r\n:$id:r\r\n"},
			{"a: CLIENT TRACKINGINFO", "%3\r\n$5\r\nflags\r\n~2\r\n$2\r\non\r\n$15\r\nbroken_redirect\r\n$8\r\nredirect\r\n:$id:r\r\n$8\r\nprefixes\r\n*0\r\n"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newTrackEnv(t)
			for i, st := range tt.steps {
				name, req, _ := strings.Cut(st[0], ":")
				want := st[1]
				for n, c := range e.conns {
					want = strings.ReplaceAll(want, "$id:"+n, fmt.Sprint(c.id))
				}
				var got string
				switch {
				case strings.HasSuffix(name, "?"):
					got = string(e.conn(name[:1]).takePending(nil))
				default:
					if name != "r" || !strings.Contains(req, "SUBSCRIBE") {
						e.conn("r") // exists for $id:r
					}
					got = e.do(name, strings.TrimSpace(req))
					if strings.HasPrefix(strings.TrimSpace(req), "HELLO") {
						continue
					}
					if strings.TrimSpace(req) == "QUIT" {
						e.s.track.close(e.conns[name])
					}
				}
				if got != want {
					t.Fatalf("step %d %q:\n got %q\nwant %q", i, st[0], got, want)
				}
			}
		})
	}
}

// TestInvalidateEncoding: invalidations as redis-server 7 writes them.
func TestInvalidateEncoding(t *testing.T) {
	for _, tt := range []struct {
		keys  []string
		proto int
		want  string
	}{
		{[]string{"k"}, 3, ">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nk\r\n"},
		{[]string{"p:1", "p:2"}, 3, ">2\r\n$10\r\ninvalidate\r\n*2\r\n$3\r\np:1\r\n$3\r\np:2\r\n"},
		{nil, 3, ">2\r\n$10\r\ninvalidate\r\n_\r\n"},
		{[]string{"k"}, 2, "*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n*1\r\n$1\r\nk\r\n"},
		{nil, 2, "*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n$-1\r\n"},
	} {
		if got := string(appendInvalidate(nil, tt.keys, tt.proto)); got != tt.want {
			t.Errorf("%q in RESP%d: %q, want %q", tt.keys, tt.proto, got, tt.want)
		}
	}
	if got, want := string(appendRedirBroken(nil, 13)), ">2\r\n$21\r\ntracking-redir-broken\r\n:13\r\n"; got != want {
		t.Errorf("redirect broken: %q, want %q", got, want)
	}
}

// TestTrackingLimits: the table keeps at most its limit of keys (the
// readers of a key dropped are told it changed, as Redis does), a
// connection that does not read what is queued for it gets one "forget
// everything" in its place, and a replaced state is a null invalidation
// to every tracking connection.
func TestTrackingLimits(t *testing.T) {
	e := newTrackEnv(t)
	e.s.track.max = 2
	e.do("a", "HELLO 3")
	e.do("a", "CLIENT TRACKING ON")
	e.do("a", "GET k1")
	e.do("a", "GET k2")
	if got := e.do("a", "GET k3"); got != "_\r\n"+inv("k1") && got != "_\r\n"+inv("k2") && got != "_\r\n"+inv("k3") {
		t.Errorf("a third key over a limit of two: %q, want one key invalidated", got)
	}
	if n := len(e.s.track.keys); n != 2 {
		t.Errorf("%d keys tracked, want 2", n)
	}
	e.s.track.changed(nil, 0)
	if got := string(e.conn("a").takePending(nil)); got != inv() {
		t.Errorf("state replaced: %q, want %q", got, inv())
	}
	if n := len(e.s.track.keys); n != 0 {
		t.Errorf("%d keys tracked after a flush, want 0", n)
	}

	c := e.conn("a")
	big := strings.Repeat("x", 200)
	for i := 0; i < 2*maxPending/len(big); i++ {
		c.push(appendInvalidate(nil, []string{big}, 3))
	}
	if got := string(c.takePending(nil)); got != inv() {
		t.Errorf("after %d bytes unread: %d bytes queued, ending %q; want at most %d, ending in a null invalidation",
			2*maxPending, len(got), got[max(0, len(got)-40):], maxPending)
	}
}

// TestTrackingClosed: a tracking connection that closes is not kept by
// the keys it read (the table holds connection ids, dropped when the key
// changes, as Redis does), and a change of such a key tells nobody.
func TestTrackingClosed(t *testing.T) {
	e := newTrackEnv(t)
	e.do("c", "HELLO 3")
	e.do("c", "CLIENT TRACKING ON") // another tracking connection: the table stays
	e.do("a", "HELLO 3")
	e.do("a", "CLIENT TRACKING ON")
	e.do("a", "GET k")
	a := e.conn("a")
	a.Closed(nil)
	delete(e.conns, "a")
	gone := weak.Make(a)
	a = nil
	for i := 0; i < 5 && gone.Value() != nil; i++ {
		runtime.GC()
	}
	if gone.Value() != nil {
		t.Error("a closed connection is kept by the tracking table")
	}
	if n := len(e.s.track.keys); n != 1 {
		t.Fatalf("%d keys tracked, want 1 (forgotten when it changes)", n)
	}
	if got := e.do("b", "SET k v"); got != "+OK\r\n" {
		t.Fatalf("SET: %q", got)
	}
	if n := len(e.s.track.keys); n != 0 {
		t.Errorf("%d keys tracked after the change, want 0", n)
	}
	if got := string(e.conn("c").takePending(nil)); got != "" {
		t.Errorf("told %q, of a key it did not read", got)
	}
}
