package raftrep

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/raft"

	"github.com/latchd/latch/internal/wal"
)

func TestLogEncoding(t *testing.T) {
	at := time.Unix(1764000000, 123456789)
	tests := []raft.Log{
		{Index: 1, Term: 1, Type: raft.LogCommand, Data: []byte("batch")},
		{Index: 1 << 40, Term: 1 << 33, Type: raft.LogConfiguration, Data: make([]byte, 300), Extensions: []byte("ext"), AppendedAt: at},
		{Index: 7, Term: 2, Type: raft.LogBarrier},
		{Index: 8, Term: 2, Type: raft.LogNoop, AppendedAt: time.Unix(0, -5)},
	}
	for _, want := range tests {
		t.Run(fmt.Sprint(want.Index, want.Type), func(t *testing.T) {
			var got raft.Log
			if err := decodeLog(appendLog(nil, &want), &got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("decoded entry differs (-want +got):\n%s", diff)
			}
		})
	}
}

// FuzzDecodeLog: any bytes decode to an entry or an error, and an entry
// that decodes encodes back to the same bytes.
func FuzzDecodeLog(f *testing.F) {
	f.Add(appendLog(nil, &raft.Log{Index: 3, Term: 2, Type: raft.LogCommand, Data: []byte("x"), Extensions: []byte("e"), AppendedAt: time.Unix(5, 6)}))
	f.Add(appendLog(nil, &raft.Log{Index: 1, Term: 1}))
	f.Add([]byte{1, 1, 0, 200, 1})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		var e raft.Log
		if decodeLog(b, &e) != nil {
			return
		}
		// Varints have more than one encoding; the decoded entry does not
		// change through a second round.
		var again raft.Log
		if err := decodeLog(appendLog(nil, &e), &again); err != nil {
			t.Fatalf("re-encoded entry does not decode: %v", err)
		}
		if diff := cmp.Diff(e, again); diff != "" {
			t.Fatalf("entry changed through a round (-first +second):\n%s", diff)
		}
	})
}

func entries(first, last, term uint64) []*raft.Log {
	var out []*raft.Log
	for i := first; i <= last; i++ {
		out = append(out, &raft.Log{Index: i, Term: term, Type: raft.LogCommand, Data: fmt.Appendf(nil, "%d@%d", i, term)})
	}
	return out
}

// checkLog fails unless s holds exactly want.
func checkLog(t *testing.T, s raft.LogStore, want []*raft.Log) {
	t.Helper()
	first, _ := s.FirstIndex()
	last, _ := s.LastIndex()
	var wf, wl uint64
	if len(want) > 0 {
		wf, wl = want[0].Index, want[len(want)-1].Index
	}
	if first != wf || last != wl {
		t.Fatalf("log holds %d..%d, want %d..%d", first, last, wf, wl)
	}
	for _, w := range want {
		var got raft.Log
		if err := s.GetLog(w.Index, &got); err != nil {
			t.Fatalf("GetLog(%d): %v", w.Index, err)
		}
		if diff := cmp.Diff(*w, got); diff != "" {
			t.Fatalf("entry %d differs (-want +got):\n%s", w.Index, diff)
		}
	}
	var e raft.Log
	if err := s.GetLog(wl+1, &e); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("GetLog past the end: %v, want raft.ErrLogNotFound", err)
	}
}

func TestLogStoreDeleteRange(t *testing.T) {
	tests := []struct {
		name    string
		lo, hi  uint64
		want    []*raft.Log // then
		refused bool
	}{
		{"compaction", 1, 40, entries(41, 100, 1), false},
		{"a tail overridden", 61, 100, entries(1, 60, 1), false},
		{"everything, after a snapshot is installed", 1, 100, nil, false},
		{"past both ends", 0, 1000, nil, false},
		{"outside the log", 200, 300, entries(1, 100, 1), false},
		{"the middle", 20, 30, entries(1, 100, 1), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := OpenLog(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if err := s.StoreLogs(entries(1, 100, 1)); err != nil {
				t.Fatal(err)
			}
			err = s.DeleteRange(tt.lo, tt.hi)
			if (err != nil) != tt.refused {
				t.Fatalf("DeleteRange(%d, %d): %v", tt.lo, tt.hi, err)
			}
			checkLog(t, s, tt.want)
		})
	}
}

func TestLogStoreRefusesGaps(t *testing.T) {
	s, err := OpenLog(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.StoreLogs(entries(10, 20, 1)); err != nil { // an empty log starts anywhere
		t.Fatal(err)
	}
	if err := s.StoreLogs(entries(22, 23, 1)); err == nil {
		t.Fatal("stored entries after a gap")
	}
	gappy := append(entries(21, 21, 1), entries(23, 23, 1)...)
	if err := s.StoreLogs(gappy); err == nil {
		t.Fatal("stored entries with a gap between them")
	}
	if err := s.StoreLog(entries(21, 21, 2)[0]); err != nil {
		t.Fatal(err)
	}
	checkLog(t, s, append(entries(10, 20, 1), entries(21, 21, 2)...))
}

// TestBroke: an error of a broken log (wal.ErrBroken) stops the node;
// any other is Raft's to handle; a log that is not Raft's (no halt:
// OpenLog) returns it.
func TestBroke(t *testing.T) {
	refused := errors.New("wal: append at 9 to a log that ends at 7")
	broken := fmt.Errorf("%w: sync log/00000000000000000001.seg: input/output error", wal.ErrBroken)
	for _, tt := range []struct {
		err    error
		live   bool
		halted bool
	}{
		{nil, true, false},
		{refused, true, false},
		{broken, true, true},
		{broken, false, false},
	} {
		var halted error
		s := &LogStore{}
		if tt.live {
			s.halt = func(err error) { halted = err }
		}
		if got := s.broke(tt.err); got != tt.err {
			t.Errorf("broke(%v) = %v, want it back", tt.err, got)
		}
		if (halted != nil) != tt.halted || tt.halted && halted != tt.err {
			t.Errorf("broke(%v) of a live log %v halted with %v, want halted %v", tt.err, tt.live, halted, tt.halted)
		}
	}
}
