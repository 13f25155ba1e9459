package memcache

import (
	"encoding/binary"
	"errors"
	"io"
	"slices"
	"strconv"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/cache"
	"github.com/latchd/latch/internal/fsm"
)

// Binary protocol magic bytes and header size.
const (
	magicRequest  = 0x80
	magicResponse = 0x81
	headerLen     = 24
)

// Binary opcodes: memcached's, and yrmcds's lock extension (0x40-0x4b)
// and Keys (0x50).
const (
	opGet        = 0x00
	opSet        = 0x01
	opAdd        = 0x02
	opReplace    = 0x03
	opDelete     = 0x04
	opIncrement  = 0x05
	opDecrement  = 0x06
	opQuit       = 0x07
	opFlush      = 0x08
	opGetQ       = 0x09
	opNoop       = 0x0a
	opVersion    = 0x0b
	opGetK       = 0x0c
	opGetKQ      = 0x0d
	opAppend     = 0x0e
	opPrepend    = 0x0f
	opStat       = 0x10
	opSetQ       = 0x11
	opAddQ       = 0x12
	opReplaceQ   = 0x13
	opDeleteQ    = 0x14
	opIncrementQ = 0x15
	opDecrementQ = 0x16
	opQuitQ      = 0x17
	opFlushQ     = 0x18
	opAppendQ    = 0x19
	opPrependQ   = 0x1a
	opTouch      = 0x1c
	opGaT        = 0x1d
	opGaTQ       = 0x1e
	opGaTK       = 0x23
	opGaTKQ      = 0x24
	opLock       = 0x40
	opLockQ      = 0x41
	opUnlock     = 0x42
	opUnlockQ    = 0x43
	opUnlockAll  = 0x44
	opUnlockAllQ = 0x45
	opLaG        = 0x46
	opLaGQ       = 0x47
	opLaGK       = 0x48
	opLaGKQ      = 0x49
	opRaU        = 0x4a
	opRaUQ       = 0x4b
	opKeys       = 0x50

	// opUnknown is the opcode yrmcds answers an unknown opcode with.
	opUnknown = 0x51
)

// Binary response statuses, with the message an error response carries.
const (
	stOK          uint16 = 0x0000
	stNotFound    uint16 = 0x0001
	stExists      uint16 = 0x0002
	stTooLarge    uint16 = 0x0003
	stInvalid     uint16 = 0x0004
	stNotStored   uint16 = 0x0005
	stNonNumeric  uint16 = 0x0006
	stLocked      uint16 = 0x0010
	stNotLocked   uint16 = 0x0011
	stUnknown     uint16 = 0x0081
	stOutOfMemory uint16 = 0x0082
	stTempFailure uint16 = 0x0086 // memcached's "Temporary failure"
)

// statusText is the text of an error status's reply body, as yrmcds
// writes it. (A switch: a map lookup cost 10% of a pipelined get miss.)
func statusText(s uint16) string {
	switch s {
	case stNotFound:
		return "Not found"
	case stExists:
		return "Exists"
	case stTooLarge:
		return "Too large value"
	case stInvalid:
		return "Invalid request"
	case stNotStored:
		return "Not stored"
	case stNonNumeric:
		return "Non-numeric value"
	case stLocked:
		return "Locked"
	case stNotLocked:
		return "Not locked"
	case stUnknown:
		return "Unknown command"
	case stOutOfMemory:
		return "Out of memory"
	}
	return ""
}

// noExptime is the binary exptime that means "none": Incr/Decr do not
// create a missing item, Get/GaT/LaG behave as without extras.
const noExptime = 0xffffffff

// header is a binary request header.
type header struct {
	op     byte
	keyLen int
	extLen int
	bodLen int
	opaque uint32
	cas    uint64
}

// request is a parsed binary request; its slices are valid until the next
// read from the connection.
type request struct {
	header
	extras, key, value []byte
}

// shape says what a binary opcode accepts (yrmcds.md 4.3).
type shape struct {
	known  bool
	ext    []int // allowed extras lengths; nil: not validated
	key    int   // 1: required, 0: optional, -1: must be empty
	value  int   // 2: required, not empty; 1: required (may be empty in latch); -1: must be empty
	noBody bool  // body not validated at all
}

