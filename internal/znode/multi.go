package znode

type undoKind uint8

const (
	undoCreate undoKind = iota + 1
	undoDelete
	undoSetData
)

// undo records what one applied op of a Multi changed, to put it back.
type undo struct {
	kind    undoKind
	n       *node
	data    []byte // setData: the old data
	version int32  // setData
	cseq    int32  // create: the parent's counter before
	pzxid   int64  // create, delete: the parent's pzxid before
	mzxid   int64  // setData
	mtime   int64  // setData
}

// Multi applies ops all or nothing and consumes one zxid, which every op
// shares. On the first op that fails, every earlier op is rolled back
// (data, stats, sequence counters and events included) and the results
// are OK (with no path or stat) for the ops before it, its error for it,
// and RuntimeInconsistency for the ops after it. Sequential creates see
// the multi's earlier ops. Only OpCreate, OpDelete, OpSetData and OpCheck
// may be inside; any other op fails with BadArguments. An empty multi
// succeeds with no results.
func (t *Tree) Multi(session int64, now int64, ops []Op) []Result {
	t.zxid++
	results := make([]Result, len(ops))
	events := len(t.events)
	t.undo = t.undo[:0]
	for i, op := range ops {
		var r Result
		switch op.Kind {
		case OpCreate, OpDelete, OpSetData, OpCheck:
			r = t.apply(session, now, t.zxid, op, true)
		default:
			r = Result{Code: BadArguments}
		}
		if r.Code == OK {
			results[i] = r
			continue
		}
		t.rollback()
		clear(t.events[events:])
		t.events = t.events[:events]
		for j := range results[:i] {
			results[j] = Result{Code: OK}
		}
		results[i] = Result{Code: r.Code}
		for j := i + 1; j < len(results); j++ {
			results[j] = Result{Code: RuntimeInconsistency}
		}
		break
	}
	clear(t.undo)
	t.undo = t.undo[:0]
	return results
}

// rollback undoes the logged changes, newest first.
func (t *Tree) rollback() {
	for i := len(t.undo) - 1; i >= 0; i-- {
		u := &t.undo[i]
		n := u.n
		switch u.kind {
		case undoCreate:
			parent := n.parent
			delete(parent.children, n.name)
			parent.cseq = u.cseq
			parent.pzxid = u.pzxid
			t.nodes--
			t.unindex(n)
		case undoDelete:
			parent := n.parent
			parent.children[n.name] = n
			parent.pzxid = u.pzxid
			t.nodes++
			t.index(n)
		case undoSetData:
			n.data = u.data
			n.version = u.version
			n.mzxid = u.mzxid
			n.mtime = u.mtime
		}
	}
}
