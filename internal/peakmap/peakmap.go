// Package peakmap owns one rule: rebuild a Go map that has shrunk far below
// its peak.
//
// A Go map never gives back the memory of its groups: a lock table that once
// held a million keys keeps the room for a million after they are all
// released, and probing that sparse table costs cache misses on every
// insert. A long-running server whose tables swell and drain (a burst of
// locks, a storm of connections) would keep its high-water mark for good.
//
// Callers check Due after deleting from a map and then Rebuild it: the map
// is copied into a new one of the right
// size once it holds an eighth of its peak or less.
// Each copy of n entries follows at least 7n deletions since the peak, so
// the cost per deletion stays constant.
package peakmap

import "maps"

// MinPeak is the peak below which a map is left alone: small maps cost
// little, and rebuilding them would be churn.
const MinPeak = 1024

// Peak is the largest size a map has had since it was last rebuilt. The
// zero value is ready to use.
type Peak struct{ n int }

// Due records that a map now holds n entries and reports whether it
// should be rebuilt: it has shrunk to an eighth of its peak or less. It is
// cheap enough for every deletion of a hot path (it inlines); Rebuild does
// the rest:
//
//	delete(m, k)
//	if p.Due(len(m)) {
//		m = peakmap.Rebuild(m, &p)
//	}
func (p *Peak) Due(n int) bool {
	if n > p.n {
		p.n = n
		return false
	}
	return p.n >= MinPeak && n <= p.n/8
}

// Rebuild returns a copy of m in a new map of its size, which becomes the
// peak.
func Rebuild[M ~map[K]V, K comparable, V any](m M, p *Peak) M {
	small := make(M, len(m))
	maps.Copy(small, m)
	p.n = len(m)
	return small
}
