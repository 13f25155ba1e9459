package resp_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	redigolib "github.com/gomodule/redigo/redis"
	goredislib "github.com/redis/go-redis/v9"
)

// Hand-written lock scripts, as applications write them: variants of the
// documented release and extend scripts that the known-script table does
// not recognise, so that they run in Lua.
const (
	releaseEnd   = `if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("del",KEYS[1]) end return 0`
	releaseUnlnk = `if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("unlink",KEYS[1]) else return 0 end`
	releaseLocal = "local v = redis.call('GET', KEYS[1])\nif v == ARGV[1] then\n  return redis.call('DEL', KEYS[1])\nend\nreturn 0"
	releasePcall = `local v = redis.pcall("get", KEYS[1]) if v == ARGV[1] then return redis.pcall("del", KEYS[1]) end return 0`
	extendEnd    = `if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("pexpire",KEYS[1],ARGV[2]) end return 0`
	extendExpire = `if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("expire",KEYS[1],ARGV[2]) else return 0 end`
)

// semAcquire is a counting semaphore's acquire on a sorted set, in the
// manner of redis-semaphore: drop the expired holders, join if there is
// room.
const semAcquire = `local key = KEYS[1]
local limit = tonumber(ARGV[1])
local id = ARGV[2]
local timeout = tonumber(ARGV[3])
local now = tonumber(ARGV[4])
redis.call('zremrangebyscore', key, '-inf', now - timeout)
if redis.call('zcard', key) < limit then
  redis.call('zadd', key, now, id)
  redis.call('pexpire', key, timeout)
  return 1
end
return 0`

