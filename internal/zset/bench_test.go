package zset

import (
	"fmt"
	"testing"
)

// semaphore returns a set of n members scored as redis-semaphore scores
// them: acquisition times in milliseconds.
func semaphore(n int) *Set {
	s := &Set{}
	for i := range n {
		s.Add(0, Pair{Score: float64(1_732_770_000_000 + i), Member: fmt.Sprintf("%036d", i)})
	}
	return s
}

// BenchmarkSemaphoreCycle is one acquire and release of a semaphore of n
// holders, as redis-semaphore's script and ZREM do them: trim the stale
// members, count, add the newest, remove it.
func BenchmarkSemaphoreCycle(b *testing.B) {
	for _, n := range []int{10, 1000, 5000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			s := semaphore(n)
			stale := Range{Min: Bound{Value: -1 / zero()}, Max: Bound{Value: 0}}
			for i := 0; b.Loop(); i++ {
				s.RemRangeByScore(stale)
				_ = s.Card()
				s.Add(0, Pair{Score: float64(1_732_780_000_000 + i), Member: "new-holder"})
				s.Rem("new-holder")
			}
		})
	}
}

// BenchmarkClone is the copy a script's scratch view or a read makes.
func BenchmarkClone(b *testing.B) {
	for _, n := range []int{10, 1000, 5000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			s := semaphore(n)
			for b.Loop() {
				s.Clone()
			}
		})
	}
}

func zero() float64 { return 0 }

// BenchmarkCloneAndAdd is a script's scratch view: a clone changed once,
// which copies it.
func BenchmarkCloneAndAdd(b *testing.B) {
	for _, n := range []int{10, 1000, 5000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			s := semaphore(n)
			for i := 0; b.Loop(); i++ {
				c := s.Clone()
				c.Add(0, Pair{Score: float64(1_732_780_000_000 + i), Member: "new-holder"})
			}
		})
	}
}
