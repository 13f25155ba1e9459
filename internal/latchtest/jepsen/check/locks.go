package check

import (
	"cmp"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// LockReport is what Locks found in the lock operations of a history.
type LockReport struct {
	Keys   int // keys with operations
	Grants int // granted Acquires, one per key
	// Linearizable: porcupine found a linearization of every key's
	// history; NotLinearizable lists the keys it proved it has none for,
	// TimedOut those it could not decide in time (then Linearizable is
	// false too: an undecided history is not shown safe).
	Linearizable    bool
	NotLinearizable []string
	TimedOut        []string
	// DoubleGrants counts holds confirmed while a hold of the same key
	// that their modes exclude was confirmed too (an exclusive hold
	// beside another, a shared one beside an exclusive one, or one over
	// a semaphore's limit).
	DoubleGrants int
	// TokenRegressions counts grants whose token is not above that of a
	// grant of the same key that was answered before they were asked for.
	TokenRegressions int
	// PartialGrants counts multi-key grants that did not carry a token for
	// each key.
	PartialGrants int
	// Stuck counts requests not answered within their bound.
	Stuck int
	// Problems describes the first violations found, for people.
	Problems []string
}

// Safe says whether the report found nothing wrong.
func (r LockReport) Safe() bool {
	return r.Linearizable && r.DoubleGrants == 0 && r.TokenRegressions == 0 && r.PartialGrants == 0 && r.Stuck == 0
}

// hold is one owner's grant of one key, and how long it is confirmed:
// from the grant's answer to its confirmed end.
type hold struct {
	owner      string
	mode       Mode
	limit      uint32
	start, end int64
	acquire    Op // the grant
	// leased: only its lease or its release ends the hold (Op.Lease);
	// until is the earliest its lease may end.
	leased bool
	until  int64
}

// leaseEnd is the Lost operation of key that the checker adds for a
// leased hold: the server may end it from until on.
func (h *hold) leaseEnd(key string) keyOp {
	a := h.acquire
	return keyOp{op: Op{Index: a.Index, Worker: a.Worker, Owner: a.Owner, Proto: a.Proto, Node: a.Node, Kind: Lost,
		Keys: []string{key}, Call: h.until, Outcome: Unknown}, call: h.until, leaseEnd: true}
}

// keyOp is an operation projected on one of its keys.
type keyOp struct {
	op    Op
	token uint64
	call  int64 // the call as the model sees it (a hold's confirmed end, for an unconfirmed release)
	// watched: whatever a release answers tells what it did, for the
	// hold's end without its holder asking is in the history as a Lost
	// (Op.Watched, or the end of a lease that the checker adds).
	watched bool
	// leaseEnd: a Lost the checker added at the end of the lease of the
	// grant op.Index.
	leaseEnd bool
}

// Locks checks the Acquire, Extend, Release and Lost operations of ops: every
// key's history with porcupine (each given at most timeout; 0: no bound),
// the confirmed holds for double grants, the tokens' order, multi-key
// grants and stuck requests. When a key's history is not linearizable and
// visualDir is not empty, porcupine's HTML visualisation of it is written
// there.
//
// A leased hold (an Acquire with a Lease) lasts at least until its lease
// may end, the Acquire's Call plus its Lease or the newest renewal's
// (Extend): it is confirmed until then, or until its release is sent if
// that is sooner, and Locks adds a Lost of its own there: the server may
// end the hold from then on. A release answered OK confirms the hold
// until it was sent, even past that bound, and then no Lost is added:
// the release ended it. A release or renewal answered "not held" before
// the bound (the server ended the hold early), or another grant that
// needs the key free before it, has no linearization.
func Locks(ops []Op, timeout time.Duration, visualDir string) (LockReport, error) {
	var rep LockReport
	perKey := map[string][]keyOp{}
	holds := map[string][]hold{}
	open := map[[2]string]*hold{} // (owner, key): a grant not ended yet
	for _, op := range ops {
		if op.Stuck {
			rep.Stuck++
			rep.problem("stuck: op %d (%s %s %v on %s) not answered: %s", op.Index, op.Owner, op.Kind, op.Keys, op.Node, op.Err)
		}
		if op.Kind != Acquire && op.Kind != Extend && op.Kind != Release && op.Kind != Lost {
			continue
		}
		if op.Kind == Acquire && op.Outcome == OK && op.Proto == "v3" && (len(op.Tokens) != len(op.Keys) || slices.Contains(op.Tokens, 0)) {
			rep.PartialGrants++
			rep.problem("partial grant: op %d of %s: keys %v, tokens %v", op.Index, op.Owner, op.Keys, op.Tokens)
		}
		for i, k := range op.Keys {
			ko := keyOp{op: op, call: op.Call, watched: op.Watched}
			if i < len(op.Tokens) {
				ko.token = op.Tokens[i]
			}
			id := [2]string{op.Owner, k}
			h := open[id]
			switch op.Kind {
			case Acquire:
				if op.Outcome == OK {
					rep.Grants++
					h = &hold{owner: op.Owner, mode: op.Mode, limit: op.Limit, start: op.Return, end: op.Return, acquire: op}
					if op.Lease > 0 {
						h.leased, h.until = true, op.Call+op.Lease
					}
					open[id] = h
				}
			case Extend:
				if h != nil && h.leased && op.Lease > 0 {
					switch op.Outcome {
					case OK:
						h.until = op.Call + op.Lease
					case Unknown:
						h.until = min(h.until, op.Call+op.Lease)
					}
				}
			default:
				confirmed := op.Call
				switch {
				case h != nil && h.leased:
					ko.watched = true
					if op.Kind != Release || op.Outcome != OK {
						// Not ended by this release, as far as anyone
						// knows: the lease ends it, from its bound on.
						confirmed = min(confirmed, h.until)
						perKey[k] = append(perKey[k], h.leaseEnd(k))
					}
				case op.Kind == Release && op.Outcome != OK && !op.Watched:
					// The hold may have ended at any time since the grant.
					if h != nil {
						confirmed = h.start
					}
					ko.call = confirmed
				}
				if h != nil {
					h.end = max(h.start, confirmed)
					holds[k] = append(holds[k], *h)
					delete(open, id)
				}
			}
			perKey[k] = append(perKey[k], ko)
		}
	}
	for id, h := range open {
		// Still held at the end of the history: confirmed until then
		// only if the workload said so with a Release; count it from its
		// grant alone, or until its lease may end.
		if h.leased {
			h.end = max(h.start, h.until)
			perKey[id[1]] = append(perKey[id[1]], h.leaseEnd(id[1]))
		}
		holds[id[1]] = append(holds[id[1]], *h)
	}

	keys := make([]string, 0, len(perKey))
	for k := range perKey {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	rep.Keys = len(keys)
	rep.Linearizable = true
	model := lockModel.ToModel()
	for _, k := range keys {
		rep.countDoubleGrants(k, holds[k])
		rep.countTokenRegressions(k, perKey[k])
		history := porcupineOps(perKey[k])
		res := porcupine.CheckOperationsTimeout(model, history, timeout)
		if res == porcupine.Ok {
			continue
		}
		rep.Linearizable = false
		if res == porcupine.Unknown {
			rep.TimedOut = append(rep.TimedOut, k)
			rep.problem("key %s: linearizability not decided in %v (%d operations)", k, timeout, len(history))
			continue
		}
		rep.NotLinearizable = append(rep.NotLinearizable, k)
		rep.problem("key %s: not linearizable (%d operations)", k, len(history))
		if visualDir != "" {
			_, info := porcupine.CheckOperationsVerbose(model, history, timeout)
			path := filepath.Join(visualDir, "porcupine-"+fileName(k)+".html")
			if err := porcupine.VisualizePath(model, info, path); err != nil {
				return rep, fmt.Errorf("check: visualising key %s: %w", k, err)
			}
			rep.problem("key %s: porcupine's visualisation in %s", k, path)
		}
	}
	return rep, nil
}

// porcupineOps converts one key's operations for porcupine: an outcome
// that is unknown returns after every other event.
func porcupineOps(kops []keyOp) []porcupine.Operation {
	var out []porcupine.Operation
	for _, ko := range kops {
		op := ko.op
		outcome := op.Outcome
		ret := op.Return
		if op.Kind == Lost || outcome == Unknown || op.Kind == Release && outcome != OK && !ko.watched {
			outcome, ret = Unknown, never
		}
		meta := fmt.Sprintf("op %d, %s on %s", op.Index, op.Proto, op.Node)
		if ko.leaseEnd {
			meta = fmt.Sprintf("end of the lease of op %d, %s", op.Index, op.Proto)
		}
		out = append(out, porcupine.Operation{
			ClientId: op.Worker,
			Input:    lockInput{Kind: op.Kind, Owner: op.Owner, Mode: op.Mode, Limit: op.Limit, Token: ko.token, Strict: op.Strict},
			Call:     ko.call,
			Output:   outcome,
			Return:   max(ret, ko.call),
			Metadata: meta,
		})
	}
	return out
}

// countDoubleGrants counts the holds of key that began while holds their
// mode excludes were confirmed. A leased grant answered only once its
// lease may have ended (until <= start: a reply delayed by a partition or
// a pause) confirms no hold: its client, which counts the lease from its
// call, knows the lock may be gone before it learns it had it, and a
// fenced write of it is refused as stale.
func (r *LockReport) countDoubleGrants(key string, hs []hold) {
	hs = slices.DeleteFunc(hs, func(h hold) bool { return h.leased && h.until <= h.start })
	slices.SortFunc(hs, func(a, b hold) int { return cmp.Compare(a.start, b.start) })
	for i, h := range hs {
		var excl, shared []hold
		for _, o := range hs[:i] {
			if o.end > h.start && o.owner != h.owner {
				if o.mode == Exclusive {
					excl = append(excl, o)
				} else {
					shared = append(shared, o)
				}
			}
		}
		var with []hold
		switch {
		case len(excl) > 0:
			with = excl
		case h.mode == Exclusive && len(shared) > 0:
			with = shared
		case h.mode == Shared && h.limit > 0 && len(shared) >= int(h.limit):
			with = shared
		default:
			continue
		}
		r.DoubleGrants++
		var desc []string
		for _, o := range with {
			desc = append(desc, fmt.Sprintf("%s (%s, op %d, confirmed %v-%v)", o.owner, o.mode, o.acquire.Index, time.Duration(o.start), time.Duration(o.end)))
		}
		r.problem("double grant of %s: %s (%s, op %d) confirmed from %v while held by %s",
			key, h.owner, h.mode, h.acquire.Index, time.Duration(h.start), strings.Join(desc, ", "))
	}
}

// countTokenRegressions counts the grants of key whose token is not above
// every token of a grant answered before their request was sent.
func (r *LockReport) countTokenRegressions(key string, kops []keyOp) {
	var grants []keyOp
	for _, ko := range kops {
		if ko.op.Kind == Acquire && ko.op.Outcome == OK && ko.token > 0 {
			grants = append(grants, ko)
		}
	}
	byReturn := slices.Clone(grants)
	slices.SortFunc(byReturn, func(a, b keyOp) int { return cmp.Compare(a.op.Return, b.op.Return) })
	slices.SortFunc(grants, func(a, b keyOp) int { return cmp.Compare(a.op.Call, b.op.Call) })
	var newest keyOp
	j := 0
	for _, g := range grants {
		for ; j < len(byReturn) && byReturn[j].op.Return < g.op.Call; j++ {
			if byReturn[j].token > newest.token {
				newest = byReturn[j]
			}
		}
		if newest.token > 0 && g.token <= newest.token {
			r.TokenRegressions++
			r.problem("token of %s went back: op %d of %s got %d after op %d of %s got %d",
				key, g.op.Index, g.op.Owner, g.token, newest.op.Index, newest.op.Owner, newest.token)
		}
	}
}

// maxProblems is how many problems a report describes at the most.
const maxProblems = 20

// addProblem describes a problem in problems, unless it has maxProblems.
func addProblem(problems *[]string, format string, args ...any) {
	if len(*problems) < maxProblems {
		*problems = append(*problems, fmt.Sprintf(format, args...))
	}
}

func (r *LockReport) problem(format string, args ...any) { addProblem(&r.Problems, format, args...) }

// fileName makes a key usable in a file name.
func fileName(k string) string {
	return strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || r < ' ' || r == ':' {
			return '_'
		}
		return r
	}, k)
}
