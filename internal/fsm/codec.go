package fsm

// The binary encoding of commands and batches, as the log carries them.
//
// A command is its Op as one byte, then the header every command has, then
// the fields its Op uses, in the order of the Command struct:
//
//	op      byte
//	At      varint
//	Origin  uvarint
//	Seq     uvarint
//	fields  as opFields lists them for op, each as below
//
// A field's encoding depends on its type:
//
//	Session, Gen, Waiter, Token           uvarint
//	CAS, Delta                            uvarint
//	Req.Limit, Flags                      uvarint, at most math.MaxUint32
//	At, Exptime                           varint
//	Req.Wait, Req.Lease, TTL, LockDelay   varint, in nanoseconds
//	Req.Mode, Req.Relock, LockMode        one byte, a known value
//	Key, Value                            uvarint length, then the bytes
//	Req.Keys                              uvarint count, then each key as
//	                                      a uvarint length and its bytes
//	Owned, OwnedFlags                     one byte each, a known value
//	Prefix                                uvarint, at most math.MaxUint32
//	Tx                                    uvarint count, then each command
//	                                      as above (OpOwned only)
//	Watch                                 uvarint count, then each as Key
//	                                      (length and bytes), Token
//	                                      uvarint, Expires varint, Owner
//	                                      (length and bytes), Version
//	                                      uvarint
//	ZSet                                  only for OpOwned of a sorted-set
//	                                      kind, after Prefix, the fields
//	                                      of ZSetArgs the kind reads:
//	                                      OwnedZAdd Flags (a byte, known
//	                                      bits) and Pairs; OwnedZPut Pairs;
//	                                      OwnedZRem Members;
//	                                      OwnedZRemRangeByScore Range (Min
//	                                      then Max, each a score and a
//	                                      byte 0 or 1, Excl);
//	                                      OwnedZRemRangeByRank Start and
//	                                      Stop varints. Pairs: uvarint
//	                                      count, then each as its score
//	                                      and Member (length and bytes). A
//	                                      score is its IEEE 754 bits, 8
//	                                      bytes little-endian. Members:
//	                                      uvarint count, then each as
//	                                      length and bytes
//
// A batch is a version byte, a uvarint count and that many commands, with
// nothing after them. AppendBatch writes version 2 (BatchVersion), in
// which the commands that act on a session's behalf (see carriesGen) carry
// its generation, Gen. DecodeBatch reads version 2 and version 1, the
// encoding before Gen, which a log written by an older latch holds:
// version 1 is version 2 without Gen, and its commands decode with Gen set
// to AnyGen, so that they apply as they did when they were written, the
// generation unchecked. DecodeCommand reads version 2. (An older latch,
// which reads version 1 only, cannot apply what this one writes.)
//
// The encoding is canonical: the decoder accepts only what AppendCommand
// and AppendBatch write (and, for version 1, what an older latch wrote),
// so that decoding and encoding again, in the same version, gives the
// same bytes. Varints must be minimal and enumerated values known. Fields
// an Op does not use are not encoded at all, and decode as zero; a nil
// slice and an empty one encode alike, and decode as nil.
//
// Decoding checks the form of the input, not its meaning: keys are not
// checked against latch.CheckKey, nor values against a size limit, nor
// numbers against the engine's limits. Applying a command does that, the
// same way on every replica. Counts and lengths are bounded only by the
// input: a count of keys or commands larger than the bytes left could hold
// is rejected before anything is allocated for it.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/cache"
	"github.com/latchd/latch/internal/engine"
	"github.com/latchd/latch/internal/zset"
)

// BatchVersion is the version of the batch encoding that AppendBatch
// writes and DecodeBatch reads (besides batchVersion1): the first byte of
// every encoded batch.
const BatchVersion = 2

// batchVersion1 is the version before session generations (Command.Gen):
// DecodeBatch still reads it, for logs written by an older latch.
const batchVersion1 = 1

