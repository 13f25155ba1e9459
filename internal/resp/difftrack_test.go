package resp_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/latchd/latch/internal/resp"
)

// trackScenarios are client-side caching sessions whose bytes must be
// Redis's: each step is a connection's name (a, b or r) and a command, or
// READ (the next push or message on that connection), on keys no other
// client touches ("K" as in diffScenarios; "$r" is connection r's id).
// A PING after a change shows that nothing was pushed before it.
var trackScenarios = [][][]string{
	{ // the default mode: the keys read, each told once, own changes too
		{"a", "HELLO", "3"},
		{"a", "CLIENT", "TRACKINGINFO"},
		{"a", "CLIENT", "GETREDIR"},
		{"a", "CLIENT", "TRACKING", "ON"},
		{"a", "CLIENT", "TRACKINGINFO"},
		{"a", "CLIENT", "GETREDIR"},
		{"a", "GET", "K1"},
		{"a", "EXISTS", "K2"},
		{"b", "SET", "K1", "v", "NX", "PX", "100000"},
		{"a", "READ"},
		{"a", "PING"},
		{"a", "GET", "K1"},
		{"a", "DEL", "K1"},
		{"a", "READ"},
		{"b", "SET", "K1", "v", "NX"},
		{"a", "PING"},
		{"b", "SET", "K2", "v", "NX"},
		{"a", "READ"},
		{"a", "TTL", "K2"},
		{"b", "PEXPIRE", "K2", "50000"},
		{"a", "READ"},
		{"b", "DEL", "K1", "K2"},
		{"a", "PING"},
		{"a", "CLIENT", "TRACKING", "OFF"},
		{"a", "CLIENT", "TRACKINGINFO"},
	},
	{ // BCAST with prefixes, NOLOOP
		{"a", "HELLO", "3"},
		{"a", "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "Kp:", "PREFIX", "Kq:", "NOLOOP"},
		{"a", "CLIENT", "TRACKINGINFO"},
		{"b", "SET", "Kp:1", "v", "NX"},
		{"a", "READ"},
		{"b", "SET", "Kr:1", "v", "NX"},
		{"a", "PING"},
		{"a", "DEL", "Kp:1"},
		{"a", "PING"},
		{"b", "DEL", "Kr:1"},
		{"b", "SET", "Kq:1", "v", "NX"},
		{"a", "READ"},
		{"a", "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "Kp:x"},
		{"a", "CLIENT", "TRACKING", "ON", "PREFIX", "Kp:x"},
		{"a", "CLIENT", "TRACKING", "ON"},
		{"a", "CLIENT", "TRACKING", "OFF"},
		{"b", "DEL", "Kq:1"},
		{"a", "PING"},
	},
	{ // OPTIN and OPTOUT
		{"a", "HELLO", "3"},
		{"a", "CLIENT", "CACHING", "yes"},
		{"a", "CLIENT", "TRACKING", "ON", "OPTIN"},
		{"a", "GET", "K1"},
		{"b", "SET", "K1", "v", "NX"},
		{"a", "PING"},
		{"a", "CLIENT", "CACHING", "yes"},
		{"a", "CLIENT", "TRACKINGINFO"},
		{"a", "GET", "K1"},
		{"a", "GET", "K2"},
		{"b", "SET", "K2", "v", "NX"},
		{"b", "DEL", "K1"},
		{"a", "READ"},
		{"a", "CLIENT", "CACHING", "no"},
		{"a", "CLIENT", "CACHING", "maybe"},
		{"a", "CLIENT", "TRACKING", "ON", "OPTOUT"},
		{"a", "CLIENT", "TRACKING", "OFF"},
		{"a", "CLIENT", "TRACKING", "ON", "OPTOUT"},
		{"a", "CLIENT", "CACHING", "no"},
		{"a", "GET", "K2"},
		{"a", "GET", "K3"},
		{"b", "DEL", "K2"},
		{"b", "SET", "K3", "v", "NX"},
		{"a", "READ"},
		{"a", "PING"},
		{"b", "DEL", "K3"},
	},
	{ // a read after a write of the same key, in a transaction or a script
		{"a", "HELLO", "3"},
		{"a", "CLIENT", "TRACKING", "ON"},
		{"a", "MULTI"},
		{"a", "SET", "K1", "v", "NX"},
		{"a", "GET", "K1"},
		{"a", "EXEC"},
		{"a", "PING"},
		{"b", "DEL", "K1"},
		{"a", "READ"},
		{"a", "GET", "K1"},
		{"a", "MULTI"},
		{"a", "GET", "K1"},
		{"a", "SET", "K1", "w", "NX"},
		{"a", "GET", "K1"},
		{"a", "EXEC"},
		{"a", "READ"},
		{"a", "PING"},
		{"b", "DEL", "K1"},
		{"a", "READ"},
		{"a", "EVAL", "redis.call('SET', KEYS[1], 'v', 'NX') return redis.call('GET', KEYS[1])", "1", "K2"},
		{"a", "PING"},
		{"b", "DEL", "K2"},
		{"a", "READ"},
		{"a", "EVAL", "local v = redis.call('GET', KEYS[1]) redis.call('SET', KEYS[1], 'v', 'NX') return v", "1", "K2"},
		{"a", "READ"},
		{"a", "PING"},
		{"b", "DEL", "K2"},
		{"a", "PING"},
	},
	{ // sorted sets
		{"a", "HELLO", "3"},
		{"a", "CLIENT", "TRACKING", "ON"},
		{"a", "ZRANGE", "Kz", "0", "-1"},
		{"b", "ZADD", "Kz", "1", "m"},
		{"a", "READ"},
		{"a", "ZCARD", "Kz"},
		{"b", "ZADD", "Kz", "1", "m"},
		{"a", "PING"},
		{"b", "ZADD", "Kz", "2", "m"},
		{"a", "READ"},
		{"a", "ZSCORE", "Kz", "m"},
		{"b", "PEXPIRE", "Kz", "100000"},
		{"a", "READ"},
		{"a", "TYPE", "Kz"},
		{"b", "DEL", "Kz"},
		{"a", "READ"},
	},
	{ // RESP2 redirection to a subscriber of __redis__:invalidate
		{"r", "SUBSCRIBE", "__redis__:invalidate"},
		{"a", "CLIENT", "TRACKING", "ON", "REDIRECT", "$r"},
		{"a", "GET", "K1"},
		{"b", "SET", "K1", "v", "NX"},
		{"r", "READ"},
		{"a", "PING"},
		{"r", "PING"},
		{"r", "PING", "hi"},
		{"r", "GET", "K1"},
		{"r", "SUBSCRIBE", "other"},
		{"r", "UNSUBSCRIBE", "other"},
		{"a", "GET", "K1"},
		{"b", "DEL", "K1"},
		{"r", "READ"},
		{"r", "UNSUBSCRIBE"},
		{"r", "UNSUBSCRIBE"},
		{"r", "PING"},
		{"a", "CLIENT", "TRACKING", "ON", "REDIRECT", "999999"},
		{"a", "CLIENT", "TRACKING", "ON", "FOO"},
		{"a", "CLIENT", "TRACKING", "MAYBE"},
		{"a", "CLIENT", "TRACKING", "ON", "OPTIN", "OPTOUT"},
		{"a", "CLIENT", "TRACKING", "ON", "BCAST", "OPTIN"},
		{"a", "CLIENT", "TRACKING"},
		{"a", "CLIENT", "CACHING"},
	},
}

// TestDifferentialTracking: client-side caching's replies, pushes and
// messages are redis-server's bytes, on connections served by event loops
// and by goroutines.
func TestDifferentialTracking(t *testing.T) {
	rd := startRedis(t)
	for _, served := range []string{"event loops", "goroutines"} {
		lt := startLatch(t)
		if served == "goroutines" {
			lt.redis = startResp(t, -1)
		}
		for i, sc := range trackScenarios {
			t.Run(fmt.Sprintf("%s/%d", served, i), func(t *testing.T) {
				prefix := fmt.Sprintf("track:%d:%d:", i, time.Now().UnixNano())
				var got [2][]string
				for j, addr := range []string{lt.redis, rd} {
					conns := map[string]*rconn{}
					for _, n := range []string{"a", "b", "r"} {
						conns[n] = dial(t, addr)
					}
					rid := strings.TrimSuffix(strings.TrimPrefix(conns["r"].do("CLIENT", "ID"), ":"), "\r\n")
					for _, step := range sc {
						c := conns[step[0]]
						if step[1] == "READ" {
							got[j] = append(got[j], c.read())
							continue
						}
						args := make([]string, len(step)-1)
						for k, a := range step[1:] {
							switch {
							case a == "$r":
								a = rid
							case len(a) > 1 && a[0] == 'K':
								a = prefix + a[1:]
							}
							args[k] = a
						}
						rep := c.do(args...)
						if args[0] == "HELLO" {
							rep = rep[:3]
						}
						if args[0] == "CLIENT" && (args[1] == "GETREDIR" || args[1] == "TRACKINGINFO") {
							rep = strings.ReplaceAll(rep, ":"+rid+"\r\n", ":$r\r\n")
						}
						got[j] = append(got[j], rep)
					}
				}
				for k := range got[0] {
					if got[0][k] != got[1][k] {
						t.Errorf("step %d %q:\nlatch %q\nredis %q", k, sc[k], got[0][k], got[1][k])
					}
				}
			})
		}
	}
}

// startResp serves an in-memory node on a loopback port with loops event
// loops (-1: a goroutine per connection) and returns its address.
func startResp(t *testing.T, loops int) string {
	return resp.StartForTest(t, loops)
}

// TestTrackingAnyChange: a tracked key's reader is told of changes that
// no Redis client makes: a lock taken over memcached, and a lease that
// ends with nobody touching the key (told at about its end).
func TestTrackingAnyChange(t *testing.T) {
	lt := startLatch(t)
	key := prefix(t) + "k"
	a, b := dial(t, lt.redis), dial(t, lt.redis)
	a.do("HELLO", "3")
	if got := a.do("CLIENT", "TRACKING", "ON"); got != "+OK\r\n" {
		t.Fatal(got)
	}
	inv := "$10\r\ninvalidate\r\n*1\r\n$" + fmt.Sprint(len(key)) + "\r\n" + key + "\r\n"

	a.do("GET", key)
	memcacheLock(t, lt.memcache, key)
	if got := a.read(); got != ">2\r\n"+inv {
		t.Fatalf("after a memcached lock: %q", got)
	}

	key2 := key + "2"
	inv2 := ">2\r\n$10\r\ninvalidate\r\n*1\r\n$" + fmt.Sprint(len(key2)) + "\r\n" + key2 + "\r\n"
	if got := b.do("SET", key2, "tok", "NX", "PX", "300"); got != "+OK\r\n" {
		t.Fatal(got)
	}
	start := time.Now()
	if got := a.do("GET", key2); got != "$3\r\ntok\r\n" {
		t.Fatal(got)
	}
	if got := a.read(); got != inv2 {
		t.Fatalf("at the lease's end: %q", got)
	}
	if d := time.Since(start); d < 250*time.Millisecond || d > 2*time.Second {
		t.Errorf("the lease's end (300 ms) was told after %v", d)
	}
}
