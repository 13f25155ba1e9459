package resp_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/latchd/latch/internal/config"
	"github.com/latchd/latch/internal/server"
)

// zsetScenarios are sorted-set command sequences whose replies must be
// byte for byte Redis's ("K" as in diffScenarios): every command and
// option, the errors in Redis's order, and the generic commands on
// sorted-set keys.
var zsetScenarios = [][][]string{
	{ // ZADD's options and replies
		{"ZADD", "Kz", "1", "a", "0.1", "b", "1e20", "c", "inf", "d", "-0", "e"},
		{"ZRANGE", "Kz", "0", "-1", "WITHSCORES"},
		{"ZADD", "Kz", "CH", "2", "a", "3", "new", "1e20", "c"},
		{"ZADD", "Kz", "NX", "5", "a", "5", "n2"},
		{"ZADD", "Kz", "XX", "CH", "5", "a", "5", "n3"},
		{"ZADD", "Kz", "GT", "CH", "1", "a", "9", "b"},
		{"ZADD", "Kz", "LT", "CH", "1", "a", "9", "c", "4", "n4"},
		{"ZADD", "Kz", "INCR", "1.5", "a"},
		{"ZADD", "Kz", "INCR", "-0", "fresh"},
		{"ZADD", "Kz", "XX", "INCR", "1", "nosuch"},
		{"ZADD", "Kz", "NX", "INCR", "1", "a"},
		{"ZADD", "Kz", "GT", "INCR", "-1", "a"},
		{"ZADD", "Kz", "incr", "ch", "+inf", "d"},
		{"ZADD", "Kz", "INCR", "-inf", "d"},
		{"ZADD", "Kz", "INCR", "1", "a", "2", "b"},
		{"ZADD", "Kz", "NX", "XX", "1", "a"},
		{"ZADD", "Kz", "NX", "GT", "1", "a"},
		{"ZADD", "Kz", "GT", "LT", "1", "a"},
		{"ZADD", "Kz", "1", "a", "2"},
		{"ZADD", "Kz", "NX"},
		{"ZADD", "Kz", "nan", "a"},
		{"ZADD", "Kz", "1x", "a"},
		{"ZADD", "Kz", " 1", "a"},
		{"ZADD", "Kz", "1e400", "a"},
		{"ZADD", "Kz", "0x10", "hex", "1e-320", "tiny", ".5", "half", "5.", "five"},
		{"ZADD", "Kz", "1", "a", "1", "a", "2", "a"},
		{"ZRANGE", "Kz", "0", "-1", "WITHSCORES"},
		{"ZCARD", "Kz"},
		{"ZCARD", "Knone"},
		{"TYPE", "Kz"},
		{"EXISTS", "Kz", "Knone", "Kz"},
	},
	{ // reads
		{"ZADD", "Kr", "1", "a", "2", "b", "2", "c", "3", "d", "-inf", "lo", "+inf", "hi"},
		{"ZSCORE", "Kr", "b"},
		{"ZSCORE", "Kr", "hi"},
		{"ZSCORE", "Kr", "nope"},
		{"ZSCORE", "Knone", "a"},
		{"ZMSCORE", "Kr", "a", "nope", "lo"},
		{"ZMSCORE", "Knone", "a", "b"},
		{"ZRANK", "Kr", "c"},
		{"ZREVRANK", "Kr", "c"},
		{"ZRANK", "Kr", "nope"},
		{"ZRANK", "Knone", "a"},
		{"ZRANK", "Kr", "a", "WITHSCORE"},
		{"ZCOUNT", "Kr", "-inf", "+inf"},
		{"ZCOUNT", "Kr", "(1", "2"},
		{"ZCOUNT", "Kr", "", "2"},
		{"ZCOUNT", "Kr", "(", "(3"},
		{"ZCOUNT", "Kr", "  2", "inf"},
		{"ZCOUNT", "Kr", "a", "1"},
		{"ZCOUNT", "Kr", "1", "[2"},
		{"ZCOUNT", "Kr", "1", "nan"},
		{"ZCOUNT", "Knone", "0", "1"},
		{"ZRANGE", "Kr", "0", "-1"},
		{"ZRANGE", "Kr", "-2", "100", "WITHSCORES"},
		{"ZRANGE", "Kr", "0", "1", "REV", "WITHSCORES"},
		{"ZRANGE", "Kr", "5", "1"},
		{"ZRANGE", "Kr", "(1", "+inf", "BYSCORE"},
		{"ZRANGE", "Kr", "+inf", "(1", "BYSCORE", "REV", "LIMIT", "1", "2", "WITHSCORES"},
		{"ZRANGE", "Kr", "-inf", "+inf", "byscore", "limit", "0", "-1", "withscores"},
		{"ZRANGE", "Kr", "-inf", "+inf", "BYSCORE", "LIMIT", "-1", "2"},
		{"ZRANGE", "Kr", "-inf", "+inf", "BYSCORE", "LIMIT", "10", "2"},
		{"ZRANGE", "Kr", "0", "1", "LIMIT", "0", "1"},
		{"ZRANGE", "Kr", "0", "1", "LIMIT", "0", "-1"},
		{"ZRANGE", "Kr", "0", "1", "LIMIT", "0"},
		{"ZRANGE", "Kr", "0", "1", "LIMIT", "x", "1"},
		{"ZRANGE", "Kr", "0", "1", "REV", "REV"},
		{"ZRANGE", "Kr", "0", "1", "BYSCORE", "BYSCORE"},
		{"ZRANGE", "Kr", "x", "1"},
		{"ZRANGE", "Kr", "x", "1", "BYSCORE"},
		{"ZRANGE", "Kr", "0", "1", "BYLEX", "WITHSCORES"},
		{"ZRANGE", "Knone", "0", "-1", "WITHSCORES"},
		{"ZRANGEBYSCORE", "Kr", "-inf", "+inf", "WITHSCORES", "LIMIT", "1", "3"},
		{"ZRANGEBYSCORE", "Kr", "2", "2"},
		{"ZRANGEBYSCORE", "Kr", "(2", "2"},
		{"ZRANGEBYSCORE", "Kr", "3", "1"},
		{"ZRANGEBYSCORE", "Kr", "0", "1", "REV"},
		{"ZRANGEBYSCORE", "Kr", "0", "1", "BYSCORE"},
		{"ZRANGEBYSCORE", "Kr", "0", "x"},
		{"ZREVRANGEBYSCORE", "Kr", "+inf", "-inf", "WITHSCORES"},
		{"ZREVRANGEBYSCORE", "Kr", "2", "(1", "LIMIT", "0", "1"},
		{"ZREVRANGEBYSCORE", "Kr", "1", "2"},
		{"ZCARD", "Kr", "extra"},
	},
	{ // removals and generic commands
		{"ZADD", "Kd", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e"},
		{"ZREM", "Kd", "a", "nope", "a"},
		{"ZREM", "Knone", "a"},
		{"ZREMRANGEBYSCORE", "Kd", "(2", "3"},
		{"ZREMRANGEBYSCORE", "Kd", "x", "3"},
		{"ZREMRANGEBYSCORE", "Knone", "0", "1"},
		{"ZREMRANGEBYRANK", "Kd", "-1", "-1"},
		{"ZREMRANGEBYRANK", "Kd", "x", "1"},
		{"ZREMRANGEBYRANK", "Kd", "5", "9"},
		{"ZRANGE", "Kd", "0", "-1", "WITHSCORES"},
		{"TTL", "Kd"},
		{"EXPIRE", "Kd", "100"},
		{"TTL", "Kd"},
		{"PERSIST", "Kd"},
		{"PERSIST", "Kd"},
		{"PERSIST", "Knone"},
		{"TTL", "Kd"},
		{"PEXPIRE", "Kd", "100000"},
		{"TTL", "Kd"},
		{"ZREMRANGEBYRANK", "Kd", "0", "-1"},
		{"EXISTS", "Kd"},
		{"TYPE", "Kd"},
		{"ZADD", "Kd", "1", "x"},
		{"TTL", "Kd"},
		{"DEL", "Kd", "Knone"},
		{"ZADD", "Kd", "1", "x"},
		{"UNLINK", "Kd"},
		{"ZADD", "Kd", "1", "x"},
		{"PEXPIRE", "Kd", "0"},
		{"EXISTS", "Kd"},
		{"ZADD", "Kd", "1", "x"},
		{"ZREM", "Kd", "x"},
		{"EXISTS", "Kd"},
		{"TYPE", "Kd"},
	},
	{ // types: a lock (a string to Redis) and a sorted set
		{"SET", "Ks", "v", "NX"},
		{"ZADD", "Ks", "1", "a"},
		{"ZADD", "Ks", "nan", "a"},
		{"ZADD", "Ks", "NX", "XX", "1", "a"},
		{"ZREM", "Ks", "a"},
		{"ZCARD", "Ks"},
		{"ZSCORE", "Ks", "a"},
		{"ZMSCORE", "Ks", "a"},
		{"ZRANK", "Ks", "a"},
		{"ZCOUNT", "Ks", "0", "1"},
		{"ZCOUNT", "Ks", "x", "1"},
		{"ZRANGE", "Ks", "0", "-1"},
		{"ZRANGEBYSCORE", "Ks", "0", "1"},
		{"ZREMRANGEBYSCORE", "Ks", "0", "1"},
		{"ZREMRANGEBYRANK", "Ks", "0", "1"},
		{"ZADD", "Kz", "1", "a"},
		{"GET", "Kz"},
		{"GETSET", "Kz", "v"},
		{"SET", "Kz", "v", "NX", "PX", "1000"},
		{"SETNX", "Kz", "v"},
		{"TYPE", "Ks"},
		{"TYPE", "Kz"},
		{"DEL", "Ks", "Kz"},
	},
	{ // redis-semaphore 5.8's scripts, as the commands they call, in
		// transactions: Semaphore acquire (limit 2), refresh, release
		// (a plain ZREM), MultiSemaphore acquire of 2 permits and release.
		{"MULTI"},
		{"ZREMRANGEBYSCORE", "Ksem", "-inf", "1732770000000"},
		{"ZCARD", "Ksem"},
		{"ZADD", "Ksem", "1732770010000", "id-1"},
		{"PEXPIRE", "Ksem", "10000"},
		{"EXEC"},
		{"ZREMRANGEBYSCORE", "Ksem", "-inf", "1732770001000"},
		{"ZCARD", "Ksem"},
		{"ZADD", "Ksem", "1732770011000", "id-2"},
		{"PEXPIRE", "Ksem", "10000"},
		{"ZCARD", "Ksem"},
		{"ZREMRANGEBYSCORE", "Ksem", "-inf", "1732770005000"},
		{"ZSCORE", "Ksem", "id-1"},
		{"ZADD", "Ksem", "1732770015000", "id-1"},
		{"PEXPIRE", "Ksem", "10000"},
		{"ZSCORE", "Ksem", "id-9"},
		{"ZREM", "Ksem", "id-1"},
		{"ZREM", "Ksem", "id-1"},
		{"ZRANGE", "Ksem", "0", "-1", "WITHSCORES"},
		{"ZREMRANGEBYSCORE", "Ksem", "-inf", "1732770012000"},
		{"EXISTS", "Ksem"},
		{"ZREMRANGEBYSCORE", "Kmulti", "-inf", "1732770000000"},
		{"ZCARD", "Kmulti"},
		{"ZADD", "Kmulti", "1732770010000", "id_0", "1732770010000", "id_1"},
		{"PEXPIRE", "Kmulti", "10000"},
		{"ZREM", "Kmulti", "id_0", "id_1"},
		{"EXISTS", "Kmulti"},
	},
	{ // transactions and watches
		{"ZADD", "Kw", "1", "a"},
		{"WATCH", "Kw"},
		{"MULTI"},
		{"ZADD", "Kw", "2", "b"},
		{"ZRANGE", "Kw", "0", "-1", "WITHSCORES"},
		{"ZSCORE", "Kw", "b"},
		{"ZADD", "Kw", "INCR", "1", "a"},
		{"ZCARD", "Kw"},
		{"ZADD", "Kw", "nan", "x"},
		{"SET", "Kl", "me", "NX"},
		{"ZADD", "Kl", "1", "x"},
		{"ZREM", "Kw", "a", "b"},
		{"EXISTS", "Kw"},
		{"EXEC"},
		{"ZADD", "Kw", "1", "a"},
		{"WATCH", "Kw"},
		{"ZADD", "Kw", "1", "a"},
		{"MULTI"},
		{"ZCARD", "Kw"},
		{"EXEC"},
		{"WATCH", "Kw"},
		{"ZADD", "Kw", "2", "a"},
		{"MULTI"},
		{"ZCARD", "Kw"},
		{"EXEC"},
		{"WATCH", "Kw"},
		{"ZREM", "Kw", "a"},
		{"ZADD", "Kw", "2", "a"},
		{"MULTI"},
		{"ZCARD", "Kw"},
		{"EXEC"},
		{"DEL", "Kl", "Kw"},
	},
}

// TestDifferentialZSet: latch's sorted sets answer zsetScenarios as
// Debian's redis-server does, byte for byte, in RESP2 and RESP3, one
// command at a time and pipelined.
func TestDifferentialZSet(t *testing.T) {
	lt := startLatch(t)
	rd := startRedis(t)
	for _, proto := range []string{"2", "3"} {
		for i, sc := range zsetScenarios {
			t.Run(fmt.Sprintf("resp%s/%d", proto, i), func(t *testing.T) {
				prefix := fmt.Sprintf("zdiff:%s:%d:%d:", proto, i, time.Now().UnixNano())
				l, r := dial(t, lt.redis), dial(t, rd)
				if proto == "3" {
					l.do("HELLO", "3")
					r.do("HELLO", "3")
				}
				runDiff(t, l, r, prefix, sc)
			})
		}
	}
	for i, sc := range zsetScenarios {
		t.Run(fmt.Sprintf("pipelined/%d", i), func(t *testing.T) {
			prefix := fmt.Sprintf("zpipe:%d:%d:", i, time.Now().UnixNano())
			runPipelinedDiff(t, lt.redis, rd, prefix, sc)
		})
	}
}

// zgen generates random sorted-set commands over a few keys, members and
// scores, valid or not: every command the front end knows for sorted sets,
// with options in random order and number, bad numbers, and a key that
// holds a lock (a string to Redis).
type zgen struct{ rng *rand.Rand }

var (
	zgenKeys    = []string{"Ka", "Kb", "Ks"}
	zgenMembers = []string{"m1", "m2", "m3", "m4", "", "a b"}
	zgenScores  = []string{"0", "1", "-1", "2.5", "1e3", "-inf", "+inf", "inf", "0.1", "3", "(1", "(2.5", "", "x", "nan", "1e400", "-0", "0x10"}
	zgenInts    = []string{"0", "1", "-1", "2", "-2", "5", "-100", "100", "x", "1.5"}
)

func (g *zgen) pick(xs []string) string { return xs[g.rng.IntN(len(xs))] }

// score returns a score; ZADD's are mostly valid.
func (g *zgen) score(valid bool) string {
	if valid && g.rng.IntN(10) > 0 {
		return []string{"0", "1", "-1", "2.5", "1e3", "-inf", "+inf", "0.1", "3", "-0", "7"}[g.rng.IntN(11)]
	}
	return g.pick(zgenScores)
}

func (g *zgen) next() []string {
	key := g.pick(zgenKeys)
	switch g.rng.IntN(16) {
	case 0, 1, 2, 3:
		cmd := []string{"ZADD", key}
		for _, o := range []string{"NX", "XX", "GT", "LT", "CH", "INCR"} {
			if g.rng.IntN(6) == 0 {
				cmd = append(cmd, o)
			}
		}
		for range 1 + g.rng.IntN(3) {
			cmd = append(cmd, g.score(true), g.pick(zgenMembers))
		}
		if g.rng.IntN(20) == 0 {
			cmd = cmd[:len(cmd)-1]
		}
		return cmd
	case 4, 5:
		cmd := []string{"ZREM", key}
		for range 1 + g.rng.IntN(3) {
			cmd = append(cmd, g.pick(zgenMembers))
		}
		return cmd
	case 6:
		return []string{"ZREMRANGEBYSCORE", key, g.pick(zgenScores), g.pick(zgenScores)}
	case 7:
		return []string{"ZREMRANGEBYRANK", key, g.pick(zgenInts), g.pick(zgenInts)}
	case 8:
		return []string{[]string{"ZCARD", "TYPE", "EXISTS", "TTL", "PERSIST"}[g.rng.IntN(5)], key}
	case 9:
		return []string{[]string{"ZSCORE", "ZRANK", "ZREVRANK"}[g.rng.IntN(3)], key, g.pick(zgenMembers)}
	case 10:
		return []string{"ZMSCORE", key, g.pick(zgenMembers), g.pick(zgenMembers)}
	case 11:
		return []string{"ZCOUNT", key, g.pick(zgenScores), g.pick(zgenScores)}
	case 12, 13:
		name := []string{"ZRANGE", "ZRANGEBYSCORE", "ZREVRANGEBYSCORE"}[g.rng.IntN(3)]
		cmd := []string{name, key}
		if name == "ZRANGE" && g.rng.IntN(2) == 0 {
			cmd = append(cmd, g.pick(zgenInts), g.pick(zgenInts))
		} else {
			cmd = append(cmd, g.pick(zgenScores), g.pick(zgenScores))
		}
		for range g.rng.IntN(4) {
			switch g.rng.IntN(5) {
			case 0:
				cmd = append(cmd, "WITHSCORES")
			case 1:
				cmd = append(cmd, "LIMIT", g.pick(zgenInts), g.pick(zgenInts))
			case 2:
				cmd = append(cmd, "REV")
			case 3:
				cmd = append(cmd, "BYSCORE")
			case 4:
				cmd = append(cmd, []string{"LIMIT", "withscores", "byscore", "rev"}[g.rng.IntN(4)])
			}
		}
		return cmd
	case 14:
		switch g.rng.IntN(3) {
		case 0:
			return []string{"DEL", key}
		case 1:
			return []string{"EXPIRE", key, "100"}
		}
		return []string{"PEXPIRE", key, g.pick([]string{"0", "-5", "100000", "x"})}
	default:
		if key == "Ks" {
			return []string{"SET", key, "v", "NX"}
		}
		return []string{"GET", key}
	}
}

// zgenSeeds is how many generated sequences TestDifferentialZSetGenerated
// runs.
var zgenSeeds = 16

// TestDifferentialZSetGenerated: random sequences of sorted-set commands,
// errors and wrong types included, get Redis's replies byte for byte, in
// RESP2 and RESP3.
func TestDifferentialZSetGenerated(t *testing.T) {
	lt := startLatch(t)
	rd := startRedis(t)
	for seed := range uint64(zgenSeeds) {
		proto := []string{"2", "3"}[seed%2]
		t.Run(fmt.Sprintf("seed%d/resp%s", seed, proto), func(t *testing.T) {
			g := &zgen{rng: rand.New(rand.NewPCG(seed, 0x5eed))}
			prefix := fmt.Sprintf("zgen:%d:%d:", seed, time.Now().UnixNano())
			l, r := dial(t, lt.redis), dial(t, rd)
			if proto == "3" {
				l.do("HELLO", "3")
				r.do("HELLO", "3")
			}
			var cmds [][]string
			for len(cmds) < 400 {
				switch g.rng.IntN(20) {
				case 0: // a transaction, watched or not
					if g.rng.IntN(2) == 0 {
						cmds = append(cmds, []string{"WATCH", g.pick(zgenKeys)})
						if g.rng.IntN(2) == 0 {
							cmds = append(cmds, g.next()) // may change the watched key
						}
					}
					cmds = append(cmds, []string{"MULTI"})
					for range 1 + g.rng.IntN(4) {
						cmds = append(cmds, g.next())
					}
					cmds = append(cmds, []string{"EXEC"})
				default:
					cmds = append(cmds, g.next())
				}
			}
			runDiff(t, l, r, prefix, cmds)
			if t.Failed() {
				var b strings.Builder
				for _, c := range cmds {
					fmt.Fprintf(&b, "%q\n", c)
				}
				t.Logf("the sequence:\n%s", b.String())
			}
		})
	}
}

// TestZSetLimits: a ZADD past the members of one set, or of all sets,
// fails with latch's error and changes nothing; a ZADD that only updates
// goes on.
func TestZSetLimits(t *testing.T) {
	cfg := config.DefaultConfig()
	cfg.Redis.Addr = "127.0.0.1:0"
	cfg.Memcache.Addr, cfg.DLock.Addr, cfg.ZooKeeper.Addr, cfg.Admin.Addr = "", "", "", ""
	cfg.Redis.ZSetMaxMembers, cfg.Redis.ZSetMaxTotal = 3, 5
	s, err := server.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.Shutdown(ctx)
	})
	c := dial(t, s.RedisAddr().String())
	steps := []struct{ cmd, want string }{
		{"ZADD a 1 x 2 y 3 z", ":3\r\n"},
		{"ZADD a 4 w", `-ERR latch: sorted set "a" would hold 4 members, at most 3 (redis-zset-max-members)` + "\r\n"},
		{"ZADD a CH 5 x 6 y", ":2\r\n"},
		{"ZADD b 1 p 2 q 3 r", `-ERR latch: sorted sets would hold 6 members in all, at most 5 (redis-zset-max-total)` + "\r\n"},
		{"ZADD b 1 p 2 q", ":2\r\n"},
		{"ZCARD b", ":2\r\n"},
		{"ZREM a x", ":1\r\n"},
		{"ZADD b 3 r", ":1\r\n"},
	}
	for _, st := range steps {
		if got := c.do(strings.Fields(st.cmd)...); got != st.want {
			t.Errorf("%s: %q, want %q", st.cmd, got, st.want)
		}
	}
}