var (
	// ErrMalformed is wrapped by every error of DecodeCommand and
	// DecodeBatch about input that is not a valid encoding: truncated,
	// an unknown op, an overlong or non-minimal varint, a count or length
	// larger than the input left, an unknown mode, or trailing bytes.
	ErrMalformed = errors.New("fsm: malformed encoding")
	// ErrVersion is wrapped by DecodeBatch's error about a batch whose
	// version byte is neither BatchVersion nor 1.
	ErrVersion = errors.New("fsm: unknown batch version")
)

// fields is a set of the Command fields an Op uses beside the header (Op,
// At, Origin, Seq). The bits are in the order fields are encoded.
type fields uint32

const (
	fSession fields = 1 << iota
	fGen            // from version 2 on
	fKeys           // Req.Keys
	fMode           // Req.Mode
	fLimit          // Req.Limit
	fWait           // Req.Wait
	fLease          // Req.Lease
	fRelock         // Req.Relock
	fWaiter
	fTTL
	fLockDelay
	fToken
	fKey
	fValue
	fFlags
	fExptime
	fCAS
	fDelta
	fLockMode
	fOwned // Owned and OwnedFlags
	fPrefix
	fTx
	fWatch

	// fStore is what a store and RaU carry.
	fStore = fSession | fKey | fValue | fFlags | fExptime | fCAS
)

// opFields returns the fields op uses, and false when op has no encoding.
// Every valid Op must have a case here: a new one without is caught by
// AppendCommand (which panics) and by the tests.
func opFields(op Op) (fields, bool) {
	switch op {
	case OpSeed:
		return fToken, true
	case OpOpenSession:
		return fTTL | fLockDelay | fKey, true
	case OpPromote:
		return fTTL, true
	case OpNodeAlive, OpEndOwner:
		return fKey, true
	case OpKeepAlive, OpReleaseAll:
		return fSession | fGen, true
	case OpItemUnlockAll, OpResume:
		return fSession, true
	case OpEndSession:
		return fSession | fToken, true
	case OpAcquire:
		return fSession | fGen | fKeys | fMode | fLimit | fWait | fLease | fRelock, true
	case OpCancel:
		return fWaiter, true
	case OpRelease:
		return fSession | fGen | fKeys, true
	case OpRenew:
		return fSession | fGen | fKeys | fLease, true
	case OpForceRelease:
		return fKey, true
	case OpTick:
		return 0, true
	case OpItemSet, OpItemAdd, OpItemReplace, OpItemCAS, OpItemReplaceAndUnlock:
		return fStore, true
	case OpItemAppend, OpItemPrepend:
		return fSession | fKey | fValue | fCAS, true
	case OpItemIncr, OpItemDecr:
		return fSession | fKey | fValue | fExptime | fDelta | fCAS, true
	case OpItemDelete:
		return fSession | fKey | fCAS, true
	case OpItemTouch, OpItemGetAndTouch:
		return fKey | fExptime, true
	case OpItemFlush:
		return fExptime, true
	case OpItemLock:
		return fSession | fKey | fExptime | fLockMode, true
	case OpItemUnlock:
		return fSession | fKey, true
	case OpItemEvict:
		return fKey | fCAS, true
	case OpOwned:
		return fKeys | fLease | fValue | fOwned | fPrefix, true
	case OpOwnedTx:
		return fTx | fWatch, true
	case OpZOpen:
		return fTTL | fValue | fExptime, true
	case OpZAttach:
		return fSession | fGen | fValue, true
	case OpZWrite:
		return fSession | fGen | fValue | fFlags | fExptime, true
	case OpZReap:
		return fExptime, true
	}
	return 0, false
}

// minCommandLen is the length of the shortest encoded command: an op
// byte and three one-byte varints (OpTick).
const minCommandLen = 4

// AppendCommand appends the encoding of c to dst, of version BatchVersion,
// and returns the extended buffer. Only the fields c.Op uses are encoded;
// the others are ignored. It allocates only to grow dst.
//
// AppendCommand panics if c.Op is not valid, or if c.Req.Mode,
// c.Req.Relock or c.LockMode, when c.Op uses it, holds an unknown value:
// DecodeCommand would reject such an encoding, so the caller must check
// these before proposing c.
func AppendCommand(dst []byte, c *Command) []byte {
	return appendCommand(dst, c, BatchVersion)
}

