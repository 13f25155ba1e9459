package latchtest

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"io"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseScenarios(t *testing.T) {
	src := `# file comment
=== first
# a note
# another
1: get k\r\x41 {cas}
2!~ raw{rep 3 ab}
1.b: Set key=k value=v flags=7 exp=0x10 cas={cas} opaque=9
1.x!: 80 0a 0000
< expected
<b reply
@close 1
@reset 2
@sleep 1100ms
@read 1
@eof 2

=== second
3: version
`
	scs, err := ParseScenarios("f.txt", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if len(scs) != 2 {
		t.Fatalf("got %d scenarios, want 2", len(scs))
	}
	sc := scs[0]
	if sc.Title != "first" || sc.Line != 2 || sc.Pos() != "f.txt:2" {
		t.Errorf("scenario = %q at %s (line %d)", sc.Title, sc.Pos(), sc.Line)
	}
	if diff := cmp.Diff([]string{"a note", "another"}, sc.Notes); diff != "" {
		t.Errorf("notes (-want +got):\n%s", diff)
	}
	type step struct {
		Kind   StepKind
		Conn   int
		NoSync bool
		Bytes  string // with {cas} = 42
	}
	var got []step
	for _, st := range sc.Steps {
		s := step{Kind: st.Kind, Conn: st.Conn, NoSync: st.NoSync}
		switch st.Kind {
		case SendBinary:
			s.Bytes = hex.EncodeToString(st.bin.build(42))
		case SendText, SendRaw, SendHex:
			s.Bytes = string(literal(st.text, 42))
		}
		got = append(got, s)
	}
	setReq := "80" + "01" + "0001" + "08" + "00" + "0000" + "0000000a" + "00000009" + "000000000000002a" +
		"00000007" + "00000010" + hex.EncodeToString([]byte("kv"))
	want := []step{
		{Kind: SendText, Conn: 1, Bytes: "get k\rA 42\r\n"},
		{Kind: SendRaw, Conn: 2, NoSync: true, Bytes: "rawababab"},
		{Kind: SendBinary, Conn: 1, Bytes: setReq},
		{Kind: SendHex, Conn: 1, NoSync: true, Bytes: "\x80\x0a\x00\x00"},
		{Kind: Close, Conn: 1},
		{Kind: Reset, Conn: 2},
		{Kind: Sleep},
		{Kind: Read, Conn: 1},
		{Kind: EOF, Conn: 2},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("steps (-want +got):\n%s", diff)
	}
	if d := sc.Steps[6].Dur.Milliseconds(); d != 1100 {
		t.Errorf("@sleep = %dms, want 1100", d)
	}
	if !sc.Golden() || scs[1].Golden() {
		t.Errorf("Golden() = %v, %v; want true, false", sc.Golden(), scs[1].Golden())
	}
	wantLines := []string{`1: get k\r\x41 {cas}`, `2!~ raw{rep 3 ab}`,
		`1.b: Set key=k value=v flags=7 exp=0x10 cas={cas} opaque=9`,
		`1.x!: 80 0a 0000`, "< expected", "<b reply",
		"@close 1", "@reset 2", "@sleep 1100ms", "@read 1", "@eof 2"}
	if diff := cmp.Diff(wantLines, sc.Want()); diff != "" {
		t.Errorf("Want() (-want +got):\n%s", diff)
	}
}

func TestParseScenariosErrors(t *testing.T) {
	tests := []struct {
		name, src, want string
	}{
		{"step before title", "1: get k\n", "before the first === title"},
		{"duplicate title", "=== a\n1: x\n=== a\n1: x\n", "already used"},
		{"no steps", "=== a\n# nothing\n", "has no steps"},
		{"reply first", "=== a\n< END\n", "expected reply before the first step"},
		{"unknown directive", "=== a\n@wait 1\n", "unknown directive"},
		{"bad sleep", "=== a\n@sleep soon\n", "positive duration"},
		{"bad conn", "=== a\n0: x\n", "bad connection number"},
		{"garbage", "=== a\nhello\n", "cannot parse"},
		{"bad escape", "=== a\n1: \\q\n", "bad escape"},
		{"bad hex escape", "=== a\n1: \\xZZ\n", "want \\xHH"},
		{"open macro", "=== a\n1: {cas\n", "unterminated macro"},
		{"stray brace", "=== a\n1: }\n", "unmatched }"},
		{"unknown macro", "=== a\n1: {now}\n", "unknown macro"},
		{"bad rep", "=== a\n1: {rep x y}\n", "bad count"},
		{"unknown opcode", "=== a\n1.b: Fetch key=k\n", "unknown opcode"},
		{"unknown field", "=== a\n1.b: Get size=1\n", "unknown field"},
		{"field twice", "=== a\n1.b: Get key=a key=b\n", "given twice"},
		{"number too big", "=== a\n1.b: Set flags=0x100000000\n", `field "flags"`},
		{"bad hex", "=== a\n1.x: 8\n", "odd length"},
		{"hex with tilde", "=== a\n1.x~ 80\n", `steps take ":"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseScenarios("f.txt", []byte(tt.src))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ParseScenarios() error = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestBinaryDefaultExtras(t *testing.T) {
	tests := []struct {
		spec, extras string
	}{
		{"Set key=k value=v flags=1 exp=2", "0000000100000002"},
		{"RaUQ key=k value=v", "0000000000000000"},
		{"Increment key=k delta=1 initial=2 exp=3", "0000000000000001000000000000000200000003"},
		{"Touch key=k exp=5", "00000005"},
		{"GaTKQ key=k", "00000000"},
		{"Get key=k", ""},
		{"Get key=k exp=0xffffffff", "ffffffff"},
		{"Flush exp=0", "00000000"},
		{"Set key=k value=v extras=", ""},
		{"Get key=k extras=0102", "0102"},
	}
	for _, tt := range tests {
		b, err := parseBinSpec(tt.spec)
		if err != nil {
			t.Fatalf("%s: %v", tt.spec, err)
		}
		req := b.build(0)
		ext := req[headerLen : headerLen+int(req[4])]
		if got := hex.EncodeToString(ext); got != tt.extras {
			t.Errorf("%s: extras %s, want %s", tt.spec, got, tt.extras)
		}
	}
}

func TestBinaryHeaderOverrides(t *testing.T) {
	b, err := parseBinSpec("op=0x30 key={rep 3 k} value=v magic=0x81 keylen=9 extlen=2 bodylen=1 dtype=1 vbucket=0x0203")
	if err != nil {
		t.Fatal(err)
	}
	got := hex.EncodeToString(b.build(0)[:headerLen])
	want := "81" + "30" + "0009" + "02" + "01" + "0203" + "00000001" + "00000000" + "0000000000000000"
	if got != want {
		t.Errorf("header %s, want %s", got, want)
	}
}

func TestEscape(t *testing.T) {
	if got, want := esc([]byte("a\\b\r\n\t\x00\xff ~")), `a\\b\r\n\t\x00\xff ~`; got != want {
		t.Errorf("esc = %s, want %s", got, want)
	}
	if got, want := quote([]byte(`say "hi"`)), `"say \x22hi\x22"`; got != want {
		t.Errorf("quote = %s, want %s", got, want)
	}
	long := bytes.Repeat([]byte("x"), maxShown+1)
	if got := esc(long); !strings.HasPrefix(got, "<201 bytes sha256:") {
		t.Errorf("esc(long) = %s", got)
	}
	// Every escape the transcript shows unescapes to the same bytes.
	segs, err := parseText(esc([]byte("a\\b\r\n\t\x00\xff")))
	if err != nil || string(literal(segs, 0)) != "a\\b\r\n\t\x00\xff" {
		t.Errorf("esc does not round-trip: %q, %v", literal(segs, 0), err)
	}
}

// textUnits turns reply lines into text units.
func textUnits(lines ...string) []*unit {
	var us []*unit
	for _, l := range lines {
		us = append(us, &unit{kind: uText, b: []byte(l + "\r\n")})
	}
	return us
}

func render(us []*unit) []string {
	var out []string
	for _, u := range normalize(us) {
		out = append(out, u.render()...)
	}
	return out
}

func TestNormalizeText(t *testing.T) {
	got := render(textUnits(
		"VERSION 1.6.21",
		"VALUE k 0 1 12345", "VALUE k 0 1 0", "VALUE k 0 1",
		// memcached-style general stats: only yrmcds's names stay.
		"STAT pid 1", "STAT uptime 5", "STAT time 2", "STAT version 1.6", "STAT cmd_get 0",
		"END",
		"STAT maxbytes 1", "STAT evictions on", "STAT bogus 1",
		"END",
		"VALUE b", "VALUE c", "VALUE a",
		"END",
	))
	want := []string{
		"< VERSION <version>",
		"< VALUE k 0 1 *", "< VALUE k 0 1 0", "< VALUE k 0 1",
		"< STAT pid *", "< STAT time *", "< STAT version *",
		"< END",
		"< STAT maxbytes *", "< STAT evictions *",
		"< END",
		"< VALUE a", "< VALUE b", "< VALUE c",
		"< END",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("normalize (-want +got):\n%s", diff)
	}
}

func TestNormalizeBinary(t *testing.T) {
	pkt := func(op byte, status uint16, opaque uint32, cas uint64, extras, key, value string) *unit {
		return &unit{kind: uBin, bin: &reply{magic: magicResponse, op: op, status: status, opaque: opaque,
			cas: cas, extras: []byte(extras), key: []byte(key), value: []byte(value)}}
	}
	got := render([]*unit{
		pkt(opVer, 0, 0, 0, "", "", "latch 1.0"),
		pkt(0x00, 0, 7, 99, "\xde\xad\xbe\xef", "", "hello"),
		pkt(opStat, 0, 0, 0, "", "items:1:number", "3"),
		pkt(opStat, 0, 0, 0, "", "items:1:bogus", "3"),
		pkt(opStat, 0, 0, 0, "", "", ""),
		pkt(opKeys, 0, 0, 0, "", "z", ""),
		pkt(opKeys, 0, 0, 0, "", "a", ""),
		pkt(opKeys, 0, 0, 0, "", "", ""),
		pkt(0x51, 0x81, 0, 0, "", "", "Unknown command"),
		{kind: uBin, bin: &reply{magic: 0x80, op: 0x77, status: 0x1234, dtype: 1, value: []byte("xy"), lens: &[3]int{9, 0, 2}}},
	})
	want := []string{
		"<b Version OK value=<version>",
		`<b Get OK opaque=0x00000007 cas=* extras=deadbeef value="hello"`,
		`<b Stat OK key="items:1:number" value=*`,
		"<b Stat OK",
		`<b Keys OK key="a"`,
		`<b Keys OK key="z"`,
		"<b Keys OK",
		`<b op=0x51 UnknownCommand value="Unknown command"`,
		`<b op=0x77 0x1234 value="xy" dtype=0x01 magic=0x80 keylen=9 extlen=0 bodylen=2`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("normalize (-want +got):\n%s", diff)
	}
}

// fakeServer is a tiny memcached-protocol server for replay tests: it
// answers version, gets k (cas 42), cas k ... 42 (STORED if the cas is
// 42), quit; binary Noop, GetK (cas 7) and Set (OK if the cas is 7).
// It records every text line it reads.
type fakeServer struct {
	ln    net.Listener
	mu    sync.Mutex
	lines []string
	wg    sync.WaitGroup
}

func startFake(t *testing.T) *fakeServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeServer{ln: ln}
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			f.wg.Add(1)
			go func() {
				defer f.wg.Done()
				defer c.Close()
				f.serve(c)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		f.wg.Wait()
	})
	return f
}

func (f *fakeServer) serve(c net.Conn) {
	r := bufio.NewReader(c)
	for {
		b, err := r.Peek(1)
		if err != nil {
			return
		}
		if b[0] == magicRequest {
			h := make([]byte, headerLen)
			if _, err := io.ReadFull(r, h); err != nil {
				return
			}
			body := make([]byte, binary.BigEndian.Uint32(h[8:]))
			if _, err := io.ReadFull(r, body); err != nil {
				return
			}
			resp := make([]byte, headerLen)
			resp[0], resp[1] = magicResponse, h[1]
			copy(resp[12:16], h[12:16])
			switch h[1] {
			case 0x0c: // GetK: key k, cas 7, flags 0, value v
				binary.BigEndian.PutUint16(resp[2:], 1)
				resp[4] = 4
				binary.BigEndian.PutUint32(resp[8:], 6)
				binary.BigEndian.PutUint64(resp[16:], 7)
				resp = append(resp, 0, 0, 0, 0, 'k', 'v')
			case 0x01: // Set: OK only with cas 7
				if binary.BigEndian.Uint64(h[16:]) != 7 {
					binary.BigEndian.PutUint16(resp[6:], 2)
				}
			}
			c.Write(resp)
			continue
		}
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		f.mu.Lock()
		f.lines = append(f.lines, line)
		f.mu.Unlock()
		switch {
		case line == "version\r\n":
			io.WriteString(c, "VERSION fake 1\r\n")
		case line == "gets k\r\n":
			io.WriteString(c, "VALUE k 0 1 42\r\nx\r\nEND\r\n")
		case strings.HasPrefix(line, "cas k 0 0 1 "):
			data := make([]byte, 3)
			io.ReadFull(r, data)
			if line == "cas k 0 0 1 42\r\n" {
				io.WriteString(c, "STORED\r\n")
			} else {
				io.WriteString(c, "EXISTS\r\n")
			}
		case line == "quit\r\n":
			return
		default:
			io.WriteString(c, "ERROR\r\n")
		}
	}
}

func TestReplay(t *testing.T) {
	f := startFake(t)
	scs, err := ParseScenarios("f.txt", []byte(`=== replay
1: version
1~ version\r\nbogus\r\n
1: gets k
1!: cas k 0 0 1 {cas}
1: x
1.b: GetK key=k
1.b: Set key=k value=v cas={cas}
2: bogus
1!: quit
@eof 1
1: version
@close 2
@read 1
`))
	if err != nil {
		t.Fatal(err)
	}
	tr, err := Replay(f.ln.Addr().String(), scs[0])
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"1: version",
		"< VERSION <version>",
		`1~ version\r\nbogus\r\n`,
		"< VERSION <version>",
		"< ERROR",
		"1: gets k",
		"< VALUE k 0 1 *",
		"<+ x",
		"< END",
		"1!: cas k 0 0 1 {cas}",
		"1: x",
		"< STORED",
		"1.b: GetK key=k",
		`<b GetK OK cas=* extras=00000000 key="k" value="v"`,
		"1.b: Set key=k value=v cas={cas}",
		"<b Set OK",
		"2: bogus",
		"< ERROR",
		"1!: quit",
		"@eof 1",
		"<! closed",
		"1: version",
		"< VERSION <version>",
		"@close 2",
		"@read 1",
	}
	if diff := cmp.Diff(want, tr.Lines()); diff != "" {
		t.Errorf("transcript (-want +got):\n%s", diff)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !strings.Contains(strings.Join(f.lines, ""), "cas k 0 0 1 42\r\n") {
		t.Errorf("{cas} was not replaced by the CAS of gets: server read %q", f.lines)
	}
}

func TestReplayUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	scs, err := ParseScenarios("f.txt", []byte("=== a\n1: version\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Replay(addr, scs[0]); err == nil {
		t.Error("Replay() on a closed port succeeded")
	}
}
