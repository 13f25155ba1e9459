package crashfs_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"

	"github.com/latchd/latch/internal/vfs"
	"github.com/latchd/latch/internal/vfs/crashfs"
)

func ExampleFS_CrashClone() {
	fsys := crashfs.New()
	if err := vfs.WriteFile(fsys, "/state", []byte("v1")); err != nil {
		panic(err)
	}
	f, err := fsys.OpenFile("/state", os.O_RDWR, 0)
	if err != nil {
		panic(err)
	}
	f.WriteAt([]byte("v2"), 0) // not synced
	for _, keep := range []float64{0, 1} {
		b, _ := vfs.ReadFile(fsys.CrashClone(nil, keep), "/state")
		fmt.Printf("keep %v: %s\n", keep, b)
	}
	// Output:
	// keep 0: v1
	// keep 1: v2
}

// This example cuts the power after each operation of a workload in
// turn: it counts the workload's operations, then runs it again on a new
// FS whose Fault fails every operation from the k-th on, and looks at
// what a power loss leaves.
func ExampleFS_SetFault() {
	setup := func() *crashfs.FS {
		fsys := crashfs.New()
		if err := vfs.WriteFile(fsys, "/state", []byte("old")); err != nil {
			panic(err)
		}
		return fsys
	}
	workload := func(fsys vfs.FS) error { return vfs.WriteFile(fsys, "/state", []byte("new")) }

	fsys := setup()
	from := fsys.Ops()
	if err := workload(fsys); err != nil {
		panic(err)
	}
	to := fsys.Ops()

	errCut := errors.New("power cut")
	seen := map[string]bool{}
	for k := from + 1; k <= to+1; k++ {
		fsys := setup()
		fsys.SetFault(func(ev crashfs.Event) error {
			if ev.Seq >= k {
				return errCut
			}
			return nil
		})
		workload(fsys)
		for seed := range uint64(10) {
			b, _ := vfs.ReadFile(fsys.CrashClone(rand.New(rand.NewPCG(seed, 0)), 0.5), "/state")
			seen[string(b)] = true
		}
	}
	fmt.Println(len(seen), seen["old"], seen["new"])
	// Output: 2 true true
}