// appendCommand is AppendCommand in the encoding of version (BatchVersion
// or batchVersion1, which leaves Gen out).
func appendCommand(dst []byte, c *Command, version byte) []byte {
	f, ok := opFields(c.Op)
	if !ok {
		if c.Op.Valid() {
			panic(fmt.Sprintf("fsm: AppendCommand: no encoding for %v", c.Op))
		}
		panic(fmt.Sprintf("fsm: AppendCommand of invalid %v", c.Op))
	}
	dst = append(dst, byte(c.Op))
	dst = binary.AppendVarint(dst, c.At)
	dst = binary.AppendUvarint(dst, c.Origin)
	dst = binary.AppendUvarint(dst, c.Seq)
	if f&fSession != 0 {
		dst = binary.AppendUvarint(dst, uint64(c.Session))
	}
	if f&fGen != 0 && version != batchVersion1 {
		dst = binary.AppendUvarint(dst, c.Gen)
	}
	if f&fKeys != 0 {
		dst = binary.AppendUvarint(dst, uint64(len(c.Req.Keys)))
		for _, k := range c.Req.Keys {
			dst = binary.AppendUvarint(dst, uint64(len(k)))
			dst = append(dst, k...)
		}
	}
	if f&fMode != 0 {
		if !validMode(c.Req.Mode) {
			panic(fmt.Sprintf("fsm: AppendCommand of %v with invalid %v", c.Op, c.Req.Mode))
		}
		dst = append(dst, byte(c.Req.Mode))
	}
	if f&fLimit != 0 {
		dst = binary.AppendUvarint(dst, uint64(c.Req.Limit))
	}
	if f&fWait != 0 {
		dst = binary.AppendVarint(dst, int64(c.Req.Wait))
	}
	if f&fLease != 0 {
		dst = binary.AppendVarint(dst, int64(c.Req.Lease))
	}
	if f&fRelock != 0 {
		if !validRelock(c.Req.Relock) {
			panic(fmt.Sprintf("fsm: AppendCommand of %v with invalid Relock(%d)", c.Op, uint8(c.Req.Relock)))
		}
		dst = append(dst, byte(c.Req.Relock))
	}
	if f&fWaiter != 0 {
		dst = binary.AppendUvarint(dst, uint64(c.Waiter))
	}
	if f&fTTL != 0 {
		dst = binary.AppendVarint(dst, int64(c.TTL))
	}
	if f&fLockDelay != 0 {
		dst = binary.AppendVarint(dst, int64(c.LockDelay))
	}
	if f&fToken != 0 {
		dst = binary.AppendUvarint(dst, uint64(c.Token))
	}
	if f&fKey != 0 {
		dst = binary.AppendUvarint(dst, uint64(len(c.Key)))
		dst = append(dst, c.Key...)
	}
	if f&fValue != 0 {
		dst = binary.AppendUvarint(dst, uint64(len(c.Value)))
		dst = append(dst, c.Value...)
	}
	if f&fFlags != 0 {
		dst = binary.AppendUvarint(dst, uint64(c.Flags))
	}
	if f&fExptime != 0 {
		dst = binary.AppendVarint(dst, c.Exptime)
	}
	if f&fCAS != 0 {
		dst = binary.AppendUvarint(dst, c.CAS)
	}
	if f&fDelta != 0 {
		dst = binary.AppendUvarint(dst, c.Delta)
	}
	if f&fLockMode != 0 {
		if !validLockMode(c.LockMode) {
			panic(fmt.Sprintf("fsm: AppendCommand of %v with invalid LockMode(%d)", c.Op, uint8(c.LockMode)))
		}
		dst = append(dst, byte(c.LockMode))
	}
	if f&fOwned != 0 {
		if !c.Owned.Valid() || c.OwnedFlags&^ownedFlagsMask != 0 {
			panic(fmt.Sprintf("fsm: AppendCommand of %v with invalid %v flags %#x", c.Op, c.Owned, uint8(c.OwnedFlags)))
		}
		dst = append(dst, byte(c.Owned), byte(c.OwnedFlags))
	}
	if f&fPrefix != 0 {
		dst = binary.AppendUvarint(dst, uint64(c.Prefix))
	}
	if f&fOwned != 0 && c.Owned.IsZSet() {
		dst = appendZSetArgs(dst, c.Owned, &c.ZSet)
	}
	if f&fTx != 0 {
		dst = binary.AppendUvarint(dst, uint64(len(c.Tx)))
		for i := range c.Tx {
			if c.Tx[i].Op != OpOwned {
				panic(fmt.Sprintf("fsm: AppendCommand of %v holding %v", c.Op, c.Tx[i].Op))
			}
			dst = appendCommand(dst, &c.Tx[i], version)
		}
	}
	if f&fWatch != 0 {
		dst = binary.AppendUvarint(dst, uint64(len(c.Watch)))
		for _, w := range c.Watch {
			dst = binary.AppendUvarint(dst, uint64(len(w.Key)))
			dst = append(dst, w.Key...)
			dst = binary.AppendUvarint(dst, uint64(w.Token))
			dst = binary.AppendVarint(dst, w.Expires)
			dst = binary.AppendUvarint(dst, uint64(len(w.Owner)))
			dst = append(dst, w.Owner...)
			dst = binary.AppendUvarint(dst, w.Version)
		}
	}
	return dst
}

