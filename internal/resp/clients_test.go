package resp_test

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/go-redsync/redsync/v4/redis/redigo"
	redigolib "github.com/gomodule/redigo/redis"
	goredislib "github.com/redis/go-redis/v9"
)

// runClient runs a client program that prints "ok" when its checks hold.
func runClient(t *testing.T, dir string, name string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

func prefix(t *testing.T) string {
	return fmt.Sprintf("%s:%d:", t.Name(), time.Now().UnixNano())
}

// TestRedisPy: Debian's python3-redis, Lock and the classic recipes.
func TestRedisPy(t *testing.T) {
	lt := startLatch(t)
	port := lt.redis[strings.LastIndexByte(lt.redis, ':')+1:]
	runClient(t, ".", python, "testdata/clients/redis_py_lock.py", port, prefix(t))
}

// TestRedlock: npm's redlock 4.2 and 5 on ioredis.
func TestRedlock(t *testing.T) {
	lt := startLatch(t)
	dir, err := filepath.Abs("testdata/npm")
	if err != nil {
		t.Fatal(err)
	}
	port := lt.redis[strings.LastIndexByte(lt.redis, ':')+1:]
	runClient(t, dir, "node", "redlock.js", port, prefix(t))
}

// TestRedisCLI: Debian's redis-cli, one command per run, as a shell script
// would use it.
func TestRedisCLI(t *testing.T) {
	lt := startLatch(t)
	port := lt.redis[strings.LastIndexByte(lt.redis, ':')+1:]
	key := prefix(t) + "cli"
	cli := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(redisCLIPath, append([]string{"-p", port}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("redis-cli %q: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	steps := []struct {
		args []string
		want string
	}{
		{[]string{"SET", key, "me", "NX", "PX", "100000"}, "OK"},
		{[]string{"SET", key, "you", "NX", "PX", "100000"}, ""},
		{[]string{"GET", key}, "me"},
		{[]string{"PEXPIRE", key, "200000"}, "1"},
		{[]string{"TTL", key}, "200"},
		{[]string{"EVAL", compareDoc, "1", key, "you"}, "0"},
		{[]string{"EVAL", compareDoc, "1", key, "me"}, "1"},
		{[]string{"SET", key, "me", "NX", "PX", "100"}, "OK"},
	}
	for _, s := range steps {
		if got := cli(s.args...); got != s.want {
			t.Fatalf("redis-cli %q = %q, want %q", s.args, got, s.want)
		}
	}
	time.Sleep(150 * time.Millisecond)
	if got := cli("SET", key, "you", "NX", "PX", "1000"); got != "OK" {
		t.Fatalf("SET NX after the lease ended = %q, want OK", got)
	}
}

// TestRedsync: go-redsync/redsync v4 over go-redis v9 (RESP3) and redigo
// (RESP2): acquire, exclusion, extend, release, expiry.
func TestRedsync(t *testing.T) {
	lt := startLatch(t)
	pools := map[string]redis.Pool{
		"go-redis": goredis.NewPool(goredislib.NewClient(&goredislib.Options{Addr: lt.redis})),
		"redigo": redigo.NewPool(&redigolib.Pool{Dial: func() (redigolib.Conn, error) {
			return redigolib.Dial("tcp", lt.redis)
		}}),
	}
	for name, pool := range pools {
		t.Run(name, func(t *testing.T) {
			rs := redsync.New(pool)
			key := prefix(t) + "m"
			m1 := rs.NewMutex(key, redsync.WithExpiry(2*time.Second), redsync.WithTries(1))
			if err := m1.Lock(); err != nil {
				t.Fatalf("lock: %v", err)
			}
			m2 := rs.NewMutex(key, redsync.WithExpiry(300*time.Millisecond), redsync.WithTries(1))
			var taken *redsync.ErrTaken
			if err := m2.Lock(); !errors.As(err, &taken) && !errors.Is(err, redsync.ErrFailed) {
				t.Fatalf("second lock: %v, want taken", err)
			}
			if ok, err := m1.Extend(); !ok || err != nil {
				t.Fatalf("extend: %v %v", ok, err)
			}
			if ok, err := m1.Unlock(); !ok || err != nil {
				t.Fatalf("unlock: %v %v", ok, err)
			}
			if err := m2.Lock(); err != nil {
				t.Fatalf("lock after unlock: %v", err)
			}
			time.Sleep(400 * time.Millisecond)
			if ok, err := m2.Unlock(); ok || !errors.Is(err, redsync.ErrLockAlreadyExpired) {
				t.Fatalf("unlock after expiry: %v %v, want ErrLockAlreadyExpired", ok, err)
			}
			if err := m1.Lock(); err != nil {
				t.Fatalf("lock after expiry: %v", err)
			}
			m1.Unlock()
		})
	}
}

// TestRedislock: bsm/redislock v0.9: obtain, exclusion, TTL, refresh,
// release, expiry.
func TestRedislock(t *testing.T) {
	lt := startLatch(t)
	ctx := context.Background()
	rc := goredislib.NewClient(&goredislib.Options{Addr: lt.redis})
	defer rc.Close()
	locker := redislock.New(rc)
	key := prefix(t) + "l"
	lock, err := locker.Obtain(ctx, key, time.Second, nil)
	if err != nil {
		t.Fatalf("obtain: %v", err)
	}
	if _, err := locker.Obtain(ctx, key, time.Second, nil); !errors.Is(err, redislock.ErrNotObtained) {
		t.Fatalf("second obtain: %v, want ErrNotObtained", err)
	}
	if ttl, err := lock.TTL(ctx); err != nil || ttl <= 0 || ttl > time.Second {
		t.Fatalf("TTL: %v %v", ttl, err)
	}
	if err := lock.Refresh(ctx, 5*time.Second, nil); err != nil {
		t.Fatalf("refresh: %v", err)
	}
	if ttl, _ := lock.TTL(ctx); ttl <= 4*time.Second {
		t.Fatalf("TTL after refresh: %v", ttl)
	}
	if err := lock.Release(ctx); err != nil {
		t.Fatalf("release: %v", err)
	}
	if err := lock.Release(ctx); !errors.Is(err, redislock.ErrLockNotHeld) {
		t.Fatalf("second release: %v, want ErrLockNotHeld", err)
	}
	short, err := locker.Obtain(ctx, key, 200*time.Millisecond, nil)
	if err != nil {
		t.Fatalf("obtain: %v", err)
	}
	time.Sleep(300 * time.Millisecond)
	if ttl, err := short.TTL(ctx); ttl != 0 || err != nil {
		t.Fatalf("TTL after expiry: %v %v, want 0", ttl, err)
	}
	if _, err := locker.Obtain(ctx, key, time.Second, nil); err != nil {
		t.Fatalf("obtain after expiry: %v", err)
	}
}

// TestRedisSemaphore: npm's redis-semaphore 5.8 on ioredis: Mutex,
// Semaphore and MultiSemaphore, under contention, with scripts latch runs
// in Lua.
func TestRedisSemaphore(t *testing.T) {
	lt := startLatch(t)
	dir, err := filepath.Abs("testdata/npm")
	if err != nil {
		t.Fatal(err)
	}
	port := lt.redis[strings.LastIndexByte(lt.redis, ':')+1:]
	runClient(t, dir, "node", "semaphore.js", port, prefix(t))
}
