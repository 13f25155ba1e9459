package zset

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func mustNew(t *testing.T, pairs ...Pair) *Set {
	t.Helper()
	s, err := New(pairs...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// members formats pairs as "m:score m:score".
func members(ps []Pair) string {
	var b strings.Builder
	for i, p := range ps {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(p.Member + ":" + FormatScore(p.Score))
	}
	return b.String()
}

func TestAdd(t *testing.T) {
	base := []Pair{{1, "a"}, {2, "b"}, {3, "c"}}
	tests := []struct {
		name  string
		flags AddFlags
		pairs []Pair
		want  AddResult
		err   error
		after string
	}{
		{"new and same", 0, []Pair{{5, "d"}, {1, "a"}}, AddResult{Count: 1, Added: 1, Done: true}, nil, "a:1 b:2 c:3 d:5"},
		{"update counts nothing", 0, []Pair{{9, "a"}}, AddResult{Count: 0, Changed: 1, Done: true}, nil, "b:2 c:3 a:9"},
		{"CH counts updates", CH, []Pair{{9, "a"}, {2, "b"}, {0, "z"}}, AddResult{Count: 2, Added: 1, Changed: 1, Done: true}, nil, "z:0 b:2 c:3 a:9"},
		{"NX adds only", NX | CH, []Pair{{9, "a"}, {4, "d"}}, AddResult{Count: 1, Added: 1, Done: true}, nil, "a:1 b:2 c:3 d:4"},
		{"XX updates only", XX | CH, []Pair{{9, "a"}, {4, "d"}}, AddResult{Count: 1, Changed: 1, Done: true}, nil, "b:2 c:3 a:9"},
		{"GT", GT | CH, []Pair{{0, "a"}, {5, "b"}, {7, "e"}}, AddResult{Count: 2, Added: 1, Changed: 1, Done: true}, nil, "a:1 c:3 b:5 e:7"},
		{"LT", LT | CH, []Pair{{0, "a"}, {5, "b"}}, AddResult{Count: 1, Changed: 1, Done: true}, nil, "a:0 b:2 c:3"},
		{"twice in one call", 0, []Pair{{7, "x"}, {8, "x"}}, AddResult{Count: 1, Added: 1, Changed: 1, Done: true}, nil, "a:1 b:2 c:3 x:8"},
		{"INCR existing", INCR, []Pair{{2.5, "a"}}, AddResult{Score: 3.5, Changed: 1, Done: true}, nil, "b:2 c:3 a:3.5"},
		{"INCR new", INCR | CH, []Pair{{-1, "n"}}, AddResult{Count: 1, Added: 1, Score: -1, Done: true}, nil, "n:-1 a:1 b:2 c:3"},
		{"INCR NX refused", INCR | NX, []Pair{{1, "a"}}, AddResult{}, nil, "a:1 b:2 c:3"},
		{"INCR XX refused", INCR | XX, []Pair{{1, "q"}}, AddResult{}, nil, "a:1 b:2 c:3"},
		{"INCR GT refused", INCR | GT, []Pair{{-1, "a"}}, AddResult{}, nil, "a:1 b:2 c:3"},
		{"INCR LT done", INCR | LT, []Pair{{-1, "a"}}, AddResult{Changed: 1, Score: 0, Done: true}, nil, "a:0 b:2 c:3"},
		{"INCR two pairs", INCR, []Pair{{1, "a"}, {1, "b"}}, AddResult{}, ErrIncrPairs, "a:1 b:2 c:3"},
		{"NX XX", NX | XX, []Pair{{1, "a"}}, AddResult{}, ErrXXAndNX, "a:1 b:2 c:3"},
		{"GT LT", GT | LT, []Pair{{1, "a"}}, AddResult{}, ErrGTLTNX, "a:1 b:2 c:3"},
		{"NX GT", NX | GT, []Pair{{1, "a"}}, AddResult{}, ErrGTLTNX, "a:1 b:2 c:3"},
		{"NaN", 0, []Pair{{4, "d"}, {math.NaN(), "e"}}, AddResult{}, ErrNaN, "a:1 b:2 c:3"},
		{"INCR to NaN", INCR, []Pair{{math.Inf(-1), "i"}}, AddResult{Count: 1, Added: 1, Score: math.Inf(-1), Done: true}, nil, "i:-inf a:1 b:2 c:3"},
		{"ties by member", 0, []Pair{{2, "aa"}, {2, "B"}}, AddResult{Count: 2, Added: 2, Done: true}, nil, "a:1 B:2 aa:2 b:2 c:3"},
		{"zero equals minus zero", CH, []Pair{{0, "m"}, {math.Copysign(0, -1), "m"}}, AddResult{Count: 1, Added: 1, Done: true}, nil, "m:0 a:1 b:2 c:3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustNew(t, base...)
			got, err := s.Add(tt.flags, tt.pairs...)
			if !errors.Is(err, tt.err) || got != tt.want {
				t.Fatalf("Add = %+v, %v; want %+v, %v", got, err, tt.want, tt.err)
			}
			if m := members(s.Pairs()); m != tt.after {
				t.Fatalf("after: %s, want %s", m, tt.after)
			}
			if s.Card() != len(s.scores) {
				t.Fatalf("Card %d, map %d", s.Card(), len(s.scores))
			}
		})
	}
	s := mustNew(t, Pair{math.Inf(1), "p"})
	if _, err := s.Add(INCR, Pair{math.Inf(-1), "p"}); err != ErrNaN {
		t.Fatalf("inf + -inf: %v, want ErrNaN", err)
	}
}

func TestRanksAndRanges(t *testing.T) {
	s := mustNew(t, Pair{1, "a"}, Pair{2, "b"}, Pair{2, "c"}, Pair{3, "d"}, Pair{math.Inf(1), "e"}, Pair{math.Inf(-1), "z"})
	// order: z:-inf a:1 b:2 c:2 d:3 e:inf
	for _, tt := range []struct {
		m        string
		rank, rv int
		ok       bool
	}{{"z", 0, 5, true}, {"c", 3, 2, true}, {"e", 5, 0, true}, {"nope", 0, 0, false}} {
		r, ok := s.Rank(tt.m, false)
		rv, _ := s.Rank(tt.m, true)
		if r != tt.rank || ok != tt.ok || ok && rv != tt.rv {
			t.Errorf("Rank(%s) = %d %d %v", tt.m, r, rv, ok)
		}
	}
	ranks := []struct {
		start, stop int64
		rev         bool
		want        string
	}{
		{0, -1, false, "z:-inf a:1 b:2 c:2 d:3 e:inf"},
		{1, 2, false, "a:1 b:2"},
		{-2, -1, false, "d:3 e:inf"},
		{0, 1, true, "e:inf d:3"},
		{-100, 0, false, "z:-inf"},
		{3, 1, false, ""},
		{6, 10, false, ""},
		{4, 100, false, "d:3 e:inf"},
		{-1, -100, false, ""},
	}
	for _, tt := range ranks {
		if got := members(s.RangeByRank(tt.start, tt.stop, tt.rev)); got != tt.want {
			t.Errorf("RangeByRank(%d, %d, %v) = %s, want %s", tt.start, tt.stop, tt.rev, got, tt.want)
		}
	}
	scores := []struct {
		min, max      string
		rev           bool
		offset, count int64
		want          string
		n             int
	}{
		{"-inf", "+inf", false, 0, -1, "z:-inf a:1 b:2 c:2 d:3 e:inf", 6},
		{"(1", "3", false, 0, -1, "b:2 c:2 d:3", 3},
		{"(1", "(3", false, 0, -1, "b:2 c:2", 2},
		{"2", "2", false, 0, -1, "b:2 c:2", 2},
		{"(2", "2", false, 0, -1, "", 0},
		{"3", "1", false, 0, -1, "", 0},
		{"-inf", "inf", true, 1, 2, "d:3 c:2", 6},
		{"-inf", "inf", false, 5, 10, "e:inf", 6},
		{"-inf", "inf", false, 6, 10, "", 6},
		{"-inf", "inf", false, -1, 10, "", 6},
		{"-inf", "inf", false, 0, 0, "", 6},
		{"(-inf", "(inf", false, 0, -1, "a:1 b:2 c:2 d:3", 4},
	}
	for _, tt := range scores {
		r, err := ParseRange(tt.min, tt.max)
		if err != nil {
			t.Fatal(err)
		}
		if got := members(s.RangeByScore(r, tt.rev, tt.offset, tt.count)); got != tt.want {
			t.Errorf("RangeByScore(%s, %s, %v, %d, %d) = %s, want %s", tt.min, tt.max, tt.rev, tt.offset, tt.count, got, tt.want)
		}
		if n := s.Count(r); n != tt.n {
			t.Errorf("Count(%s, %s) = %d, want %d", tt.min, tt.max, n, tt.n)
		}
	}
}

func TestRemove(t *testing.T) {
	base := []Pair{{1, "a"}, {2, "b"}, {3, "c"}, {4, "d"}}
	tests := []struct {
		name string
		do   func(s *Set) int
		n    int
		want string
	}{
		{"rem", func(s *Set) int { return s.Rem("a", "x", "c", "a") }, 2, "b:2 d:4"},
		{"by score", func(s *Set) int { return s.RemRangeByScore(Range{Bound{2, false}, Bound{4, true}}) }, 2, "a:1 d:4"},
		{"by score none", func(s *Set) int { return s.RemRangeByScore(Range{Bound{5, false}, Bound{math.Inf(1), false}}) }, 0, "a:1 b:2 c:3 d:4"},
		{"by rank", func(s *Set) int { return s.RemRangeByRank(1, -2) }, 2, "a:1 d:4"},
		{"by rank all", func(s *Set) int { return s.RemRangeByRank(0, -1) }, 4, ""},
		{"by rank none", func(s *Set) int { return s.RemRangeByRank(5, 9) }, 0, "a:1 b:2 c:3 d:4"},
	}
	for _, tt := range tests {
		s := mustNew(t, base...)
		if n := tt.do(s); n != tt.n || members(s.Pairs()) != tt.want || len(s.scores) != s.Card() {
			t.Errorf("%s: %d, %s; want %d, %s", tt.name, n, members(s.Pairs()), tt.n, tt.want)
		}
	}
}

func TestCloneEqual(t *testing.T) {
	s := mustNew(t, Pair{1, "a"}, Pair{2, "b"})
	c := s.Clone()
	if !s.Equal(c) || !c.Equal(s) {
		t.Fatal("clone differs")
	}
	c.Add(0, Pair{3, "c"})
	if s.Equal(c) || s.Card() != 2 {
		t.Fatalf("clone shares: %v %v", s, c)
	}
	c.Rem("c")
	c.Add(0, Pair{5, "a"})
	if s.Equal(c) {
		t.Fatal("score change not seen")
	}
	var empty *Set
	if !empty.Equal(&Set{}) || empty.Clone() != nil || empty.Card() != 0 {
		t.Fatal("nil set")
	}
}

func TestParseScore(t *testing.T) {
	ok := map[string]float64{
		"1": 1, "-1.5": -1.5, "+2": 2, ".5": .5, "5.": 5, "1e3": 1000, "1E-2": 0.01,
		"inf": math.Inf(1), "-inf": math.Inf(-1), "+inf": math.Inf(1), "Infinity": math.Inf(1), "-INF": math.Inf(-1),
		"0x10": 16, "0x1p4": 16, "0X.8": 0.5, "0e-500": 0, "1e-310": 1e-310, "-0": math.Copysign(0, -1),
	}
	for in, want := range ok {
		got, err := ParseScore(in)
		if err != nil || got != want || math.Signbit(got) != math.Signbit(want) {
			t.Errorf("ParseScore(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", " 1", "1 ", "nan", "NaN", "abc", "1e", "1e+", "--1", "1e400", "-1e400", "1e-400", "0x", "1\x00", "in", "1_000", "0x_1p0", "infinit"} {
		if f, err := ParseScore(in); err != ErrNotFloat {
			t.Errorf("ParseScore(%q) = %v, %v; want ErrNotFloat", in, f, err)
		}
	}
}

func TestParseBound(t *testing.T) {
	ok := map[string]Bound{
		"1": {1, false}, "(1": {1, true}, "(-inf": {math.Inf(-1), true}, "+inf": {math.Inf(1), false},
		"": {0, false}, "(": {0, true}, " 2": {2, false}, "1e400": {math.Inf(1), false}, "3\x00junk": {3, false},
		"\x00": {0, false}, "(0x1p1": {2, true},
	}
	for in, want := range ok {
		got, err := ParseBound(in)
		if err != nil || got != want {
			t.Errorf("ParseBound(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"x", "((1", "1 ", " ", "nan", "(nan", "[1", "-", "1e5x"} {
		if b, err := ParseBound(in); err != ErrRangeFloat {
			t.Errorf("ParseBound(%q) = %v, %v; want ErrRangeFloat", in, b, err)
		}
	}
}

func TestFormatScore(t *testing.T) {
	for f, want := range map[float64]string{
		1.5: "1.5", 0.1: "0.10000000000000001", 1e20: "1e+20", math.Inf(1): "inf", math.Inf(-1): "-inf",
		100: "100", 1e17: "1e+17", 1e16: "10000000000000000", -3: "-3", 1e-5: "1.0000000000000001e-05",
	} {
		if got := FormatScore(f); got != want {
			t.Errorf("FormatScore(%v) = %s, want %s", f, got, want)
		}
	}
}

// FuzzParse checks the parsers never panic, and that what they accept
// agrees with strconv where both read a plain decimal number.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"1", "(1", "-inf", "+inf", "(inf", "1e400", "0x1p-3", "", "(", " 1", "nan", "1.5e-7", "infinity", "0x.8p1", "1\x00x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		score, err := ParseScore(s)
		if err == nil {
			if math.IsNaN(score) {
				t.Fatalf("ParseScore(%q) = NaN", s)
			}
			if b, err := ParseBound(s); err != nil || b.Value != score || b.Excl {
				t.Fatalf("ParseScore(%q) = %v but ParseBound = %v, %v", s, score, b, err)
			}
		}
		if b, err := ParseBound(s); err == nil && math.IsNaN(b.Value) {
			t.Fatalf("ParseBound(%q) = NaN", s)
		}
	})
}
