package node

import (
	"errors"
	"testing"
	"time"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/fsm"
	"github.com/latchd/latch/internal/zset"
)

// TestOwnedZSet: the node proposes the sorted-set kinds with their
// arguments (Command.ZSet), its limits apply, and OwnedZGet reads a copy
// that the state's later changes do not reach.
func TestOwnedZSet(t *testing.T) {
	n := newNode(t, Config{ZSet: zset.Limits{MaxMembers: 2}})
	zcmd := func(kind fsm.OwnedKind, key string, a fsm.ZSetArgs) *fsm.Command {
		return &fsm.Command{Op: fsm.OpOwned, Owned: kind, Req: latch.LockRequest{Keys: []string{key}}, ZSet: a}
	}
	add := fsm.ZSetArgs{Pairs: []zset.Pair{{Score: 1, Member: "a"}, {Score: 2, Member: "b"}}}
	if r := n.Owned(zcmd(fsm.OwnedZAdd, "sem", add)); r.Err != nil || r.Count != 2 || r.ZKeys != 1 {
		t.Fatalf("ZADD: %+v", r)
	}
	r, at := n.OwnedZGet("sem")
	if r.Err != nil || r.Found != 1 || r.ZSet.String() != `{"a":1 "b":2}` || at == 0 {
		t.Fatalf("OwnedZGet: %+v at %d", r, at)
	}
	read := r.ZSet
	if r := n.Owned(zcmd(fsm.OwnedZAdd, "sem", fsm.ZSetArgs{Pairs: []zset.Pair{{Score: 3, Member: "c"}}})); !errors.Is(r.Err, fsm.ErrZSetLimit) {
		t.Fatalf("ZADD past the limit: %+v", r)
	}
	if r := n.Owned(zcmd(fsm.OwnedZRem, "sem", fsm.ZSetArgs{Members: []string{"a"}})); r.Err != nil || r.Count != 1 {
		t.Fatalf("ZREM: %+v", r)
	}
	if read.String() != `{"a":1 "b":2}` {
		t.Fatalf("a read's copy changed with the state: %v", read)
	}
	// A watched transaction of both kinds of key.
	g, _ := n.OwnedGet("sem")
	w := fsm.WatchOfResult("sem", &g)
	tx := &fsm.Command{Op: fsm.OpOwnedTx, Watch: []fsm.Watch{w}, Tx: []fsm.Command{
		*zcmd(fsm.OwnedZExpire, "sem", fsm.ZSetArgs{}),
		{Op: fsm.OpOwned, Owned: fsm.OwnedAcquire, Value: []byte("me"), Req: latch.LockRequest{Keys: []string{"lock"}, Lease: time.Minute}},
	}}
	tx.Tx[0].Req.Lease = time.Minute
	if r := n.Owned(tx); r.Err != nil || len(r.Tx) != 2 || r.Tx[0].Count != 1 || r.Tx[1].Count != 1 {
		t.Fatalf("EXEC: %+v", r)
	}
	if r := n.Owned(tx); !errors.Is(r.Err, fsm.ErrWatchChanged) {
		t.Fatalf("EXEC after the set changed: %+v", r)
	}
	if r, _ := n.OwnedZGet("lock"); !errors.Is(r.Err, fsm.ErrWrongType) {
		t.Fatalf("OwnedZGet of a lock: %+v", r)
	}
}
