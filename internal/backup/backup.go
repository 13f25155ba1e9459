// Package backup is the file of an online snapshot of latch's replicated
// state (latch snapshot save, GET /v1/snapshot): one file that holds its
// metadata and the state, each with its SHA-256, and the SHA-256 of the
// whole file, so that any changed, missing or extra byte is found before
// a restore trusts the file.
//
// # Format version 1
//
// Big-endian integers:
//
//	magic    [8]byte "LATCHBAK"
//	version  uint32  1
//	parts, in this order, each:
//	  nameLen uint8, name        "meta.json", then "state"
//	  size    uint64
//	  sum     [32]byte           SHA-256 of the part's data
//	  data    size bytes
//	end      [4]byte "END\n"
//	fileSum  [32]byte            SHA-256 of every byte before it
//
// and nothing after. meta.json is the Meta in JSON; state is the
// replicated state as the node encodes its snapshots (internal/fsm).
package backup

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
)

// Version is the format version that Write writes and Parse reads.
const Version = 1

const (
	magic     = "LATCHBAK"
	endMark   = "END\n"
	metaPart  = "meta.json"
	statePart = "state"
	sumLen    = sha256.Size
)

// ErrCorrupt is wrapped by the errors of Parse for a file that is not a
// whole, unchanged backup of a version this latch reads.
var ErrCorrupt = errors.New("backup: corrupt or truncated file")

// Meta describes a backup. Counts are of the state in the file.
type Meta struct {
	// Format is the file's format version (Version).
	Format int `json:"format"`
	// StateFormat is the version of the state's encoding (the first byte
	// of the state).
	StateFormat int `json:"state_format"`
	// LatchVersion is the version of the latch that took the backup.
	LatchVersion string `json:"latch_version,omitempty"`
	// Node is the node that took it; Term and Index the Raft term and
	// index of the last log entry applied to the state (0 for a node
	// without a log).
	Node  string `json:"node"`
	Term  uint64 `json:"term"`
	Index uint64 `json:"index"`
	// Time is when the node captured the state, by its clock; Clock the
	// replicated clock of the state then, in Unix nanoseconds.
	Time  time.Time `json:"time"`
	Clock int64     `json:"clock"`

	// Locks is the number of keys held, Holds the holds on them, Leases
	// the holds with a lease, Waiters the queued requests.
	Locks   int `json:"locks"`
	Holds   int `json:"holds"`
	Leases  int `json:"leases"`
	Waiters int `json:"waiters"`
	// Sessions is the number of sessions; OwnedSessions those bound to a
	// node's client connection (a restore ends them).
	Sessions      int `json:"sessions"`
	OwnedSessions int `json:"owned_sessions"`
	// Items is the number of memcached items, Znodes of ZooKeeper nodes.
	Items  int `json:"items"`
	Znodes int `json:"znodes"`
	// Token is the highest fencing token issued; Zxid the ZooKeeper zxid.
	Token uint64 `json:"token"`
	Zxid  int64  `json:"zxid"`

	// StateSize is the size of the state in bytes, StateSHA256 its
	// SHA-256 (hex): filled in by Write.
	StateSize   int    `json:"state_size"`
	StateSHA256 string `json:"state_sha256"`
}

// Write writes a backup of state described by meta to w. It fills in
// meta's Format, StateSize and StateSHA256.
func Write(w io.Writer, meta Meta, state []byte) error {
	meta.Format = Version
	meta.StateSize = len(state)
	stateSum := sha256.Sum256(state)
	meta.StateSHA256 = hex.EncodeToString(stateSum[:])
	mj, err := json.MarshalIndent(meta, "", "  ")
	if err != nil {
		return fmt.Errorf("backup: meta: %w", err)
	}
	mj = append(mj, '\n')
	h := sha256.New()
	out := io.MultiWriter(w, h)
	var head []byte
	head = append(head, magic...)
	head = binary.BigEndian.AppendUint32(head, Version)
	if _, err := out.Write(head); err != nil {
		return fmt.Errorf("backup: write: %w", err)
	}
	for _, p := range []struct {
		name string
		data []byte
	}{{metaPart, mj}, {statePart, state}} {
		sum := sha256.Sum256(p.data)
		ph := []byte{byte(len(p.name))}
		ph = append(ph, p.name...)
		ph = binary.BigEndian.AppendUint64(ph, uint64(len(p.data)))
		ph = append(ph, sum[:]...)
		if _, err := out.Write(ph); err != nil {
			return fmt.Errorf("backup: write %s: %w", p.name, err)
		}
		if _, err := out.Write(p.data); err != nil {
			return fmt.Errorf("backup: write %s: %w", p.name, err)
		}
	}
	if _, err := out.Write([]byte(endMark)); err != nil {
		return fmt.Errorf("backup: write: %w", err)
	}
	if _, err := w.Write(h.Sum(nil)); err != nil {
		return fmt.Errorf("backup: write: %w", err)
	}
	return nil
}

