package resp

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

var testLimits = Limits{MaxArgs: 16, MaxBulk: 64, MaxInline: 64}

// readAll reads every request of in, and the error that ended them.
func readAll(in []byte, lim Limits) ([][]string, error) {
	return readAllSize(in, lim, 16)
}

// readAllSize reads in through a buffer of size bytes: 16 (bufio's least)
// makes the Reader read most requests line by line, a large one lets it
// parse whole ones in the buffer (arrayBuffered).
func readAllSize(in []byte, lim Limits, size int) ([][]string, error) {
	rd := NewReader(bufio.NewReaderSize(bytes.NewReader(in), size), lim)
	var out [][]string
	for {
		args, err := rd.Next()
		if err != nil {
			return out, err
		}
		var req []string
		for _, a := range args {
			req = append(req, string(a))
		}
		out = append(out, req)
	}
}

func TestReader(t *testing.T) {
	tests := []struct {
		in   string
		want string // requests joined, then the error
	}{
		{"*1\r\n$4\r\nPING\r\n", `[[PING]] EOF`},
		{"*2\r\n$3\r\nGET\r\n$0\r\n\r\n*0\r\n*-1\r\n", `[[GET ]] EOF`},
		{"PING\r\nset a \"b c\"\n\r\n  get   'x y' \r\n", `[[PING] [set a b c] [get x y]] EOF`},
		{"echo \"\\x41\\n\\t\\\\\"\r\n", "[[echo A\n\t\\]] EOF"},
		{"echo 'it\\'s'\r\n", `[[echo it's]] EOF`},
		{"echo \"a\"b\r\n", `[] Protocol error: unbalanced quotes in request`},
		{"echo \"ab\r\n", `[] Protocol error: unbalanced quotes in request`},
		{"*x\r\n", `[] Protocol error: invalid multibulk length`},
		{"*1\r\n+PING\r\n", `[] Protocol error: expected '$', got '+'`},
		{"*1\r\n$-1\r\n", `[] Protocol error: invalid bulk length`},
		{"*1\r\n$4\r\nPINGxx", `[] Protocol error: bulk string not followed by CRLF`},
		{"*1\r\n$65\r\n", `[] Protocol error: argument of 65 bytes, at most 64`},
		{"*17\r\n", `[] Protocol error: too many arguments: 17, at most 16`},
		{strings.Repeat("a", 70) + "\r\n", `[] Protocol error: too big inline request`},
		{"*2\r\n$3\r\nGET\r\n", `[] unexpected EOF`},
		{"*1\r\n$4\r\nPI", `[] unexpected EOF`},
		{"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n*1\r\n$4\r\nPING\r\n", `[[SET k v] [PING]] EOF`},
		{"*2\r\n$3\r\nGET\r\n$1\r\nkx\r\n", `[] Protocol error: bulk string not followed by CRLF`},
		{"*2\r\n$3\r\n000\r\n000\r\n\r\n", `[] Protocol error: expected '$', got '0'`},
		{"*1\r\n$" + strings.Repeat("0", 40) + "\r\n", `[] Protocol error: too big bulk count string`},
	}
	for _, tt := range tests {
		for _, size := range []int{16, 4096} {
			reqs, err := readAllSize([]byte(tt.in), testLimits, size)
			if got := fmt.Sprintf("%v %v", reqs, err); got != tt.want {
				t.Errorf("%q, buffer of %d: got %q, want %q", tt.in, size, got, tt.want)
			}
		}
	}
}

func TestWriter(t *testing.T) {
	for _, proto := range []int{2, 3} {
		var b bytes.Buffer
		bw := bufio.NewWriter(&b)
		w := NewWriter(bw)
		w.Proto = proto
		w.Simple("OK")
		w.Error("ERR a\r\nb")
		w.Int(-3)
		w.BulkString("v")
		w.Null()
		w.NullArray()
		w.Map(1)
		w.Verbatim("x")
		bw.Flush()
		want := map[int]string{
			2: "+OK\r\n-ERR a  b\r\n:-3\r\n$1\r\nv\r\n$-1\r\n*-1\r\n*2\r\n$1\r\nx\r\n",
			3: "+OK\r\n-ERR a  b\r\n:-3\r\n$1\r\nv\r\n_\r\n_\r\n%1\r\n=5\r\ntxt:x\r\n",
		}[proto]
		if b.String() != want {
			t.Errorf("RESP%d: %q, want %q", proto, b.String(), want)
		}
	}
}

