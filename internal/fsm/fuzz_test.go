package fsm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/cache"
	"github.com/latchd/latch/internal/engine"
	"github.com/latchd/latch/internal/znode"
	"github.com/latchd/latch/internal/zset"
)

// FuzzDecodeBatch decodes its input as a batch. Decoding must never panic,
// and fail only with ErrMalformed or ErrVersion, leaving the batch empty.
// When it succeeds, the encoding must be canonical: every command is
// normalized (it has no field its Op does not use, and no empty slice),
// re-encoding the commands in the input's version gives back the input
// byte for byte, decoding that gives the same commands, and DecodeCommand,
// run along the input, finds them too. A version 1 batch's commands have
// every generation AnyGen, and keep it re-encoded in the current version.
func FuzzDecodeBatch(f *testing.F) {
	cmds := testBatch(f)
	f.Add(AppendBatch(nil, nil))
	f.Add(AppendBatch(nil, cmds))
	for i := range cmds {
		f.Add(AppendBatch(nil, cmds[i:i+1]))
	}
	full := make([]Command, 0, numOps-1)
	for _, op := range allOps() {
		full = append(full, fullCommand(op))
	}
	f.Add(AppendBatch(nil, full))
	f.Add(appendBatch(nil, cmds, batchVersion1))
	f.Add(appendBatch(nil, full, batchVersion1))
	tick := []byte{byte(OpTick), 0, 0, 0}
	for _, junk := range [][]byte{
		{},
		{0},
		{BatchVersion},
		{2, 0},
		{BatchVersion, 1},
		append([]byte{BatchVersion, 1}, tick...),
		append([]byte{BatchVersion, 1}, append(tick, 0)...),
		append([]byte{BatchVersion, 2}, tick...),
		{BatchVersion, 1, byte(OpTick), 0x80, 0, 0, 0},
		{BatchVersion, 1, byte(OpRelease), 0, 0, 0, 1, 2, 1, 'a'},
		{BatchVersion, 1, byte(OpAcquire), 0, 0, 0, 1, 1, 1, 'a', 2, 0, 0, 0, 0},
		{BatchVersion, 1, byte(OpAcquire), 0, 0, 0, 1, 0, 1, 1, 'a', 2, 0, 0, 0, 0},
		{batchVersion1, 1, byte(OpAcquire), 0, 0, 0, 1, 1, 1, 'a', 0, 0, 0, 0, 0},
		{batchVersion1, 1, byte(OpKeepAlive), 0, 0, 0, 1, 0},
		{3, 1, byte(OpTick), 0, 0, 0},
		bytes.Repeat([]byte{0xff}, 32),
		[]byte("\x01\x03 not a batch at all"),
	} {
		f.Add(junk)
	}

	f.Fuzz(func(t *testing.T, data []byte) {
		var b Batch
		err := DecodeBatch(data, &b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrVersion) {
				t.Fatalf("DecodeBatch error %v is neither ErrMalformed nor ErrVersion", err)
			}
			if len(b.Cmds) != 0 {
				t.Fatalf("DecodeBatch left %d commands after error %v", len(b.Cmds), err)
			}
			return
		}
		for i, c := range b.Cmds {
			n := c
			if !normalize(&n) {
				t.Fatalf("command %d: decoded an unknown %v", i, c.Op)
			}
			if diff := cmp.Diff(n, c, cmpopts.EquateNaNs()); diff != "" { // a NaN score decodes as written
				t.Fatalf("command %d is not normalized (-normalized +decoded):\n%s", i, diff)
			}
		}
		version := data[0]
		if version == batchVersion1 {
			for i, c := range b.Cmds {
				if carriesGen(c.Op) && c.Gen != AnyGen {
					t.Fatalf("command %d: version 1 %v decoded with generation %d, not AnyGen", i, c.Op, c.Gen)
				}
			}
		}
		enc := appendBatch(nil, b.Cmds, version)
		if !bytes.Equal(enc, data) {
			t.Fatalf("re-encoding differs from the input:\n%x\n%x", data, enc)
		}
		var b2 Batch
		if err := DecodeBatch(enc, &b2); err != nil {
			t.Fatalf("decoding the re-encoded batch: %v", err)
		}
		if diff := cmp.Diff(b.Cmds, b2.Cmds, cmpopts.EquateNaNs()); diff != "" {
			t.Fatalf("re-encoded batch decodes to other commands (-first +second):\n%s", diff)
		}
		if enc2 := appendBatch(nil, b2.Cmds, version); !bytes.Equal(enc2, enc) {
			t.Fatalf("second re-encoding differs:\n%x\n%x", enc, enc2)
		}
		if version != BatchVersion {
			var b3 Batch
			if err := DecodeBatch(AppendBatch(nil, b.Cmds), &b3); err != nil {
				t.Fatalf("decoding the batch re-encoded in version %d: %v", BatchVersion, err)
			}
			if diff := cmp.Diff(b.Cmds, b3.Cmds, cmpopts.EquateNaNs()); diff != "" {
				t.Fatalf("the batch re-encoded in version %d decodes to other commands (-first +second):\n%s", BatchVersion, diff)
			}
		}

		// The commands one by one, after the version and count.
		_, off := binary.Uvarint(data[1:])
		off++
		for i := range b.Cmds {
			var c Command
			n, err := decodeCommand(data[off:], &c, version)
			if err != nil {
				t.Fatalf("DecodeCommand of command %d: %v", i, err)
			}
			if diff := cmp.Diff(b.Cmds[i], c, cmpopts.EquateNaNs()); diff != "" {
				t.Fatalf("command %d: DecodeCommand and DecodeBatch differ (-batch +command):\n%s", i, diff)
			}
			off += n
		}
		if off != len(data) {
			t.Fatalf("the commands end at %d of %d bytes", off, len(data))
		}
	})
}

