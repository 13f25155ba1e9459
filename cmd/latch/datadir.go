package main

import (
	"fmt"

	"github.com/latchd/latch/internal/replica/raftrep"
)

// runDatadir implements "latch datadir": what an operator does to a
// stopped node's data dir.
func runDatadir(args []string, env *environment) int {
	fs := env.newFlagSet("datadir")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: latch datadir --data-dir DIR clear-halt

clear-halt lets a node that stopped on a disk error start again. Such a
node leaves a mark in its data dir and refuses to start while it is there:
after a failed write or sync, what the node reads back may never have
reached the disk. Clear it only once the disk is sound, and only on a node
of a cluster whose other members hold everything it acknowledged, or on a
single node whose loss of its last writes you accept; otherwise replace the
member (docs/operations.md). The node must be stopped.

Flags:
`)
		fs.PrintDefaults()
	}
	dir := fs.String("data-dir", "", "the node's data `dir`")
	if code, done := parseFlags(fs, args); done {
		return code
	}
	if *dir == "" || fs.NArg() != 1 || fs.Arg(0) != "clear-halt" {
		fs.Usage()
		return 2
	}
	cleared, err := raftrep.ClearHalt(*dir)
	if err != nil {
		fmt.Fprintf(env.stderr, "latch datadir: %v\n", err)
		return 1
	}
	if !cleared {
		fmt.Fprintf(env.stdout, "%s was not halted\n", *dir)
		return 0
	}
	fmt.Fprintf(env.stdout, "%s: halt cleared; the node starts again\n", *dir)
	return 0
}
