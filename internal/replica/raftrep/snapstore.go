package raftrep

import (
	"bufio"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/latchd/latch/internal/vfs"
)

// A snapshot file is, little-endian:
//
//	magic    [8]byte "LATCHSNP"
//	version  uint32  snapVersion, of this layout
//	metaLen  uint32
//	meta     metaLen bytes:
//	           Version, Index, Term, ConfigurationIndex, Size  uint64 each
//	           idLen uint32, ID
//	           confLen uint32, Configuration (raft.EncodeConfiguration)
//	metaCRC  uint32  CRC-32C of every byte before it
//	state    Size bytes, what the FSM wrote
//	trailer: stateLen uint64 (= Size), crc uint32: CRC-32C of every byte
//	         before the trailer
//
// metaCRC lets List trust a meta without reading the state; the trailer's
// crc covers the whole file before it, the meta included, and Open checks
// it before it hands out the state.
const (
	snapMagic   = "LATCHSNP"
	snapVersion = 1
	snapSuffix  = ".snap"
	tmpSuffix   = ".tmp"

	snapHeadLen    = 8 + 4 + 4 // magic, version, metaLen
	snapTrailerLen = 8 + 4
	// metaSizeAt is where Size lies in the meta, which Close fills in.
	metaSizeAt = 4 * 8
	// snapMetaMax bounds a meta: a configuration of a few servers.
	snapMetaMax = 1 << 20
)

// snapshotStore is Raft's SnapshotStore on a vfs.FS: each snapshot one
// file in dir, named <term>-<index>-<unixmilli>.snap, its ID the name
// without the suffix (see above for the layout). A snapshot is written as
// <name>.tmp and takes its name, durably, when its sink is closed; then
// the snapshots beyond the newest retain are removed (one that Open is
// reading stays readable on a POSIX file system until closed). It is safe
// for concurrent use.
//
// # The floor
//
// At start Raft restores the first snapshot that List returns, and if
// that fails, the next: it takes the log's entries after the snapshot
// restored to be all it has to replay. A snapshot older than the log's
// first entry less one would silently drop the entries between them,
// which no longer exist anywhere on this node. So, once SetFloor gave it
// the log's bounds, List returns only the snapshots that the log
// continues:
//   - when the log holds entries (0 < first <= last), those with
//     Index+1 >= first;
//   - when the log is empty (first is 0, or last < first), the newest
//     alone (by its name, unreadable or not), since the log holds nothing
//     of what came after it;
//
// and List is an error when that leaves the log without a start: the log
// does not begin at entry 1 and no snapshot reaches its first entry, or
// the snapshots that remain are all unreadable. Raft then refuses to
// start (raft.NewRaft returns the error, or, when every snapshot listed
// fails to restore, "failed to load any existing snapshots") where it
// would otherwise start from a state with entries missing, and panic when
// it came to apply the first entry it lacks.
type snapshotStore struct {
	fsys   vfs.FS
	dir    string
	retain int
	log    *slog.Logger
	now    func() time.Time // time.Now; tests set it

	// mu is held while snapshots take their names, are removed and are
	// listed, so that List sees a set Close left; it guards floor and
	// newest.
	mu    sync.Mutex
	floor func() (first, last uint64, err error)
	// newest describes the newest snapshot in dir, by name: the one
	// found at open, then each that Close finishes; ok is false while
	// there is none.
	newest struct {
		SnapshotInfo
		ok bool
	}
}

// SnapshotInfo describes a node's newest snapshot (Replicator.LastSnapshot).
type SnapshotInfo struct {
	// Index and Term are those of the last entry it covers.
	Index, Term uint64
	// Taken is when the node began it (the time in its file's name).
	Taken time.Time
	// Size is its file's size in bytes: the state, its meta and its
	// checksums.
	Size int64
}

var _ raft.SnapshotStore = (*snapshotStore)(nil)