var (
	extNone    = []int{0}
	extExp     = []int{0, 4}
	extStore   = []int{8}
	extArith   = []int{20}
	extTouch   = []int{4}
	getShape   = shape{known: true, ext: extExp, key: 1, value: -1}
	storeShape = shape{known: true, ext: extStore, key: 1, value: 1}
	// RaU must carry a value (yrmcds answers Invalid without one), where
	// latch, unlike yrmcds, lets Set, Add and Replace store an empty one.
	rauShape   = shape{known: true, ext: extStore, key: 1, value: 2}
	concatShp  = shape{known: true, ext: extNone, key: 1, value: 1}
	keyOnly    = shape{known: true, ext: extNone, key: 1, value: -1}
	arithShape = shape{known: true, ext: extArith, key: 1, value: -1}
	anyBody    = shape{known: true, noBody: true}
)

var shapes = [256]shape{
	opGet: getShape, opGetQ: getShape, opGetK: getShape, opGetKQ: getShape,
	opGaT: getShape, opGaTQ: getShape, opGaTK: getShape, opGaTKQ: getShape,
	opLaG: getShape, opLaGQ: getShape, opLaGK: getShape, opLaGKQ: getShape,
	opSet: storeShape, opAdd: storeShape, opReplace: storeShape,
	opSetQ: storeShape, opAddQ: storeShape, opReplaceQ: storeShape,
	opRaU: rauShape, opRaUQ: rauShape,
	opAppend: concatShp, opPrepend: concatShp, opAppendQ: concatShp, opPrependQ: concatShp,
	opDelete: keyOnly, opDeleteQ: keyOnly,
	opLock: keyOnly, opLockQ: keyOnly, opUnlock: keyOnly, opUnlockQ: keyOnly,
	opIncrement: arithShape, opDecrement: arithShape, opIncrementQ: arithShape, opDecrementQ: arithShape,
	opTouch:  {known: true, ext: extTouch, key: 1, value: -1},
	opFlush:  {known: true, ext: extExp, key: -1, value: -1},
	opFlushQ: {known: true, ext: extExp, key: -1, value: -1},
	opStat:   {known: true, ext: extNone, key: 0, value: -1},
	opKeys:   {known: true, ext: extNone, key: 0, value: -1},
	opQuit:   anyBody, opQuitQ: anyBody, opVersion: anyBody, opNoop: anyBody,
	opUnlockAll: anyBody, opUnlockAllQ: anyBody,
}

// valid checks a request against its opcode's shape. A key must follow
// latch's one key rule (latch.CheckKey: no space, CR or LF), which yrmcds
// does not apply to binary keys: every key must be lockable over every
// protocol, so such keys are refused as invalid rather than stored.
func (s shape) valid(r *request) bool {
	if s.noBody {
		return true
	}
	if !slices.Contains(s.ext, r.extLen) {
		return false
	}
	if hasSpace(r.key) {
		return false
	}
	switch {
	case s.key == 1 && r.keyLen == 0, s.key == -1 && r.keyLen != 0:
		return false
	}
	switch s.value {
	case -1:
		return len(r.value) == 0
	case 2:
		return len(r.value) > 0
	}
	return true
}

// hasSpace reports whether key has a space, CR or LF: a key the text
// protocol could not name. (bytes.ContainsAny costs several times more
// on the short keys of memcached.)
func hasSpace(key []byte) bool {
	for _, b := range key {
		if b <= ' ' && (b == ' ' || b == '\r' || b == '\n') {
			return true
		}
	}
	return false
}

