package engine

import (
	"math/rand/v2"
	"testing"
)

// FuzzEngine drives the model-based harness of model_test.go with the
// fuzzer's bytes instead of a PRNG: every choice the operation generator
// makes (which operation, session, keys, mode, wait, lease, instant...)
// takes one byte, or two for a choice among more than 256, so a mutation
// changes the sequence locally. The sequence ends when the bytes run out
// (or after modelMaxFuzzOps operations) and the table is then drained as
// in TestModel. Every check of TestModel applies.
//
//	go test ./internal/engine/ -run '^$' -fuzz FuzzEngine -fuzztime 60s
//
// The seed corpus, which plain go test runs, is the inputs added below and
// testdata/fuzz/FuzzEngine: minimized reproducers of the engine bugs the
// harness found (bug-*; see the TestModelBug* tests) and inputs the fuzzer
// found interesting (found-*).
func FuzzEngine(f *testing.F) {
	f.Add([]byte{})                       // no operation: drain an empty table
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7}) // a few operations with the first choices
	for seed := range uint64(3) {         // PRNG inputs of growing length
		f.Add(modelFuzzInput(seed, 64<<(2*seed)))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if _, err := runModelSequence(&modelBytes{data: data}); err != nil {
			t.Fatal(err)
		}
	})
}

// modelMaxFuzzOps bounds the operations of one fuzz input, which keeps an
// execution in the order of a millisecond: the fuzzer minimizes every new
// interesting input by running it over and over.
const modelMaxFuzzOps = 200

// modelBytes is a modelSource reading the fuzzer's bytes. Once they run
// out every choice is 0.
type modelBytes struct {
	data []byte
	ops  int
}

func (s *modelBytes) intn(n int) int {
	if n <= 1 || len(s.data) == 0 {
		return 0
	}
	v := int(s.data[0])
	s.data = s.data[1:]
	if n > 256 && len(s.data) > 0 {
		v = v<<8 | int(s.data[0])
		s.data = s.data[1:]
	}
	return v % n
}

func (s *modelBytes) more() bool {
	s.ops++
	return len(s.data) > 0 && s.ops <= modelMaxFuzzOps
}

// modelFuzzInput returns n bytes of the PRNG seeded with seed.
func modelFuzzInput(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}
