package engine_test

import (
	"testing"

	"github.com/latchd/latch/internal/engine/enginemodel"
)

// FuzzEngine drives the model-based harness (package enginemodel, see
// model_test.go) with the fuzzer's bytes instead of a PRNG: every choice
// the operation generator makes (which operation, session, keys, mode,
// wait, lease, instant...) takes one byte, or two for a choice among more
// than 256, so a mutation changes the sequence locally. The sequence ends
// when the bytes run out (or after 200 operations) and the table is then
// drained as in TestModel. Every check of TestModel applies.
//
//	go test ./internal/engine/ -run '^$' -fuzz FuzzEngine -fuzztime 60s
//
// The seed corpus, which plain go test runs, is enginemodel.FuzzSeeds and
// testdata/fuzz/FuzzEngine: minimized reproducers of the engine bugs the
// harness found (bug-*; see the TestModelBug* tests) and inputs the fuzzer
// found interesting (found-*).
func FuzzEngine(f *testing.F) {
	for _, seed := range enginemodel.FuzzSeeds() {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if _, err := enginemodel.Run(enginemodel.BytesSource(data), enginemodel.NewDirect); err != nil {
			t.Fatal(err)
		}
	})
}
