package znode

import (
	"fmt"
	"testing"
)

// BenchmarkLockRecipe: the lock recipe's writes and read on a lock znode
// with 16 waiters: create an ephemeral-sequential child, list the
// children, delete the oldest.
func BenchmarkLockRecipe(b *testing.B) {
	tr := New(Config{})
	tr.OpenSession(1, [16]byte{}, 1000, 1)
	tr.Write(1, 1, create("/locks", Persistent))
	tr.Write(1, 1, create("/locks/l", Container))
	var held []string
	for range 16 {
		held = append(held, tr.Write(1, 1, create("/locks/l/_c_0123456789abcdef-lock-", EphemeralSequential)).Path)
	}
	var events []Event
	b.ReportAllocs()
	for b.Loop() {
		r := tr.Write(1, 2, create("/locks/l/_c_0123456789abcdef-lock-", EphemeralSequential))
		held = append(held, r.Path)
		if _, _, code := tr.Children("/locks/l"); code != OK {
			b.Fatal(code)
		}
		if r := tr.Write(1, 3, del(held[0], -1)); r.Code != OK {
			b.Fatal(r.Code)
		}
		held = held[1:]
		events = tr.TakeEvents(events[:0])
	}
}

func BenchmarkGet(b *testing.B) {
	tr := New(Config{})
	tr.Write(0, 1, create("/a", Persistent))
	tr.Write(0, 1, create("/a/b", Persistent))
	tr.Write(0, 1, create("/a/b/c", Persistent))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, code := tr.Get("/a/b/c"); code != OK {
			b.Fatal(code)
		}
	}
}

// benchTree holds 100 parents of 100 ephemeral-sequential children each.
func benchTree() *Tree {
	tr := New(Config{})
	tr.OpenSession(1, [16]byte{}, 1000, 1)
	for i := range 100 {
		p := fmt.Sprintf("/d%d", i)
		tr.Write(1, 1, create(p, Persistent))
		for range 100 {
			tr.Write(1, 1, create(p+"/e-", EphemeralSequential))
		}
	}
	return tr
}

func BenchmarkAppendSnapshot(b *testing.B) {
	tr := benchTree()
	buf := tr.AppendSnapshot(nil)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		buf = tr.AppendSnapshot(buf[:0])
	}
}

func BenchmarkRestore(b *testing.B) {
	buf := benchTree().AppendSnapshot(nil)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Restore(Config{}, buf); err != nil {
			b.Fatal(err)
		}
	}
}
