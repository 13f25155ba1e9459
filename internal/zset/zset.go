package zset

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
)

// Limits bound the sorted sets of a state; 0 means no limit.
type Limits struct {
	// MaxMembers limits the members of one set.
	MaxMembers int
	// MaxTotal limits the members of all sets together.
	MaxTotal int
}

// Pair is a member of a set with its score.
type Pair struct {
	Score  float64
	Member string
}

// less reports whether a pair of score s and member m sorts before p:
// by score, then by member bytes.
func less(s float64, m string, p Pair) bool {
	if s != p.Score {
		return s < p.Score
	}
	return m < p.Member
}

// Set is a sorted set. The zero Set is empty and ready to use; Clone
// copies one. Members are unique, scores are never NaN.
type Set struct {
	pairs  []Pair             // sorted by (Score, Member)
	scores map[string]float64 // Member -> Score, for the members of pairs
}

// New returns a set of the given pairs; a member given twice keeps its
// last score. It fails if a score is NaN.
func New(pairs ...Pair) (*Set, error) {
	s := &Set{}
	for _, p := range pairs {
		if math.IsNaN(p.Score) {
			return nil, ErrNaN
		}
		s.set(p.Member, p.Score)
	}
	return s, nil
}

// Card returns the number of members.
func (s *Set) Card() int {
	if s == nil {
		return 0
	}
	return len(s.pairs)
}

// Score returns member's score, and false if member is not in s.
func (s *Set) Score(member string) (float64, bool) {
	if s == nil {
		return 0, false
	}
	f, ok := s.scores[member]
	return f, ok
}

// search returns the index of the first pair not before (score, member).
func (s *Set) search(score float64, member string) int {
	return sort.Search(len(s.pairs), func(i int) bool { return !less(s.pairs[i].Score, s.pairs[i].Member, Pair{score, member}) })
}

// Rank returns member's 0-based rank in ascending order (or descending,
// with rev), and false if member is not in s.
func (s *Set) Rank(member string, rev bool) (int, bool) {
	f, ok := s.Score(member)
	if !ok {
		return 0, false
	}
	i := s.search(f, member)
	if rev {
		return len(s.pairs) - 1 - i, true
	}
	return i, true
}

// set puts member with score f, replacing its old score. A score of -0
// is kept as 0, as Redis keeps the scores of small sets (listpacks store
// 0 for it), so that the sign of a zero never shows.
func (s *Set) set(member string, f float64) {
	if f == 0 {
		f = 0 // +0
	}
	if old, ok := s.scores[member]; ok {
		if old == f {
			return
		}
		s.remove(member, old)
	}
	if s.scores == nil {
		s.scores = make(map[string]float64)
	}
	s.scores[member] = f
	i := s.search(f, member)
	s.pairs = append(s.pairs, Pair{})
	copy(s.pairs[i+1:], s.pairs[i:])
	s.pairs[i] = Pair{f, member}
}

// remove drops member, whose score is f.
func (s *Set) remove(member string, f float64) {
	i, n := s.search(f, member), len(s.pairs)
	copy(s.pairs[i:], s.pairs[i+1:])
	s.pairs[n-1] = Pair{} // no stale member kept alive
	s.pairs = s.pairs[:n-1]
	delete(s.scores, member)
}

// AddFlags are ZADD's options.
type AddFlags uint8

const (
	// NX: only add new members, never update.
	NX AddFlags = 1 << iota
	// XX: only update members, never add.
	XX
	// GT: update a member only to a greater score (new members are added).
	GT
	// LT: update a member only to a lesser score (new members are added).
	LT
	// CH: the count is of members added or whose score changed, not of
	// members added only.
	CH
	// INCR: add the score to the member's (ZINCRBY); one pair only.
	INCR

	addFlagsMask = 1<<iota - 1
)

// The errors of Check and Add, worded as Redis replies them (after the
// "ERR " of its error prefix, which Error's text includes).
var (
	ErrXXAndNX    = errors.New("ERR XX and NX options at the same time are not compatible")
	ErrGTLTNX     = errors.New("ERR GT, LT, and/or NX options at the same time are not compatible")
	ErrIncrPairs  = errors.New("ERR INCR option supports a single increment-element pair")
	ErrNaN        = errors.New("ERR resulting score is not a number (NaN)")
	ErrNotFloat   = errors.New("ERR value is not a valid float")
	ErrRangeFloat = errors.New("ERR min or max is not a float")
	ErrFlags      = errors.New("ERR syntax error")
)