// luaScenarios are command sequences with Lua scripts whose replies must be
// byte for byte Redis's ("K" in an argument: the scenario's key prefix).
var luaScenarios = [][][]string{
	{ // the hand-written release and extend variants
		{"SET", "K1", "tokA", "NX", "PX", "100000"},
		{"EVAL", releaseEnd, "1", "K1", "tokB"},
		{"EVAL", extendEnd, "1", "K1", "tokB", "5000"},
		{"EVAL", extendEnd, "1", "K1", "tokA", "50000"},
		{"TTL", "K1"},
		{"EVAL", extendExpire, "1", "K1", "tokA", "70"},
		{"TTL", "K1"},
		{"EVAL", releaseEnd, "1", "K1", "tokA"},
		{"EVAL", releaseEnd, "1", "K1", "tokA"},
		{"SET", "K1", "tokC", "NX", "PX", "100000"},
		{"EVAL", releaseUnlnk, "1", "K1", "tokC"},
		{"SET", "K1", "tokD", "NX", "PX", "100000"},
		{"EVAL", releaseLocal, "1", "K1", "tokX"},
		{"EVAL", releaseLocal, "1", "K1", "tokD"},
		{"SET", "K1", "tokE", "NX"},
		{"EVAL", releasePcall, "1", "K1", "tokE"},
		{"EXISTS", "K1"},
	},
	{ // lock commands inside a script, time frozen at its start
		// The lease left, as a comparison: Redis reads its clock for PTTL
		// in a script, so the exact figure may be 1499 or 1500.
		{"EVAL", "return {redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', 1500), redis.call('pttl', KEYS[1]) > 1000, redis.call('ttl', KEYS[1]) >= 1}", "1", "K2", "me"},
		{"EVAL", "return redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', 1500)", "1", "K2", "other"},
		{"EVAL", "return {redis.call('get', KEYS[1]), redis.call('exists', KEYS[1], KEYS[2], KEYS[1]), redis.call('type', KEYS[1]), redis.call('type', KEYS[2])}", "2", "K2", "Knone"},
		{"EVAL", "return redis.call('setnx', KEYS[1], 'x')", "1", "K3"},
		{"EVAL", "return {redis.call('setnx', KEYS[1], 'y'), redis.call('getset', KEYS[1], 'z'), redis.call('get', KEYS[1])}", "1", "K3"},
		{"EVAL", "return {redis.call('set', KEYS[1], 'z', 'XX', 'KEEPTTL'), redis.call('pttl', KEYS[1])}", "1", "K3"},
		{"EVAL", "return redis.call('set', KEYS[1], 'v', 'XX')", "1", "Knew"},
		{"EVAL", "return {redis.call('del', KEYS[1], KEYS[2], KEYS[3], KEYS[1]), redis.call('exists', KEYS[1])}", "3", "K2", "K3", "Knone"},
		{"EVAL", "redis.call('set', KEYS[1], 'a'); return redis.call('pexpire', KEYS[1], 0)", "1", "K4"},
		{"EXISTS", "K4"},
		{"EVAL", "redis.call('set', KEYS[1], 'a', 'EX', 100); redis.call('del', KEYS[1]); return redis.call('set', KEYS[1], 'b', 'NX', 'PX', 100000)", "1", "K5"},
		{"GET", "K5"},
		{"EVAL", "return redis.call('set', KEYS[1], 'v', 'EX', 'x')", "1", "K6"},
		{"EVAL", "return redis.pcall('set', KEYS[1], 'v', 'PX', 0)", "1", "K6"},
		{"EVAL", "return redis.call('set', KEYS[1], 'v', 'NX', 'XX')", "1", "K6"},
		{"EVAL", "return redis.call('get', KEYS[1], 'x')", "1", "K6"},
		{"EVAL", "return redis.call('ping')", "0"},
		{"EVAL", "return redis.call('ping', 'x')", "0"},
		{"EVAL", "return redis.call('echo', 'x')", "0"},
		{"EVAL", "return redis.call('select', '0')", "0"},
		{"EVAL", "return redis.call('nosuchcommand')", "0"},
		{"EVAL", "return redis.call('multi')", "0"},
		{"EVAL", "return redis.call('eval', 'return 1', '0')", "0"},
		{"EVAL", "return redis.call('watch', 'x')", "0"},
		{"EVAL", "return redis.call('script', 'flush')", "0"},
		{"EVAL", "return #redis.call('time')", "0"},
		{"EXISTS", "K6"},
	},
	{ // sorted sets in scripts: a semaphore of 2
		{"EVAL", semAcquire, "1", "Ks", "2", "a", "10000", "1000"},
		{"EVAL", semAcquire, "1", "Ks", "2", "b", "10000", "1001"},
		{"EVAL", semAcquire, "1", "Ks", "2", "c", "10000", "1002"},
		{"EVAL", "return redis.call('zrange', KEYS[1], 0, -1, 'WITHSCORES')", "1", "Ks"},
		{"EVAL", semAcquire, "1", "Ks", "2", "c", "10000", "11500"},
		{"EVAL", "return {redis.call('zcard', KEYS[1]), redis.call('zscore', KEYS[1], 'c'), redis.call('zrank', KEYS[1], 'c'), redis.call('zcount', KEYS[1], 0, '+inf')}", "1", "Ks"},
		{"EVAL", "redis.setresp(3); return redis.call('zscore', KEYS[1], 'c')", "1", "Ks"},
		{"EVAL", "return {redis.call('zrem', KEYS[1], 'c', 'x'), redis.call('zcard', KEYS[1]), redis.call('type', KEYS[1])}", "1", "Ks"},
		{"EVAL", "return redis.call('zadd', KEYS[1], 'INCR', 2.5, 'm')", "1", "Kz"},
		{"EVAL", "return redis.call('zadd', KEYS[1], 'NX', 'XX', 1, 'm')", "1", "Kz"},
		{"EVAL", "return redis.pcall('zadd', KEYS[1], 'nan', 'm')", "1", "Kz"},
		{"EVAL", "return {redis.call('zrangebyscore', KEYS[1], '(1', '+inf'), redis.call('zremrangebyscore', KEYS[1], 0, 10), redis.call('exists', KEYS[1])}", "1", "Kz"},
		{"SET", "Kl", "v", "PX", "100000"},
		{"EVAL", "return redis.call('zadd', KEYS[1], 1, 'm')", "1", "Kl"},
		{"EVAL", "return redis.pcall('zcard', KEYS[1])", "1", "Kl"},
		{"ZADD", "Kz2", "1", "a"},
		{"EVAL", "return redis.pcall('get', KEYS[1])", "1", "Kz2"},
		{"EVAL", "return {redis.call('pexpire', KEYS[1], 100000), redis.call('ttl', KEYS[1]), redis.call('persist', KEYS[1]), redis.call('ttl', KEYS[1]), redis.call('del', KEYS[1]), redis.call('exists', KEYS[1])}", "1", "Kz2"},
	},
	{ // EVAL_RO, EVALSHA, SCRIPT
		{"SET", "K7", "v", "PX", "100000"},
		{"EVAL_RO", "return redis.call('get', KEYS[1])", "1", "K7"},
		{"EVAL_RO", "return redis.call('set', KEYS[1], 'w')", "1", "K7"},
		{"EVAL_RO", "return redis.pcall('del', KEYS[1])", "1", "K7"},
		{"GET", "K7"},
		{"SCRIPT", "LOAD", "return redis.call('get', KEYS[1]) .. ARGV[1]"},
		{"EVALSHA", "8a6d80b9c54f3b45f0b7ba6b6a4e8b8cf46cd7e5", "1", "K7", "!"},
		{"SCRIPT", "EXISTS", "8a6d80b9c54f3b45f0b7ba6b6a4e8b8cf46cd7e5", "0000000000000000000000000000000000000000"},
		{"EVALSHA_RO", "8a6d80b9c54f3b45f0b7ba6b6a4e8b8cf46cd7e5", "1", "K7", "?"},
		{"EVALSHA", "0000000000000000000000000000000000000000", "0"},
		{"EVAL", "return 1", "-1"},
		{"EVAL", "return 1", "2", "a"},
		{"EVAL", "return 1", "x"},
		{"SCRIPT", "FLUSH", "x"},
		{"SCRIPT", "FLUSH", "ASYNC"},
		{"SCRIPT", "EXISTS", "8a6d80b9c54f3b45f0b7ba6b6a4e8b8cf46cd7e5"},
		{"EVAL", "error('boom')", "0"},
		{"EVAL", "#!lua\nreturn x", "0"},
		{"EVAL", "#!lua flags=no-writes\nreturn redis.call('set', KEYS[1], 'v')", "1", "K7"},
		{"EVAL", "#!lua flags=no-writes,allow-stale\nreturn redis.call('get', KEYS[1])", "1", "K7"},
		{"EVAL", "#!lua flags=no-writes\nreturn redis.pcall('set', KEYS[1], 'v')", "1", "K7"},
		{"EVAL", "#!lua flags=bogus\nreturn 1", "0"},
		{"EVAL", "#!lua foo=bar\nreturn 1", "0"},
		{"EVAL", "#!python\nreturn 1", "0"},
		{"EVAL", "#!lua", "0"},
		{"EVAL", "#!lua flags=\nreturn 1", "0"},
		{"EVAL_RO", "#!lua\nreturn 1", "0"},
		{"EVAL_RO", "#!lua flags=no-writes\nreturn 1", "0"},
		{"EVAL", "#!lua\n\nerror('x')", "0"},
		{"EVAL", "return x", "0"},
	},
}

