package fsm

import (
	"fmt"
	"math"
	"time"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/cache"
	"github.com/latchd/latch/internal/engine"
	"github.com/latchd/latch/internal/znode"
	"github.com/latchd/latch/internal/zset"
)

// Op says which state change a Command makes.
type Op uint8

// The lock table's commands. The fields each reads are listed; every
// command also has At, Origin and Seq.
const (
	// OpSeed raises the fencing-token counter to Token (never lowers it).
	// The proposer of a new state seeds it once from its clock, so that
	// tokens keep growing across in-memory restarts.
	OpSeed Op = iota + 1
	// OpOpenSession opens a session with TTL and LockDelay; the result's
	// Session names it. A non-empty Key names the node that owns the
	// session (a connection-bound session of a cluster node): OpNodeAlive
	// keeps it alive, OpEndOwner ends it.
	OpOpenSession
	// OpKeepAlive restarts Session's TTL (of generation Gen).
	OpKeepAlive
	// OpEndSession ends Session as if it died: its waiters are aborted,
	// its holds without a lease released with its lock-delay, and its
	// memcached item locks dropped. Token is the generation of the
	// connection that ends it (OpResume): an older one than the
	// session's is ignored (ErrSuperseded).
	OpEndSession
	// OpAcquire asks for Req on behalf of Session (of generation Gen).
	// The result is Granted (Token, Expires), queued (Waiter), or Err.
	OpAcquire
	// OpCancel withdraws the queued request Waiter. It carries no
	// generation: an OpResume aborts the session's queued requests, and
	// waiter ids are never reused, so a late cancel from the old
	// connection finds nothing to withdraw.
	OpCancel
	// OpRelease releases Req.Keys, held by Session (of generation Gen).
	OpRelease
	// OpReleaseAll releases everything Session (of generation Gen) holds;
	// Count says how many keys.
	OpReleaseAll
	// OpRenew resets the lease of Req.Keys, held by Session (of generation
	// Gen), to Req.Lease; the result carries Token and Expires.
	OpRenew
	// OpForceRelease releases every holder of Key (an operator's
	// command), memcached item locks included; Count says how many.
	OpForceRelease
	// OpTick brings the state up to At: leases, session TTLs, lock-delays
	// and wait deadlines that are due end.
	OpTick
	// OpPromote is a new leader's first command: every session's TTL
	// deadline and every leased hold's end that falls before At+TTL is
	// moved to At+TTL (the grace period), so that a failover never ends
	// a lease or a session by itself.
	OpPromote
	// OpNodeAlive is the heartbeat of the node named Key: it restarts the
	// TTL of every session the node owns and records the instant.
	OpNodeAlive
	// OpEndOwner ends every session owned by the node named Key, as
	// OpEndSession does (a node that restarts ends its previous
	// incarnation's sessions); Count says how many.
	OpEndOwner
	// OpResume hands Session, a session with a TTL that no node owns,
	// over to a new connection: its waiting requests are aborted, its TTL
	// restarts, and its generation goes up by one (the result's Count):
	// a command of an older generation (Command.Gen, OpEndSession's
	// Token), which the old connection's node proposed late, is refused
	// with ErrSuperseded.
	OpResume

	// The item cache's commands (memcached), by Session (0 for none).
	// They carry no generation: their sessions (memcached connections')
	// have no TTL or are owned by their node, and cannot be resumed.

	// OpItemSet, OpItemAdd, OpItemReplace and OpItemCAS store Value under
	// Key with Flags and Exptime (CAS: compare first, 0 = none); the
	// result's CAS is the item's new one.
	OpItemSet
	OpItemAdd
	OpItemReplace
	OpItemCAS
	// OpItemAppend and OpItemPrepend add Value to Key's item (CAS as
	// above).
	OpItemAppend
	OpItemPrepend
	// OpItemIncr and OpItemDecr add or subtract Delta; the result carries
	// Value and CAS. On a miss, a non-nil Value (decimal digits: the
	// binary protocol's initial value) is stored with Exptime instead,
	// unless CAS is set, and is the result's Value.
	OpItemIncr
	OpItemDecr
	// OpItemDelete deletes Key's item (CAS as above). The holder's delete
	// also releases the key's lock.
	OpItemDelete
	// OpItemTouch sets Key's Exptime; the result's CAS is the item's.
	OpItemTouch
	// OpItemGetAndTouch is touch that returns the item (gat, GaT).
	OpItemGetAndTouch
	// OpItemFlush is flush_all with a delay of Exptime.
	OpItemFlush
	// OpItemLock locks Key's item for Session, in the lock table and on
	// the item, as LockMode says (lock, LaG, LaG with an exptime).
	OpItemLock
	// OpItemUnlock drops Session's lock on Key.
	OpItemUnlock
	// OpItemUnlockAll drops every lock of Session, in the lock table and
	// on items; Count says how many keys.
	OpItemUnlockAll
	// OpItemReplaceAndUnlock replaces Key's item (Value, Flags, Exptime,
	// CAS) and drops Session's lock on it in one step (RaU).
	OpItemReplaceAndUnlock
	// OpItemEvict removes Key's item if it is unlocked and its CAS is
	// still CAS: the proposer's decision to make room or to drop an
	// expired item. Count is 1 if it was removed.
	OpItemEvict

	// Owned-lock commands (owned.go): locks owned by a value, not a
	// session (Redis clients).

	// OpOwned does the owned-lock operation Owned (with OwnedFlags and
	// Prefix) on Req.Keys for the owner value Value, with lease
	// Req.Lease.
	OpOwned
	// OpOwnedTx applies the OpOwned commands of Tx in order, at its own
	// At, as one step, unless a key of Watch changed (ErrWatchChanged);
	// the result's Tx holds their results.
	OpOwnedTx

	// ZooKeeper's commands (znode.go): the data tree's, by ZooKeeper
	// sessions. Exptime is the proposer's wall clock in Unix milliseconds
	// (znodes' ctime and mtime: the replicated clock is not Unix time).

	// OpZOpen opens a ZooKeeper session with timeout TTL and the password
	// Value (PasswordLen bytes): a lock-table session with that TTL, which
	// the tree knows. The result's Session names it; its Zxid is the
	// tree's.
	OpZOpen
	// OpZAttach moves Session to a new connection if Value is its
	// password, as OpResume does: the result's Count is its new
	// generation, TTL its timeout. Otherwise ErrZSession. Gen is the
	// generation the proposer saw: an attach that another overtook
	// (a connection the client gave up on while its attach waited out an
	// election) is superseded, and must not take the session from the
	// connection that overtook it.
	OpZAttach
	// OpZWrite applies the znode operations encoded in Value (AppendZOps)
	// on behalf of Session (of generation Gen): one (Flags 0) or a multi
	// (Flags ZMulti). The result's Z holds one result per operation,
	// Zxid the tree's zxid after it.
	OpZWrite
	// OpZReap deletes the containers that are empty (znode.Tree's
	// ReapContainers); Count says how many.
	OpZReap

	numOps
)