func validMode(m latch.Mode) bool     { return m == latch.Exclusive || m == latch.Shared }
func validRelock(r latch.Relock) bool { return r == latch.RelockReject || r == latch.RelockReuse }
func validLockMode(m cache.LockMode) bool {
	return m == cache.LockOnly || m == cache.LockGet || m == cache.LockTouch
}

// DecodeCommand decodes one command of version BatchVersion from the front
// of b into *c, overwriting all of it, and returns the number of bytes it
// used; bytes after them are left alone. The fields c.Op does not use are zero, and
// empty slices are nil.
//
// Key and Value alias b (with their capacity cut to their length, so
// appending to them does not write into b); the caller must not modify b
// while c is in use. Req.Keys are strings of their own.
//
// If b does not begin with a valid encoding, DecodeCommand zeroes *c and
// returns an error wrapping ErrMalformed. It never panics.
func DecodeCommand(b []byte, c *Command) (n int, err error) {
	return decodeCommand(b, c, BatchVersion)
}

// decodeCommand is DecodeCommand for the encoding of version (BatchVersion
// or batchVersion1).
func decodeCommand(b []byte, c *Command, version byte) (n int, err error) {
	d := decoder{b: b, version: version}
	d.command(c)
	if d.err != nil {
		*c = Command{}
		return 0, fmt.Errorf("fsm: decode %w", d.err)
	}
	return d.off, nil
}

// AppendBatch appends the encoding of a batch of cmds, of version
// BatchVersion, to dst and returns the extended buffer. It panics as
// AppendCommand does on a command that cannot be encoded.
func AppendBatch(dst []byte, cmds []Command) []byte {
	return appendBatch(dst, cmds, BatchVersion)
}

// appendBatch is AppendBatch in the encoding of version (BatchVersion, or
// batchVersion1, which leaves Gen out: what an older latch wrote, for the
// tests).
func appendBatch(dst []byte, cmds []Command, version byte) []byte {
	dst = append(dst, version)
	dst = binary.AppendUvarint(dst, uint64(len(cmds)))
	for i := range cmds {
		dst = appendCommand(dst, &cmds[i], version)
	}
	return dst
}

// BatchLen returns the count of commands that batch data (AppendBatch)
// says it holds, from its header, without decoding them: 0 for data too
// short to say.
func BatchLen(data []byte) int {
	if len(data) < 2 {
		return 0
	}
	n, k := binary.Uvarint(data[1:])
	if k <= 0 || n > math.MaxInt32 {
		return 0
	}
	return int(n)
}