func TestLuaDifferential(t *testing.T) {
	lt := startLatch(t)
	rd := startRedis(t)
	for _, proto := range []string{"2", "3"} {
		for i, sc := range luaScenarios {
			t.Run(fmt.Sprintf("resp%s/%d", proto, i), func(t *testing.T) {
				prefix := fmt.Sprintf("lua:%s:%d:%d:", proto, i, time.Now().UnixNano())
				l, r := dial(t, lt.redis), dial(t, rd)
				if proto == "3" {
					l.do("HELLO", "3")
					r.do("HELLO", "3")
				}
				runDiff(t, l, r, prefix, sc)
			})
		}
	}
}

// TestHandWrittenScripts: the hand-written release and extend variants,
// through go-redis's Script (EVALSHA, then EVAL on NOSCRIPT) and redigo's
// Script, on latch and on redis-server: the same answers, and the lock
// changes as they say.
func TestHandWrittenScripts(t *testing.T) {
	ctx := context.Background()
	for _, server := range []string{"latch", "redis"} {
		addr := ""
		if server == "latch" {
			addr = startLatch(t).redis
		} else {
			addr = startRedis(t)
		}
		gr := goredislib.NewClient(&goredislib.Options{Addr: addr})
		defer gr.Close()
		rg, err := redigolib.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer rg.Close()
		for _, release := range []string{releaseEnd, releaseUnlnk, releaseLocal, releasePcall} {
			for _, extend := range []string{extendEnd, extendExpire} {
				key := prefix(t) + "hw"
				// go-redis: acquire, extend by the wrong value and the
				// right one, release by the wrong value and the right one.
				rel, ext := goredislib.NewScript(release), goredislib.NewScript(extend)
				n, want := 50000, 50*time.Second // PEXPIRE's ms, EXPIRE's s
				if extend == extendExpire {
					n, want = 50, 50*time.Second
				}
				if ok, err := gr.SetNX(ctx, key, "me", 10*time.Second).Result(); !ok || err != nil {
					t.Fatalf("%s: SET NX: %v %v", server, ok, err)
				}
				for _, c := range []struct {
					s    *goredislib.Script
					argv []any
					want int64
				}{{ext, []any{"other", n}, 0}, {ext, []any{"me", n}, 1}, {rel, []any{"other"}, 0}, {rel, []any{"me"}, 1}, {rel, []any{"me"}, 0}} {
					got, err := c.s.Run(ctx, gr, []string{key}, c.argv...).Int64()
					if err != nil || got != c.want {
						t.Fatalf("%s go-redis %q %v: %d %v, want %d", server, c.s.Hash(), c.argv, got, err, c.want)
					}
					if c.want == 1 && c.s == ext {
						if ttl := gr.PTTL(ctx, key).Val(); ttl > want || ttl < want-5*time.Second {
							t.Fatalf("%s: PTTL after extend: %v", server, ttl)
						}
					}
				}
				if n := gr.Exists(ctx, key).Val(); n != 0 {
					t.Fatalf("%s: key held after release", server)
				}
				// redigo: the same with its Script (EVALSHA, then EVAL).
				rrel, rext := redigolib.NewScript(1, release), redigolib.NewScript(1, extend)
				if _, err := redigolib.String(rg.Do("SET", key, "you", "NX", "PX", 10000)); err != nil {
					t.Fatalf("%s redigo SET NX: %v", server, err)
				}
				for _, c := range []struct {
					s    *redigolib.Script
					argv []any
					want int
				}{{rext, []any{key, "me", 50}, 0}, {rext, []any{key, "you", 90}, 1}, {rrel, []any{key, "me"}, 0}, {rrel, []any{key, "you"}, 1}} {
					got, err := redigolib.Int(c.s.Do(rg, c.argv...))
					if err != nil || got != c.want {
						t.Fatalf("%s redigo %v: %d %v, want %d", server, c.argv, got, err, c.want)
					}
				}
				if n, _ := redigolib.Int(rg.Do("EXISTS", key)); n != 0 {
					t.Fatalf("%s: key held after redigo release", server)
				}
			}
		}
	}
}
