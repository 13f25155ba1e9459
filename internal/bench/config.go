package bench

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Targets: the protocol spoken.
const (
	TargetText   = "memcache-text"
	TargetBinary = "memcache-binary"
	TargetDLock  = "dlock"
)

// Workloads.
const (
	WorkloadCycle   = "cycle"
	WorkloadHandoff = "handoff"
	WorkloadGetSet  = "getset"
	WorkloadHold    = "hold"
	WorkloadIdle    = "idle"
)

// Recipes: how a memcached target takes a lock.
const (
	// RecipeAuto asks the server's version: yrmcds and latch get
	// RecipeLock, anything else RecipeAdd.
	RecipeAuto = "auto"
	// RecipeLock uses yrmcds's lock extension (text lock/unlock, binary
	// Lock/Unlock); the item must exist, so it is set first.
	RecipeLock = "lock"
	// RecipeAdd is the plain memcached recipe: add with an exptime takes
	// the lock, delete releases it.
	RecipeAdd = "add"
)

// Config is one benchmark run.
type Config struct {
	Target string // TargetText, TargetBinary or TargetDLock
	// Addr is host:port, or several comma-separated (the nodes of a
	// cluster): connection i dials the (i mod n)th. "" means latch's
	// default port for Target.
	Addr     string
	Workload string
	Recipe   string // memcached targets: RecipeAuto, RecipeLock or RecipeAdd

	Conns    int           // connections, one goroutine each
	Pipeline int           // requests in flight per connection (cycle, getset, hold)
	Duration time.Duration // measured time (cycle, handoff, getset)
	Warmup   time.Duration // unmeasured time before it
	Keys     int           // key space (getset; cycle: split among the connections)

	ValueSize int // getset values, bytes
	GetRatio  int // getset: gets per SetRatio sets
	SetRatio  int

	PollInterval time.Duration // handoff over memcached: pause after a refused lock
	Exptime      int           // add recipe: the exptime of the lock item, seconds
	DLockVersion int           // 2 or 3

	Locks     int           // hold: locks to take
	HoldFor   time.Duration // hold: keep them this long after measuring
	ServerPID int           // hold, idle: read the server's VmRSS from /proc; cycle, getset, handoff: its CPU time
	// ServerPIDs are further server processes (a cluster's other nodes)
	// whose CPU time a timed workload adds to ServerPID's.
	ServerPIDs []int
	Admin      string        // hold, idle: latch's admin address, for its Go heap and RSS
	Timeout    time.Duration // a reply later than this fails the connection
	Seed       uint64        // getset key choice
}

// DefaultConfig returns the defaults of "latch bench".
func DefaultConfig() Config {
	return Config{
		Target:       TargetText,
		Workload:     WorkloadCycle,
		Recipe:       RecipeAuto,
		Conns:        16,
		Pipeline:     1,
		Duration:     5 * time.Second,
		Warmup:       time.Second,
		Keys:         100000,
		ValueSize:    100,
		GetRatio:     9,
		SetRatio:     1,
		PollInterval: time.Millisecond,
		Exptime:      60,
		DLockVersion: 3,
		Locks:        1000000,
		Timeout:      10 * time.Second,
		Seed:         1,
	}
}

// RegisterFlags defines c's flags in fs, with c's values as defaults.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Target, "target", c.Target, "protocol: memcache-text, memcache-binary or dlock")
	fs.StringVar(&c.Addr, "addr", c.Addr, "server `host:port`, or several comma-separated (a cluster's nodes: connections round-robin over them) (default 127.0.0.1:11211, or :11212 for dlock)")
	fs.StringVar(&c.Workload, "workload", c.Workload, "cycle, handoff, getset, hold or idle")
	fs.StringVar(&c.Recipe, "recipe", c.Recipe, "memcached lock recipe: lock (yrmcds lock/unlock), add (add+delete) or auto (by the server's version)")
	fs.IntVar(&c.Conns, "conns", c.Conns, "connections")
	fs.IntVar(&c.Pipeline, "pipeline", c.Pipeline, "requests in flight per connection (cycle, getset, hold)")
	fs.DurationVar(&c.Duration, "duration", c.Duration, "measured time")
	fs.DurationVar(&c.Warmup, "warmup", c.Warmup, "unmeasured time before the measured time")
	fs.IntVar(&c.Keys, "keys", c.Keys, "key space (getset; cycle splits it among the connections)")
	fs.IntVar(&c.ValueSize, "value-size", c.ValueSize, "getset value size, bytes")
	fs.Func("ratio", "getset `gets:sets` ratio (default 9:1)", func(s string) error {
		g, st, ok := strings.Cut(s, ":")
		gi, err1 := strconv.Atoi(g)
		si, err2 := strconv.Atoi(st)
		if !ok || err1 != nil || err2 != nil || gi < 0 || si < 0 || gi+si == 0 {
			return errors.New("want gets:sets, like 9:1")
		}
		c.GetRatio, c.SetRatio = gi, si
		return nil
	})
	fs.DurationVar(&c.PollInterval, "poll-interval", c.PollInterval, "handoff over memcached: pause before retrying a refused lock")
	fs.IntVar(&c.Exptime, "exptime", c.Exptime, "add recipe: exptime of the lock item, seconds")
	fs.IntVar(&c.DLockVersion, "dlock-version", c.DLockVersion, "dlock protocol version: 2 or 3")
	fs.IntVar(&c.Locks, "locks", c.Locks, "hold: locks to take and hold")
	fs.DurationVar(&c.HoldFor, "hold-for", c.HoldFor, "hold: keep the locks this long after measuring, to inspect the server")
	fs.Func("server-pid", "the server's `pid`, to read from /proc its VmRSS (hold, idle) or its CPU time over the measured time (cycle, getset, handoff; Linux); several comma-separated (a cluster's nodes) add up their CPU time", func(s string) error {
		pids, err := parsePIDs(s)
		if err != nil {
			return err
		}
		c.ServerPID, c.ServerPIDs = pids[0], pids[1:]
		return nil
	})
	fs.StringVar(&c.Admin, "admin", c.Admin, "hold, idle: latch's admin `host:port`, to read its Go heap (after a GC) and RSS")
	fs.DurationVar(&c.Timeout, "timeout", c.Timeout, "fail a connection whose reply takes longer")
	fs.Uint64Var(&c.Seed, "seed", c.Seed, "random seed (getset)")
}

