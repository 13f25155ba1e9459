// Package peakmap owns one rule: rebuild a Go map that has shrunk far below
// its peak.
//
// A Go map never gives back the memory of its groups: a lock table that once
// held a million keys keeps the room for a million after they are all
// released, and probing that sparse table costs cache misses on every
// insert. A long-running server whose tables swell and drain (a burst of
// locks, a storm of connections) would keep its high-water mark for good.
//
// Callers call Shrink after deleting from a map; it copies the map into a
// new one of the right size once it holds an eighth of its peak or less.
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

// Shrink returns m, or a copy of m in a new map when m has shrunk to an
// eighth of its peak or less. Call it after deleting from m and store the
// result in place of m.
func Shrink[M ~map[K]V, K comparable, V any](m M, p *Peak) M {
	n := len(m)
	if n > p.n {
		p.n = n
		return m
	}
	if p.n < MinPeak || n > p.n/8 {
		return m
	}
	small := make(M, n)
	maps.Copy(small, m)
	p.n = n
	return small
}
