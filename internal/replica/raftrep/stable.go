package raftrep

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"maps"
	"slices"
	"sync"

	"github.com/hashicorp/raft"

	"github.com/latchd/latch/internal/vfs"
)

// castagnoli is the CRC-32C table of the stable store and the snapshots.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errNotFound is what Get and GetUint64 return for a key never set.
// hashicorp/raft tells it from other errors by its text alone
// (err.Error() == "not found"), so the text must not change or be wrapped.
var errNotFound = errors.New("not found")

// The stable store's file is, little-endian:
//
//	magic   [4]byte "LTSS"
//	version uint32  stableVersion
//	count   uint32  the number of pairs, sorted by key
//	count x { keyLen uint32, key, valLen uint32, value }
//	crc     uint32  CRC-32C of every byte before it
const (
	stableMagic   = "LTSS"
	stableVersion = 1
	// stableMax bounds the file: a few small values, never near it.
	stableMax = 1 << 20
)

// stableStore is Raft's StableStore on a vfs.FS: its few keys (the
// current term, the last vote) held in memory and written to one file,
// whole, on every Set, so that the file always holds one complete set.
// It is safe for concurrent use.
//
// A Set or SetUint64 that returns nil has made the whole set durable. One
// that returns an error leaves the store's values as they were before the
// call, and what a crash leaves in the file is then either the old set
// or, if the error came after the new file took the old one's name (its
// directory's sync failed), the new one: both are sets the node may hold,
// since its caller was told the write failed (Raft panics on a term it
// could not store, and does not grant a vote it could not). The next Set
// that succeeds writes the whole set again and ends the doubt.
type stableStore struct {
	fsys vfs.FS
	path string

	mu sync.Mutex // held across a write, so that writes reach the file in order
	kv map[string][]byte
}

var _ raft.StableStore = (*stableStore)(nil)

// openStable opens the stable store in file path. A missing file is an
// empty store: whether that may be is for the caller to decide. A file
// that is not one complete set of this format (a bad checksum, an unknown
// version) is an error naming it, never an empty store: Raft would forget
// its term and vote, and could vote twice in one term.
func openStable(fsys vfs.FS, path string) (*stableStore, error) {
	s := &stableStore{fsys: fsys, path: path, kv: make(map[string][]byte)}
	b, err := vfs.ReadFile(fsys, path)
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("raftrep: stable store %s: %w", path, err)
	}
	if s.kv, err = decodeStable(b); err != nil {
		return nil, fmt.Errorf("raftrep: stable store %s: %w", path, err)
	}
	return s, nil
}

// Set stores val under key, durably (see stableStore).
func (s *stableStore) Set(key, val []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	kv := maps.Clone(s.kv)
	kv[string(key)] = bytes.Clone(val)
	if err := vfs.WriteFile(s.fsys, s.path, encodeStable(kv)); err != nil {
		return fmt.Errorf("raftrep: stable store %s: write: %w", s.path, err)
	}
	s.kv = kv
	return nil
}

// Get returns a copy of the value under key, or an error whose text is
// "not found" if none was set.
func (s *stableStore) Get(key []byte) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.kv[string(key)]
	if !ok {
		return nil, errNotFound
	}
	return bytes.Clone(v), nil
}

// SetUint64 stores val under key as 8 bytes, durably (see stableStore).
func (s *stableStore) SetUint64(key []byte, val uint64) error {
	return s.Set(key, binary.LittleEndian.AppendUint64(nil, val))
}

// GetUint64 returns the value that SetUint64 stored under key, or an
// error whose text is "not found" if none was set.
func (s *stableStore) GetUint64(key []byte) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.kv[string(key)]
	if !ok {
		return 0, errNotFound
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("raftrep: stable store %s: key %q holds %d bytes, not a uint64's 8", s.path, key, len(v))
	}
	return binary.LittleEndian.Uint64(v), nil
}

// encodeStable encodes kv in the stable store's format.
func encodeStable(kv map[string][]byte) []byte {
	b := make([]byte, 0, 16+32*len(kv))
	b = append(b, stableMagic...)
	b = binary.LittleEndian.AppendUint32(b, stableVersion)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(kv)))
	for _, k := range slices.Sorted(maps.Keys(kv)) {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(k)))
		b = append(b, k...)
		b = binary.LittleEndian.AppendUint32(b, uint32(len(kv[k])))
		b = append(b, kv[k]...)
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// decodeStable decodes a file in the stable store's format, and refuses
// anything else: another magic, another version, a bad checksum, pairs
// that do not fill the file exactly, a key twice.
func decodeStable(b []byte) (map[string][]byte, error) {
	const head = len(stableMagic) + 4 + 4
	if len(b) > stableMax {
		return nil, fmt.Errorf("%d bytes, more than a stable store holds (%d)", len(b), stableMax)
	}
	if len(b) < head+4 {
		return nil, fmt.Errorf("truncated: %d bytes, less than a header and checksum (%d)", len(b), head+4)
	}
	if m := string(b[:len(stableMagic)]); m != stableMagic {
		return nil, fmt.Errorf("not a stable store: magic %q, not %q", m, stableMagic)
	}
	if v := binary.LittleEndian.Uint32(b[4:]); v != stableVersion {
		return nil, fmt.Errorf("format version %d, not %d", v, stableVersion)
	}
	body, sum := b[:len(b)-4], binary.LittleEndian.Uint32(b[len(b)-4:])
	if got := crc32.Checksum(body, castagnoli); got != sum {
		return nil, fmt.Errorf("checksum mismatch: the file says %08x, its contents sum to %08x", sum, got)
	}
	n := binary.LittleEndian.Uint32(body[8:])
	p := lenPrefixed(body[head:])
	kv := make(map[string][]byte, min(n, 64))
	for i := range n {
		k, ok := p.next()
		if !ok {
			return nil, fmt.Errorf("pair %d of %d runs past the end", i+1, n)
		}
		v, ok := p.next()
		if !ok {
			return nil, fmt.Errorf("pair %d of %d runs past the end", i+1, n)
		}
		if _, dup := kv[string(k)]; dup {
			return nil, fmt.Errorf("key %q twice", k)
		}
		kv[string(k)] = bytes.Clone(v)
	}
	if len(p) != 0 {
		return nil, fmt.Errorf("%d bytes after the last of %d pairs", len(p), n)
	}
	return kv, nil
}

// lenPrefixed reads fields that are each a uint32 length, little endian,
// then that many bytes: the stable store's pairs, a snapshot's meta.
type lenPrefixed []byte

// next returns the next field, or false if what is left is not one.
func (p *lenPrefixed) next() ([]byte, bool) {
	b := *p
	if len(b) < 4 {
		return nil, false
	}
	l := binary.LittleEndian.Uint32(b)
	if uint64(len(b)-4) < uint64(l) {
		return nil, false
	}
	*p = b[4+l:]
	return b[4 : 4+l], true
}
