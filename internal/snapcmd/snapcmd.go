// Package snapcmd is "latch snapshot": save a backup of a running node's
// committed state (GET /v1/snapshot) to a file, inspect and verify one,
// and restore one into the data dir of a new node.
//
// # What a restore changes
//
// A restore makes the first state of a new cluster (or a new single
// node) from the backup, the same state in every member's data dir
// (members must hold the same log), with three changes (Floors):
//   - the sessions bound to the old nodes' client connections (memcached,
//     dlock v2, v3 without a TTL) end, as their nodes' deaths would end
//     them: their locks are released, their leased locks stay until the
//     lease ends;
//   - the fencing-token counter is raised to max(token, T) + Margin, where
//     T is the instant of the backup in Unix nanoseconds (the later of the
//     node's clock and the replicated clock), and each start of a restored
//     node seeds it with its clock plus the same lead over T (the
//     offset), which at the first start adds the time elapsed since the
//     backup: no client sees a token go back;
//   - the ZooKeeper zxid is raised by Margin, and follows the token seeds.
//
// Everything else keeps the time it had left: the new cluster's clock
// resumes from the backup's, so leases, sessions with a TTL and item
// expiry times count what they had left from the new cluster's first
// leader, plus the grace period of any new leader.
package snapcmd

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/admin"
	"github.com/latchd/latch/internal/backup"
	"github.com/latchd/latch/internal/fsm"
	"github.com/latchd/latch/internal/replica/raftrep"
	"github.com/latchd/latch/internal/vfs"
)

// Margin is how far a restore raises the token counter and the zxid above
// what the backup's state and instant allow for. The old cluster, which
// went on after the backup, raised its counter by one a grant (far less
// than one a nanosecond) and to its nodes' clocks as they started; a
// restored node seeds it with its own clock plus the counter's lead over
// the backup's instant plus Margin. So Margin covers the old machines'
// clocks being up to an hour ahead of the new ones'.
const Margin = time.Hour

// SaveOptions are those of Save.
type SaveOptions struct {
	Addr  string      // admin API address of any node, host:port or URL
	Token string      // the admin token, if the server has one
	TLS   *tls.Config // for an HTTPS admin API; nil: HTTP
	File  string      // where to write the backup
	FS    vfs.FS      // nil: vfs.OS
	Out   io.Writer
}

// Save fetches a backup from the node at opts.Addr, verifies it (checksums,
// the state decodes, its counts match the metadata) and writes it to
// opts.File, durably, whole or not at all. It prints the metadata.
func Save(ctx context.Context, opts SaveOptions) error {
	addr := opts.Addr
	if opts.TLS != nil && !strings.Contains(addr, "://") {
		addr = "https://" + addr
	}
	c := admin.NewClient(addr)
	if opts.TLS != nil {
		c.HTTP = &http.Client{Transport: &http.Transport{TLSClientConfig: opts.TLS}}
	}
	file, err := c.Snapshot(ctx, opts.Token)
	if err != nil {
		return err
	}
	meta, _, err := Verify(file)
	if err != nil {
		return fmt.Errorf("snapshot save: the node's backup does not verify, not saved: %w", err)
	}
	if err := vfs.WriteFile(fsOf(opts.FS), opts.File, file); err != nil {
		return fmt.Errorf("snapshot save: %w", err)
	}
	fmt.Fprintf(opts.Out, "saved %s (%d bytes), verified\n", opts.File, len(file))
	writeMeta(opts.Out, meta)
	return nil
}

func fsOf(fsys vfs.FS) vfs.FS {
	if fsys == nil {
		return vfs.OS
	}
	return fsys
}

// Verify checks a backup file: its checksums (backup.Parse), that its
// state decodes, and that the state holds what the metadata counts. It
// returns the metadata and the state.
func Verify(file []byte) (backup.Meta, *fsm.State, error) {
	meta, b, err := backup.Parse(file)
	if err != nil {
		return meta, nil, err
	}
	st, err := fsm.Restore(fsm.OfflineConfig(), b)
	if err != nil {
		return meta, nil, fmt.Errorf("backup: the state does not decode: %w", err)
	}
	sum := st.Summary()
	for _, c := range []struct {
		name       string
		meta, have int64
	}{
		{"locks", int64(meta.Locks), int64(sum.Locks)},
		{"holds", int64(meta.Holds), int64(sum.Holds)},
		{"leases", int64(meta.Leases), int64(sum.Leases)},
		{"waiters", int64(meta.Waiters), int64(sum.Waiters)},
		{"sessions", int64(meta.Sessions), int64(sum.Sessions)},
		{"owned sessions", int64(meta.OwnedSessions), int64(sum.Owned)},
		{"items", int64(meta.Items), int64(sum.Items)},
		{"znodes", int64(meta.Znodes), int64(sum.Znodes)},
		{"token", int64(meta.Token), int64(sum.Token)},
		{"zxid", meta.Zxid, sum.Zxid},
		{"clock", meta.Clock, sum.Now},
	} {
		if c.meta != c.have {
			return meta, nil, fmt.Errorf("backup: the metadata says %s %d, the state holds %d", c.name, c.meta, c.have)
		}
	}
	return meta, st, nil
}

// InspectOptions are those of Inspect.
type InspectOptions struct {
	File string
	FS   vfs.FS // nil: vfs.OS
	JSON bool   // print the metadata as JSON
	Out  io.Writer
}