// openSnapshots opens the snapshot store in dir, keeping the newest retain
// (at least 1) snapshots. It removes the temporary files of snapshots
// that were never finished. A missing dir is an empty store; Create makes
// it.
func openSnapshots(fsys vfs.FS, dir string, retain int, logger *slog.Logger) (*snapshotStore, error) {
	if retain < 1 {
		return nil, fmt.Errorf("raftrep: snapshots %s: retain %d, must keep at least 1", dir, retain)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &snapshotStore{fsys: fsys, dir: dir, retain: retain, log: logger, now: time.Now}
	names, err := fsys.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("raftrep: snapshots %s: %w", dir, err)
	}
	removed := false
	for _, name := range names {
		if !strings.HasSuffix(name, snapSuffix+tmpSuffix) {
			continue
		}
		path := filepath.Join(dir, name)
		if err := fsys.Remove(path); err != nil {
			return nil, fmt.Errorf("raftrep: snapshots: remove unfinished %s: %w", path, err)
		}
		s.log.Info("raftrep: removed an unfinished snapshot", "file", path)
		removed = true
	}
	if removed {
		if err := fsys.SyncDir(dir); err != nil {
			return nil, fmt.Errorf("raftrep: snapshots %s: %w", dir, err)
		}
	}
	if err := s.findNewest(); err != nil {
		return nil, err
	}
	return s, nil
}

// findNewest sets s.newest from the newest snapshot in dir, by its name.
func (s *snapshotStore) findNewest() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	names, err := s.names()
	if err != nil || len(names) == 0 {
		return err
	}
	n := names[0]
	fi, err := s.fsys.Stat(s.path(n.id))
	if err != nil {
		return fmt.Errorf("raftrep: snapshots: %w", err)
	}
	s.setNewest(n, fi.Size())
	return nil
}

// setNewest records snapshot n, of size bytes, as the newest. s.mu is
// held.
func (s *snapshotStore) setNewest(n snapName, size int64) {
	s.newest.SnapshotInfo = SnapshotInfo{Index: n.index, Term: n.term, Taken: time.UnixMilli(n.milli), Size: size}
	s.newest.ok = true
}

// Newest describes the newest snapshot; ok is false while there is none.
func (s *snapshotStore) Newest() (info SnapshotInfo, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.newest.SnapshotInfo, s.newest.ok
}

// SetFloor makes List return only the snapshots that the log continues
// (see snapshotStore). bounds returns the log's first and last index (0
// and 0 when it is empty): a LogStore's FirstIndex and LastIndex. Call it
// before Raft starts.
func (s *snapshotStore) SetFloor(bounds func() (first, last uint64, err error)) {
	s.mu.Lock()
	s.floor = bounds
	s.mu.Unlock()
}

// snapName is a snapshot's name, parsed.
type snapName struct {
	term, index uint64
	milli       int64
	id          string
}

