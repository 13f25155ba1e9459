package memcache

import (
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/latchd/latch/internal/cache"
)

// counters are the server's own statistics.
type counters struct {
	started     time.Time
	sweeps      atomic.Uint64
	lastSweep   atomic.Int64 // items removed by the last sweep
	lastSweepNs atomic.Int64
	sweepNs     atomic.Int64
	textOps     [len(textCommands)]atomic.Uint64
	binOps      [256]atomic.Uint64
}

// textCommands are the text commands counted in "stats ops", in yrmcds's
// order.
var textCommands = [...]string{
	"set", "add", "replace", "append", "prepend", "cas", "get", "gets",
	"delete", "incr", "decr", "touch", "lock", "unlock", "unlock_all",
	"slabs", "stats", "flush_all", "version", "verbosity", "quit", "keys",
}

// textCommandIndex returns the index of the command name in textCommands,
// or -1. It runs for every text request: a switch costs a few comparisons,
// where a map lookup cost a hash and a probe (TestTextCommandIndex keeps it
// in step with textCommands).
func textCommandIndex(name []byte) int {
	switch string(name) {
	case "set":
		return 0
	case "add":
		return 1
	case "replace":
		return 2
	case "append":
		return 3
	case "prepend":
		return 4
	case "cas":
		return 5
	case "get":
		return 6
	case "gets":
		return 7
	case "delete":
		return 8
	case "incr":
		return 9
	case "decr":
		return 10
	case "touch":
		return 11
	case "lock":
		return 12
	case "unlock":
		return 13
	case "unlock_all":
		return 14
	case "slabs":
		return 15
	case "stats":
		return 16
	case "flush_all":
		return 17
	case "version":
		return 18
	case "verbosity":
		return 19
	case "quit":
		return 20
	case "keys":
		return 21
	}
	return -1
}

// binaryNames names the opcodes counted in "stats ops", in yrmcds's order.
var binaryNames = []struct {
	op   byte
	name string
}{
	{opGet, "Get"}, {opSet, "Set"}, {opAdd, "Add"}, {opReplace, "Replace"},
	{opDelete, "Delete"}, {opIncrement, "Increment"}, {opDecrement, "Decrement"},
	{opQuit, "Quit"}, {opFlush, "Flush"}, {opGetQ, "GetQ"}, {opNoop, "Noop"},
	{opVersion, "Version"}, {opGetK, "GetK"}, {opGetKQ, "GetKQ"}, {opAppend, "Append"},
	{opPrepend, "Prepend"}, {opStat, "Stat"}, {opSetQ, "SetQ"}, {opAddQ, "AddQ"},
	{opReplaceQ, "ReplaceQ"}, {opDeleteQ, "DeleteQ"}, {opIncrementQ, "IncrementQ"},
	{opDecrementQ, "DecrementQ"}, {opQuitQ, "QuitQ"}, {opFlushQ, "FlushQ"},
	{opAppendQ, "AppendQ"}, {opPrependQ, "PrependQ"}, {opTouch, "Touch"}, {opGaT, "GaT"},
	{opGaTQ, "GaTQ"}, {opGaTK, "GaTK"}, {opGaTKQ, "GaTKQ"}, {opLock, "Lock"},
	{opLockQ, "LockQ"}, {opUnlock, "Unlock"}, {opUnlockQ, "UnlockQ"},
	{opUnlockAll, "UnlockAll"}, {opUnlockAllQ, "UnlockAllQ"}, {opLaG, "LaG"},
	{opLaGQ, "LaGQ"}, {opLaGK, "LaGK"}, {opLaGKQ, "LaGKQ"}, {opRaU, "RaU"},
	{opRaUQ, "RaUQ"}, {opKeys, "Keys"},
}

// sizeBounds are the buckets of "stats sizes".
var sizeBounds = []int64{1024, 4096, 16384, 65536, 262144, 1048576, 4194304}

