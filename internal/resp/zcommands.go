package resp

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/latchd/latch/internal/fsm"
	"github.com/latchd/latch/internal/zset"
)

// Sorted-set commands: Redis's sorted sets, kept in latch's replicated
// state beside the locks (fsm's sorted-set kinds of OpOwned). Each parses
// its arguments as Redis 7.0 does, with its errors in the same order
// (options, then numbers, then the key's type), and is one OpOwned command:
// a write applied as a lock command is, a read (OwnedZGet) read at once, or
// inside MULTI read in the transaction. The replies are Redis's, in RESP2
// and RESP3 (scores as doubles, WITHSCORES as pairs).

// zcommandTable lists the sorted-set commands; New indexes them with the
// others.
var zcommandTable = []command{
	{name: "zadd", arity: -4, plan: planZAdd, write: true},
	{name: "zrem", arity: -3, plan: planZRem, write: true},
	{name: "zremrangebyscore", arity: 4, plan: planZRemRangeByScore, write: true},
	{name: "zremrangebyrank", arity: 4, plan: planZRemRangeByRank, write: true},
	{name: "zcard", arity: 2, plan: planZRead},
	{name: "zscore", arity: 3, plan: planZRead},
	{name: "zmscore", arity: -3, plan: planZRead},
	{name: "zrank", arity: 3, plan: planZRead},
	{name: "zrevrank", arity: 3, plan: planZRead},
	{name: "zcount", arity: 4, plan: planZRead},
	{name: "zrange", arity: -4, plan: planZRange},
	{name: "zrangebyscore", arity: -4, plan: planZRange},
	{name: "zrevrangebyscore", arity: -4, plan: planZRange},
	{name: "persist", arity: 2, plan: planPersist, write: true},
}

// zquery is what a read of a sorted set answers: the plan of a ZCARD,
// ZSCORE, ZMSCORE, Z[REV]RANK, ZCOUNT or ZRANGE, answered from the set
// read (rZRead).
type zquery struct {
	cmd        string // lower case
	members    []string
	rng        zset.Range
	byScore    bool
	rev        bool
	withScores bool
	start      int64 // ranks; offset and count of LIMIT (count -1: all)
	stop       int64
	offset     int64
	count      int64
}

// zsub adds a sorted-set command on key k to the plan.
func (c *conn) zsub(kind fsm.OwnedKind, k string, args fsm.ZSetArgs) *fsm.Command {
	cmd := c.sub(kind, 0, nil, 0, c.one(k)...)
	cmd.ZSet = args
	return cmd
}

// member checks a member's size: as an owner value, at most MaxValue.
func (c *conn) member(m []byte) bool {
	if len(m) > c.srv.cfg.MaxValue {
		c.fail(fmt.Sprintf("ERR latch: sorted-set member of %d bytes, at most %d", len(m), c.srv.cfg.MaxValue))
		return false
	}
	return true
}

// zaddOptions are ZADD's option names and flags.
var zaddOptions = []struct {
	name string
	flag zset.AddFlags
}{{"NX", zset.NX}, {"XX", zset.XX}, {"GT", zset.GT}, {"LT", zset.LT}, {"CH", zset.CH}, {"INCR", zset.INCR}}

func planZAdd(c *conn, args [][]byte) {
	var flags zset.AddFlags
	i := 2
options:
	for ; i < len(args); i++ {
		for _, o := range zaddOptions {
			if bytes.EqualFold(args[i], []byte(o.name)) {
				flags |= o.flag
				continue options
			}
		}
		break
	}
	n := len(args) - i
	if n == 0 || n%2 != 0 {
		c.fail("ERR syntax error")
		return
	}
	if err := flags.Check(n / 2); err != nil {
		c.fail(err.Error())
		return
	}
	pairs := make([]zset.Pair, 0, n/2)
	for ; i < len(args); i += 2 {
		f, err := zset.ParseScore(string(args[i]))
		if err != nil {
			c.fail(err.Error())
			return
		}
		if !c.member(args[i+1]) {
			return
		}
		pairs = append(pairs, zset.Pair{Score: f, Member: string(args[i+1])})
	}
	k, ok := c.key(args[1])
	if !ok {
		return
	}
	first := len(c.subs)
	c.zsub(fsm.OwnedZAdd, k, fsm.ZSetArgs{Flags: flags, Pairs: pairs})
	if flags&zset.INCR != 0 {
		c.add(rZIncr, first)
		return
	}
	c.add(rCount, first)
}

