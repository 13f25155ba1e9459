package check

import (
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"strings"

	"github.com/anishathalye/porcupine"
)

// lockInput is an operation on one key, as the lock model sees it.
type lockInput struct {
	Kind   Kind
	Owner  string
	Mode   Mode
	Limit  uint32
	Token  uint64 // of a granted Acquire; 0 when the protocol has none
	Strict bool
}

// lockState is one key's state: its holders (sorted owners, separated by
// NUL), whether they hold it exclusively, and the newest token granted.
type lockState struct {
	Holders string
	N       int
	Excl    bool
	Last    uint64
}

func (s lockState) owners() []string {
	if s.Holders == "" {
		return nil
	}
	return strings.Split(s.Holders, "\x00")
}

func (s lockState) has(owner string) bool { return slices.Contains(s.owners(), owner) }

func (s lockState) canGrant(mode Mode, limit uint32) bool {
	if mode == Exclusive {
		return s.N == 0
	}
	return !s.Excl && (limit == 0 || s.N < int(limit))
}

func (s lockState) with(owner string, mode Mode, token uint64) lockState {
	o := append(s.owners(), owner)
	slices.Sort(o)
	return lockState{Holders: strings.Join(o, "\x00"), N: s.N + 1, Excl: mode == Exclusive, Last: max(s.Last, token)}
}

func (s lockState) without(owner string) lockState {
	o := slices.DeleteFunc(s.owners(), func(x string) bool { return x == owner })
	return lockState{Holders: strings.Join(o, "\x00"), N: len(o), Excl: s.Excl && len(o) > 0, Last: s.Last}
}

// lockStep is the lock model: every state the key can be in after in
// answered out in state s (none: the answer is impossible).
func lockStep(s lockState, in lockInput, out Outcome) []lockState {
	switch in.Kind {
	case Acquire:
		switch out {
		case OK:
			if !s.has(in.Owner) && s.canGrant(in.Mode, in.Limit) && (in.Token == 0 || in.Token > s.Last) {
				return []lockState{s.with(in.Owner, in.Mode, in.Token)}
			}
			return nil
		case Busy:
			// With FIFO queues, a shared or multi-key request may wait
			// behind a waiter while the key could be granted: its busy
			// answer says nothing about this key.
			if !in.Strict || s.N > 0 && !(s.N == 1 && s.has(in.Owner)) {
				return []lockState{s}
			}
			return nil
		case Fail:
			return []lockState{s}
		default: // Unknown: granted at some point, or never.
			next := []lockState{s}
			if !s.has(in.Owner) && s.canGrant(in.Mode, in.Limit) {
				next = append(next, s.with(in.Owner, in.Mode, 0))
			}
			return next
		}
	case Extend:
		// A renewal changes the hold's lease, which the model leaves to
		// Lost operations, not its holders.
		switch {
		case out == OK && !s.has(in.Owner), out == Fail && s.has(in.Owner):
			return nil
		}
		return []lockState{s}
	case Release, Lost:
		switch {
		case out == OK && in.Kind == Release:
			if s.has(in.Owner) {
				return []lockState{s.without(in.Owner)}
			}
			return nil
		case out == Fail && in.Kind == Release:
			if !s.has(in.Owner) {
				return []lockState{s}
			}
			return nil
		default: // released by the server at this point, if still held
			if s.has(in.Owner) {
				return []lockState{s.without(in.Owner)}
			}
			return []lockState{s}
		}
	}
	return nil
}

// lockModel is lockStep as porcupine's model of one key.
var lockModel = porcupine.NondeterministicModel{
	Init: func() []any { return []any{lockState{}} },
	Step: func(state, input, output any) []any {
		var next []any
		for _, s := range lockStep(state.(lockState), input.(lockInput), output.(Outcome)) {
			next = append(next, s)
		}
		return next
	},
	Equal: func(a, b any) bool { return a.(lockState) == b.(lockState) },
	Hash: func(state any) uint64 {
		s := state.(lockState)
		h := fnv.New64a()
		fmt.Fprintf(h, "%s|%d|%t|%d", s.Holders, s.N, s.Excl, s.Last)
		return h.Sum64()
	},
	DescribeOperation: func(input, output any) string {
		in := input.(lockInput)
		d := fmt.Sprintf("%s %s", in.Owner, in.Kind)
		if in.Kind == Acquire {
			d += " " + string(in.Mode)
			if in.Limit > 0 {
				d += fmt.Sprintf("/%d", in.Limit)
			}
		}
		d += " -> " + string(output.(Outcome))
		if in.Token > 0 {
			d += fmt.Sprintf(" token %d", in.Token)
		}
		return d
	},
	DescribeState: func(state any) string {
		s := state.(lockState)
		if s.N == 0 {
			return fmt.Sprintf("free (last token %d)", s.Last)
		}
		m := "shared"
		if s.Excl {
			m = "exclusive"
		}
		return fmt.Sprintf("%s by %s (last token %d)", m, strings.Join(s.owners(), ", "), s.Last)
	},
}

// never is the return time of an operation whose outcome is unknown: after
// every event of the history.
const never = math.MaxInt64