// Check returns the error Redis gives ZADD for the options f with n
// pairs, or nil. (Redis checks the options before the scores.)
func (f AddFlags) Check(n int) error {
	switch {
	case f&^addFlagsMask != 0:
		return ErrFlags
	case f&NX != 0 && f&XX != 0:
		return ErrXXAndNX
	case f&GT != 0 && f&LT != 0, f&NX != 0 && f&(GT|LT) != 0:
		return ErrGTLTNX
	case f&INCR != 0 && n != 1:
		return ErrIncrPairs
	}
	return nil
}

// AddResult is what Add did.
type AddResult struct {
	// Count is ZADD's reply without INCR: members added, plus members
	// whose score changed with CH.
	Count int
	// Added is how many members were added (what a limit counts),
	// Changed how many members' scores changed.
	Added, Changed int
	// Score is INCR's new score, when Done.
	Score float64
	// Done is false when INCR was refused by NX, XX, GT or LT (ZADD
	// replies nil).
	Done bool
}

// Add does ZADD with the options f on the pairs, in order (a member given
// twice is added, then updated). A score of -0 is stored as 0 (INCR's
// Score is the sum, which Redis replies, sign and all). It fails, changing nothing, with the
// errors of Check, or ErrNaN when a score is NaN or INCR makes one. Done
// is true but for an INCR refused.
func (s *Set) Add(f AddFlags, pairs ...Pair) (AddResult, error) {
	if err := f.Check(len(pairs)); err != nil {
		return AddResult{}, err
	}
	for _, p := range pairs {
		if math.IsNaN(p.Score) {
			return AddResult{}, ErrNaN
		}
	}
	var r AddResult
	if f&INCR != 0 {
		p := pairs[0]
		old, ok := s.scores[p.Member]
		switch {
		case ok && f&NX != 0, !ok && f&XX != 0:
			return r, nil
		}
		nf := p.Score
		if ok {
			nf = old + p.Score
			if math.IsNaN(nf) {
				return AddResult{}, ErrNaN
			}
			if f&GT != 0 && nf <= old || f&LT != 0 && nf >= old {
				return r, nil
			}
		}
		s.set(p.Member, nf)
		r.Score, r.Done = nf, true
		switch {
		case !ok:
			r.Count, r.Added = 1, 1
		case nf != old:
			r.Changed = 1
			if f&CH != 0 {
				r.Count = 1
			}
		}
		return r, nil
	}
	r.Done = true
	for _, p := range pairs {
		old, ok := s.scores[p.Member]
		switch {
		case !ok && f&XX == 0:
			s.set(p.Member, p.Score)
			r.Count++
			r.Added++
		case ok && f&NX == 0:
			if f&GT != 0 && p.Score <= old || f&LT != 0 && p.Score >= old || p.Score == old {
				continue
			}
			s.set(p.Member, p.Score)
			r.Changed++
			if f&CH != 0 {
				r.Count++
			}
		}
	}
	return r, nil
}

// Rem removes the members and returns how many were in s.
func (s *Set) Rem(members ...string) int {
	if s == nil {
		return 0
	}
	n := 0
	for _, m := range members {
		if f, ok := s.scores[m]; ok {
			s.remove(m, f)
			n++
		}
	}
	return n
}

// rankRange turns Redis's start and stop ranks (negative: from the end)
// into the indexes [lo, hi) of an ascending order of n members.
func rankRange(start, stop int64, n int) (lo, hi int) {
	l := int64(n)
	if start < 0 {
		start += l
	}
	if stop < 0 {
		stop += l
	}
	start = max(start, 0)
	if start > stop || start >= l {
		return 0, 0
	}
	stop = min(stop, l-1)
	return int(start), int(stop) + 1
}

// RangeByRank returns the members of ranks start to stop inclusive, as
// ZRANGE does: negative ranks count from the end (-1 the last), the
// order descending with rev (ranks are then of the descending order).
// The result is a new slice.
func (s *Set) RangeByRank(start, stop int64, rev bool) []Pair {
	lo, hi := rankRange(start, stop, s.Card())
	if lo == hi {
		return nil
	}
	out := make([]Pair, 0, hi-lo)
	if rev {
		n := len(s.pairs)
		for i := lo; i < hi; i++ {
			out = append(out, s.pairs[n-1-i])
		}
		return out
	}
	return append(out, s.pairs[lo:hi]...)
}

