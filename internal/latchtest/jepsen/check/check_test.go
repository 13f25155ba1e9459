package check

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// acq, rel and lost write lock operations by hand: times in nanoseconds.
func acq(owner string, call, ret int64, out Outcome, token uint64) Op {
	op := Op{Owner: owner, Proto: "v3", Kind: Acquire, Keys: []string{"k"}, Mode: Exclusive, Strict: true, Call: call, Return: ret, Outcome: out, Watched: true}
	if out == OK && token > 0 {
		op.Tokens = []uint64{token}
	}
	return op
}

func rel(owner string, call, ret int64, out Outcome) Op {
	return Op{Owner: owner, Proto: "v3", Kind: Release, Keys: []string{"k"}, Call: call, Return: ret, Outcome: out, Watched: true}
}

func lost(owner string, at int64) Op {
	return Op{Owner: owner, Proto: "v3", Kind: Lost, Keys: []string{"k"}, Call: at, Outcome: Unknown}
}

func unwatched(op Op) Op {
	op.Proto, op.Watched, op.Tokens = "v2", false, nil
	return op
}

// leased makes op a Redis client's, whose hold only its lease (in
// nanoseconds, on an Acquire) or its release ends.
func leased(op Op, lease int64) Op {
	op.Proto, op.Watched = "redis", false
	if op.Kind == Acquire {
		op.Lease = lease
	}
	return op
}

// ext renews owner's lease to lease from its call.
func ext(owner string, call, ret int64, out Outcome, lease int64) Op {
	return Op{Owner: owner, Proto: "redis", Kind: Extend, Keys: []string{"k"}, Lease: lease, Call: call, Return: ret, Outcome: out}
}

func shared(op Op, limit uint32) Op {
	op.Mode, op.Limit, op.Strict = Shared, limit, false
	return op
}