// parseSnapName parses a snapshot's ID, <term>-<index>-<unixmilli>.
func parseSnapName(id string) (snapName, bool) {
	f := strings.Split(id, "-")
	if len(f) != 3 {
		return snapName{}, false
	}
	term, err1 := strconv.ParseUint(f[0], 10, 64)
	index, err2 := strconv.ParseUint(f[1], 10, 64)
	milli, err3 := strconv.ParseInt(f[2], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || milli < 0 {
		return snapName{}, false
	}
	n := snapName{term: term, index: index, milli: milli}
	n.id = n.String()
	if n.id != id { // leading zeros, signs: one name per snapshot
		return snapName{}, false
	}
	return n, true
}

func (n snapName) String() string { return fmt.Sprintf("%d-%d-%d", n.term, n.index, n.milli) }

// newer orders names newest first: by index, then term, then time.
func newer(a, b snapName) int {
	return cmp.Or(cmp.Compare(b.index, a.index), cmp.Compare(b.term, a.term), cmp.Compare(b.milli, a.milli))
}

// names returns the snapshots in dir, newest first, by their names.
func (s *snapshotStore) names() ([]snapName, error) {
	all, err := s.fsys.ReadDir(s.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("raftrep: snapshots %s: %w", s.dir, err)
	}
	var names []snapName
	for _, name := range all {
		id, ok := strings.CutSuffix(name, snapSuffix)
		if !ok {
			continue
		}
		n, ok := parseSnapName(id)
		if !ok {
			s.log.Warn("raftrep: skipping a file that is not named as a snapshot", "file", filepath.Join(s.dir, name))
			continue
		}
		names = append(names, n)
	}
	slices.SortFunc(names, newer)
	return names, nil
}

func (s *snapshotStore) path(id string) string { return filepath.Join(s.dir, id+snapSuffix) }

// Create begins a snapshot (raft.SnapshotStore). Only version 1
// snapshots are written: the version of every Raft protocol version that
// latch speaks.
func (s *snapshotStore) Create(version raft.SnapshotVersion, index, term uint64, conf raft.Configuration, confIndex uint64, _ raft.Transport) (raft.SnapshotSink, error) {
	if version != 1 {
		return nil, fmt.Errorf("raftrep: snapshots %s: create a snapshot of version %d: only version 1 is written", s.dir, version)
	}
	if err := vfs.MkdirAll(s.fsys, s.dir, 0o700); err != nil {
		return nil, fmt.Errorf("raftrep: snapshots %s: %w", s.dir, err)
	}
	n := snapName{term: term, index: index, milli: s.now().UnixMilli()}
	// Two snapshots of one entry taken within a millisecond: a later time
	// rather than one file for both.
	var f vfs.File
	for {
		n.id = n.String()
		if _, err := s.fsys.Stat(s.path(n.id)); err == nil {
			n.milli++
			continue
		}
		var err error
		f, err = s.fsys.OpenFile(s.path(n.id)+tmpSuffix, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			n.milli++
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("raftrep: snapshots: create %s: %w", s.path(n.id)+tmpSuffix, err)
		}
		break
	}
	meta := raft.SnapshotMeta{
		Version:            version,
		ID:                 n.id,
		Index:              index,
		Term:               term,
		Configuration:      conf,
		ConfigurationIndex: confIndex,
	}
	head := encodeSnapHead(&meta)
	k := &snapSink{s: s, f: f, open: true, name: n, meta: meta, headLen: int64(len(head)), stateCRC: ^uint32(0)}
	if _, err := f.WriteAt(head, 0); err != nil {
		k.abort()
		return nil, fmt.Errorf("raftrep: snapshots: write %s: %w", f.Name(), err)
	}
	k.w = bufio.NewWriterSize(io.NewOffsetWriter(f, k.headLen), 256<<10)
	return k, nil
}

// encodeSnapHead encodes a snapshot's head: magic, version, meta, metaCRC.
func encodeSnapHead(m *raft.SnapshotMeta) []byte {
	conf := raft.EncodeConfiguration(m.Configuration)
	metaLen := metaSizeAt + 8 + 4 + len(m.ID) + 4 + len(conf)
	b := make([]byte, 0, snapHeadLen+metaLen+4)
	b = append(b, snapMagic...)
	b = binary.LittleEndian.AppendUint32(b, snapVersion)
	b = binary.LittleEndian.AppendUint32(b, uint32(metaLen))
	b = binary.LittleEndian.AppendUint64(b, uint64(m.Version))
	b = binary.LittleEndian.AppendUint64(b, m.Index)
	b = binary.LittleEndian.AppendUint64(b, m.Term)
	b = binary.LittleEndian.AppendUint64(b, m.ConfigurationIndex)
	b = binary.LittleEndian.AppendUint64(b, uint64(m.Size))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(m.ID)))
	b = append(b, m.ID...)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(conf)))
	b = append(b, conf...)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// readSnapHead reads and checks the head of snapshot file f, of size
// bytes: it returns the meta and the length of the head, where the state
// begins. It does not read the state, and so does not know it is whole.
func readSnapHead(f vfs.File, size int64) (*raft.SnapshotMeta, int64, error) {
	var h [snapHeadLen]byte
	if size < snapHeadLen {
		return nil, 0, fmt.Errorf("truncated: %d bytes, less than a header", size)
	}
	if err := readAt(f, h[:], 0); err != nil {
		return nil, 0, err
	}
	if m := string(h[:len(snapMagic)]); m != snapMagic {
		return nil, 0, fmt.Errorf("not a snapshot: magic %q, not %q", m, snapMagic)
	}
	if v := binary.LittleEndian.Uint32(h[len(snapMagic):]); v != snapVersion {
		return nil, 0, fmt.Errorf("format version %d, not %d", v, snapVersion)
	}
	metaLen := int64(binary.LittleEndian.Uint32(h[len(snapMagic)+4:]))
	if metaLen > snapMetaMax || metaLen < metaSizeAt+8+4+4 {
		return nil, 0, fmt.Errorf("meta of %d bytes: not a meta", metaLen)
	}
	headLen := snapHeadLen + metaLen + 4
	if size < headLen {
		return nil, 0, fmt.Errorf("truncated: %d bytes, less than its header and meta (%d)", size, headLen)
	}
	b := make([]byte, headLen)
	if err := readAt(f, b, 0); err != nil {
		return nil, 0, err
	}
	body, sum := b[:headLen-4], binary.LittleEndian.Uint32(b[headLen-4:])
	if got := crc32.Checksum(body, castagnoli); got != sum {
		return nil, 0, fmt.Errorf("meta checksum mismatch: the file says %08x, its meta sums to %08x", sum, got)
	}
	p := body[snapHeadLen:]
	m := &raft.SnapshotMeta{
		Version:            raft.SnapshotVersion(binary.LittleEndian.Uint64(p[0:])),
		Index:              binary.LittleEndian.Uint64(p[8:]),
		Term:               binary.LittleEndian.Uint64(p[16:]),
		ConfigurationIndex: binary.LittleEndian.Uint64(p[24:]),
		Size:               int64(binary.LittleEndian.Uint64(p[metaSizeAt:])),
	}
	fields := lenPrefixed(p[metaSizeAt+8:])
	id, ok1 := fields.next()
	conf, ok2 := fields.next()
	if !ok1 || !ok2 || len(fields) != 0 {
		return nil, 0, errors.New("meta does not parse")
	}
	m.ID = string(id)
	if m.Size < 0 {
		return nil, 0, fmt.Errorf("meta gives a size of %d", m.Size)
	}
	var err error
	if m.Configuration, err = decodeConfiguration(conf); err != nil {
		return nil, 0, err
	}
	return m, headLen, nil
}