// Validate reports every invalid setting of c, joined, and fills in the
// default address.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("bench: "+format, args...)) }
	switch c.Target {
	case TargetText, TargetBinary:
		switch c.Recipe {
		case RecipeAuto, RecipeLock, RecipeAdd:
		default:
			bad("invalid recipe %q: want auto, lock or add", c.Recipe)
		}
		if c.Addr == "" {
			c.Addr = "127.0.0.1:11211"
		}
	case TargetDLock:
		if c.Addr == "" {
			c.Addr = "127.0.0.1:11212"
		}
		if c.DLockVersion != 2 && c.DLockVersion != 3 {
			bad("invalid dlock-version %d: want 2 or 3", c.DLockVersion)
		}
	default:
		bad("invalid target %q: want memcache-text, memcache-binary or dlock", c.Target)
	}
	switch c.Workload {
	case WorkloadCycle, WorkloadHandoff, WorkloadGetSet, WorkloadHold, WorkloadIdle:
	default:
		bad("invalid workload %q: want cycle, handoff, getset, hold or idle", c.Workload)
	}
	for _, a := range c.Addrs() {
		if a == "" {
			bad("invalid addr %q: an empty address in the list", c.Addr)
			break
		}
	}
	if c.Workload == WorkloadGetSet && c.Target == TargetDLock {
		bad("workload getset needs a memcached target")
	}
	if c.Conns < 1 {
		bad("invalid conns %d: want at least 1", c.Conns)
	}
	if c.Pipeline < 1 || c.Pipeline > 4096 {
		bad("invalid pipeline %d: want 1 to 4096", c.Pipeline)
	}
	if c.Duration <= 0 || c.Warmup < 0 {
		bad("invalid duration %v or warmup %v", c.Duration, c.Warmup)
	}
	if c.Keys < 1 {
		bad("invalid keys %d: want at least 1", c.Keys)
	}
	if c.ValueSize < 1 || c.ValueSize > 1<<20 {
		bad("invalid value-size %d: want 1 to 1048576", c.ValueSize)
	}
	if c.GetRatio < 0 || c.SetRatio < 0 || c.GetRatio+c.SetRatio == 0 {
		bad("invalid ratio %d:%d", c.GetRatio, c.SetRatio)
	}
	if c.PollInterval < 0 {
		bad("invalid poll-interval %v", c.PollInterval)
	}
	if c.Exptime < 0 {
		bad("invalid exptime %d", c.Exptime)
	}
	if c.Locks < 0 || c.HoldFor < 0 {
		bad("invalid locks %d or hold-for %v", c.Locks, c.HoldFor)
	}
	if c.Timeout <= 0 {
		bad("invalid timeout %v", c.Timeout)
	}
	return errors.Join(errs...)
}

// Addrs returns the addresses of Addr, split at its commas.
func (c *Config) Addrs() []string {
	addrs := strings.Split(c.Addr, ",")
	for i, a := range addrs {
		addrs[i] = strings.TrimSpace(a)
	}
	return addrs
}

// parsePIDs parses "pid[,pid...]": positive process ids.
func parsePIDs(s string) ([]int, error) {
	var pids []int
	for f := range strings.SplitSeq(s, ",") {
		pid, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || pid <= 0 {
			return nil, fmt.Errorf("want pid[,pid...], not %q", s)
		}
		pids = append(pids, pid)
	}
	return pids, nil
}
