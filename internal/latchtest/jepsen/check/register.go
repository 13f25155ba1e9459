package check

import (
	"cmp"
	"slices"
)

// Accepted is a write the fenced register took: the token it carried, the
// owner that sent it and the value it appended.
type Accepted struct {
	Token uint64 `json:"token"`
	Owner string `json:"owner"`
	Add   int    `json:"add"`
}

// RegisterReport is what Register found.
type RegisterReport struct {
	Writes   int // write requests
	Acked    int // writes the register acknowledged
	Rejected int // register operations refused as stale (fencing at work)
	// LostWrites counts acknowledged writes whose value is missing from
	// the register's final state, or comes there before the value of a
	// write acknowledged before it was sent (overtaken).
	LostWrites int
	// TokenViolations counts accepted writes whose token is below the
	// previous accepted write's, or equal to it from another owner.
	TokenViolations int
	Problems        []string
}

// Safe says whether the report found nothing wrong.
func (r RegisterReport) Safe() bool { return r.LostWrites == 0 && r.TokenViolations == 0 }

// Register checks the fenced register's workload: the Write operations of
// ops (a Write appends Add to what it read), the register's final state
// of each key and the writes it accepted, in order.
func Register(ops []Op, final map[string][]int, accepted map[string][]Accepted) RegisterReport {
	var r RegisterReport
	acked := map[string][]Op{}
	for _, op := range ops {
		switch {
		case op.Kind != Write && op.Kind != Read:
		case op.Outcome == Fail:
			r.Rejected++
		}
		if op.Kind != Write {
			continue
		}
		r.Writes++
		if op.Outcome == OK {
			r.Acked++
			acked[op.Keys[0]] = append(acked[op.Keys[0]], op)
		}
	}
	keys := make([]string, 0, len(acked))
	for k := range acked {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		pos := map[int]int{}
		for i, v := range final[k] {
			pos[v] = i
		}
		ws := acked[k]
		slices.SortFunc(ws, func(a, b Op) int { return cmp.Compare(a.Return, b.Return) })
		for i, w := range ws {
			p, ok := pos[w.Add]
			if !ok {
				r.LostWrites++
				r.problem("lost write on %s: %d by %s (op %d, token %d) acknowledged, not in the final state", k, w.Add, w.Owner, w.Index, w.Token)
				continue
			}
			for _, e := range ws[:i] {
				if e.Return >= w.Call {
					continue
				}
				if q, ok := pos[e.Add]; ok && q > p {
					r.LostWrites++
					r.problem("overtaken write on %s: %d by %s (op %d) acknowledged before %d (op %d) was sent, but comes after it", k, e.Add, e.Owner, e.Index, w.Add, w.Index)
					break
				}
			}
		}
	}
	keys = keys[:0]
	for k := range accepted {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		log := accepted[k]
		for i := 1; i < len(log); i++ {
			a, b := log[i-1], log[i]
			if b.Token < a.Token || b.Token == a.Token && b.Owner != a.Owner {
				r.TokenViolations++
				r.problem("register %s accepted token %d of %s after token %d of %s", k, b.Token, b.Owner, a.Token, a.Owner)
			}
		}
	}
	return r
}

func (r *RegisterReport) problem(format string, args ...any) {
	addProblem(&r.Problems, format, args...)
}