// decodeConfiguration is raft.DecodeConfiguration, which panics on bytes
// it cannot decode, with an error instead.
func decodeConfiguration(b []byte) (c raft.Configuration, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("meta's configuration does not decode: %v", r)
		}
	}()
	return raft.DecodeConfiguration(b), nil
}

// List returns the snapshots' metas, newest first (by index, then term),
// those that the floor allows (see snapshotStore). It reads their heads
// only, and skips, with a warning, a snapshot whose head it cannot read.
func (s *snapshotStore) List() ([]*raft.SnapshotMeta, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	names, err := s.names()
	if err != nil {
		return nil, err
	}
	if s.floor != nil {
		first, last, err := s.floor()
		if err != nil {
			return nil, fmt.Errorf("raftrep: snapshots %s: the log's bounds: %w", s.dir, err)
		}
		if first == 0 || last < first { // empty
			names = names[:min(len(names), 1)]
		} else {
			names = slices.DeleteFunc(names, func(n snapName) bool { return n.index+1 < first })
			if len(names) == 0 && first > 1 {
				return nil, fmt.Errorf("raftrep: snapshots %s: the log begins at entry %d, and no snapshot reaches entry %d: the entries before the log are lost", s.dir, first, first-1)
			}
		}
	}
	var metas []*raft.SnapshotMeta
	for _, n := range names {
		m, err := s.readMeta(n)
		if err != nil {
			s.log.Warn("raftrep: skipping an unreadable snapshot", "err", err)
			continue
		}
		metas = append(metas, m)
	}
	if len(names) > 0 && len(metas) == 0 {
		return nil, fmt.Errorf("raftrep: snapshots %s: none of the snapshots that could be restored (newest %s) is readable", s.dir, s.path(names[0].id))
	}
	return metas, nil
}

// readMeta reads the meta of snapshot n, and checks that it is n's.
func (s *snapshotStore) readMeta(n snapName) (*raft.SnapshotMeta, error) {
	path := s.path(n.id)
	f, err := s.fsys.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, fmt.Errorf("raftrep: snapshot %s: %w", path, err)
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, fmt.Errorf("raftrep: snapshot %s: %w", path, err)
	}
	m, _, err := readSnapHead(f, size)
	if err != nil {
		return nil, fmt.Errorf("raftrep: snapshot %s: %w", path, err)
	}
	if m.ID != n.id || m.Index != n.index || m.Term != n.term {
		return nil, fmt.Errorf("raftrep: snapshot %s: its meta is of snapshot %s (index %d, term %d), not of its name", path, m.ID, m.Index, m.Term)
	}
	return m, nil
}