// Parse verifies the backup in b and returns its metadata and its state (a
// slice of b). It refuses, with an error wrapping ErrCorrupt that says
// what is wrong and where, a file that is not a latch backup, one of
// another format version, a truncated one, one with a part whose SHA-256
// does not match, one whose whole-file SHA-256 does not match, one with
// bytes after its end, and one whose metadata contradicts its state.
func Parse(b []byte) (Meta, []byte, error) {
	var meta Meta
	if len(b) < len(magic) || string(b[:len(magic)]) != magic {
		return meta, nil, corrupt("not a latch backup: it does not begin with %q", magic)
	}
	r := reader{b: b, off: len(magic)}
	v, err := r.uint32("the format version")
	if err != nil {
		return meta, nil, err
	}
	if v != Version {
		return meta, nil, corrupt("format version %d: this latch reads version %d", v, Version)
	}
	mj, err := r.part(metaPart)
	if err != nil {
		return meta, nil, err
	}
	state, err := r.part(statePart)
	if err != nil {
		return meta, nil, err
	}
	end, err := r.take(len(endMark), "the end mark")
	if err != nil {
		return meta, nil, err
	}
	if string(end) != endMark {
		return meta, nil, corrupt("no end mark at byte %d: a part is missing or has the wrong size", r.off-len(endMark))
	}
	sumAt := r.off
	fileSum, err := r.take(sumLen, "the file's SHA-256")
	if err != nil {
		return meta, nil, err
	}
	if r.off != len(b) {
		return meta, nil, corrupt("%d bytes after the end of the backup (at byte %d)", len(b)-r.off, r.off)
	}
	if got := sha256.Sum256(b[:sumAt]); !bytes.Equal(got[:], fileSum) {
		return meta, nil, corrupt("the file's SHA-256 is %x, the file says %x: it was changed", got, fileSum)
	}
	if err := json.Unmarshal(mj, &meta); err != nil {
		return meta, nil, corrupt("%s: %v", metaPart, err)
	}
	if meta.Format != Version {
		return meta, nil, corrupt("%s: format %d, the file's is %d", metaPart, meta.Format, Version)
	}
	if meta.StateSize != len(state) {
		return meta, nil, corrupt("%s: state of %d bytes, the file holds %d", metaPart, meta.StateSize, len(state))
	}
	stateSum := sha256.Sum256(state)
	if meta.StateSHA256 != hex.EncodeToString(stateSum[:]) {
		return meta, nil, corrupt("%s: state SHA-256 %s, the state's is %x", metaPart, meta.StateSHA256, stateSum)
	}
	if len(state) == 0 {
		return meta, nil, corrupt("the state is empty")
	}
	if int(state[0]) != meta.StateFormat {
		return meta, nil, corrupt("%s: state format %d, the state's is %d", metaPart, meta.StateFormat, state[0])
	}
	return meta, state, nil
}

func corrupt(format string, args ...any) error {
	return fmt.Errorf("backup: %s: %w", fmt.Sprintf(format, args...), ErrCorrupt)
}

// reader reads a backup's fields from the front of b.
type reader struct {
	b   []byte
	off int
}

// take returns the next n bytes, what naming them for the error of a
// file that ends before them.
func (r *reader) take(n int, what string) ([]byte, error) {
	if n < 0 || len(r.b)-r.off < n {
		return nil, corrupt("truncated: the file ends at byte %d, in %s (%d bytes wanted, %d there)", len(r.b), what, n, len(r.b)-r.off)
	}
	p := r.b[r.off : r.off+n]
	r.off += n
	return p, nil
}

func (r *reader) uint32(what string) (uint32, error) {
	p, err := r.take(4, what)
	if err != nil {
		return 0, err
	}
	return binary.BigEndian.Uint32(p), nil
}

// part reads the part named name and checks its SHA-256.
func (r *reader) part(name string) ([]byte, error) {
	at := r.off
	n, err := r.take(1, "the header of part "+name)
	if err != nil {
		return nil, err
	}
	got, err := r.take(int(n[0]), "the header of part "+name)
	if err != nil {
		return nil, err
	}
	if string(got) != name {
		return nil, corrupt("at byte %d: part %q where %q belongs", at, got, name)
	}
	sz, err := r.take(8, "the header of part "+name)
	if err != nil {
		return nil, err
	}
	size := binary.BigEndian.Uint64(sz)
	sum, err := r.take(sumLen, "the header of part "+name)
	if err != nil {
		return nil, err
	}
	if size > uint64(len(r.b)-r.off) {
		return nil, corrupt("truncated: part %s of %d bytes, the file holds %d after its header (byte %d)", name, size, len(r.b)-r.off, r.off)
	}
	data, _ := r.take(int(size), "part "+name)
	if got := sha256.Sum256(data); !bytes.Equal(got[:], sum) {
		return nil, corrupt("part %s (bytes %d to %d): its SHA-256 is %x, the file says %x: it was changed", name, r.off-int(size), r.off, got, sum)
	}
	return data, nil
}