// Bound is one end of a score range: a score, and whether the range
// excludes it ("(" in Redis).
type Bound struct {
	Value float64
	Excl  bool
}

// Range is a score range, Min to Max, whatever the order of a query.
type Range struct {
	Min, Max Bound
}

// above reports whether f is within r on r's lower side.
func (r Range) above(f float64) bool {
	if r.Min.Excl {
		return f > r.Min.Value
	}
	return f >= r.Min.Value
}

// below reports whether f is within r on r's upper side.
func (r Range) below(f float64) bool {
	if r.Max.Excl {
		return f < r.Max.Value
	}
	return f <= r.Max.Value
}

// empty reports whether no score can be in r.
func (r Range) empty() bool {
	return r.Min.Value > r.Max.Value || r.Min.Value == r.Max.Value && (r.Min.Excl || r.Max.Excl)
}

// span returns the indexes [lo, hi) of the pairs whose scores are in r.
func (s *Set) span(r Range) (lo, hi int) {
	if s == nil || r.empty() {
		return 0, 0
	}
	lo = sort.Search(len(s.pairs), func(i int) bool { return r.above(s.pairs[i].Score) })
	hi = lo + sort.Search(len(s.pairs)-lo, func(i int) bool { return !r.below(s.pairs[lo+i].Score) })
	return lo, hi
}

// Count returns how many members have a score in r (ZCOUNT).
func (s *Set) Count(r Range) int {
	lo, hi := s.span(r)
	return hi - lo
}

// RangeByScore returns the members with a score in r, ascending (or
// descending with rev), skipping offset of them and returning at most
// count (count < 0: all), as ZRANGEBYSCORE's LIMIT (a negative offset
// returns none). The result is a new slice.
func (s *Set) RangeByScore(r Range, rev bool, offset, count int64) []Pair {
	lo, hi := s.span(r)
	if offset < 0 || offset >= int64(hi-lo) || count == 0 {
		return nil
	}
	n := int64(hi-lo) - offset
	if count > 0 && count < n {
		n = count
	}
	out := make([]Pair, 0, n)
	for i := int64(0); i < n; i++ {
		if rev {
			out = append(out, s.pairs[hi-1-int(offset+i)])
		} else {
			out = append(out, s.pairs[lo+int(offset+i)])
		}
	}
	return out
}

// RemRangeByScore removes the members with a score in r and returns how
// many (ZREMRANGEBYSCORE).
func (s *Set) RemRangeByScore(r Range) int {
	lo, hi := s.span(r)
	return s.cut(lo, hi)
}

// RemRangeByRank removes the members of ranks start to stop inclusive
// (negative from the end, as RangeByRank) and returns how many
// (ZREMRANGEBYRANK).
func (s *Set) RemRangeByRank(start, stop int64) int {
	lo, hi := rankRange(start, stop, s.Card())
	return s.cut(lo, hi)
}

// cut removes the pairs [lo, hi).
func (s *Set) cut(lo, hi int) int {
	if lo >= hi {
		return 0
	}
	for _, p := range s.pairs[lo:hi] {
		delete(s.scores, p.Member)
	}
	n := len(s.pairs)
	s.pairs = append(s.pairs[:lo], s.pairs[hi:]...)
	clear(s.pairs[len(s.pairs):n])
	return hi - lo
}

// Pairs returns every pair in ascending order. The slice is s's own: the
// caller must not change it, and it is valid until s changes.
func (s *Set) Pairs() []Pair {
	if s == nil {
		return nil
	}
	return s.pairs
}

// Clone returns a copy of s that shares nothing mutable with it (member
// strings are immutable and shared). A nil s clones to nil.
func (s *Set) Clone() *Set {
	if s == nil {
		return nil
	}
	c := &Set{pairs: make([]Pair, len(s.pairs)), scores: make(map[string]float64, len(s.pairs))}
	copy(c.pairs, s.pairs)
	for _, p := range s.pairs {
		c.scores[p.Member] = p.Score
	}
	return c
}

// Equal reports whether s and t hold the same members with the same
// scores (a nil Set equals an empty one). Scores compare by value, as
// Redis compares them (0 equals -0).
func (s *Set) Equal(t *Set) bool {
	a, b := s.Pairs(), t.Pairs()
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// String formats s for tests and errors: {member:score ...}.
func (s *Set) String() string {
	var b strings.Builder
	b.WriteByte('{')
	for i, p := range s.Pairs() {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%q:%s", p.Member, FormatScore(p.Score))
	}
	b.WriteByte('}')
	return b.String()
}