// TestZSetDurable: on a durable node (Raft's log and snapshots on disk),
// sorted sets written one command at a time, in transactions and
// pipelined are what a restarted node reads back, from its snapshot and
// the log after it, expiry included.
func TestZSetDurable(t *testing.T) {
	dir := t.TempDir()
	start := func() (*server.Server, *rconn) {
		cfg := config.DefaultConfig()
		cfg.Redis.Addr = "127.0.0.1:0"
		cfg.Memcache.Addr, cfg.DLock.Addr, cfg.ZooKeeper.Addr, cfg.Admin.Addr = "", "", "", ""
		cfg.Cluster.DataDir = dir
		cfg.Cluster.SnapshotEntries, cfg.Cluster.SnapshotTrailingEntries, cfg.Cluster.SnapshotInterval = 16, 4, 100*time.Millisecond
		s, err := server.New(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		return s, dial(t, s.RedisAddr().String())
	}
	stop := func(s *server.Server) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
	}
	s, c := start()
	for i := range 40 {
		if got := c.do("ZADD", "sem", fmt.Sprint(i), fmt.Sprint("m", i)); got != ":1\r\n" {
			t.Fatalf("ZADD %d: %q", i, got)
		}
	}
	time.Sleep(300 * time.Millisecond) // a snapshot is taken meanwhile
	c.do("ZREMRANGEBYSCORE", "sem", "-inf", "(37")
	c.do("MULTI")
	c.do("ZADD", "sem", "INCR", "0.5", "m39")
	c.do("PEXPIRE", "sem", "600000")
	if got := c.do("EXEC"); got != "*2\r\n$4\r\n39.5\r\n:1\r\n" {
		t.Fatalf("EXEC: %q", got)
	}
	if _, err := c.nc.Write(append(encode("ZADD", "other", "1", "a"), encode("ZREM", "other", "a", "b")...)); err != nil {
		t.Fatal(err)
	}
	if got := c.read() + c.read(); got != ":1\r\n:1\r\n" {
		t.Fatalf("pipelined: %q", got)
	}
	want := c.do("ZRANGE", "sem", "0", "-1", "WITHSCORES")
	if want != "*6\r\n$3\r\nm37\r\n$2\r\n37\r\n$3\r\nm38\r\n$2\r\n38\r\n$3\r\nm39\r\n$4\r\n39.5\r\n" {
		t.Fatalf("ZRANGE: %q", want)
	}
	stop(s)
	if snaps, _ := filepath.Glob(filepath.Join(dir, "snap", "*.snap")); len(snaps) == 0 {
		t.Fatalf("no snapshot in %s: the restart would read only the log", dir)
	}

	s, c = start()
	defer stop(s)
	if got := c.do("ZRANGE", "sem", "0", "-1", "WITHSCORES"); got != want {
		t.Fatalf("after a restart: %q, want %q", got, want)
	}
	if got := c.do("TTL", "sem"); got != ":600\r\n" && got != ":599\r\n" {
		t.Fatalf("TTL after a restart: %q", got)
	}
	if got := c.do("EXISTS", "other"); got != ":0\r\n" {
		t.Fatalf("EXISTS other: %q", got)
	}
}
