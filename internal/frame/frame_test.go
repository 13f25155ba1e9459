package frame

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

func hdr(n uint32) string {
	return string([]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)})
}

func TestReader(t *testing.T) {
	tests := []struct {
		name    string
		input   string
		max     int
		want    []string
		wantErr error // after the frames of want
	}{
		{"empty stream", "", 16, nil, io.EOF},
		{"one frame", hdr(3) + "abc", 16, []string{"abc"}, io.EOF},
		{"zero-length frame", hdr(0) + hdr(1) + "x", 16, []string{"", "x"}, io.EOF},
		{"frames back to back", hdr(1) + "a" + hdr(2) + "bc" + hdr(3) + "def", 16, []string{"a", "bc", "def"}, io.EOF},
		{"exactly the limit", hdr(4) + "abcd", 4, []string{"abcd"}, io.EOF},
		{"over the limit", hdr(1) + "a" + hdr(5) + "abcde", 4, []string{"a"}, ErrTooLarge},
		{"huge header", hdr(0xffffffff), 1 << 20, nil, ErrTooLarge},
		{"no limit", hdr(5) + "abcde", 0, []string{"abcde"}, io.EOF},
		{"end inside the header", hdr(1) + "a" + "\x00\x00", 16, []string{"a"}, io.ErrUnexpectedEOF},
		{"end inside the payload", hdr(4) + "ab", 16, nil, io.ErrUnexpectedEOF},
		{"end right after the header", hdr(4), 16, nil, io.ErrUnexpectedEOF},
	}
	readers := []struct {
		name string
		wrap func(io.Reader) io.Reader
	}{
		{"whole", func(r io.Reader) io.Reader { return r }},
		{"one byte at a time", iotest.OneByteReader},
		{"half reads", iotest.HalfReader},
		{"buffered", func(r io.Reader) io.Reader { return bufio.NewReaderSize(r, 16) }},
	}
	for _, tt := range tests {
		for _, rd := range readers {
			t.Run(tt.name+"/"+rd.name, func(t *testing.T) {
				r := NewReader(rd.wrap(strings.NewReader(tt.input)), tt.max)
				for i, want := range tt.want {
					got, err := r.Read()
					if err != nil {
						t.Fatalf("Read() #%d error = %v, want %q", i, err, want)
					}
					if string(got) != want {
						t.Fatalf("Read() #%d = %q, want %q", i, got, want)
					}
				}
				got, err := r.Read()
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Read() after %d frames = %q, %v; want error %v", len(tt.want), got, err, tt.wantErr)
				}
			})
		}
	}
}

func TestTooLargeError(t *testing.T) {
	r := NewReader(strings.NewReader(hdr(300)), 256)
	_, err := r.Read()
	var tl *TooLargeError
	if !errors.As(err, &tl) {
		t.Fatalf("Read() error = %v, want a *TooLargeError", err)
	}
	if tl.Size != 300 || tl.Max != 256 {
		t.Errorf("TooLargeError = %+v, want Size 300, Max 256", *tl)
	}
	if want := "frame: 300 bytes, more than the limit of 256"; err.Error() != want {
		t.Errorf("Error() = %q, want %q", err.Error(), want)
	}
}