var opNames = [numOps]string{
	OpSeed:                 "seed",
	OpOpenSession:          "open-session",
	OpKeepAlive:            "keepalive",
	OpEndSession:           "end-session",
	OpAcquire:              "acquire",
	OpCancel:               "cancel",
	OpRelease:              "release",
	OpReleaseAll:           "release-all",
	OpRenew:                "renew",
	OpForceRelease:         "force-release",
	OpTick:                 "tick",
	OpPromote:              "promote",
	OpNodeAlive:            "node-alive",
	OpEndOwner:             "end-owner",
	OpResume:               "resume",
	OpItemSet:              "item-set",
	OpItemAdd:              "item-add",
	OpItemReplace:          "item-replace",
	OpItemCAS:              "item-cas",
	OpItemAppend:           "item-append",
	OpItemPrepend:          "item-prepend",
	OpItemIncr:             "item-incr",
	OpItemDecr:             "item-decr",
	OpItemDelete:           "item-delete",
	OpItemTouch:            "item-touch",
	OpItemGetAndTouch:      "item-gat",
	OpItemFlush:            "item-flush",
	OpItemLock:             "item-lock",
	OpItemUnlock:           "item-unlock",
	OpItemUnlockAll:        "item-unlock-all",
	OpItemReplaceAndUnlock: "item-rau",
	OpItemEvict:            "item-evict",
	OpOwned:                "owned",
	OpOwnedTx:              "owned-tx",
	OpZOpen:                "z-open",
	OpZAttach:              "z-attach",
	OpZWrite:               "z-write",
	OpZReap:                "z-reap",
}