// FuzzCommandRoundTrip builds a command from its arguments, with any op
// and fields (keys are the \x00-separated parts of keys; modes are taken
// modulo their number of values), and checks that it decodes as its
// normalized self, which encodes as it does.
func FuzzCommandRoundTrip(f *testing.F) {
	add := func(c Command) {
		f.Add(uint8(c.Op), c.At, c.Origin, c.Seq, uint64(c.Session), c.Gen,
			strings.Join(c.Req.Keys, "\x00"), uint8(c.Req.Mode), c.Req.Limit,
			int64(c.Req.Wait), int64(c.Req.Lease), uint8(c.Req.Relock),
			uint64(c.Waiter), int64(c.TTL), int64(c.LockDelay), uint64(c.Token),
			c.Key, c.Value, c.Flags, c.Exptime, c.CAS, c.Delta, uint8(c.LockMode),
			uint8(c.Owned), uint8(c.OwnedFlags), c.Prefix)
	}
	for _, c := range testBatch(f) {
		add(c)
	}
	for _, op := range allOps() {
		add(fullCommand(op))
	}

	f.Fuzz(func(t *testing.T, op uint8, at int64, origin, seq, session, gen uint64,
		keys string, mode uint8, limit uint32, wait, lease int64, relock uint8,
		waiter uint64, ttl, lockDelay int64, token uint64,
		key, value []byte, flags uint32, exptime int64, cas, delta uint64, lockMode uint8,
		owned, ownedFlags uint8, ownedPrefix uint32) {
		c := Command{
			Op:     Op(op%uint8(numOps-1) + 1),
			At:     at,
			Origin: origin,
			Seq:    seq,

			Session: latch.SessionID(session),
			Gen:     gen,
			Req: latch.LockRequest{
				Mode:   latch.Mode(mode % 2),
				Limit:  limit,
				Wait:   time.Duration(wait),
				Lease:  time.Duration(lease),
				Relock: latch.Relock(relock % 2),
			},
			Waiter:    engine.WaiterID(waiter),
			TTL:       time.Duration(ttl),
			LockDelay: time.Duration(lockDelay),
			Token:     latch.Token(token),

			Key:      key,
			Value:    value,
			Flags:    flags,
			Exptime:  exptime,
			CAS:      cas,
			Delta:    delta,
			LockMode: cache.LockMode(lockMode % 3),

			Owned:      OwnedKind(owned%uint8(numOwnedKinds-1) + 1),
			OwnedFlags: OwnedFlags(ownedFlags) & ownedFlagsMask,
			Prefix:     ownedPrefix,
		}
		if keys != "" {
			c.Req.Keys = strings.Split(keys, "\x00")
		}
		if c.Op == OpOwned && c.Owned.IsZSet() {
			// The sorted-set arguments, from the other inputs.
			c.ZSet = ZSetArgs{
				Flags:   zset.AddFlags(ownedFlags) & zsetFlagsMask,
				Members: c.Req.Keys,
				Range:   zset.Range{Min: zset.Bound{Value: math.Float64frombits(uint64(wait)), Excl: mode&1 != 0}, Max: zset.Bound{Value: math.Float64frombits(uint64(lease)), Excl: relock&1 != 0}},
				Start:   wait, Stop: ttl,
			}
			for i, m := range c.Req.Keys {
				c.ZSet.Pairs = append(c.ZSet.Pairs, zset.Pair{Score: math.Float64frombits(uint64(lockDelay) + uint64(i)), Member: m})
			}
		}
		want := c
		if !normalize(&want) {
			t.Fatalf("normalize does not know %v", c.Op)
		}

		prefix := []byte("prefix")
		enc := AppendCommand(prefix, &c)
		if !bytes.Equal(enc[:len(prefix)], prefix) {
			t.Fatalf("AppendCommand overwrote its dst: %q", enc[:len(prefix)])
		}
		enc = enc[len(prefix):]

		// Decode with a command after it, which must be left alone.
		data := append(bytes.Clone(enc), byte(OpTick), 0, 0, 0)
		var got Command
		n, err := DecodeCommand(data, &got)
		if err != nil {
			t.Fatalf("DecodeCommand(%x): %v", enc, err)
		}
		if n != len(enc) {
			t.Fatalf("DecodeCommand used %d bytes of the %d of the command", n, len(enc))
		}
		if diff := cmp.Diff(want, got, cmpopts.EquateNaNs()); diff != "" {
			t.Fatalf("round trip (-want +got):\n%s", diff)
		}
		if enc2 := AppendCommand(nil, &want); !bytes.Equal(enc2, enc) {
			t.Fatalf("the normalized command encodes otherwise:\n%x\n%x", enc, enc2)
		}
	})
}

// FuzzDecodeZOps: any input decodes to znode operations or to an error
// wrapping ErrZOps, never a panic; what decodes encodes back to the same
// bytes (the encoding is canonical).
func FuzzDecodeZOps(f *testing.F) {
	f.Add([]byte{})
	f.Add(AppendZOps(nil, nil))
	f.Add(AppendZOps(nil, []znode.Op{
		{Kind: znode.OpCreate, Path: "/locks/l-", Data: []byte("me"), Mode: znode.EphemeralSequential, ACL: []znode.ACL{{Perms: znode.PermAll, Scheme: "world", ID: "anyone"}}},
		{Kind: znode.OpDelete, Path: "/a", Version: -1},
		{Kind: znode.OpSetData, Path: "/b", Data: []byte{}, Version: 3},
	}))
	f.Fuzz(func(t *testing.T, b []byte) {
		ops, err := DecodeZOps(b, nil)
		if err != nil {
			if !errors.Is(err, ErrZOps) {
				t.Fatalf("error %v does not wrap ErrZOps", err)
			}
			return
		}
		if again := AppendZOps(nil, ops); !bytes.Equal(again, b) {
			t.Fatalf("% x decodes to %+v, which encodes to % x", b, ops, again)
		}
	})
}
