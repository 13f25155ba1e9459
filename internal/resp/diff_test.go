package resp_test

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/latchd/latch/internal/resp"
)

// compareDoc is the compare-and-delete script of the Redis documentation's
// SET page, as applications copy it.
const compareDoc = `if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("del",KEYS[1]) else return 0 end`

// diffScenarios are command sequences whose replies must be byte for byte
// Redis's, on keys no other client touches. "K" in an argument becomes the
// scenario's own key prefix. Left out on purpose: SELECT of another
// database (latch has one) and CLIENT SETINFO (Redis 7.2's; latch accepts
// it, as clients send it and ignore its errors).
var diffScenarios = [][][]string{
	{ // SET NX PX, exclusion, GET, compare-and-delete by script
		{"SET", "K1", "tokA", "NX", "PX", "100000"},
		{"SET", "K1", "tokB", "NX", "PX", "100000"},
		{"GET", "K1"},
		{"GET", "Knone"},
		{"EXISTS", "K1", "Knone", "K1"},
		{"TTL", "K1"},
		{"EVAL", compareDoc, "1", "K1", "tokB"},
		{"EVAL", compareDoc, "1", "K1", "tokA"},
		{"GET", "K1"},
		{"PTTL", "K1"},
		{"TYPE", "K1"},
	},
	{ // SET EX and options, PEXPIRE, EXPIRE, DEL
		{"SET", "K2", "v", "EX", "100", "NX"},
		{"TTL", "K2"},
		{"EXPIRE", "K2", "200"},
		{"TTL", "K2"},
		{"PEXPIRE", "Knone", "1000"},
		{"SET", "K3", "v", "XX"},
		{"SET", "K3", "v", "PX", "0"},
		{"SET", "K3", "v", "EX", "x"},
		{"SET", "K3", "v", "NX", "XX"},
		{"SET", "K3", "v"},
		{"PTTL", "K3"},
		{"TYPE", "K3"},
		{"DEL", "K2", "K3", "Knone"},
		{"DEL", "K2"},
		{"SET", "K4", "v", "PX", "100000"},
		{"PEXPIRE", "K4", "0"},
		{"EXISTS", "K4"},
	},
	{ // the SETNX/GETSET recipe
		{"SETNX", "K5", "1700000000"},
		{"SETNX", "K5", "1700000001"},
		{"GET", "K5"},
		{"GETSET", "K5", "1700000002"},
		{"GETSET", "Knew", "x"},
		{"GET", "K5"},
		{"DEL", "K5", "Knew"},
	},
	{ // a transaction, applied
		{"SETNX", "K6", "me"},
		{"EXPIRE", "K6", "100"},
		{"WATCH", "K6"},
		{"GET", "K6"},
		{"MULTI"},
		{"DEL", "K6"},
		{"GET", "K6"},
		{"EXEC"},
		{"EXISTS", "K6"},
		{"EXEC"},
		{"DISCARD"},
		{"MULTI"},
		{"SET", "K7", "a", "NX"},
		{"NOSUCHCOMMAND", "x"},
		{"EXEC"},
		{"EXISTS", "K7"},
		{"MULTI"},
		{"MULTI"},
		{"PING"},
		{"DISCARD"},
		{"UNWATCH"},
	},
	{ // SETEX, PSETEX, SET's GET, EXAT, PXAT and KEEPTTL, GETDEL, GETEX, EXPIRETIME, the EXPIREAT family
		{"SETEX", "K9", "0", "v"},
		{"SETEX", "K9", "x", "v"},
		{"SETEX", "K9", "9223372036854775", "v"},
		{"PSETEX", "K9", "9223372036854775807", "v"},
		{"SETEX", "K9", "100", "v"},
		{"TTL", "K9"},
		{"PSETEX", "K9", "100000", "v"},
		{"TTL", "K9"},
		{"SET", "K9", "w", "NX", "GET"},
		{"SET", "K9", "v", "XX", "GET", "KEEPTTL"},
		{"TTL", "K9"},
		{"SET", "K9", "v", "GET", "GET", "EX", "10", "EX", "20"},
		{"TTL", "K9"},
		{"SET", "Knew", "v", "GET", "NX"},
		{"SET", "Knew2", "v", "XX", "GET"},
		{"EXISTS", "Knew2"},
		{"SET", "K9", "v", "KEEPTTL", "EX", "1"},
		{"SET", "K9", "v", "EX", "1", "PXAT", "1"},
		{"SET", "K9", "v", "EX", "x", "NX", "XX"},
		{"SET", "K9", "v", "EXAT", "0"},
		{"SET", "K9", "v", "PXAT", "-1"},
		{"SET", "K9", "v", "EXAT", "9223372036854776"},
		{"SET", "K9", "v", "EX", "9223372036854775"},
		{"SET", "K9", "v", "PX", "9223372036854775807"},
		{"SET", "K9", "v", "PXAT", "4102444800123"},
		{"PEXPIRETIME", "K9"},
		{"EXPIRETIME", "K9"},
		{"SET", "K9", "v", "EXAT", "4102444800", "GET"},
		{"PEXPIRETIME", "K9"},
		{"SET", "K9", "v", "EXAT", "1"},
		{"EXISTS", "K9"},
		{"SET", "K9", "v", "PXAT", "1", "NX", "GET"},
		{"EXISTS", "K9"},
		{"SET", "K10", "v"},
		{"EXPIRETIME", "K10"},
		{"EXPIRETIME", "Knone"},
		{"PEXPIRETIME", "Knone"},
		{"GETEX", "K10"},
		{"GETEX", "K10", "EX", "100"},
		{"TTL", "K10"},
		{"GETEX", "K10", "PERSIST"},
		{"PTTL", "K10"},
		{"GETEX", "K10", "PXAT", "4102444800000"},
		{"PEXPIRETIME", "K10"},
		{"GETEX", "K10", "PERSIST", "EX", "1"},
		{"GETEX", "K10", "EX", "1", "PX", "1"},
		{"GETEX", "K10", "FOO"},
		{"GETEX", "K10", "EX", "0"},
		{"GETEX", "K10", "EX", "x"},
		{"GETEX", "Knone", "EX", "0"},
		{"GETEX", "Knone", "EX", "x"},
		{"GETEX", "Knone", "FOO"},
		{"GETEX", "Knone", "PX", "1000"},
		{"GETEX", "K10", "EXAT", "1"},
		{"EXISTS", "K10"},
		{"SET", "K11", "v"},
		{"GETDEL", "K11"},
		{"GETDEL", "K11"},
		{"EXISTS", "K11"},
		{"SET", "K12", "v"},
		{"EXPIREAT", "K12", "4102444800"},
		{"EXPIRETIME", "K12"},
		{"PEXPIREAT", "K12", "4102444800999"},
		{"PEXPIRETIME", "K12"},
		{"EXPIREAT", "K12", "9223372036854776"},
		{"EXPIRE", "K12", "9223372036854775"},
		{"PEXPIRE", "K12", "9223372036854775807"},
		{"EXPIREAT", "Knone", "9223372036854776"},
		{"PEXPIREAT", "K12", "x"},
		{"EXPIREAT", "Knone", "4102444800"},
		{"PEXPIREAT", "K12", "1"},
		{"EXISTS", "K12"},
		{"SET", "K12", "v"},
		{"EXPIREAT", "K12", "-1"},
		{"EXISTS", "K12"},
		{"SETEX", "K12", "10"},
		{"GETEX"},
		{"DEL", "K9", "K10", "Knew"},
	},
	{ // connection commands and errors
		{"PING"},
		{"PING", "hi"},
		{"ECHO", "hello"},
		{"SELECT", "0"},
		{"CLIENT", "SETNAME", "lockclient"},
		{"CLIENT", "GETNAME"},
		{"CLIENT", "NOSUCH"},
		{"GET"},
		{"SET", "K8"},
		{"FOO", "bar", "baz"},
		{"EVALSHA", "ffffffffffffffffffffffffffffffffffffffff", "0"},
		{"EVAL", compareDoc, "2", "K8"},
		{"EVAL", compareDoc, "-1"},
		{"SCRIPT", "LOAD", compareDoc},
		{"SCRIPT", "EXISTS", "ffffffffffffffffffffffffffffffffffffffff"},
		{"WAIT", "0", "0"},
		{"HELLO", "4"},
		{"AUTH", "secret"},
	},
}