// FuzzReader: the Reader never panics nor reads past its limits, ends
// every input with a request, a protocol error or a read error, reads
// back what an encoder wrote, and is not asked too early (complete).
//
//	go test ./internal/resp/ -run '^$' -fuzz FuzzReader -fuzztime 60s
func FuzzReader(f *testing.F) {
	for _, s := range []string{
		"*1\r\n$4\r\nPING\r\n",
		"*5\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n$2\r\nNX\r\n$2\r\nPX\r\n",
		"SET k \"a\\x41\" NX\r\nGET 'k'\r\n",
		"*-1\r\n*0\r\n\r\n",
		"*2\r\n$3\r\nGET\r\n$300\r\n",
		"echo \"unterminated\r\n",
		"*99999999999999999999\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		// complete may say "wait" only where the Reader would wait.
		if !complete(in, testLimits) {
			_, err := NewReader(bufio.NewReader(bytes.NewReader(in)), testLimits).Next()
			if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("complete(%q) = false, but the Reader reads its first request: %v", in, err)
			}
		}
		reqs, err := readAll(in, testLimits)
		// Parsed in a buffer that holds it, the same requests and error
		// (but where the input ends: an inline line too long for the
		// limit is refused when the buffer fills, or is cut by the end).
		whole, werr := readAllSize(in, testLimits, len(in)+16)
		eof := func(err error) bool { return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) }
		if fmt.Sprint(whole) != fmt.Sprint(reqs) || !eof(err) && !eof(werr) && werr.Error() != err.Error() {
			t.Fatalf("read whole: %q %v, line by line: %q %v", whole, werr, reqs, err)
		}
		var pe *ProtocolError
		if !errors.As(err, &pe) && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("unexpected error %v", err)
		}
		var enc bytes.Buffer
		for _, r := range reqs {
			if len(r) == 0 || len(r) > testLimits.MaxArgs {
				t.Fatalf("request of %d arguments", len(r))
			}
			fmt.Fprintf(&enc, "*%d\r\n", len(r))
			for _, a := range r {
				if len(a) > max(testLimits.MaxBulk, testLimits.MaxInline) {
					t.Fatalf("argument of %d bytes", len(a))
				}
				fmt.Fprintf(&enc, "$%d\r\n%s\r\n", len(a), a)
			}
		}
		back, err := readAll(enc.Bytes(), Limits{MaxArgs: 16, MaxBulk: 1 << 10, MaxInline: 64})
		if !errors.Is(err, io.EOF) || fmt.Sprint(back) != fmt.Sprint(reqs) {
			t.Fatalf("re-encoded requests read back as %q (%v), want %q", back, err, reqs)
		}
	})
}

// FuzzCanonical: Canonical never panics, and is idempotent on its output
// up to quoting (a canonical form's canonical form is itself).
func FuzzCanonical(f *testing.F) {
	f.Add([]byte(`if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("del",KEYS[1]) else return 0 end`))
	f.Add([]byte("--[[ c ]] local x = [==[ s ]==] .. 'q\\'' -- end"))
	f.Fuzz(func(t *testing.T, in []byte) {
		_ = Canonical(in)
		_ = recognise(in)
	})
}

// BenchmarkReader parses a client's batch of 16 pipelined requests (SET NX
// PX, as redis-benchmark sends them) out of one read. One op is the batch.
func BenchmarkReader(b *testing.B) {
	var batch []byte
	for i := range 16 {
		key := fmt.Sprintf("lock:%012d", i)
		batch = fmt.Appendf(batch, "*6\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$22\r\nowner-value-0123456789\r\n$2\r\nNX\r\n$2\r\nPX\r\n$5\r\n10000\r\n", len(key), key)
	}
	src := bytes.NewReader(batch)
	br := bufio.NewReaderSize(src, 4<<10)
	rd := NewReader(br, Limits{MaxArgs: 1024, MaxBulk: 1 << 20, MaxInline: 64 << 10})
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	for b.Loop() {
		src.Reset(batch)
		br.Reset(src)
		for range 16 {
			if args, err := rd.Next(); err != nil || len(args) != 6 {
				b.Fatal(args, err)
			}
		}
	}
}