// Inspect verifies the backup in opts.File (Verify) and prints its
// metadata.
func Inspect(opts InspectOptions) error {
	file, err := vfs.ReadFile(fsOf(opts.FS), opts.File)
	if err != nil {
		return fmt.Errorf("snapshot inspect: %w", err)
	}
	meta, _, err := Verify(file)
	if err != nil {
		return fmt.Errorf("snapshot inspect %s: %w", opts.File, err)
	}
	if opts.JSON {
		enc := json.NewEncoder(opts.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(meta)
	}
	fmt.Fprintf(opts.Out, "%s (%d bytes): verified\n", opts.File, len(file))
	writeMeta(opts.Out, meta)
	return nil
}

// writeMeta prints a backup's metadata, one thing a line.
func writeMeta(w io.Writer, m backup.Meta) {
	node := m.Node
	if m.LatchVersion != "" {
		node += " (latch " + m.LatchVersion + ")"
	}
	fmt.Fprintf(w, "  format     %d (state encoding %d)\n", m.Format, m.StateFormat)
	fmt.Fprintf(w, "  node       %s\n", node)
	fmt.Fprintf(w, "  raft       term %d, index %d\n", m.Term, m.Index)
	fmt.Fprintf(w, "  taken      %s\n", m.Time.UTC().Format(time.RFC3339Nano))
	fmt.Fprintf(w, "  locks      %d (%d holds, %d leased), %d waiting\n", m.Locks, m.Holds, m.Leases, m.Waiters)
	fmt.Fprintf(w, "  sessions   %d (%d bound to a node's connections)\n", m.Sessions, m.OwnedSessions)
	fmt.Fprintf(w, "  items      %d\n", m.Items)
	fmt.Fprintf(w, "  znodes     %d\n", m.Znodes)
	fmt.Fprintf(w, "  token      %d\n", m.Token)
	fmt.Fprintf(w, "  zxid       %#x\n", m.Zxid)
	fmt.Fprintf(w, "  state      %d bytes, sha256 %s\n", m.StateSize, m.StateSHA256)
}

// Floors returns what a restore of a backup described by meta raises the
// token counter and the zxid to, in every member's state, and the offset
// over its clock that a restored node seeds the counter with at each
// start (see the package documentation).
func Floors(meta backup.Meta) (token latch.Token, zxid int64, offset int64) {
	at := max(meta.Time.UnixNano(), meta.Clock)
	base := max(int64(meta.Token), at)
	token = latch.Token(base + int64(Margin))
	offset = int64(token) - at
	zxid = meta.Zxid + int64(Margin)
	return token, zxid, offset
}

// RestoreOptions are those of Restore.
type RestoreOptions struct {
	File    string
	DataDir string
	// NodeID names the new node; Peers are the new cluster's members
	// (empty: a single node).
	NodeID string
	Peers  []raftrep.Peer
	FS     vfs.FS // nil: vfs.OS
	Out    io.Writer
}

// Restore verifies the backup in opts.File and makes opts.DataDir the data
// dir of node opts.NodeID of a new cluster of opts.Peers holding its state,
// changed as the package documentation says. Every member of the new
// cluster is restored from the same file, with the same members.
func Restore(opts RestoreOptions) error {
	fsys := fsOf(opts.FS)
	file, err := vfs.ReadFile(fsys, opts.File)
	if err != nil {
		return fmt.Errorf("snapshot restore: %w", err)
	}
	meta, st, err := Verify(file)
	if err != nil {
		return fmt.Errorf("snapshot restore %s: refused: %w", opts.File, err)
	}
	if opts.NodeID == "" {
		return errors.New("snapshot restore: no node id")
	}
	token, zxid, offset := Floors(meta)
	ended := st.Reissue(token, zxid)
	sum := st.Summary()
	seed := raftrep.Seed{
		Dir: opts.DataDir, FS: fsys, ID: opts.NodeID, Peers: opts.Peers,
		Index: meta.Index, Stamp: st.Now(), State: st.AppendSnapshot(nil),
		TokenOffset: offset,
	}
	if err := raftrep.SeedDir(seed); err != nil {
		return fmt.Errorf("snapshot restore: %w", err)
	}
	members := opts.NodeID + " alone"
	if len(opts.Peers) > 0 {
		ids := make([]string, len(opts.Peers))
		for i, p := range opts.Peers {
			ids[i] = p.ID
		}
		members = opts.NodeID + " of " + strings.Join(ids, ", ")
	}
	fmt.Fprintf(opts.Out, "restored %s (node %s, term %d, index %d, taken %s) into %s as node %s\n",
		opts.File, meta.Node, meta.Term, meta.Index, meta.Time.UTC().Format(time.RFC3339), opts.DataDir, members)
	fmt.Fprintf(opts.Out, "  locks      %d (%d leased); %s bound to the old nodes' connections ended\n", sum.Locks, sum.Leases, plural(ended, "session"))
	fmt.Fprintf(opts.Out, "  sessions   %d, items %d, znodes %d\n", sum.Sessions, sum.Items, sum.Znodes)
	fmt.Fprintf(opts.Out, "  token      %d raised to %d; each start of this node seeds it %v ahead of its clock\n", meta.Token, sum.Token, time.Duration(offset))
	fmt.Fprintf(opts.Out, "  zxid       %#x raised to %#x\n", meta.Zxid, sum.Zxid)
	return nil
}

// plural returns "1 session", "2 sessions".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