// DecodeBatch resets b and decodes the batch data into b.Cmds, reusing
// their storage. As with DecodeCommand, the commands' Key and Value alias
// data.
//
// DecodeBatch reads versions BatchVersion and 1; the commands of a version
// 1 batch that carry a generation from version 2 on have Gen AnyGen. It
// returns an error wrapping ErrVersion if data is of another version, and
// one wrapping ErrMalformed if data is not otherwise a valid encoding of a
// batch, with nothing after it. On error, b is left empty. It never
// panics.
func DecodeBatch(data []byte, b *Batch) error {
	b.Reset()
	if len(data) == 0 {
		return fmt.Errorf("fsm: decode batch: empty: %w", ErrMalformed)
	}
	if v := data[0]; v != BatchVersion && v != batchVersion1 {
		return fmt.Errorf("fsm: decode batch: version %d, want %d or %d: %w", v, BatchVersion, batchVersion1, ErrVersion)
	}
	d := decoder{b: data, off: 1, version: data[0]}
	count := d.count("count", "commands", minCommandLen)
	if d.err != nil {
		return fmt.Errorf("fsm: decode batch: %w", d.err)
	}
	b.Cmds = slices.Grow(b.Cmds, count)
	for i := range count {
		d.command(b.Add())
		if d.err != nil {
			b.Reset()
			return fmt.Errorf("fsm: decode batch: command %d of %d: %w", i, count, d.err)
		}
	}
	if d.off != len(data) {
		n := len(data) - d.off
		b.Reset()
		return fmt.Errorf("fsm: decode batch: %d bytes after the last command: %w", n, ErrMalformed)
	}
	return nil
}

// A decoder reads an encoding of version from the front of b[off:]. The
// first problem it meets is kept in err, which wraps ErrMalformed; after
// it, every read returns a zero value, so that a caller checks err once at
// the end.
type decoder struct {
	b       []byte
	off     int
	err     error
	version byte
}

// fail records the problem with field, unless one is already recorded.
func (d *decoder) fail(field, format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%s: %s: %w", field, fmt.Sprintf(format, args...), ErrMalformed)
	}
}

// command decodes one command into *c, as the file's comment lays it out.
// An error names the command's op.
func (d *decoder) command(c *Command) {
	d.fields(c)
	if d.err != nil {
		what := "command"
		if c.Op != 0 {
			what = c.Op.String() + " command"
		}
		d.err = fmt.Errorf("%s: %w", what, d.err)
	}
}

