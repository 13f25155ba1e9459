package resp

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/latchd/latch/internal/fsm"
)

// Strings with an expiry: SET and its options, SETEX, PSETEX, GETDEL,
// GETEX, the EXPIRE family and EXPIRETIME.
//
// Redis accepts any expire time whose milliseconds, added to its clock
// (relative times) or not (absolute ones), fit a signed 64-bit integer:
// leases of up to about 292 million years. latch's lock table keeps lease
// ends as nanoseconds on its clock (Service.Now, about Unix time), whose
// largest instant is in year 2262: a lease that would end later ends then
// (the table saturates its ends), and PTTL, TTL, EXPIRETIME and
// PEXPIRETIME answer that end. Nothing else differs: the same arguments
// are accepted and refused as by Redis, with its errors.

// expireUnit is an expire argument's unit in milliseconds.
type expireUnit int64

const (
	unitSeconds expireUnit = 1000
	unitMillis  expireUnit = 1
)

// farMillis is the threshold above which an expire time in milliseconds
// may overflow once Redis adds its clock to it: below it the clock need
// not be read (it is about 2^40 ms now).
const farMillis = math.MaxInt64 / 2

// nowMillis is the service's clock in milliseconds, the base of relative
// expire times.
func (c *conn) nowMillis() int64 { return c.srv.svc.Now() / int64(time.Millisecond) }

// setExpire converts the expire argument n of SET, SETEX, PSETEX or GETEX
// (named cmd) as Redis does: positive, and its milliseconds, plus the
// clock for a relative one, must not overflow. It returns the lease to
// send: a duration, or with abs the instant it ends (fsm.OwnedAt), in
// nanoseconds, saturated; or the error of a refusal.
func (c *conn) setExpire(cmd string, n int64, unit expireUnit, abs bool) (time.Duration, string) {
	if n <= 0 || (unit == unitSeconds && n > math.MaxInt64/1000) {
		return 0, fmt.Sprintf("ERR invalid expire time in '%s' command", cmd)
	}
	ms := n * int64(unit)
	if !abs && ms > farMillis && ms > math.MaxInt64-c.nowMillis() {
		return 0, fmt.Sprintf("ERR invalid expire time in '%s' command", cmd)
	}
	return millisToNanos(ms), ""
}

// expireTime converts the argument n of EXPIRE, PEXPIRE, EXPIREAT or
// PEXPIREAT (named cmd) as Redis does: any sign, but its milliseconds,
// plus the clock for a relative one, must not overflow.
func (c *conn) expireTime(cmd string, n int64, unit expireUnit, abs bool) (time.Duration, bool) {
	if unit == unitSeconds && (n > math.MaxInt64/1000 || n < math.MinInt64/1000) {
		c.fail(fmt.Sprintf("ERR invalid expire time in '%s' command", cmd))
		return 0, false
	}
	ms := n * int64(unit)
	if !abs && ms > farMillis && ms > math.MaxInt64-c.nowMillis() {
		c.fail(fmt.Sprintf("ERR invalid expire time in '%s' command", cmd))
		return 0, false
	}
	return millisToNanos(ms), true
}

// millisToNanos converts ms to nanoseconds, saturating.
func millisToNanos(ms int64) time.Duration {
	switch {
	case ms > math.MaxInt64/int64(time.Millisecond):
		return math.MaxInt64
	case ms < math.MinInt64/int64(time.Millisecond):
		return math.MinInt64
	}
	return time.Duration(ms) * time.Millisecond
}

// Expire options, as Redis parses SET's and GETEX's.
const (
	optNX = 1 << iota
	optXX
	optGet
	optKeepTTL
	optPersist
	optEX
	optPX
	optEXAT
	optPXAT

	optExpires = optEX | optPX | optEXAT | optPXAT
)