// serveBinary reads one binary request and writes its reply.
func (c *conn) serveBinary() error {
	p, err := c.r.Peek(headerLen)
	if err != nil {
		return err
	}
	var r request
	r.op = p[1]
	r.keyLen = int(binary.BigEndian.Uint16(p[2:]))
	r.extLen = int(p[4])
	r.bodLen = int(binary.BigEndian.Uint32(p[8:]))
	r.opaque = binary.BigEndian.Uint32(p[12:])
	r.cas = binary.BigEndian.Uint64(p[16:])
	c.r.Discard(headerLen)

	if r.bodLen > maxRequest {
		// Too large to read, even to skip it: refuse and hang up.
		c.binError(&r, stTooLarge)
		return errClose
	}
	if r.keyLen > latch.MaxKeyLen || r.keyLen+r.extLen > r.bodLen {
		return c.skip(uint64(r.bodLen), skipState{then: thenBinInvalid, req: r.header})
	}
	valLen := r.bodLen - r.keyLen - r.extLen
	if valLen > c.srv.items.MaxItemSize {
		// Too large to keep: skip the body, then answer (binTooLarge).
		return c.skip(uint64(r.bodLen), skipState{then: thenBinTooLarge, req: r.header})
	}
	body, err := c.readBody(r.bodLen)
	if err != nil {
		return err
	}
	r.extras = body[:r.extLen:r.extLen]
	r.key = body[r.extLen : r.extLen+r.keyLen : r.extLen+r.keyLen]
	r.value = body[r.extLen+r.keyLen:]
	defer c.r.Discard(c.bodyPeeked)

	s := shapes[r.op]
	switch {
	case !s.known:
		c.binUnknown(&r)
		return nil
	case !s.valid(&r):
		c.binError(&r, stInvalid)
		return nil
	}
	return c.binCommand(&r)
}

// binTooLarge answers r, whose body was skipped for its value's size, as
// yrmcds does, which validates a request before it looks at the value's
// size.
func (c *conn) binTooLarge(r *request) error {
	s := shapes[r.op]
	switch {
	case !s.known:
		c.binUnknown(r)
	case s.noBody:
		return c.binCommand(r) // the body is ignored anyway
	default:
		r.value = []byte{0} // stands for the skipped value: not empty
		if s.valid(r) {
			c.binError(r, stTooLarge)
		} else {
			c.binError(r, stInvalid)
		}
	}
	return nil
}

// readBody reads n body bytes. A body that fits in the reader's buffer is
// peeked, and c.bodyPeeked records the bytes to discard once the request
// is done; a larger one is read into c.data.
func (c *conn) readBody(n int) ([]byte, error) {
	c.bodyPeeked = 0
	if n <= c.r.Size() {
		b, err := c.r.Peek(n)
		if err != nil {
			return nil, err
		}
		c.bodyPeeked = n
		return b, nil
	}
	c.data = slices.Grow(c.data[:0], n)[:n]
	if _, err := io.ReadFull(c.r, c.data); err != nil {
		return nil, err
	}
	return c.data, nil
}

// binCommand executes a valid request.
func (c *conn) binCommand(r *request) error {
	c.srv.counters.binOps[r.op].Add(1)
	c.srv.binCmds[r.op].Request()
	switch r.op {
	case opGet, opGetQ, opGetK, opGetKQ, opGaT, opGaTQ, opGaTK, opGaTKQ:
		return c.binGet(r)
	case opSet, opSetQ, opAdd, opAddQ, opReplace, opReplaceQ:
		return c.binStore(r)
	case opAppend, opAppendQ, opPrepend, opPrependQ:
		return c.binConcat(r)
	case opDelete, opDeleteQ:
		return c.binDelete(r)
	case opIncrement, opIncrementQ, opDecrement, opDecrementQ:
		return c.binArith(r)
	case opTouch:
		return c.binTouch(r)
	case opFlush, opFlushQ:
		return c.binFlush(r)
	case opNoop:
		return c.binNoop(r)
	case opVersion:
		return c.binVersion(r)
	case opStat:
		return c.binStat(r)
	case opKeys:
		return c.binKeys(r)
	case opQuit:
		return c.binQuit(r)
	case opQuitQ:
		return c.binQuitQ(r)
	case opLock, opLockQ:
		return c.binLock(r)
	case opUnlock, opUnlockQ:
		return c.binUnlock(r)
	case opUnlockAll, opUnlockAllQ:
		return c.binUnlockAll(r)
	case opLaG, opLaGQ, opLaGK, opLaGKQ:
		return c.binLaG(r)
	case opRaU, opRaUQ:
		return c.binRaU(r)
	}
	return nil
}