// TestDifferential: the replies of latch and of Debian's redis-server to
// the same commands are the same bytes, in RESP2 and in RESP3.
func TestDifferential(t *testing.T) {
	lt := startLatch(t)
	rd := startRedis(t)
	for _, proto := range []string{"2", "3"} {
		for i, sc := range diffScenarios {
			t.Run(fmt.Sprintf("resp%s/%d", proto, i), func(t *testing.T) {
				prefix := fmt.Sprintf("diff:%s:%d:%d:", proto, i, time.Now().UnixNano())
				l, r := dial(t, lt.redis), dial(t, rd)
				if proto == "3" {
					// HELLO's reply names the server and the connection: compare its form only.
					lh, rh := l.do("HELLO", "3"), r.do("HELLO", "3")
					if !strings.HasPrefix(lh, "%7\r\n") || !strings.HasPrefix(rh, "%7\r\n") {
						t.Fatalf("HELLO 3: latch %q, redis %q", lh, rh)
					}
				}
				runDiff(t, l, r, prefix, sc)
			})
		}
	}
}

// runDiff sends cmds to latch (l) and Redis (r) and reports every reply
// that differs. An argument "Kx" (not KEYS) names key prefix+"x".
func runDiff(t *testing.T, l, r *rconn, prefix string, cmds [][]string) {
	t.Helper()
	for _, cmd := range cmds {
		args := prefixed(prefix, cmd)
		lr, rr := l.do(args...), r.do(args...)
		if lr != rr {
			t.Errorf("%q:\nlatch %q\nredis %q", cmd, lr, rr)
		}
	}
}