// expireOptions parses the options of SET (set) or GETEX (!set) in args,
// as Redis 7 does: each option is accepted unless one it excludes came
// before; the expire argument is checked once all are parsed. On a
// refusal it adds the error plan; with late, an error of the expire
// argument is returned in msg instead (GETEX answers it only for a key
// that exists).
func (c *conn) expireOptions(cmd string, args [][]byte, set, late bool) (flags int, lease time.Duration, msg string, ok bool) {
	var arg []byte
	for i := 0; i < len(args); i++ {
		opt := upperOption(args[i])
		next := i+1 < len(args)
		var f int
		switch {
		case opt == "NX" && set && flags&optXX == 0:
			f = optNX
		case opt == "XX" && set && flags&optNX == 0:
			f = optXX
		case opt == "GET" && set:
			f = optGet
		case opt == "KEEPTTL" && set && flags&(optPersist|optExpires) == 0:
			f = optKeepTTL
		case opt == "PERSIST" && !set && flags&(optKeepTTL|optExpires) == 0:
			f = optPersist
		case opt == "EX" && next && flags&(optKeepTTL|optPersist|optPX|optEXAT|optPXAT) == 0:
			f = optEX
		case opt == "PX" && next && flags&(optKeepTTL|optPersist|optEX|optEXAT|optPXAT) == 0:
			f = optPX
		case opt == "EXAT" && next && flags&(optKeepTTL|optPersist|optEX|optPX|optPXAT) == 0:
			f = optEXAT
		case opt == "PXAT" && next && flags&(optKeepTTL|optPersist|optEX|optPX|optEXAT) == 0:
			f = optPXAT
		default:
			c.fail("ERR syntax error")
			return 0, 0, "", false
		}
		flags |= f
		if f&optExpires != 0 {
			i++
			arg = args[i]
		}
	}
	if flags&optExpires == 0 {
		return flags, 0, "", true
	}
	n, ok := parseInt(arg)
	if !ok {
		msg = "ERR value is not an integer or out of range"
	} else {
		unit := unitSeconds
		if flags&(optPX|optPXAT) != 0 {
			unit = unitMillis
		}
		lease, msg = c.setExpire(cmd, n, unit, flags&(optEXAT|optPXAT) != 0)
	}
	switch {
	case msg == "":
		return flags, lease, "", true
	case late:
		return flags, 0, msg, false
	}
	c.fail(msg)
	return 0, 0, "", false
}

// ownedFlags are the fsm flags of an expiry the options name.
func ownedFlags(flags int) fsm.OwnedFlags {
	var f fsm.OwnedFlags
	if flags&(optEXAT|optPXAT) != 0 {
		f |= fsm.OwnedAt
	}
	if flags&optXX != 0 {
		f |= fsm.OwnedXX
	}
	if flags&optKeepTTL != 0 {
		f |= fsm.OwnedKeepTTL
	}
	return f
}

func planSet(c *conn, args [][]byte) {
	k, ok := c.key(args[1])
	if !ok || !c.value(args[2]) {
		return
	}
	flags, lease, _, ok := c.expireOptions("set", args[3:], true, false)
	if !ok {
		return
	}
	c.store(k, args[2], flags, lease)
}

// store plans SET k v with the options flags and the lease.
func (c *conn) store(k string, v []byte, flags int, lease time.Duration) {
	first := len(c.subs)
	if flags&optGet != 0 {
		// The value before, read in the same step (one transaction).
		c.sub(fsm.OwnedGet, 0, nil, 0, c.one(k)...)
	}
	if flags&optNX != 0 {
		c.sub(fsm.OwnedAcquire, ownedFlags(flags)&fsm.OwnedAt, v, lease, c.one(k)...)
	} else {
		c.sub(fsm.OwnedSet, ownedFlags(flags), v, lease, c.one(k)...)
	}
	if flags&optGet != 0 {
		c.add(rGet, first).typed = true
		return
	}
	c.add(rOKOrNull, first)
}