// stats returns the lines of a stats group: "" for the general stats,
// "settings", "items", "sizes" or "ops". An unknown group gives nil and
// false over text; over binary it gives the general stats, as in yrmcds.
func (s *Server) stats(group string, binary bool) ([]Stat, bool) {
	switch group {
	case "":
	case "settings":
		return s.settingsStats(), true
	case "items":
		return s.itemStats(), true
	case "sizes":
		return s.sizeStats(), true
	case "ops":
		return s.opStats(), true
	default:
		if !binary {
			return nil, false
		}
	}
	return s.generalStats(), true
}

func u(v uint64) string { return strconv.FormatUint(v, 10) }

// seconds formats d as memcached's rusage stats do: seconds, a dot and six
// digits of microseconds.
func seconds(d time.Duration) string {
	return fmt.Sprintf("%d.%06d", d/time.Second, d%time.Second/time.Microsecond)
}

func (s *Server) generalStats() []Stat {
	cs := s.svc.ItemStats()
	n := &s.counters
	conns := s.ns.Stats()
	out := []Stat{
		{"pid", strconv.Itoa(os.Getpid())},
		{"time", strconv.FormatInt(time.Now().Unix(), 10)},
		{"version", protocolVersion},
		{"latch_version", versionWord(s.cfg.Version)},
		{"pointer_size", strconv.Itoa(strconv.IntSize)},
	}
	// The process's CPU times, where the system tells them (processCPU).
	if user, system, ok := processCPU(); ok {
		out = append(out, Stat{"rusage_user", seconds(user)}, Stat{"rusage_system", seconds(system)})
	}
	out = append(out, []Stat{
		{"curr_connections", strconv.Itoa(conns.Open)},
		{"total_connections", u(conns.Accepted)},
		{"rejected_connections", u(conns.RefusedMaxConns)},
		{"curr_items", u(cs.CurrItems)},
		{"total_items", u(cs.TotalItems)},
		{"get_hits", u(cs.GetHits)},
		{"get_misses", u(cs.GetMisses)},
		{"cas_hits", u(cs.CasHits)},
		{"cas_misses", u(cs.CasMisses)},
		{"cas_badval", u(cs.CasBadval)},
		{"bytes", u(cs.Bytes)},
		{"limit_maxbytes", u(cs.LimitMaxbytes)},
		{"threads", strconv.Itoa(runtime.GOMAXPROCS(0))},
		{"gc_count", u(n.sweeps.Load())},
		{"slaves", "0"},
		{"last_expirations", strconv.FormatInt(n.lastSweep.Load(), 10)},
		{"last_evictions", "0"},
		{"evictions", u(cs.Evictions)},
		{"last_gc_elapsed", strconv.FormatInt(n.lastSweepNs.Load()/1000, 10)},
		{"total_gc_elapsed", strconv.FormatInt(n.sweepNs.Load()/1000, 10)},
		// memcached's counters that yrmcds lacks, and latch's own.
		{"uptime", strconv.FormatInt(int64(time.Since(n.started).Seconds()), 10)},
		{"cmd_get", u(cs.CmdGet)},
		{"cmd_set", u(cs.CmdSet)},
		{"cmd_flush", u(cs.CmdFlush)},
		{"cmd_touch", u(cs.CmdTouch)},
		{"delete_hits", u(cs.DeleteHits)},
		{"delete_misses", u(cs.DeleteMisses)},
		{"incr_hits", u(cs.IncrHits)},
		{"incr_misses", u(cs.IncrMisses)},
		{"decr_hits", u(cs.DecrHits)},
		{"decr_misses", u(cs.DecrMisses)},
		{"touch_hits", u(cs.TouchHits)},
		{"touch_misses", u(cs.TouchMisses)},
		{"expired_unfetched", u(cs.ExpiredUnfetched)},
		{"evicted_unfetched", u(cs.EvictedUnfetched)},
		{"reclaimed", u(cs.Reclaimed)},
		{"locked_items", u(cs.LockedItems)},
	}...)
	if s.cfg.ExtraStats != nil {
		out = append(out, s.cfg.ExtraStats()...)
	}
	return out
}