func (o Op) String() string {
	if o > 0 && o < numOps {
		return opNames[o]
	}
	return fmt.Sprintf("Op(%d)", uint8(o))
}

// Valid reports whether o is a known command.
func (o Op) Valid() bool { return o > 0 && o < numOps }

// Command is one state change: a value that can be logged, shipped and
// applied in the same order on every replica. It is a flat struct rather
// than one type per command, so that a proposer builds it in place without
// allocating; Op says which fields count (see the Op constants), and the
// codec carries only those.
//
// At is the instant the change happens, stamped by the proposer: Apply
// never reads a clock. Origin names the proposer (unique per process
// incarnation) and Seq numbers its commands from 1: a command whose Seq is
// not above the last one applied from its Origin is a resend and is not
// applied again (Seq 0: not numbered, always applied).
//
// Slices (Req.Keys, Key, Value) are borrowed: Apply copies what it keeps.
type Command struct {
	Op     Op
	At     int64
	Origin uint64
	Seq    uint64

	Session latch.SessionID
	// Gen is the generation of Session (see OpResume) as the proposer's
	// connection knows it, for the commands that act on the session's
	// behalf (OpKeepAlive, OpAcquire, OpRelease, OpReleaseAll, OpRenew:
	// see carriesGen): Apply refuses one of an older generation than
	// the session's with ErrSuperseded, and it changes nothing. AnyGen,
	// what a version 1 batch decodes to, is never older.
	Gen uint64
	// Req is OpAcquire's request; OpRelease and OpRenew use its Keys, and
	// OpRenew its Lease.
	Req latch.LockRequest
	// Waiter is OpCancel's request.
	Waiter engine.WaiterID
	// TTL and LockDelay are OpOpenSession's; TTL is OpPromote's grace.
	TTL, LockDelay time.Duration
	// Token is OpSeed's token, OpEndSession's generation.
	Token latch.Token

	// Key is an item's key, OpForceRelease's key, or the node that owns
	// sessions (OpOpenSession, OpNodeAlive, OpEndOwner).
	Key      []byte
	Value    []byte
	Flags    uint32
	Exptime  int64
	CAS      uint64
	Delta    uint64
	LockMode cache.LockMode

	// Owned, OwnedFlags and Prefix are OpOwned's; Tx and Watch
	// OpOwnedTx's.
	Owned      OwnedKind
	OwnedFlags OwnedFlags
	Prefix     uint32
	Tx         []Command
	Watch      []Watch
	// ZSet holds the arguments of OpOwned's sorted-set kinds (OwnedZGet
	// to OwnedZPut; see each).
	ZSet ZSetArgs
	// TxResults is not part of the command (it is not encoded): room of
	// its proposer's for OpOwnedTx's results (Result.Tx), used when it is
	// large enough, so that a front end that applies batches reuses one.
	TxResults []Result
	// Client is not part of the command (it is not encoded): the front
	// end's client that proposed it (0: none), which its proposer's node
	// tells whoever hears of the keys the command changed, so that a
	// client can be spared the news of its own changes.
	Client uint64
}

// ResetItem makes c the item command op on key at instant at: it sets Op,
// At and Key, and zeroes the other fields an item command reads (Session,
// Value, Flags, Exptime, CAS, Delta, LockMode), for the caller to fill in.
// The fields no item command reads (the lock table's, the owned locks',
// Origin and Seq) are left as they are: a front end that builds only item
// commands in c never sets them, and it costs a few stores where clearing
// the whole Command would cost hundreds of bytes per request.
func (c *Command) ResetItem(op Op, at int64, key []byte) {
	c.Op, c.At, c.Key = op, at, key
	c.Session, c.Value, c.Flags, c.Exptime, c.CAS, c.Delta, c.LockMode = 0, nil, 0, 0, 0, 0, 0
}

// SetItem copies into c the fields of in that an item command reads (Op
// one of OpItemSet to OpItemEvict): Op, At, Session, Key, Value, Flags,
// Exptime, CAS, Delta and LockMode. Origin, Seq and the fields no item
// command reads are left as they are: the proposer stamps the first two,
// and neither Apply nor the codec reads the others for an item command,
// so c then applies and encodes as in would, with c's Origin and Seq.
// It is the copy of an item command into a batch of them, without
// copying or clearing the whole Command.
func (c *Command) SetItem(in *Command) {
	c.Op, c.At, c.Session = in.Op, in.At, in.Session
	c.Key, c.Value, c.Flags, c.Exptime = in.Key, in.Value, in.Flags, in.Exptime
	c.CAS, c.Delta, c.LockMode = in.CAS, in.Delta, in.LockMode
}

