//go:build unix

package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Scripts of TestClusterLuaScripts: hand-written, so that no known lock
// script's native operation stands in for them: they run in Lua.
var (
	luaAcquire = redis.NewScript(`local v = redis.call('get', KEYS[1])
if v == false then
  redis.call('set', KEYS[1], ARGV[1], 'PX', 30000)
  return 1
end
return 0`)
	luaRelease = redis.NewScript(`if redis.call('get', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('del', KEYS[1])
redis.call('del', KEYS[2])
redis.call('set', KEYS[2], ARGV[1])
return 1`)
)

// TestClusterLuaScripts: clients of the three nodes of a cluster contend
// for one key with Lua scripts (acquire if free, release if owned and
// record the holder in a second key). At most one holds it at any time
// (a counter updated by the holder alone loses no increment), and every
// replica ends in the same state: the key free, the record naming the
// last holder.
func TestClusterLuaScripts(t *testing.T) {
	redisAddrs := freePorts(t, 3)
	procs, _ := startClusterEach(t, func(i int) []string { return []string{"--redis-addr", redisAddrs[i]} })
	waitLeader(t, procs)
	ctx := context.Background()
	var clients []*redis.Client
	for _, a := range redisAddrs {
		c := redis.NewClient(&redis.Options{Addr: a, MaxRetries: -1})
		t.Cleanup(func() { c.Close() })
		clients = append(clients, c)
	}
	const perWorker = 15
	var holders atomic.Int32
	counter, total := 0, 0
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i, c := range clients {
		for w := range 2 {
			total += perWorker
			wg.Add(1)
			go func() {
				defer wg.Done()
				me := fmt.Sprintf("node%d-worker%d", i+1, w)
				for n := 0; n < perWorker; {
					got, err := luaAcquire.Run(ctx, c, []string{"lua:lock"}, me).Int()
					if err != nil {
						errs <- fmt.Errorf("%s acquire: %w", me, err)
						return
					}
					if got == 0 {
						time.Sleep(time.Millisecond)
						continue
					}
					if h := holders.Add(1); h != 1 {
						errs <- fmt.Errorf("%s acquired while %d others held the lock", me, h-1)
					}
					v := counter
					time.Sleep(time.Millisecond)
					counter = v + 1
					holders.Add(-1)
					if got, err := luaRelease.Run(ctx, c, []string{"lua:lock", "lua:last"}, me).Int(); err != nil || got != 1 {
						errs <- fmt.Errorf("%s release: %d, %v", me, got, err)
						return
					}
					n++
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if counter != total {
		t.Errorf("counter %d after %d critical sections: the lock was not exclusive", counter, total)
	}
	// Every replica's own state (GET reads a node's applied state).
	var last string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var states []string
		for _, c := range clients {
			v, err := c.Get(ctx, "lua:last").Result()
			held, err2 := c.Exists(ctx, "lua:lock").Result()
			states = append(states, fmt.Sprintf("last=%q(%v) lock=%d(%v)", v, err, held, err2))
			last = v
		}
		same := true
		for _, s := range states {
			same = same && s == states[0] && !strings.Contains(s, "(redis: nil)") && strings.HasSuffix(s, "lock=0(<nil>)")
		}
		if same {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("replicas disagree: %q", states)
		}
	}
	if !strings.HasPrefix(last, "node") {
		t.Fatalf("last holder %q", last)
	}
}
