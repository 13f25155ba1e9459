package clidoc

import (
	"flag"
	"reflect"
	"strings"
	"testing"
)

func TestFlags(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.Bool("json", false, "print JSON")
	fs.Bool("v", true, "verbose")
	fs.String("addr", "127.0.0.1:1", "server `address` (env LATCH_ADDR)")
	fs.Duration("ttl", 0, "lease `duration`")
	fs.Int("n", 3, "count")
	got := Flags(fs)
	want := []Flag{
		{Name: "addr", Arg: "address", Usage: "server address (env LATCH_ADDR)", Default: "127.0.0.1:1"},
		{Name: "json", Usage: "print JSON"},
		{Name: "n", Arg: "int", Usage: "count", Default: "3"},
		{Name: "ttl", Arg: "duration", Usage: "lease duration"},
		{Name: "v", Usage: "verbose"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Flags =\n%+v\nwant\n%+v", got, want)
	}
}

func TestRoff(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain", "plain"},
		{"--max-keys", `\-\-max\-keys`},
		{`a\b`, `a\eb`},
		{".starts with a dot", `\&.starts with a dot`},
		{"'quote", `\&'quote`},
	}
	for _, tt := range tests {
		if got := roffLine(tt.in); got != tt.want {
			t.Errorf("roffLine(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestEnv(t *testing.T) {
	p := &Program{
		Commands: []Command{
			{Name: "a", Flags: []Flag{{Name: "addr", Usage: "x (env P_ADDR)"}, {Name: "q", Usage: "no env"}}},
			{Name: "b", Flags: []Flag{{Name: "addr", Usage: "y (env P_ADDR)"}}},
		},
		Environment: []Item{{Term: "P_A", Text: "set for the child"}},
	}
	want := []Item{
		{Term: "P_A", Text: "set for the child"},
		{Term: "P_ADDR", Text: "Sets --addr (a, b) where the flag is not given."},
	}
	if got := p.Env(); !reflect.DeepEqual(got, want) {
		t.Errorf("Env = %+v, want %+v", got, want)
	}
}

func TestCompletionUnknownShell(t *testing.T) {
	var b strings.Builder
	if err := Completion(&b, &Program{Name: "p"}, "csh"); err == nil {
		t.Error("Completion(csh) succeeded")
	}
}