// binGet serves Get, GetQ, GetK, GetKQ and the GaT variants: a read, or a touch that returns the item.
func (c *conn) binGet(r *request) error {
	var it cache.Item
	var err error
	if exp, touch := exptimeExtra(r.extras); touch {
		c.command(fsm.OpItemGetAndTouch, r.key).Exptime = exp
		res := c.exec()
		it, err = res.Item, res.Err
	} else {
		it, err = c.srv.svc.Get(c.now, r.key)
	}
	quiet := r.op == opGetQ || r.op == opGetKQ || r.op == opGaTQ || r.op == opGaTKQ
	withKey := r.op == opGetK || r.op == opGetKQ || r.op == opGaTK || r.op == opGaTKQ
	if err != nil {
		switch {
		case unavailable(err):
			c.binError(r, stTempFailure) // even quiet: it is not a miss
		case !quiet:
			c.binError(r, stNotFound)
		}
		return nil
	}
	c.binItem(r, it, withKey)
	return nil
}

// binStore serves Set, Add, Replace and their quiet variants.
func (c *conn) binStore(r *request) error {
	flags := binary.BigEndian.Uint32(r.extras)
	exp := int64(binary.BigEndian.Uint32(r.extras[4:]))
	op := fsm.OpItemReplace
	switch r.op {
	case opSet, opSetQ:
		op = fsm.OpItemSet
	case opAdd, opAddQ:
		op = fsm.OpItemAdd
	}
	cmd := c.command(op, r.key)
	cmd.Value, cmd.Flags, cmd.Exptime, cmd.CAS = r.value, flags, exp, r.cas
	res := c.exec()
	newCAS, err := res.CAS, res.Err
	c.binStored(r, newCAS, err, r.op == opSetQ || r.op == opAddQ || r.op == opReplaceQ)
	return nil
}

// binConcat serves Append, Prepend and their quiet variants.
func (c *conn) binConcat(r *request) error {
	op := fsm.OpItemPrepend
	if r.op == opAppend || r.op == opAppendQ {
		op = fsm.OpItemAppend
	}
	cmd := c.command(op, r.key)
	cmd.Value, cmd.CAS = r.value, r.cas
	res := c.exec()
	newCAS, err := res.CAS, res.Err
	c.binStored(r, newCAS, err, r.op == opAppendQ || r.op == opPrependQ)
	return nil
}

// binDelete serves Delete and DeleteQ; the holder's delete drops the lock too.
func (c *conn) binDelete(r *request) error {
	c.command(fsm.OpItemDelete, r.key).CAS = r.cas
	err := c.exec().Err
	switch {
	case err == nil:
		if r.op == opDelete {
			c.binOK(r, 0, nil, nil, nil)
		}
	case errors.Is(err, cache.ErrNotFound), errors.Is(err, cache.ErrInvalidKey):
		if r.op == opDelete {
			c.binError(r, stNotFound)
		}
	default:
		c.binCacheError(r, err)
	}
	return nil
}

// binArith serves Increment, Decrement and their quiet variants, creating a missing item with the initial value unless the exptime is 0xffffffff.
func (c *conn) binArith(r *request) error {
	delta := binary.BigEndian.Uint64(r.extras)
	initial := binary.BigEndian.Uint64(r.extras[8:])
	exp := binary.BigEndian.Uint32(r.extras[16:])
	incr := r.op == opIncrement || r.op == opIncrementQ
	op := fsm.OpItemDecr
	if incr {
		op = fsm.OpItemIncr
	}
	cmd := c.command(op, r.key)
	cmd.Delta, cmd.CAS = delta, r.cas
	if exp != noExptime {
		// A miss stores the initial value (in one command with the
		// incr, so that no other write comes between).
		c.num = strconv.AppendUint(c.num[:0], initial, 10)
		cmd.Value, cmd.Exptime = c.num, int64(exp)
	}
	res := c.exec()
	v, newCAS, err := res.Value, res.CAS, res.Err
	if err != nil {
		c.binCacheError(r, err)
		return nil
	}
	if r.op == opIncrement || r.op == opDecrement {
		var b [8]byte
		binary.BigEndian.PutUint64(b[:], v)
		c.binOK(r, newCAS, nil, nil, b[:])
	}
	return nil
}