// Open opens snapshot id for reading (raft.SnapshotStore). It reads the
// whole file once to check it before it returns a reader of the state, so
// that a snapshot that does not checksum is an error here, naming the file
// and what is wrong with it, rather than a state half restored.
func (s *snapshotStore) Open(id string) (*raft.SnapshotMeta, io.ReadCloser, error) {
	n, ok := parseSnapName(id)
	if !ok {
		return nil, nil, fmt.Errorf("raftrep: snapshots %s: no snapshot %q: not a snapshot's ID", s.dir, id)
	}
	path := s.path(n.id)
	f, err := s.fsys.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("raftrep: snapshot %s: %w", path, err)
	}
	m, off, err := checkSnapshot(f)
	if err == nil && (m.ID != n.id || m.Index != n.index || m.Term != n.term) {
		err = fmt.Errorf("its meta is of snapshot %s (index %d, term %d), not of its name", m.ID, m.Index, m.Term)
	}
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("raftrep: snapshot %s: %w", path, err)
	}
	r := bufio.NewReaderSize(io.NewSectionReader(f, off, m.Size), 256<<10)
	return m, &snapReader{Reader: r, f: f}, nil
}

// checkSnapshot checks the whole of snapshot file f: its head, that its
// size is its head's, state's and trailer's, its trailer, and its
// checksum. It returns the meta and where the state begins.
func checkSnapshot(f vfs.File) (*raft.SnapshotMeta, int64, error) {
	size, err := f.Size()
	if err != nil {
		return nil, 0, err
	}
	m, off, err := readSnapHead(f, size)
	if err != nil {
		return nil, 0, err
	}
	end := off + m.Size // where the trailer begins
	if want := end + snapTrailerLen; size != want || end < off {
		return nil, 0, fmt.Errorf("truncated or overwritten: %d bytes, where its meta gives a state of %d bytes, a file of %d", size, m.Size, want)
	}
	var t [snapTrailerLen]byte
	if err := readAt(f, t[:], end); err != nil {
		return nil, 0, err
	}
	if l := binary.LittleEndian.Uint64(t[:]); l != uint64(m.Size) {
		return nil, 0, fmt.Errorf("trailer gives a state of %d bytes, its meta %d", l, m.Size)
	}
	h := crc32.New(castagnoli)
	if _, err := io.CopyBuffer(h, io.NewSectionReader(f, 0, end), make([]byte, 256<<10)); err != nil {
		return nil, 0, err
	}
	if got, sum := h.Sum32(), binary.LittleEndian.Uint32(t[8:]); got != sum {
		return nil, 0, fmt.Errorf("checksum mismatch: the trailer says %08x, the file sums to %08x", sum, got)
	}
	return m, off, nil
}

// snapReader reads a snapshot's state; Close closes its file.
type snapReader struct {
	*bufio.Reader
	f vfs.File
}

func (r *snapReader) Close() error { return r.f.Close() }

// snapSink writes a snapshot (raft.SnapshotSink). One goroutine uses it.
// Raft closes a sink that an FSM's Persist closed itself, and cancels one
// that Persist cancelled, or whose Close failed: a Close after Close
// returns what the first returned, a Cancel after Close or Cancel does
// nothing and returns nil, and a Close after Cancel is an error.
type snapSink struct {
	s        *snapshotStore
	f        vfs.File
	open     bool // f is open
	name     snapName
	w        *bufio.Writer
	meta     raft.SnapshotMeta
	headLen  int64  // where the state begins
	stateCRC uint32 // crc32.Update from ^0 over the state: see crcJoin
	err      error  // the first error of a Write
	done     bool   // closed or cancelled
	doneErr  error  // what Close returned, or errCancelled
}

var errCancelled = errors.New("cancelled")

func (k *snapSink) ID() string { return k.meta.ID }

func (k *snapSink) Write(p []byte) (int, error) {
	if k.done {
		return 0, fmt.Errorf("raftrep: snapshot %s: write after Close or Cancel", k.f.Name())
	}
	if k.err != nil {
		return 0, k.err
	}
	n, err := k.w.Write(p)
	k.stateCRC = crc32.Update(k.stateCRC, castagnoli, p[:n])
	k.meta.Size += int64(n)
	if err != nil {
		k.err = fmt.Errorf("raftrep: snapshot %s: write: %w", k.f.Name(), err)
		return n, k.err
	}
	return n, nil
}

// Close finishes the snapshot: it writes the meta's size and the
// trailer, syncs and closes the file, gives it its name and syncs the
// directory, then removes the snapshots beyond the store's retain. When
// it returns nil the snapshot is durable. When it returns an error the
// temporary file is removed, unless the error came after the rename (the
// directory's sync failed): then the snapshot, whole and synced, may or
// may not be found after a crash.
func (k *snapSink) Close() error {
	if k.done {
		if k.doneErr == errCancelled {
			return fmt.Errorf("raftrep: snapshot %s: Close after Cancel", k.f.Name())
		}
		return k.doneErr
	}
	k.done = true
	k.doneErr = k.finish()
	return k.doneErr
}