// TestReaderSplitAcrossPackets sends a frame over a real TCP connection in
// pieces written separately, the header split too: the frame reads whole.
func TestReaderSplitAcrossPackets(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	payload := bytes.Repeat([]byte("0123456789"), 2000) // larger than a bufio buffer
	wire := Append(nil, payload)
	wire = Append(wire, []byte("next"))

	sent := make(chan error, 1)
	go func() {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			sent <- err
			return
		}
		defer c.Close()
		c.(*net.TCPConn).SetNoDelay(true)
		// Cut points inside the header, inside the payload, and between
		// the two frames' header bytes.
		cuts := []int{0, 2, 7, 4000, 19999, len(wire) - 6, len(wire) - 3, len(wire)}
		for i := 1; i < len(cuts); i++ {
			if _, err := c.Write(wire[cuts[i-1]:cuts[i]]); err != nil {
				sent <- err
				return
			}
			// Not a timing assertion: the pause only makes separate
			// segments likely; the test passes either way.
			time.Sleep(time.Millisecond)
		}
		sent <- nil
	}()
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := NewReader(bufio.NewReader(c), 1<<20)
	got, err := r.Read()
	if err != nil {
		t.Fatalf("Read() error = %v", err)
	}
	if !bytes.Equal(got, payload) {
		t.Fatalf("Read() = %d bytes, want the %d sent", len(got), len(payload))
	}
	got, err = r.Read()
	if err != nil || string(got) != "next" {
		t.Fatalf("second Read() = %q, %v; want \"next\"", got, err)
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
}

func TestReaderReusesBuffer(t *testing.T) {
	var wire []byte
	for _, p := range []string{"abcdef", "ab", "abcd"} {
		wire = Append(wire, []byte(p))
	}
	r := NewReader(bytes.NewReader(wire), 0)
	first, err := r.Read()
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		next, err := r.Read()
		if err != nil {
			t.Fatal(err)
		}
		if &next[:1][0] != &first[:1][0] {
			t.Fatal("Read() allocated a new buffer for a frame that fits the previous one")
		}
	}
	allocs := testing.AllocsPerRun(100, func() {
		r := r
		r.r = bytes.NewReader(wire)
		for range 3 {
			if _, err := r.Read(); err != nil {
				t.Fatal(err)
			}
		}
	})
	if allocs > 1 { // the bytes.Reader
		t.Errorf("reading 3 frames allocates %v times, want at most 1", allocs)
	}
}

func TestReaderDropsLargeBuffer(t *testing.T) {
	big := make([]byte, keepBuffer+1)
	wire := Append(Append(nil, big), []byte("x"))
	r := NewReader(bytes.NewReader(wire), 0)
	if _, err := r.Read(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Read(); err != nil {
		t.Fatal(err)
	}
	if cap(r.buf) > keepBuffer {
		t.Errorf("the reader keeps a %d-byte buffer, want at most %d", cap(r.buf), keepBuffer)
	}
}

func TestStartFinish(t *testing.T) {
	buf := []byte("prefix")
	buf, off := Start(buf)
	buf = append(buf, "hello"...)
	if err := Finish(buf, off); err != nil {
		t.Fatal(err)
	}
	if want := "prefix" + hdr(5) + "hello"; string(buf) != want {
		t.Errorf("Start/Finish = %q, want %q", buf, want)
	}
	if err := Finish(buf[:off+2], off); err == nil {
		t.Error("Finish() of a truncated header error = nil, want an error")
	}
	if got, want := string(Append([]byte("x"), []byte("ab"))), "x"+hdr(2)+"ab"; got != want {
		t.Errorf("Append() = %q, want %q", got, want)
	}
}

func TestWriter(t *testing.T) {
	var calls [][]byte
	w := NewWriter(writerFunc(func(p []byte) (int, error) {
		calls = append(calls, bytes.Clone(p))
		return len(p), nil
	}))
	for _, p := range []string{"one", "", "three"} {
		if err := w.Write([]byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{hdr(3) + "one", hdr(0), hdr(5) + "three"}
	if len(calls) != len(want) {
		t.Fatalf("%d Write calls, want one per frame (%d)", len(calls), len(want))
	}
	for i := range want {
		if string(calls[i]) != want[i] {
			t.Errorf("Write call %d = %q, want %q", i, calls[i], want[i])
		}
	}
	errBoom := errors.New("boom")
	w = NewWriter(writerFunc(func(p []byte) (int, error) { return 0, errBoom }))
	if err := w.Write([]byte("x")); !errors.Is(err, errBoom) {
		t.Errorf("Write() error = %v, want %v", err, errBoom)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