// prefixed returns cmd with prefix in place of the K of its arguments
// K<name> (a scenario's keys), KEYS aside.
func prefixed(prefix string, cmd []string) []string {
	args := make([]string, len(cmd))
	for j, a := range cmd {
		if len(a) > 1 && a[0] == 'K' && a != "KEYS" {
			a = prefix + a[1:]
		}
		args[j] = a
	}
	return args
}

// runPipelinedDiff sends cmds (keys prefixed) in one write to latch (at
// ladr) and to redis-server (at radr), and compares all their replies.
func runPipelinedDiff(t *testing.T, ladr, radr, prefix string, cmds [][]string) {
	t.Helper()
	var batch []byte
	for _, cmd := range cmds {
		batch = append(batch, encode(prefixed(prefix, cmd)...)...)
	}
	var replies [2]string
	for j, addr := range []string{ladr, radr} {
		c := dial(t, addr)
		if _, err := c.nc.Write(batch); err != nil {
			t.Fatal(err)
		}
		for range cmds {
			replies[j] += c.read()
		}
	}
	if replies[0] != replies[1] {
		t.Errorf("latch:\n%q\nredis:\n%q", replies[0], replies[1])
	}
}

// TestInline: inline commands with Redis's quoting, pipelined, answered in
// order and as redis-server answers.
func TestInline(t *testing.T) {
	lt := startLatch(t)
	rd := startRedis(t)
	key := fmt.Sprintf("inline:%d", time.Now().UnixNano())
	batch := "PING\r\nSET " + key + " \"a\\x41\\n\" NX\r\nGET " + key + "\r\n\r\nset " + key + "b 'it''s'\r\nDEL " + key + "\r\n"
	for _, addr := range []string{lt.redis, rd} {
		c := dial(t, addr)
		if _, err := c.nc.Write([]byte(batch)); err != nil {
			t.Fatal(err)
		}
		var got []string
		for range 4 {
			got = append(got, c.read())
		}
		want := []string{"+PONG\r\n", "+OK\r\n", "$3\r\naA\n\r\n", "-ERR Protocol error: unbalanced quotes in request\r\n"}
		if strings.Join(got[:4], "") != strings.Join(want, "") {
			t.Errorf("%s: %q, want %q", addr, got, want)
		}
	}
}