func (s *Server) settingsStats() []Stat {
	port, host := "0", "127.0.0.1"
	if a, ok := s.Addr().(*net.TCPAddr); ok {
		port, host = strconv.Itoa(a.Port), a.IP.String()
	}
	cfg := s.items
	return []Stat{
		{"maxbytes", strconv.FormatInt(cfg.MemoryLimit, 10)},
		{"tcpport", port},
		{"replport", "0"},
		{"virtual_ip", host},
		{"evictions", "on"},
		{"cas_enabled", "on"},
		{"locking", "on"},
		{"secure_erase", "off"},
		{"lock_memory", "off"},
		{"tmp_dir", ""},
		{"buckets", "0"},
		{"item_size_max", strconv.Itoa(cfg.MaxItemSize)},
		{"num_threads", strconv.Itoa(runtime.GOMAXPROCS(0))},
		{"gc_interval", strconv.FormatInt(int64(s.cfg.SweepInterval/time.Second), 10)},
	}
}

func (s *Server) itemStats() []Stat {
	cs := s.svc.ItemStats()
	var largest uint64
	counts := s.svc.ItemSizes(sizeBounds)
	for i := len(counts) - 1; i >= 0; i-- {
		if counts[i] > 0 {
			if i < len(sizeBounds) {
				largest = uint64(sizeBounds[i])
			} else {
				largest = uint64(s.items.MaxItemSize + cache.ItemOverhead + 250)
			}
			break
		}
	}
	return []Stat{
		{"items:1:number", u(cs.CurrItems)},
		{"items:1:age", "0"},
		{"items:1:evicted", u(cs.Evictions)},
		{"items:1:conflicts", "0"},
		{"items:1:largest", u(largest)},
	}
}

func (s *Server) sizeStats() []Stat {
	counts := s.svc.ItemSizes(sizeBounds)
	out := make([]Stat, 0, len(counts))
	for i, n := range counts {
		name := "huge"
		if i < len(sizeBounds) {
			name = strconv.FormatInt(sizeBounds[i], 10)
		}
		out = append(out, Stat{name, u(n)})
	}
	return out
}

func (s *Server) opStats() []Stat {
	out := make([]Stat, 0, len(textCommands)+len(binaryNames))
	for i, name := range textCommands {
		out = append(out, Stat{"text:" + name, u(s.counters.textOps[i].Load())})
	}
	for _, b := range binaryNames {
		out = append(out, Stat{"binary:" + b.name, u(s.counters.binOps[b.op].Load())})
	}
	return out
}

// textStats serves stats [<group>].
func (c *conn) textStats() error {
	group := ""
	if len(c.toks) > 1 {
		group = string(c.toks[1])
	}
	if group == "cachedump" {
		return c.textCachedump()
	}
	lines, ok := c.srv.stats(group, false)
	if !ok {
		c.w.WriteString(rError)
		return nil
	}
	for _, l := range lines {
		c.w.WriteString("STAT ")
		c.w.WriteString(l.Name)
		c.w.WriteString(" ")
		c.w.WriteString(l.Value)
		c.w.WriteString("\r\n")
	}
	c.w.WriteString(rEnd)
	return nil
}

// textCachedump serves memcached's stats cachedump <slab> <limit>, which
// libmemcached's memcdump lists keys with: every item is in slab class 1
// (stats items), so slab 1 lists up to limit live items (0: all) as
// "ITEM <key> [<size> b; <expiry> s]", the expiry as a Unix time (0: none);
// another slab lists none.
func (c *conn) textCachedump() error {
	if len(c.toks) != 4 {
		c.textError(rError)
		return nil
	}
	slab, ok1 := parseUint(c.toks[2], 32)
	limit, ok2 := parseUint(c.toks[3], 31)
	if !ok1 || !ok2 {
		c.textError(rError)
		return nil
	}
	if slab == 1 {
		for _, e := range c.srv.svc.ItemEntries(int(limit)) {
			c.w.WriteString("ITEM ")
			c.w.WriteString(e.Key)
			c.num = append(c.num[:0], " ["...)
			c.num = strconv.AppendInt(c.num, e.Size, 10)
			c.num = append(c.num, " b; "...)
			c.num = strconv.AppendInt(c.num, e.Exp/int64(time.Second), 10)
			c.num = append(c.num, " s]\r\n"...)
			c.w.Write(c.num)
		}
	}
	c.w.WriteString(rEnd)
	return nil
}