// binTouch serves Touch.
func (c *conn) binTouch(r *request) error {
	exp := int64(binary.BigEndian.Uint32(r.extras))
	c.command(fsm.OpItemTouch, r.key).Exptime = exp
	res := c.exec()
	casv, err := res.CAS, res.Err
	switch {
	case unavailable(err):
		c.binError(r, stTempFailure)
	case err != nil:
		c.binError(r, stNotFound)
	default:
		c.binOK(r, casv, nil, nil, nil)
	}
	return nil
}

// binFlush serves Flush and FlushQ.
func (c *conn) binFlush(r *request) error {
	var delay int64
	if len(r.extras) == 4 {
		delay = int64(binary.BigEndian.Uint32(r.extras))
	}
	c.command(fsm.OpItemFlush, nil).Exptime = delay
	if err := c.exec().Err; err != nil {
		if unavailable(err) {
			c.binError(r, stTempFailure)
			return nil
		}
		return err
	}
	if r.op == opFlush {
		c.binOK(r, 0, nil, nil, nil)
	}
	return nil
}

// binNoop serves Noop.
func (c *conn) binNoop(r *request) error {
	c.binOK(r, 0, nil, nil, nil)
	return nil
}

// binVersion serves Version.
func (c *conn) binVersion(r *request) error {
	c.binOK(r, 0, nil, nil, []byte(c.srv.version))
	return nil
}

// binStat serves Stat: one response per statistic, then an empty one.
func (c *conn) binStat(r *request) error {
	lines, _ := c.srv.stats(string(r.key), true)
	for _, kv := range lines {
		c.binOK(r, 0, nil, []byte(kv.Name), []byte(kv.Value))
	}
	c.binOK(r, 0, nil, nil, nil)
	return nil
}

// binKeys serves yrmcds's Keys: one response per live key with the prefix, then an empty one.
func (c *conn) binKeys(r *request) error {
	keys := c.srv.svc.ItemKeys(r.key)
	slices.Sort(keys)
	for _, k := range keys {
		c.binOK(r, 0, nil, []byte(k), nil)
	}
	c.binOK(r, 0, nil, nil, nil)
	return nil
}

// binQuit serves Quit: the answer, then the connection closes, its locks released.
func (c *conn) binQuit(r *request) error {
	c.unlockAll()
	c.binOK(r, 0, nil, nil, nil)
	return errClose
}

// binQuitQ serves QuitQ: the connection closes without an answer, its locks released.
func (c *conn) binQuitQ(r *request) error {
	c.unlockAll()
	return errClose
}

// binLock serves yrmcds's Lock and LockQ.
func (c *conn) binLock(r *request) error {
	c.command(fsm.OpItemLock, r.key)
	err := c.execLock().Err
	if err != nil {
		c.binCacheError(r, err)
		return nil
	}
	if r.op == opLock {
		c.binOK(r, 0, nil, nil, nil)
	}
	return nil
}

// binUnlock serves yrmcds's Unlock and UnlockQ.
func (c *conn) binUnlock(r *request) error {
	err := c.unlock(r.key)
	switch {
	case err == nil:
		if r.op == opUnlock {
			c.binOK(r, 0, nil, nil, nil)
		}
	case unavailable(err):
		c.binError(r, stTempFailure)
	case errors.Is(err, cache.ErrNotFound), errors.Is(err, cache.ErrInvalidKey):
		c.binError(r, stNotFound)
	default:
		c.binError(r, stNotLocked)
	}
	return nil
}

// binUnlockAll serves yrmcds's UnlockAll and UnlockAllQ.
func (c *conn) binUnlockAll(r *request) error {
	if err := c.unlockAll(); unavailable(err) {
		c.binError(r, stTempFailure)
		return nil
	}
	if r.op == opUnlockAll {
		c.binOK(r, 0, nil, nil, nil)
	}
	return nil
}