// fields decodes one command into *c, without naming it in an error.
func (d *decoder) fields(c *Command) {
	*c = Command{}
	if d.off >= len(d.b) {
		d.fail("Op", "truncated")
		return
	}
	op := Op(d.b[d.off])
	f, ok := opFields(op)
	if !ok {
		d.fail("Op", "unknown value %d", uint8(op))
		return
	}
	d.off++
	c.Op = op
	c.At = d.varint("At")
	c.Origin = d.uvarint("Origin")
	c.Seq = d.uvarint("Seq")
	if f&fSession != 0 {
		c.Session = latch.SessionID(d.uvarint("Session"))
	}
	if f&fGen != 0 {
		if d.version == batchVersion1 {
			c.Gen = AnyGen
		} else {
			c.Gen = d.uvarint("Gen")
		}
	}
	if f&fKeys != 0 {
		c.Req.Keys = d.keys("Req.Keys")
	}
	if f&fMode != 0 {
		m := latch.Mode(d.byte("Req.Mode"))
		if !validMode(m) {
			d.fail("Req.Mode", "invalid value %d", uint8(m))
		}
		c.Req.Mode = m
	}
	if f&fLimit != 0 {
		c.Req.Limit = d.uint32("Req.Limit")
	}
	if f&fWait != 0 {
		c.Req.Wait = time.Duration(d.varint("Req.Wait"))
	}
	if f&fLease != 0 {
		c.Req.Lease = time.Duration(d.varint("Req.Lease"))
	}
	if f&fRelock != 0 {
		r := latch.Relock(d.byte("Req.Relock"))
		if !validRelock(r) {
			d.fail("Req.Relock", "invalid value %d", uint8(r))
		}
		c.Req.Relock = r
	}
	if f&fWaiter != 0 {
		c.Waiter = engine.WaiterID(d.uvarint("Waiter"))
	}
	if f&fTTL != 0 {
		c.TTL = time.Duration(d.varint("TTL"))
	}
	if f&fLockDelay != 0 {
		c.LockDelay = time.Duration(d.varint("LockDelay"))
	}
	if f&fToken != 0 {
		c.Token = latch.Token(d.uvarint("Token"))
	}
	if f&fKey != 0 {
		c.Key = d.bytes("Key")
	}
	if f&fValue != 0 {
		c.Value = d.bytes("Value")
	}
	if f&fFlags != 0 {
		c.Flags = d.uint32("Flags")
	}
	if f&fExptime != 0 {
		c.Exptime = d.varint("Exptime")
	}
	if f&fCAS != 0 {
		c.CAS = d.uvarint("CAS")
	}
	if f&fDelta != 0 {
		c.Delta = d.uvarint("Delta")
	}
	if f&fLockMode != 0 {
		m := cache.LockMode(d.byte("LockMode"))
		if !validLockMode(m) {
			d.fail("LockMode", "invalid value %d", uint8(m))
		}
		c.LockMode = m
	}
	if f&fOwned != 0 {
		k := OwnedKind(d.byte("Owned"))
		if !k.Valid() {
			d.fail("Owned", "invalid value %d", uint8(k))
		}
		fl := OwnedFlags(d.byte("OwnedFlags"))
		if fl&^ownedFlagsMask != 0 {
			d.fail("OwnedFlags", "invalid value %#x", uint8(fl))
		}
		c.Owned, c.OwnedFlags = k, fl
	}
	if f&fPrefix != 0 {
		c.Prefix = d.uint32("Prefix")
	}
	if f&fOwned != 0 && c.Owned.IsZSet() && d.err == nil {
		d.zsetArgs(c.Owned, &c.ZSet)
	}
	if f&fTx != 0 {
		c.Tx = d.tx("Tx")
	}
	if f&fWatch != 0 {
		c.Watch = d.watch("Watch")
	}
}

// tx reads a count and that many OpOwned commands; none is nil.
func (d *decoder) tx(field string) []Command {
	count := d.count(field, "commands", minCommandLen)
	if count == 0 {
		return nil
	}
	cmds := make([]Command, count)
	for i := range cmds {
		if d.off < len(d.b) && Op(d.b[d.off]) != OpOwned {
			d.fail(field, "command %d is %v, not %v", i, Op(d.b[d.off]), OpOwned)
			return nil
		}
		d.fields(&cmds[i])
		if d.err != nil {
			return nil
		}
	}
	return cmds
}

// minWatchLen is the length of the shortest encoded Watch.
const minWatchLen = 5

// watch reads a count and that many watched keys; none is nil.
func (d *decoder) watch(field string) []Watch {
	count := d.count(field, "watches", minWatchLen)
	if count == 0 {
		return nil
	}
	ws := make([]Watch, count)
	for i := range ws {
		ws[i].Key = string(d.bytes(field + ".Key"))
		ws[i].Token = latch.Token(d.uvarint(field + ".Token"))
		ws[i].Expires = d.varint(field + ".Expires")
		ws[i].Owner = string(d.bytes(field + ".Owner"))
		ws[i].Version = d.uvarint(field + ".Version")
		if d.err != nil {
			return nil
		}
	}
	return ws
}