// memcacheLock locks key over memcached on a connection kept open until the
// test ends (a memcached lock ends with its connection).
func memcacheLock(t *testing.T, addr, key string) {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := fmt.Fprintf(nc, "set %s 0 0 1\r\nv\r\nlock %s\r\n", key, key); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(nc)
	for _, want := range []string{"STORED", "OK"} {
		l, err := br.ReadString('\n')
		if err != nil || strings.TrimSpace(l) != want {
			t.Fatalf("memcached lock %s: %q, %v; want %s", key, l, err, want)
		}
	}
}

// TestDifferentialWrongType: a key held over memcached (a lock without an
// owner value) is to latch's Redis clients what a list is to Redis's: a key
// of another type. Every command that reads it as a string answers Redis's
// WRONGTYPE, scripts with their SHA1 and line, and the others (SET NX,
// SETNX, EXISTS, PTTL, redlock's acquire) see a key that exists.
func TestDifferentialWrongType(t *testing.T) {
	lt := startLatch(t)
	rd := startRedis(t)
	scripts := resp.ClientScripts(t)
	for _, proto := range []string{"2", "3"} {
		t.Run("resp"+proto, func(t *testing.T) {
			key := fmt.Sprintf("wrongtype:%s:%d", proto, time.Now().UnixNano())
			l, r := dial(t, lt.redis), dial(t, rd)
			if proto == "3" {
				l.do("HELLO", "3")
				r.do("HELLO", "3")
			}
			memcacheLock(t, lt.memcache, key)
			if got := r.do("RPUSH", key, "x"); got != ":1\r\n" {
				t.Fatalf("RPUSH: %q", got)
			}
			cmds := [][]string{
				{"GET", key},
				{"GETSET", key, "v"},
				{"SET", key, "v", "NX", "PX", "1000"},
				{"SETNX", key, "v"},
				{"EXISTS", key},
				{"PTTL", key},
				{"SET", key, "v", "GET"},
				{"SET", key, "v", "NX", "GET"},
				{"GETDEL", key},
				{"GETEX", key},
				{"GETEX", key, "EX", "100"},
				{"GETEX", key, "EX", "0"},
				{"PEXPIRETIME", key},
				{"EVAL", compareDoc, "1", key, "tok"},
				{"EVALSHA", "B70C2384248F88E6B75B9F89241A180F856AD852", "1", key, "tok"},
				{"MULTI"},
				{"GET", key},
				{"SET", key + ":other", "v", "NX"},
				{"EXEC"},
				{"DEL", key + ":other"},
				{"ZADD", key, "1", "a"},
				{"ZADD", key, "NX", "XX", "1", "a"},
				{"ZREM", key, "a"},
				{"ZCARD", key},
				{"ZSCORE", key, "a"},
				{"ZRANGE", key, "0", "-1", "WITHSCORES"},
				{"ZREMRANGEBYSCORE", key, "-inf", "+inf"},
				{"MULTI"},
				{"ZCOUNT", key, "0", "1"},
				{"EXEC"},
			}
			for _, s := range scripts {
				cmds = append(cmds, append([]string{"EVAL", s.Body, "1", key}, s.Argv...))
			}
			for _, cmd := range cmds {
				lr, rr := l.do(cmd...), r.do(cmd...)
				if lr != rr {
					t.Errorf("%.80q:\nlatch %q\nredis %q", cmd, lr, rr)
				}
			}
			if got := l.do("TYPE", key); got != "+latchlock\r\n" {
				t.Errorf("TYPE of a key held over memcached: %q, want +latchlock", got)
			}
		})
	}
}

// TestDifferentialPipelined: each scenario of TestDifferential sent in one
// write, so that latch applies its lock commands in batches, answers as
// redis-server does.
func TestDifferentialPipelined(t *testing.T) {
	lt := startLatch(t)
	rd := startRedis(t)
	for i, sc := range diffScenarios {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			prefix := fmt.Sprintf("pipe:%d:%d:", i, time.Now().UnixNano())
			runPipelinedDiff(t, lt.redis, rd, prefix, sc)
		})
	}
}