func (k *snapSink) finish() error {
	tmp := k.f.Name()
	fail := func(what string, err error) error {
		k.abort()
		return fmt.Errorf("raftrep: snapshot %s: %s: %w", tmp, what, err)
	}
	if k.err != nil {
		k.abort()
		return k.err
	}
	if err := k.w.Flush(); err != nil {
		return fail("write", err)
	}
	head := encodeSnapHead(&k.meta) // as long as Create's: Size is fixed-width
	sum := crcJoin(crc32.Checksum(head, castagnoli), k.stateCRC, k.meta.Size)
	var t [snapTrailerLen]byte
	binary.LittleEndian.PutUint64(t[:], uint64(k.meta.Size))
	binary.LittleEndian.PutUint32(t[8:], sum)
	if _, err := k.f.WriteAt(t[:], k.headLen+k.meta.Size); err != nil {
		return fail("write the trailer", err)
	}
	if _, err := k.f.WriteAt(head, 0); err != nil {
		return fail("write the meta", err)
	}
	if err := k.f.Sync(); err != nil {
		return fail("sync", err)
	}
	k.open = false
	if err := k.f.Close(); err != nil {
		return fail("close", err)
	}

	s := k.s
	final := s.path(k.meta.ID)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.fsys.Rename(tmp, final); err != nil {
		return fail("rename", err)
	}
	if err := s.fsys.SyncDir(s.dir); err != nil {
		return fmt.Errorf("raftrep: snapshot %s: sync its directory: %w", final, err)
	}
	if !s.newest.ok || newer(k.name, snapName{index: s.newest.Index, term: s.newest.Term, milli: s.newest.Taken.UnixMilli()}) <= 0 {
		s.setNewest(k.name, k.headLen+k.meta.Size+snapTrailerLen)
	}
	s.reap()
	return nil
}

// reap removes the snapshots beyond the newest s.retain, oldest first,
// and syncs the directory. It only logs its errors: the new snapshot is
// durable, and what was not removed is removed after the next. s.mu is
// held.
func (s *snapshotStore) reap() {
	names, err := s.names()
	if err != nil {
		s.log.Warn("raftrep: list the snapshots to remove the old", "err", err)
		return
	}
	if len(names) <= s.retain {
		return
	}
	old := names[s.retain:]
	slices.Reverse(old)
	for _, n := range old {
		if err := s.fsys.Remove(s.path(n.id)); err != nil {
			s.log.Warn("raftrep: remove an old snapshot", "file", s.path(n.id), "err", err)
		}
	}
	if err := s.fsys.SyncDir(s.dir); err != nil {
		s.log.Warn("raftrep: sync the snapshots' directory", "dir", s.dir, "err", err)
	}
}

// Cancel abandons the snapshot and removes its temporary file. After
// Close or Cancel it does nothing.
func (k *snapSink) Cancel() error {
	if k.done {
		return nil
	}
	k.done = true
	k.doneErr = errCancelled
	return k.abort()
}

// abort closes the temporary file if it is open and removes it.
func (k *snapSink) abort() error {
	tmp := k.f.Name()
	if k.open {
		k.open = false
		k.f.Close()
	}
	if err := k.s.fsys.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("raftrep: snapshot %s: remove: %w", tmp, err)
	}
	return nil
}

// readAt fills b from f at off: io.ReaderAt's ReadAt, without the io.EOF
// it may return with the last byte of the file.
func readAt(f vfs.File, b []byte, off int64) error {
	n, err := f.ReadAt(b, off)
	if n == len(b) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return err
}

// crcJoin returns the CRC-32C of a||b, given crcA, the CRC-32C of a (as
// crc32.Checksum returns it), rawB, crc32.Update from ^0 over b, and the
// length of b. CRC-32 is affine in its register: the register after b is
// the register after len(b) zero bytes from a's, xor the register after b
// from zero. So a snapshot's checksum covers its meta, which is known only
// once the state was written (its Size), without reading the state again:
// only zeros are fed, at the CPU's speed.
func crcJoin(crcA, rawB uint32, lenB int64) uint32 {
	var zeros [64 << 10]byte
	c := crcA
	for n := lenB; n > 0; {
		k := min(n, int64(len(zeros)))
		c = crc32.Update(c, castagnoli, zeros[:k])
		n -= k
	}
	return ^(c ^ rawB)
}