// count reads the count of a list of field whose elements (what) take at
// least minLen bytes each, and fails, returning 0, on a count larger than
// the bytes left could hold: nothing is allocated for it.
func (d *decoder) count(field, what string, minLen uint64) int {
	n := d.uvarint(field)
	if d.err != nil {
		return 0
	}
	if left := uint64(len(d.b) - d.off); n > left/minLen {
		d.fail(field, "%d %s in %d bytes", n, what, left)
		return 0
	}
	return int(n)
}

// byte reads one byte.
func (d *decoder) byte(field string) byte {
	if d.err != nil {
		return 0
	}
	if d.off >= len(d.b) {
		d.fail(field, "truncated")
		return 0
	}
	d.off++
	return d.b[d.off-1]
}

// uvarint reads a minimal uvarint.
func (d *decoder) uvarint(field string) uint64 {
	if d.err != nil {
		return 0
	}
	x, n := binary.Uvarint(d.b[d.off:])
	if !d.checkVarint(field, n) {
		return 0
	}
	return x
}

// varint reads a minimal varint.
func (d *decoder) varint(field string) int64 {
	if d.err != nil {
		return 0
	}
	x, n := binary.Varint(d.b[d.off:])
	if !d.checkVarint(field, n) {
		return 0
	}
	return x
}

// checkVarint checks the varint of n bytes that binary.Uvarint or
// binary.Varint read at d.off (n <= 0: none) and skips it. A varint is
// minimal unless it has more than one byte and its last is 0: a shorter
// encoding of the same number exists, which the encoder would have written.
func (d *decoder) checkVarint(field string, n int) bool {
	switch {
	case n == 0:
		d.fail(field, "truncated")
		return false
	case n < 0:
		d.fail(field, "varint overflows 64 bits")
		return false
	case n > 1 && d.b[d.off+n-1] == 0:
		d.fail(field, "non-minimal varint")
		return false
	}
	d.off += n
	return true
}

// uint32 reads a uvarint that must fit in 32 bits.
func (d *decoder) uint32(field string) uint32 {
	x := d.uvarint(field)
	if x > math.MaxUint32 {
		d.fail(field, "%d overflows 32 bits", x)
		return 0
	}
	return uint32(x)
}

// length reads a uvarint length, which must not exceed the bytes left.
func (d *decoder) length(field string) int {
	l := d.uvarint(field)
	if d.err != nil {
		return 0
	}
	if left := uint64(len(d.b) - d.off); l > left {
		d.fail(field, "length %d, only %d left", l, left)
		return 0
	}
	return int(l)
}

// bytes reads a length-prefixed byte string, aliasing d.b; an empty one is
// nil.
func (d *decoder) bytes(field string) []byte {
	l := d.length(field)
	if d.err != nil || l == 0 {
		return nil
	}
	s := d.b[d.off : d.off+l : d.off+l]
	d.off += l
	return s
}

// keys reads a count and that many length-prefixed strings; none is nil.
// The strings share one allocation: a copy of their part of the input,
// length prefixes included, which saves an allocation per key for a few
// bytes.
func (d *decoder) keys(field string) []string {
	// Each key takes at least its length's byte.
	count := d.count(field, "keys", 1)
	if count == 0 {
		return nil
	}
	start := d.off
	for range count {
		d.off += d.length(field)
		if d.err != nil {
			return nil
		}
	}
	// The lengths are now known to be valid: read them again, this time
	// cutting the keys out of the copy.
	all := string(d.b[start:d.off])
	keys := make([]string, count)
	off := 0
	for i := range keys {
		l, n := binary.Uvarint(d.b[start+off:])
		off += n
		keys[i] = all[off : off+int(l)]
		off += int(l)
	}
	return keys
}