func TestLocks(t *testing.T) {
	tests := []struct {
		name         string
		ops          []Op
		linearizable bool
		doubles      int
		regressions  int
		partial      int
		stuck        int
	}{
		{"one after the other", []Op{
			acq("a", 0, 10, OK, 1), rel("a", 20, 30, OK), acq("b", 35, 40, OK, 2), rel("b", 50, 60, OK),
		}, true, 0, 0, 0, 0},
		{"a waiter granted as the holder releases", []Op{
			acq("a", 0, 10, OK, 1), acq("b", 5, 40, OK, 2), rel("a", 20, 30, OK), rel("b", 50, 60, OK),
		}, true, 0, 0, 0, 0},
		{"double grant", []Op{
			acq("a", 0, 10, OK, 1), acq("b", 15, 20, OK, 2), rel("a", 30, 40, OK), rel("b", 50, 60, OK),
		}, false, 1, 0, 0, 0},
		{"busy while free", []Op{
			acq("a", 0, 10, OK, 1), rel("a", 20, 30, OK), acq("b", 40, 50, Busy, 0),
		}, false, 0, 0, 0, 0},
		{"busy while held", []Op{
			acq("a", 0, 10, OK, 1), acq("b", 12, 15, Busy, 0), rel("a", 20, 30, OK),
		}, true, 0, 0, 0, 0},
		{"an unwatched hold may end when its release fails", []Op{
			unwatched(acq("a", 0, 10, OK, 0)), unwatched(acq("b", 15, 20, OK, 0)), unwatched(rel("a", 30, 40, Unknown)), unwatched(rel("b", 50, 60, OK)),
		}, true, 0, 0, 0, 0},
		{"an unwatched hold released OK is confirmed", []Op{
			unwatched(acq("a", 0, 10, OK, 0)), unwatched(acq("b", 15, 20, OK, 0)), unwatched(rel("a", 30, 40, OK)), unwatched(rel("b", 50, 60, OK)),
		}, false, 1, 0, 0, 0},
		{"a watched hold the server released early", []Op{
			acq("a", 0, 10, OK, 1), acq("b", 15, 20, OK, 2), rel("a", 30, 40, Fail), rel("b", 50, 60, OK),
		}, false, 1, 0, 0, 0},
		{"a watched hold lost, then granted to another", []Op{
			acq("a", 0, 10, OK, 1), lost("a", 12), acq("b", 15, 20, OK, 2), rel("b", 50, 60, OK),
		}, true, 0, 0, 0, 0},
		{"granted to another before the holder lost it", []Op{
			acq("a", 0, 10, OK, 1), acq("b", 12, 14, OK, 2), lost("a", 20), rel("b", 50, 60, OK),
		}, false, 1, 0, 0, 0},
		{"an unknown grant, released later", []Op{
			acq("a", 0, 0, Unknown, 0), lost("a", 0), acq("b", 5, 10, Busy, 0), acq("c", 20, 30, OK, 3), rel("c", 40, 50, OK),
		}, true, 0, 0, 0, 0},
		{"token goes back", []Op{
			acq("a", 0, 10, OK, 5), rel("a", 20, 30, OK), acq("b", 40, 50, OK, 3), rel("b", 60, 70, OK),
		}, false, 0, 1, 0, 0},
		{"semaphore within its limit", []Op{
			shared(acq("a", 0, 10, OK, 1), 2), shared(acq("b", 0, 10, OK, 2), 2), shared(acq("c", 5, 30, OK, 3), 2),
			rel("a", 20, 25, OK), rel("b", 40, 45, OK), rel("c", 40, 45, OK),
		}, true, 0, 0, 0, 0},
		{"semaphore over its limit", []Op{
			shared(acq("a", 0, 10, OK, 1), 2), shared(acq("b", 0, 10, OK, 2), 2), shared(acq("c", 5, 12, OK, 3), 2),
			rel("a", 20, 25, OK), rel("b", 40, 45, OK), rel("c", 40, 45, OK),
		}, false, 1, 0, 0, 0},
		{"writer beside a reader", []Op{
			shared(acq("a", 0, 10, OK, 1), 0), acq("b", 5, 12, OK, 2), rel("a", 20, 25, OK), rel("b", 40, 45, OK),
		}, false, 1, 0, 0, 0},
		{"readers together", []Op{
			shared(acq("a", 0, 10, OK, 1), 0), shared(acq("b", 5, 12, OK, 2), 0), rel("a", 20, 25, OK), rel("b", 40, 45, OK),
		}, true, 0, 0, 0, 0},
		{"partial multi-key grant", []Op{
			{Owner: "a", Proto: "v3", Kind: Acquire, Keys: []string{"k", "l"}, Mode: Exclusive, Tokens: []uint64{1}, Call: 0, Return: 10, Outcome: OK, Watched: true},
		}, true, 0, 0, 1, 0},
		{"a lease ends, then another holder", []Op{
			leased(acq("a", 0, 10, OK, 1), 100), acq("b", 150, 160, OK, 2), rel("b", 200, 210, OK), leased(rel("a", 300, 310, Fail), 0),
		}, true, 0, 0, 0, 0},
		{"a lease ends, its holder never releases", []Op{
			leased(acq("a", 0, 10, OK, 1), 100), acq("b", 150, 160, OK, 2), rel("b", 200, 210, OK),
		}, true, 0, 0, 0, 0},
		{"a lease ends, another protocol's holder before its release", []Op{
			leased(acq("a", 0, 10, OK, 0), 100), unwatched(acq("b", 150, 160, OK, 0)), unwatched(rel("b", 200, 210, OK)), leased(rel("a", 220, 230, Fail), 0),
		}, true, 0, 0, 0, 0},
		{"granted to another while a lease runs", []Op{
			leased(acq("a", 0, 10, OK, 1), 100), acq("b", 50, 60, OK, 2), rel("b", 200, 210, OK), leased(rel("a", 300, 310, Fail), 0),
		}, false, 1, 0, 0, 0},
		{"granted to another while a lease runs, never released", []Op{
			leased(acq("a", 0, 10, OK, 1), 100), unwatched(acq("b", 50, 60, OK, 0)), unwatched(rel("b", 200, 210, OK)),
		}, false, 1, 0, 0, 0},
		{"a release answered OK past the lease confirms the hold", []Op{
			leased(acq("a", 0, 10, OK, 1), 100), acq("b", 150, 160, OK, 2), leased(rel("a", 300, 310, OK), 0), rel("b", 320, 330, OK),
		}, false, 1, 0, 0, 0},
		{"a release refused before the lease's end", []Op{
			leased(acq("a", 0, 10, OK, 1), 100), leased(rel("a", 50, 60, Fail), 0),
		}, false, 0, 0, 0, 0},
		{"a release refused as the lease may end", []Op{
			leased(acq("a", 0, 10, OK, 1), 100), leased(rel("a", 50, 120, Fail), 0),
		}, true, 0, 0, 0, 0},
		{"a release with an unknown outcome", []Op{
			leased(acq("a", 0, 10, OK, 1), 100), leased(rel("a", 50, 0, Unknown), 0), acq("b", 70, 80, OK, 2), rel("b", 90, 95, OK),
		}, true, 0, 0, 0, 0},
		{"a renewal moves the lease's end", []Op{
			leased(acq("a", 0, 10, OK, 1), 100), ext("a", 80, 90, OK, 100), acq("b", 150, 160, OK, 2), rel("b", 200, 210, OK),
		}, false, 1, 0, 0, 0},
		{"a renewal answered not held after the lease", []Op{
			leased(acq("a", 0, 10, OK, 1), 100), ext("a", 120, 130, Fail, 100), acq("b", 150, 160, OK, 2), rel("b", 200, 210, OK),
		}, true, 0, 0, 0, 0},
		{"a renewal answered not held before the lease's end", []Op{
			leased(acq("a", 0, 10, OK, 1), 100), ext("a", 50, 60, Fail, 100),
		}, false, 0, 0, 0, 0},
		{"a renewal answered held with no holder", []Op{
			leased(acq("a", 0, 10, OK, 1), 100), acq("b", 150, 160, OK, 2), ext("a", 170, 180, OK, 100), rel("b", 200, 210, OK),
		}, false, 1, 0, 0, 0},
		{"a renewal to a shorter lease, outcome unknown", []Op{
			leased(acq("a", 0, 10, OK, 1), 100), ext("a", 20, 0, Unknown, 30), acq("b", 60, 70, OK, 2), rel("b", 80, 90, OK),
		}, true, 0, 0, 0, 0},
		{"busy while a lease may still run", []Op{
			leased(acq("a", 0, 10, OK, 1), 100), acq("b", 50, 60, Busy, 0), acq("c", 150, 160, Busy, 0), acq("d", 170, 180, OK, 2), rel("d", 200, 210, OK),
		}, true, 0, 0, 0, 0},
		{"a grant answered after its lease ended, another holder meanwhile", []Op{
			leased(acq("a", 0, 150, OK, 1), 100), acq("b", 120, 130, OK, 2), leased(rel("a", 155, 160, Fail), 0), rel("b", 200, 210, OK),
		}, true, 0, 0, 0, 0},
		{"a lease's token below an earlier grant's", []Op{
			acq("b", 0, 10, OK, 5), rel("b", 20, 30, OK), leased(acq("a", 40, 50, OK, 3), 100), leased(rel("a", 60, 70, OK), 0),
		}, false, 0, 1, 0, 0},
		{"stuck waiter", []Op{
			acq("a", 0, 10, OK, 1), {Owner: "b", Proto: "v3", Kind: Acquire, Keys: []string{"k"}, Mode: Exclusive, Call: 5, Outcome: Unknown, Stuck: true},
			lost("b", 5), rel("a", 20, 30, OK),
		}, true, 0, 0, 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for i := range tt.ops {
				tt.ops[i].Index = i
			}
			r, err := Locks(tt.ops, 0, dir)
			if err != nil {
				t.Fatal(err)
			}
			if r.Linearizable != tt.linearizable || r.DoubleGrants != tt.doubles || r.TokenRegressions != tt.regressions || r.PartialGrants != tt.partial || r.Stuck != tt.stuck {
				t.Errorf("linearizable %v, double grants %d, token regressions %d, partial %d, stuck %d; want %v, %d, %d, %d, %d\n%s",
					r.Linearizable, r.DoubleGrants, r.TokenRegressions, r.PartialGrants, r.Stuck,
					tt.linearizable, tt.doubles, tt.regressions, tt.partial, tt.stuck, strings.Join(r.Problems, "\n"))
			}
			wantSafe := tt.linearizable && tt.doubles+tt.regressions+tt.partial+tt.stuck == 0
			if r.Safe() != wantSafe {
				t.Errorf("Safe() = %v, want %v", r.Safe(), wantSafe)
			}
			html, _ := filepath.Glob(filepath.Join(dir, "*.html"))
			if (len(html) > 0) != !tt.linearizable {
				t.Errorf("visualisations %v for a history linearizable=%v", html, tt.linearizable)
			}
			for _, f := range html {
				if b, err := os.ReadFile(f); err != nil || len(b) < 1000 {
					t.Errorf("visualisation %s: %d bytes, %v", f, len(b), err)
				}
			}
		})
	}
}

