package netserve

import (
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestReadTokens(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []Token
		err  string // substring of the error; "": none
	}{
		{
			name: "one token a line, as before",
			in:   "# tokens\n\n  alpha  \nbeta\n#gamma\n",
			want: []Token{{Value: "alpha"}, {Value: "beta"}},
		},
		{
			name: "rights and prefixes",
			in:   "ci lock jobs/ ci/\nmon read\nroot lock\n\tops\tlock  deploy/ \n",
			want: []Token{
				{Value: "ci", Prefixes: []string{"jobs/", "ci/"}},
				{Value: "mon", ReadOnly: true},
				{Value: "root"},
				{Value: "ops", Prefixes: []string{"deploy/"}},
			},
		},
		{name: "no token", in: "# none\n", err: "no token"},
		{name: "unknown rights", in: "a jobs/\n", err: `line 1: rights "jobs/"`},
		{name: "read with prefixes", in: "# c\nmon read jobs/\n", err: "line 2: a read-only token takes no key prefix"},
		{name: "duplicate", in: "a\nb lock x/\na read\n", err: "access token 3 is given twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ReadTokens(strings.NewReader(tt.in))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("ReadTokens() error = %v, want one with %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ReadTokens() (-want +got):\n%s", diff)
			}
		})
	}
	if _, err := LoadTokens(t.TempDir() + "/missing"); err == nil {
		t.Error("LoadTokens() of a missing file: error = nil")
	}
}

func TestCheckTokens(t *testing.T) {
	for _, toks := range [][]Token{
		{{Value: ""}},
		{{Value: "a"}, {Value: "a"}},
		{{Value: "a", Prefixes: []string{""}}},
		{{Value: "a", ReadOnly: true, Prefixes: []string{"x/"}}},
	} {
		if err := CheckTokens(toks); err == nil {
			t.Errorf("CheckTokens(%+v) = nil, want an error", toks)
		}
	}
}

// FuzzReadTokens reads arbitrary bytes as a tokens file. It must not
// panic; what it accepts must be what CheckTokens accepts, and must read
// back the same once written in the file's format.
func FuzzReadTokens(f *testing.F) {
	for _, seed := range []string{
		"",
		"secret\n",
		"# ops\nadmin lock\nci lock jobs/ deploy/\nprobe read\n",
		"a\r\nb lock x/\r\n",
		"  padded   lock   p/  \n\n#x\n",
		"t read x/\n",
		"t write\n",
		"t\nt\n",
		"\x00 lock \xff\n",
		strings.Repeat("x", 300) + " lock " + strings.Repeat("p/ ", 100) + "\n",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data string) {
		toks, err := ReadTokens(strings.NewReader(data))
		if err != nil {
			if toks != nil {
				t.Fatalf("ReadTokens() = %v, %v: tokens with an error", toks, err)
			}
			return
		}
		if len(toks) == 0 {
			t.Fatal("ReadTokens() accepted a file without tokens")
		}
		if err := CheckTokens(toks); err != nil {
			t.Fatalf("ReadTokens() accepted tokens CheckTokens refuses: %v", err)
		}
		var b strings.Builder
		for _, tok := range toks {
			b.WriteString(tok.Value)
			switch {
			case tok.ReadOnly:
				b.WriteString(" read")
			case len(tok.Prefixes) > 0:
				b.WriteString(" lock " + strings.Join(tok.Prefixes, " "))
			}
			b.WriteString("\n")
		}
		again, err := ReadTokens(strings.NewReader(b.String()))
		if err != nil {
			t.Fatalf("re-reading %q: %v", b.String(), err)
		}
		if !reflect.DeepEqual(toks, again) {
			t.Fatalf("re-read %v, want %v", again, toks)
		}
	})
}