// appendZSetArgs appends the fields of a that the sorted-set kind k reads.
func appendZSetArgs(dst []byte, k OwnedKind, a *ZSetArgs) []byte {
	switch k {
	case OwnedZAdd:
		if a.Flags&^zsetFlagsMask != 0 {
			panic(fmt.Sprintf("fsm: AppendCommand of %v with invalid flags %#x", k, uint8(a.Flags)))
		}
		dst = append(dst, byte(a.Flags))
		dst = appendPairs(dst, a.Pairs)
	case OwnedZPut:
		dst = appendPairs(dst, a.Pairs)
	case OwnedZRem:
		dst = binary.AppendUvarint(dst, uint64(len(a.Members)))
		for _, m := range a.Members {
			dst = binary.AppendUvarint(dst, uint64(len(m)))
			dst = append(dst, m...)
		}
	case OwnedZRemRangeByScore:
		dst = appendBound(dst, a.Range.Min)
		dst = appendBound(dst, a.Range.Max)
	case OwnedZRemRangeByRank:
		dst = binary.AppendVarint(dst, a.Start)
		dst = binary.AppendVarint(dst, a.Stop)
	}
	return dst
}

// zsetFlagsMask holds the known zset.AddFlags.
const zsetFlagsMask = zset.NX | zset.XX | zset.GT | zset.LT | zset.CH | zset.INCR

func appendPairs(dst []byte, ps []zset.Pair) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(ps)))
	for _, p := range ps {
		dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(p.Score))
		dst = binary.AppendUvarint(dst, uint64(len(p.Member)))
		dst = append(dst, p.Member...)
	}
	return dst
}

func appendBound(dst []byte, b zset.Bound) []byte {
	dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(b.Value))
	if b.Excl {
		return append(dst, 1)
	}
	return append(dst, 0)
}

// zsetArgs reads the fields of ZSetArgs that the sorted-set kind k reads.
func (d *decoder) zsetArgs(k OwnedKind, a *ZSetArgs) {
	switch k {
	case OwnedZAdd:
		fl := zset.AddFlags(d.byte("ZSet.Flags"))
		if d.err == nil && fl&^zsetFlagsMask != 0 {
			d.fail("ZSet.Flags", "invalid value %#x", uint8(fl))
		}
		a.Flags = fl
		a.Pairs = d.pairs("ZSet.Pairs")
	case OwnedZPut:
		a.Pairs = d.pairs("ZSet.Pairs")
	case OwnedZRem:
		n := d.count("ZSet.Members", "members", 1)
		if n > 0 {
			a.Members = make([]string, n)
			for i := range a.Members {
				a.Members[i] = string(d.bytes("ZSet.Members"))
			}
		}
	case OwnedZRemRangeByScore:
		a.Range.Min = d.bound("ZSet.Range.Min")
		a.Range.Max = d.bound("ZSet.Range.Max")
	case OwnedZRemRangeByRank:
		a.Start = d.varint("ZSet.Start")
		a.Stop = d.varint("ZSet.Stop")
	}
	if d.err != nil {
		*a = ZSetArgs{}
	}
}

// pairs reads a count and that many score and member pairs.
func (d *decoder) pairs(field string) []zset.Pair {
	n := d.count(field, "pairs", 9)
	if n == 0 {
		return nil
	}
	ps := make([]zset.Pair, n)
	for i := range ps {
		ps[i].Score = d.score(field + ".Score")
		ps[i].Member = string(d.bytes(field + ".Member"))
		if d.err != nil {
			return nil
		}
	}
	return ps
}

// score reads a float64's 8 bytes. A NaN is read as written: no front end
// makes one, but what a proposer encodes every replica must decode, and
// the state machine refuses it (zset.ErrNaN).
func (d *decoder) score(field string) float64 {
	if d.err != nil {
		return 0
	}
	if len(d.b)-d.off < 8 {
		d.fail(field, "truncated")
		return 0
	}
	f := math.Float64frombits(binary.LittleEndian.Uint64(d.b[d.off:]))
	d.off += 8
	return f
}

// bound reads a range bound: a score and an Excl byte, 0 or 1.
func (d *decoder) bound(field string) zset.Bound {
	b := zset.Bound{Value: d.score(field)}
	switch x := d.byte(field + ".Excl"); {
	case d.err != nil:
	case x == 1:
		b.Excl = true
	case x != 0:
		d.fail(field+".Excl", "invalid value %d", x)
	}
	return b
}