// binLaG serves yrmcds's lock-and-get: LaG, LaGQ, LaGK, LaGKQ.
func (c *conn) binLaG(r *request) error {
	mode := cache.LockGet
	exp, touch := exptimeExtra(r.extras)
	if touch {
		mode = cache.LockTouch
	}
	cmd := c.command(fsm.OpItemLock, r.key)
	cmd.LockMode, cmd.Exptime = mode, exp
	res := c.execLock()
	it, err := res.Item, res.Err
	if err != nil {
		// LaGKQ is silent on a miss; LaGQ is not (yrmcds.md 10).
		if r.op == opLaGKQ && errors.Is(err, cache.ErrNotFound) {
			return nil
		}
		c.binCacheError(r, err)
		return nil
	}
	c.binItem(r, it, r.op == opLaGK || r.op == opLaGKQ)
	return nil
}

// binRaU serves yrmcds's replace-and-unlock: RaU and RaUQ.
func (c *conn) binRaU(r *request) error {
	flags := binary.BigEndian.Uint32(r.extras)
	exp := int64(binary.BigEndian.Uint32(r.extras[4:]))
	cmd := c.command(fsm.OpItemReplaceAndUnlock, r.key)
	cmd.Value, cmd.Flags, cmd.Exptime, cmd.CAS = r.value, flags, exp, r.cas
	res := c.exec()
	newCAS, err := res.CAS, res.Err
	if err != nil {
		c.binCacheError(r, err)
		return nil
	}
	if r.op == opRaU {
		c.binOK(r, newCAS, nil, nil, nil)
	}
	return nil
}

// exptimeExtra reads the optional 4-byte exptime of Get, GaT and LaG.
func exptimeExtra(extras []byte) (exp int64, ok bool) {
	if len(extras) != 4 {
		return 0, false
	}
	e := binary.BigEndian.Uint32(extras)
	if e == noExptime {
		return 0, false
	}
	return int64(e), true
}

// binStored answers a storage command.
func (c *conn) binStored(r *request, newCAS uint64, err error, quiet bool) {
	if err != nil {
		c.binCacheError(r, err)
		return
	}
	if !quiet {
		c.binOK(r, newCAS, nil, nil, nil)
	}
}

// binItem answers a hit: flags as extras, the key when asked, the value.
func (c *conn) binItem(r *request, it cache.Item, withKey bool) {
	var flags [4]byte
	binary.BigEndian.PutUint32(flags[:], it.Flags)
	var key []byte
	if withKey {
		key = r.key
	}
	c.binOK(r, it.CAS, flags[:], key, it.Value)
}

// binOK writes a success response.
func (c *conn) binOK(r *request, casv uint64, extras, key, value []byte) {
	c.binWrite(r.op, stOK, r.opaque, casv, extras, key, value)
}

// binError writes an error response: no extras, no key, cas 0, the
// status's message as the value.
func (c *conn) binError(r *request, s uint16) {
	switch s {
	case stInvalid, stTooLarge, stOutOfMemory:
		c.srv.binCmds[r.op].Error()
	}
	text := statusText(s)
	c.binHeader(r.op, s, r.opaque, 0, nil, 0, len(text))
	c.w.WriteString(text)
}

// binUnknown answers an unknown opcode as yrmcds does: opcode 0x51.
func (c *conn) binUnknown(r *request) {
	text := statusText(stUnknown)
	c.binHeader(opUnknown, stUnknown, r.opaque, 0, nil, 0, len(text))
	c.w.WriteString(text)
}

func (c *conn) binWrite(op byte, status uint16, opaque uint32, casv uint64, extras, key, value []byte) {
	c.binHeader(op, status, opaque, casv, extras, len(key), len(value))
	c.w.Write(key)
	c.w.Write(value)
}

// binHeader writes a response header and its extras. They are built in
// the writer's free space (AvailableBuffer), so that neither a header nor
// extras on the caller's stack escape to the heap: a reply costs no
// allocation.
func (c *conn) binHeader(op byte, status uint16, opaque uint32, casv uint64, extras []byte, keyLen, valueLen int) {
	h := c.w.AvailableBuffer()
	h = append(h, magicResponse, op, byte(keyLen>>8), byte(keyLen), byte(len(extras)), 0)
	h = binary.BigEndian.AppendUint16(h, status)
	h = binary.BigEndian.AppendUint32(h, uint32(len(extras)+keyLen+valueLen))
	h = binary.BigEndian.AppendUint32(h, opaque)
	h = binary.BigEndian.AppendUint64(h, casv)
	h = append(h, extras...)
	c.w.Write(h)
}