func planZRem(c *conn, args [][]byte) {
	k, ok := c.key(args[1])
	if !ok {
		return
	}
	ms := make([]string, len(args)-2)
	for i, a := range args[2:] {
		ms[i] = string(a)
	}
	first := len(c.subs)
	c.zsub(fsm.OwnedZRem, k, fsm.ZSetArgs{Members: ms})
	c.add(rCount, first)
}

func planZRemRangeByScore(c *conn, args [][]byte) {
	r, err := zset.ParseRange(string(args[2]), string(args[3]))
	if err != nil {
		c.fail(err.Error())
		return
	}
	k, ok := c.key(args[1])
	if !ok {
		return
	}
	first := len(c.subs)
	c.zsub(fsm.OwnedZRemRangeByScore, k, fsm.ZSetArgs{Range: r})
	c.add(rCount, first)
}

func planZRemRangeByRank(c *conn, args [][]byte) {
	start, ok1 := parseInt(args[2])
	stop, ok2 := parseInt(args[3])
	if !ok1 || !ok2 {
		c.fail("ERR value is not an integer or out of range")
		return
	}
	k, ok := c.key(args[1])
	if !ok {
		return
	}
	first := len(c.subs)
	c.zsub(fsm.OwnedZRemRangeByRank, k, fsm.ZSetArgs{Start: start, Stop: stop})
	c.add(rCount, first)
}

func planPersist(c *conn, args [][]byte) {
	k, ok := c.key(args[1])
	if !ok {
		return
	}
	first := len(c.subs)
	c.sub(fsm.OwnedRenew, fsm.OwnedPersist, nil, 0, c.one(k)...)
	c.add(rCount, first)
}

// planZRead plans ZCARD, ZSCORE, ZMSCORE, ZRANK, ZREVRANK and ZCOUNT.
func planZRead(c *conn, args [][]byte) {
	q := &zquery{cmd: strings.ToLower(string(args[0]))}
	switch q.cmd {
	case "zcount":
		r, err := zset.ParseRange(string(args[2]), string(args[3]))
		if err != nil {
			c.fail(err.Error())
			return
		}
		q.rng = r
	case "zscore", "zmscore", "zrank", "zrevrank":
		for _, a := range args[2:] {
			q.members = append(q.members, string(a))
		}
	}
	c.zread(args[1], q)
}

// zread plans the read q of key k.
func (c *conn) zread(key []byte, q *zquery) {
	k, ok := c.key(key)
	if !ok {
		return
	}
	first := len(c.subs)
	c.zsub(fsm.OwnedZGet, k, fsm.ZSetArgs{})
	c.add(rZRead, first).zq = q
}

// planZRange plans ZRANGE, ZRANGEBYSCORE and ZREVRANGEBYSCORE, whose
// options Redis reads in any order, once each, then checks together.
func planZRange(c *conn, args [][]byte) {
	q := &zquery{cmd: strings.ToLower(string(args[0])), count: -1}
	const (
		auto = iota
		rank
		score
		lex
	)
	kind, dirSet := auto, false
	switch q.cmd {
	case "zrangebyscore":
		kind, dirSet = score, true
	case "zrevrangebyscore":
		kind, dirSet, q.rev = score, true, true
	}
	limit := false
	for i := 4; i < len(args); i++ {
		left := len(args) - i - 1
		switch a := args[i]; {
		case bytes.EqualFold(a, []byte("WITHSCORES")):
			q.withScores = true
		case bytes.EqualFold(a, []byte("LIMIT")) && left >= 2:
			off, ok1 := parseInt(args[i+1])
			if !ok1 {
				c.fail("ERR value is not an integer or out of range")
				return
			}
			n, ok2 := parseInt(args[i+2])
			if !ok2 {
				c.fail("ERR value is not an integer or out of range")
				return
			}
			q.offset, q.count, limit = off, n, n != -1
			i += 2
		case !dirSet && bytes.EqualFold(a, []byte("REV")):
			q.rev, dirSet = true, true
		case kind == auto && bytes.EqualFold(a, []byte("BYLEX")):
			kind = lex
		case kind == auto && bytes.EqualFold(a, []byte("BYSCORE")):
			kind = score
		default:
			c.fail("ERR syntax error")
			return
		}
	}
	if kind == auto {
		kind = rank
	}
	switch {
	case limit && kind == rank:
		c.fail("ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX")
		return
	case q.withScores && kind == lex:
		c.fail("ERR syntax error, WITHSCORES not supported in combination with BYLEX")
		return
	case kind == lex:
		c.fail("ERR latch: BYLEX is not supported")
		return
	}
	lo, hi := args[2], args[3]
	if q.rev && kind == score {
		lo, hi = hi, lo // given as max, min
	}
	if kind == rank {
		start, ok1 := parseInt(lo)
		stop, ok2 := parseInt(hi)
		if !ok1 || !ok2 {
			c.fail("ERR value is not an integer or out of range")
			return
		}
		q.start, q.stop = start, stop
	} else {
		r, err := zset.ParseRange(string(lo), string(hi))
		if err != nil {
			c.fail(err.Error())
			return
		}
		q.rng, q.byScore = r, true
	}
	c.zread(args[1], q)
}

