package jute

import (
	"bytes"
	"errors"
	"testing"
)

func TestNextFrame(t *testing.T) {
	for _, tc := range []struct {
		name  string
		in    []byte
		limit int
		body  []byte
		n     int
		err   bool
	}{
		{"empty", nil, MaxFrame, nil, 0, false},
		{"part of a length", hx("00 00 00"), MaxFrame, nil, 0, false},
		{"length only", hx("00 00 00 02"), MaxFrame, nil, 0, false},
		{"part of a body", hx("00 00 00 02 61"), MaxFrame, nil, 0, false},
		{"a frame", hx("00 00 00 02 61 62"), MaxFrame, []byte("ab"), 6, false},
		{"a frame and more", hx("00 00 00 01 61 00 00"), MaxFrame, []byte("a"), 5, false},
		{"empty body", hx("00 00 00 00 ff"), MaxFrame, []byte{}, 4, false},
		{"at the limit", hx("00 00 00 02 61 62"), 2, []byte("ab"), 6, false},
		{"over the limit", hx("00 00 00 03 61 62 63"), 2, nil, 0, true},
		{"maxbuffer, incomplete", hx("00 0f ff ff"), MaxFrame, nil, 0, false},
		{"maxbuffer + 1", hx("00 10 00 00"), MaxFrame, nil, 0, true},
		{"negative", hx("ff ff ff ff"), MaxFrame, nil, 0, true},
		{"ruok", []byte("ruok"), MaxFrame, nil, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body, n, err := NextFrame(tc.in, tc.limit)
			if (err != nil) != tc.err || !bytes.Equal(body, tc.body) || (body == nil) != (tc.body == nil) || n != tc.n {
				t.Fatalf("NextFrame = %q, %d, %v; want %q, %d, error %v", body, n, err, tc.body, tc.n, tc.err)
			}
			if err != nil && !errors.Is(err, ErrFrameLength) {
				t.Fatalf("error %v does not wrap ErrFrameLength", err)
			}
			if body != nil && cap(body) != len(body) {
				t.Fatalf("body's capacity %d runs past it (%d)", cap(body), len(body))
			}
		})
	}
	_, _, err := NextFrame(hx("00 10 00 00"), MaxFrame)
	if got, want := err.Error(), "jute: frame length 1048576 outside 0..1048575"; got != want {
		t.Errorf("error %q, want %q", got, want)
	}
}

func TestWriteFrame(t *testing.T) {
	b, off := StartFrame([]byte("xy"))
	h := ReplyHeader{Xid: 1, Zxid: 2, Err: OK}
	b = h.Append(b)
	b = (&CreateResponse{Path: "/a"}).Append(b)
	if l := FinishFrame(b, off); l != 22 {
		t.Errorf("FinishFrame = %d, want 22", l)
	}
	want := cat([]byte("xy"), hx("00 00 00 16"), hx("00 00 00 01  00 00 00 00 00 00 00 02  00 00 00 00"), hx("00 00 00 02"), []byte("/a"))
	if !bytes.Equal(b, want) {
		t.Errorf("%x\nwant %x", b, want)
	}
	if got := AppendFrame([]byte("xy"), want[6:]); !bytes.Equal(got, want) {
		t.Errorf("AppendFrame: %x", got)
	}
}

func TestFourLetterWord(t *testing.T) {
	for _, w := range []string{"ruok", "srvr", "stat", "mntr", "envi", "isro", "conf", "cons", "wchs",
		"wchc", "wchp", "dump", "dirs", "crst", "srst", "gtmk", "stmk", "hash"} {
		got, ok := FourLetterWord([]byte(w + "\n"))
		if !ok || got != w {
			t.Errorf("FourLetterWord(%q) = %q, %v", w, got, ok)
		}
		if _, _, err := NextFrame([]byte(w), MaxFrame); err == nil {
			t.Errorf("%q reads as a valid frame length", w)
		}
	}
	for _, in := range [][]byte{nil, []byte("ruo"), []byte("RUOK"), []byte("kill"), hx("00 00 00 2d"), hx("ff f4 ff fd")} {
		if got, ok := FourLetterWord(in); ok {
			t.Errorf("FourLetterWord(%q) = %q, true", in, got)
		}
	}
	if n := testing.AllocsPerRun(100, func() { FourLetterWord([]byte("mntr")) }); n != 0 {
		t.Errorf("%v allocations", n)
	}
}
