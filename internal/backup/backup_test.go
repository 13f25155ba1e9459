package backup

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"
)

// sample returns a backup file and the meta and state it was written from.
func sample(t testing.TB) ([]byte, Meta, []byte) {
	t.Helper()
	meta := Meta{
		StateFormat: 3, LatchVersion: "v0.1.0", Node: "n1", Term: 4, Index: 1234,
		Time: time.Date(2026, 11, 28, 3, 0, 0, 0, time.UTC), Clock: 1_800_000_000_000_000_000,
		Locks: 2, Holds: 3, Leases: 1, Sessions: 5, OwnedSessions: 2, Items: 7, Znodes: 1,
		Token: 1_800_000_000_000_000_042, Zxid: 42 << 32,
	}
	state := []byte{3, 1, 2, 3, 4, 5, 6, 7, 8, 9}
	var buf bytes.Buffer
	if err := Write(&buf, meta, state); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), meta, state
}

func TestRoundTrip(t *testing.T) {
	file, meta, state := sample(t)
	got, gotState, err := Parse(file)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(gotState, state) {
		t.Errorf("state %x, want %x", gotState, state)
	}
	meta.Format = Version
	meta.StateSize = len(state)
	sum := sha256.Sum256(state)
	meta.StateSHA256 = hex.EncodeToString(sum[:])
	if got != meta {
		t.Errorf("meta\n%+v\nwant\n%+v", got, meta)
	}
}

// TestEveryByteChecked changes each byte of a backup in turn, and cuts the
// file at each length: Parse refuses every one.
func TestEveryByteChecked(t *testing.T) {
	file, _, _ := sample(t)
	for i := range file {
		bad := bytes.Clone(file)
		bad[i] ^= 0x01
		if _, _, err := Parse(bad); !errors.Is(err, ErrCorrupt) {
			t.Errorf("byte %d changed: Parse = %v, want ErrCorrupt", i, err)
		}
	}
	for n := range len(file) {
		if _, _, err := Parse(file[:n]); !errors.Is(err, ErrCorrupt) {
			t.Errorf("cut at %d of %d: Parse = %v, want ErrCorrupt", n, len(file), err)
		}
	}
}

// resum recomputes the file's SHA-256 after a deliberate change, so that
// the checks behind it are reached.
func resum(b []byte) []byte {
	sum := sha256.Sum256(b[:len(b)-sumLen])
	copy(b[len(b)-sumLen:], sum[:])
	return b
}

func TestParseRefuses(t *testing.T) {
	file, _, _ := sample(t)
	metaAt := len(magic) + 4
	tests := []struct {
		name string
		file func() []byte
		want string
	}{
		{"empty", func() []byte { return nil }, "not a latch backup"},
		{"other file", func() []byte { return []byte("SQLite format 3\x00") }, "not a latch backup"},
		{"newer format", func() []byte {
			b := bytes.Clone(file)
			binary.BigEndian.PutUint32(b[len(magic):], 2)
			return b
		}, "format version 2"},
		{"truncated in the state", func() []byte { return file[:len(file)-sumLen-len(endMark)-3] }, "truncated"},
		{"truncated in the file's SHA-256", func() []byte { return file[:len(file)-1] }, "truncated"},
		{"trailing bytes", func() []byte { return append(bytes.Clone(file), 0) }, "1 bytes after the end"},
		{"meta changed", func() []byte {
			b := bytes.Clone(file)
			b[metaAt+1+len(metaPart)+8+sumLen+2] ^= 1
			return b
		}, "part meta.json"},
		{"state changed", func() []byte {
			b := bytes.Clone(file)
			b[len(b)-sumLen-len(endMark)-1] ^= 1
			return b
		}, "part state"},
		{"end mark changed, file sum redone", func() []byte {
			b := bytes.Clone(file)
			b[len(b)-sumLen-1] = 'X'
			return resum(b)
		}, "no end mark"},
		{"file sum changed", func() []byte {
			b := bytes.Clone(file)
			b[len(b)-1] ^= 1
			return b
		}, "the file's SHA-256"},
		{"part renamed, file sum redone", func() []byte {
			b := bytes.Clone(file)
			b[metaAt+1] = 'M'
			return resum(b)
		}, `part "Meta.json"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := Parse(tt.file())
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Parse = %v, want ErrCorrupt saying %q", err, tt.want)
			}
		})
	}
}

// TestMetaMustMatchState: a file whose parts and sums are consistent but
// whose meta describes another state is refused.
func TestMetaMustMatchState(t *testing.T) {
	tests := []struct {
		name  string
		meta  func(*Meta)
		empty bool // write an empty state
		want  string
	}{
		{"state format", func(m *Meta) { m.StateFormat = 9 }, false, "state format 9, the state's is 3"},
		{"empty state", func(*Meta) {}, true, "the state is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, meta, state := sample(t)
			tt.meta(&meta)
			if tt.empty {
				state = nil
			}
			var buf bytes.Buffer
			if err := Write(&buf, meta, state); err != nil {
				t.Fatal(err)
			}
			if _, _, err := Parse(buf.Bytes()); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Parse = %v, want ErrCorrupt saying %q", err, tt.want)
			}
		})
	}
}

// FuzzParse: Parse never panics, and what it accepts writes back to the
// same bytes.
func FuzzParse(f *testing.F) {
	file, _, _ := sample(f)
	f.Add(file)
	f.Add(file[:len(file)/2])
	f.Add([]byte(magic))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		meta, state, err := Parse(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Parse = %v, not ErrCorrupt", err)
			}
			return
		}
		var buf bytes.Buffer
		if err := Write(&buf, meta, state); err != nil {
			t.Fatal(err)
		}
		if _, _, err := Parse(buf.Bytes()); err != nil {
			t.Fatalf("a parsed backup written back does not parse: %v", err)
		}
	})
}