// answerZRead writes the reply of the read q from the set read, nil when
// the key holds none.
func (c *conn) answerZRead(q *zquery, set *zset.Set) {
	w := c.w
	switch q.cmd {
	case "zcard":
		w.Int(int64(set.Card()))
	case "zscore":
		if f, ok := set.Score(q.members[0]); ok {
			w.Double(f)
		} else {
			w.Null()
		}
	case "zmscore":
		w.Array(len(q.members))
		for _, m := range q.members {
			if f, ok := set.Score(m); ok {
				w.Double(f)
			} else {
				w.Null()
			}
		}
	case "zrank", "zrevrank":
		if r, ok := set.Rank(q.members[0], q.cmd == "zrevrank"); ok {
			w.Int(int64(r))
		} else {
			w.Null()
		}
	case "zcount":
		w.Int(int64(set.Count(q.rng)))
	default: // the ranges
		var ps []zset.Pair
		if q.byScore {
			ps = set.RangeByScore(q.rng, q.rev, q.offset, q.count)
		} else {
			ps = set.RangeByRank(q.start, q.stop, q.rev)
		}
		c.writePairs(ps, q.withScores)
	}
}

// writePairs writes members, with their scores: in RESP3 an array of
// [member, score] pairs, in RESP2 one flat array.
func (c *conn) writePairs(ps []zset.Pair, withScores bool) {
	w := c.w
	switch {
	case !withScores:
		w.Array(len(ps))
		for _, p := range ps {
			w.BulkString(p.Member)
		}
	case w.Proto == 3:
		w.Array(len(ps))
		for _, p := range ps {
			w.Array(2)
			w.BulkString(p.Member)
			w.Double(p.Score)
		}
	default:
		w.Array(2 * len(ps))
		for _, p := range ps {
			w.BulkString(p.Member)
			w.Double(p.Score)
		}
	}
}

// zsetErrors are the sorted-set errors whose text is Redis's reply.
var zsetErrors = []error{zset.ErrNaN, zset.ErrXXAndNX, zset.ErrGTLTNX, zset.ErrIncrPairs, zset.ErrNotFloat, zset.ErrRangeFloat}

// zsetErrorReply returns the reply to err when it is one of the sorted
// sets' own (WRONGTYPE, Redis's wording of a zset error), and false
// otherwise.
func zsetErrorReply(err error) (string, bool) {
	if errors.Is(err, fsm.ErrWrongType) {
		return wrongType, true
	}
	for _, e := range zsetErrors {
		if errors.Is(err, e) {
			return e.Error(), true
		}
	}
	if le := (*fsm.ZSetLimitError)(nil); errors.As(err, &le) {
		flag := "redis-zset-max-members"
		if le.Total {
			flag = "redis-zset-max-total"
		}
		return fmt.Sprintf("ERR latch: %v (%s)", le, flag), true
	}
	return "", false
}

// Double writes a double: a bulk string of Redis 7.0's "%.17g" in RESP2,
// a RESP3 double (",inf", ",-inf") in RESP3.
func (w *Writer) Double(f float64) {
	w.num = zset.AppendScore(w.num[:0], f)
	if w.Proto == 3 {
		w.w.WriteByte(',')
		w.w.Write(w.num)
		w.w.WriteString("\r\n")
		return
	}
	w.w.WriteByte('$')
	w.w.WriteString(strconv.Itoa(len(w.num)))
	w.w.WriteString("\r\n")
	w.w.Write(w.num)
	w.w.WriteString("\r\n")
}