func write(owner string, token uint64, add int, call, ret int64, out Outcome) Op {
	return Op{Owner: owner, Kind: Write, Keys: []string{"r"}, Token: token, Add: add, Call: call, Return: ret, Outcome: out}
}

func TestRegister(t *testing.T) {
	tests := []struct {
		name       string
		ops        []Op
		final      []int
		accepted   []Accepted
		lost, viol int
	}{
		{"every write kept in order", []Op{write("a", 1, 1, 0, 10, OK), write("b", 2, 2, 20, 30, OK)},
			[]int{1, 2}, []Accepted{{1, "a", 1}, {2, "b", 2}}, 0, 0},
		{"a stale write refused", []Op{write("b", 2, 2, 20, 30, OK), write("a", 1, 1, 25, 40, Fail)},
			[]int{2}, []Accepted{{2, "b", 2}}, 0, 0},
		{"a write lost", []Op{write("b", 2, 2, 20, 30, OK), write("a", 1, 1, 35, 40, OK)},
			[]int{1}, []Accepted{{2, "b", 2}, {1, "a", 1}}, 1, 1},
		{"a write overtaken", []Op{write("a", 1, 1, 0, 10, OK), write("b", 2, 2, 20, 30, OK)},
			[]int{2, 1}, []Accepted{{1, "a", 1}, {2, "b", 2}}, 1, 0},
		{"one token, two owners", []Op{write("a", 1, 1, 0, 10, OK), write("b", 1, 2, 20, 30, OK)},
			[]int{1, 2}, []Accepted{{1, "a", 1}, {1, "b", 2}}, 0, 1},
		{"an unacknowledged write may be lost", []Op{write("a", 1, 1, 0, 10, Unknown), write("b", 2, 2, 20, 30, OK)},
			[]int{2}, []Accepted{{2, "b", 2}}, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Register(tt.ops, map[string][]int{"r": tt.final}, map[string][]Accepted{"r": tt.accepted})
			if r.LostWrites != tt.lost || r.TokenViolations != tt.viol {
				t.Errorf("lost %d, token violations %d; want %d, %d\n%s", r.LostWrites, r.TokenViolations, tt.lost, tt.viol, strings.Join(r.Problems, "\n"))
			}
			if r.Safe() != (tt.lost+tt.viol == 0) {
				t.Errorf("Safe() = %v", r.Safe())
			}
		})
	}
}