// IsItem reports whether o is one of the item cache's commands (OpItemSet
// to OpItemEvict).
func (o Op) IsItem() bool { return o >= OpItemSet && o <= OpItemEvict }

// IsZ reports whether o is one of the ZooKeeper commands (OpZOpen to
// OpZReap).
func (o Op) IsZ() bool { return o >= OpZOpen && o <= OpZReap }

// AnyGen is the Gen of a command that acts whatever the generation of its
// session: the commands of a version 1 batch, written before commands
// carried one, apply as they did then.
const AnyGen = math.MaxUint64

// carriesGen reports whether commands of op act on behalf of their Session
// and carry its generation in Gen, which Apply checks: the session-bound
// changes a client makes on its connection. OpEndSession carries its
// generation in Token instead (it did before Gen existed); OpCancel names
// no session; OpOpenSession and OpResume make a generation; the item
// commands' sessions cannot be resumed (see OpResume).
func carriesGen(op Op) bool {
	switch op {
	case OpKeepAlive, OpAcquire, OpRelease, OpReleaseAll, OpRenew, OpZAttach, OpZWrite:
		return true
	}
	return false
}

// Result is what applying a Command gave. Only the fields its Op sets
// count. Results are never shipped: every replica computes them by
// applying the same commands, and the proposer reads its own.
type Result struct {
	Err error

	Session latch.SessionID // OpOpenSession
	// OpAcquire and OpRenew; for OpOwned, Granted is true when the
	// command made a new grant (a free key acquired, a GETSET takeover).
	Granted bool
	Token   latch.Token
	Expires int64
	Waiter  engine.WaiterID // a queued OpAcquire
	Count   int             // OpReleaseAll, OpForceRelease, OpItemUnlockAll, OpItemEvict, OpEndOwner, OpResume

	Item  cache.Item // OpItemGetAndTouch, OpItemLock
	CAS   uint64     // item writes
	Value uint64     // OpItemIncr, OpItemDecr

	// OpOwned (see OwnedKind), and OpOwnedTx's results in order. Foreign
	// counts the keys the command found held by a session (memcached,
	// dlock): locks without an owner value, which a Redis client sees as
	// a key of another type. OwnedAcquire leaves it 0; with OwnedAll,
	// OwnedRelease and OwnedRenew count only up to the first key they
	// stop at.
	Found   int
	Foreign int
	Owner   string
	Tx      []Result
	// ZKeys counts the keys an OpOwned command found holding a sorted
	// set (OwnedAcquire, OwnedGetSet and OwnedObtain then change
	// nothing; a front end answers WRONGTYPE where Redis would); on the
	// sorted-set kinds it is 1 when the key holds one after the command.
	// Version is that set's version (see Watch), Score OwnedZAdd's new
	// score with zset.INCR, ZSet OwnedZGet's copy of the set.
	ZKeys   int
	Version uint64
	Score   float64
	ZSet    *zset.Set

	// The ZooKeeper commands': the tree's zxid after the command, the
	// results of OpZWrite's operations, OpZAttach's session timeout.
	Zxid int64
	Z    []znode.Result
	TTL  time.Duration
}

// Batch is commands applied in order, as one entry of a log. Results is
// filled by Apply, one per command.
type Batch struct {
	Cmds    []Command
	Results []Result
}

// Reset empties b, keeping its storage. The commands' slots are zeroed
// (they borrow their callers' slices); the results' are not, since Apply
// overwrites each one whole.
func (b *Batch) Reset() {
	clear(b.Cmds)
	b.Cmds = b.Cmds[:0]
	b.Results = b.Results[:0]
}

// Add appends a zero command and returns it, for the caller to fill in.
func (b *Batch) Add() *Command {
	if len(b.Cmds) < cap(b.Cmds) {
		b.Cmds = b.Cmds[:len(b.Cmds)+1]
	} else {
		b.Cmds = append(b.Cmds, Command{})
	}
	return &b.Cmds[len(b.Cmds)-1]
}