// planSetEx plans SETEX and PSETEX: SET with EX or PX.
func planSetEx(c *conn, args [][]byte) {
	k, ok := c.key(args[1])
	if !ok || !c.value(args[3]) {
		return
	}
	n, ok := parseInt(args[2])
	if !ok {
		c.fail("ERR value is not an integer or out of range")
		return
	}
	cmd, unit := "setex", unitSeconds
	if len(args[0]) == 6 {
		cmd, unit = "psetex", unitMillis
	}
	lease, msg := c.setExpire(cmd, n, unit, false)
	if msg != "" {
		c.fail(msg)
		return
	}
	c.store(k, args[3], 0, lease)
}

// planGetDel plans GETDEL: the value, and the key released, in one step.
func planGetDel(c *conn, args [][]byte) {
	k, ok := c.key(args[1])
	if !ok {
		return
	}
	first := len(c.subs)
	c.sub(fsm.OwnedGet, 0, nil, 0, c.one(k)...)
	c.sub(fsm.OwnedRelease, 0, nil, 0, c.one(k)...)
	c.add(rGet, first).typed = true
}

// planGetEx plans GETEX: the value, and the lease set or removed, in one
// step.
func planGetEx(c *conn, args [][]byte) {
	k, ok := c.key(args[1])
	if !ok {
		return
	}
	flags, lease, msg, ok := c.expireOptions("getex", args[2:], false, true)
	first := len(c.subs)
	if !ok && msg == "" {
		return
	}
	c.sub(fsm.OwnedGet, 0, nil, 0, c.one(k)...)
	if !ok {
		// Redis checks the expire time once it found the key.
		p := c.add(rErrIfFound, first)
		p.typed, p.msg = true, msg
		return
	}
	switch {
	case flags&optPersist != 0:
		c.sub(fsm.OwnedRenew, fsm.OwnedPersist, nil, 0, c.one(k)...)
	case flags&optExpires != 0:
		c.sub(fsm.OwnedRenew, ownedFlags(flags), nil, lease, c.one(k)...)
	}
	c.add(rGet, first).typed = true
}

// planExpire plans EXPIRE, PEXPIRE, EXPIREAT and PEXPIREAT.
func planExpire(c *conn, args [][]byte) {
	k, ok := c.key(args[1])
	if !ok {
		return
	}
	n, ok := parseInt(args[2])
	if !ok {
		c.fail("ERR value is not an integer or out of range")
		return
	}
	if len(args) > 3 {
		c.fail(fmt.Sprintf("ERR Unsupported option %s", args[3]))
		return
	}
	name := strings.ToLower(string(args[0]))
	unit := unitSeconds
	if name[0] == 'p' {
		unit = unitMillis
	}
	abs := strings.HasSuffix(name, "at")
	lease, ok := c.expireTime(name, n, unit, abs)
	if !ok {
		return
	}
	var flags fsm.OwnedFlags
	if abs {
		flags = fsm.OwnedAt
	}
	first := len(c.subs)
	c.sub(fsm.OwnedRenew, flags, nil, lease, c.one(k)...)
	c.add(rCount, first)
}

// planExpireTime plans EXPIRETIME and PEXPIRETIME: when the lease ends,
// in Unix seconds or milliseconds on the service's clock.
func planExpireTime(c *conn, args [][]byte) {
	first, ok := c.readKey(args[1])
	if !ok {
		return
	}
	if args[0][0] == 'p' || args[0][0] == 'P' {
		c.add(rPExpireAt, first)
	} else {
		c.add(rExpireAt, first)
	}
}

// expireTimeOf is Redis's PEXPIRETIME of a read key: the end of its lease
// in milliseconds, -1 without a lease, -2 when it is free.
func expireTimeOf(r *fsm.Result) int64 {
	switch {
	case r.Found == 0:
		return -2
	case r.Expires == 0:
		return -1
	}
	return r.Expires / int64(time.Millisecond)
}
