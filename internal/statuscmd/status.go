package statuscmd

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/latchd/latch/internal/admin"
)

// Defaults of "latch status".
const (
	DefaultAddr     = "127.0.0.1:11280"
	DefaultInterval = 2 * time.Second
)

// Options configure Run.
type Options struct {
	// Addr is the admin server: host:port or a base URL.
	Addr string
	// Prefix limits the keys shown to those starting with it.
	Prefix string
	// JSON prints {"locks": ..., "sessions": ...} as the API gives them.
	JSON bool
	// Watch redraws every Interval until ctx is done.
	Watch    bool
	Interval time.Duration
	// Out receives the output.
	Out io.Writer
	// TLS, when set, is the configuration of HTTPS to the server; an Addr
	// without a scheme then means https://.
	TLS *tls.Config
}

// Status is what one round fetches; it is also the --json output.
type Status struct {
	Cluster  admin.ClusterStatus `json:"cluster"`
	Locks    admin.LockList      `json:"locks"`
	Sessions admin.SessionList   `json:"sessions"`
}

// Fetch reads every key with prefix and every session from c.
func Fetch(ctx context.Context, c *admin.Client, prefix string) (Status, error) {
	locks, err := c.Locks(ctx, prefix)
	if err != nil {
		return Status{}, err
	}
	sessions, err := c.Sessions(ctx)
	if err != nil {
		return Status{}, err
	}
	cluster, err := c.Cluster(ctx)
	if err != nil {
		return Status{}, err
	}
	return Status{Cluster: cluster, Locks: locks, Sessions: sessions}, nil
}

// clearScreen moves the cursor home and clears the terminal.
const clearScreen = "\x1b[H\x1b[2J"

// Run prints the status once, or, with Watch, every Interval until ctx is
// done; then it returns nil. A failed fetch is an error at once; while
// watching it is printed and the next round tries again.
func Run(ctx context.Context, opts Options) error {
	if opts.Interval <= 0 {
		opts.Interval = DefaultInterval
	}
	c := newClient(opts)
	for {
		st, err := Fetch(ctx, c, opts.Prefix)
		if ctx.Err() != nil && opts.Watch {
			return nil
		}
		if err != nil && !opts.Watch {
			return fmt.Errorf("latch status: %w", err)
		}
		if opts.Watch && !opts.JSON {
			fmt.Fprint(opts.Out, clearScreen)
		}
		switch {
		case err != nil:
			fmt.Fprintf(opts.Out, "latch status: %v (retrying every %v)\n", err, opts.Interval)
		case opts.JSON:
			if err := writeJSON(opts.Out, st); err != nil {
				return err
			}
		default:
			if err := Write(opts.Out, st, opts.Addr); err != nil {
				return err
			}
		}
		if !opts.Watch {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(opts.Interval):
		}
	}
}

func writeJSON(w io.Writer, st Status) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(st); err != nil {
		return fmt.Errorf("latch status: %w", err)
	}
	return nil
}

// Write prints st as aligned tables: one row per holder and per waiter of
// every key, then one row per session, then, if ZooKeeper sessions have
// ephemeral znodes, one row per ephemeral znode. Durations are relative
// to the time the server took each list.
func Write(w io.Writer, st Status, addr string) error {
	now := st.Locks.Time.Time
	holders, waiters := 0, 0
	for _, l := range st.Locks.Locks {
		holders += len(l.Holders)
		waiters += len(l.Waiters)
	}
	fmt.Fprintf(w, "latch at %s, %s\n\n", addr, now.Local().Format("2006-01-02 15:04:05 MST"))
	if c := st.Cluster; c.Mode == "cluster" || c.Mode == "durable" {
		writeCluster(w, c)
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "LOCKS: %s, %s, %s\n",
		plural(len(st.Locks.Locks), "key"), plural(holders, "holder"), plural(waiters, "waiter"))
	if len(st.Locks.Locks) > 0 {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "KEY\tSTATE\tMODE\tSESSION\tPROTOCOL\tPEER\tTOKEN\tFOR\tLEASE/DEADLINE")
		for _, l := range st.Locks.Locks {
			if len(l.Holders) == 0 && len(l.Waiters) == 0 {
				state := "free"
				if !l.DelayedUntil.IsZero() {
					state = "lock-delay " + fmtDuration(l.DelayedUntil.Sub(now)) + " left"
				}
				fmt.Fprintf(tw, "%s\t%s\t-\t-\t-\t-\t-\t-\t-\n", l.Key, state)
			}
			for _, h := range l.Holders {
				session := "-"
				if h.Session != 0 {
					session = strconv.FormatUint(h.Session, 10)
				}
				lease := "-"
				if !h.LeaseExpiresAt.IsZero() {
					lease = fmtDuration(h.LeaseExpiresAt.Sub(now)) + " left"
				}
				mode := l.Mode
				if l.Limit > 0 {
					mode += fmt.Sprintf(" (limit %d)", l.Limit)
				}
				fmt.Fprintf(tw, "%s\theld\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", l.Key, mode, session,
					dash(h.Protocol), dash(h.Peer), h.Token, fmtSeconds(h.HeldSeconds), lease)
			}
			for _, wt := range l.Waiters {
				deadline := "forever"
				if !wt.Deadline.IsZero() {
					deadline = fmtDuration(wt.Deadline.Sub(now)) + " left"
				}
				state := fmt.Sprintf("waiting (%d ahead)", wt.Position)
				if wt.Keys > 1 {
					state += fmt.Sprintf(" (%d keys)", wt.Keys)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t-\t%s\t%s\n", l.Key, state, wt.Mode, wt.Session,
					dash(wt.Protocol), dash(wt.Peer), fmtSeconds(wt.WaitedSeconds), deadline)
			}
		}
		if err := tw.Flush(); err != nil {
			return fmt.Errorf("latch status: %w", err)
		}
	}

	snow := st.Sessions.Time.Time
	// ZooKeeper sessions (those with an ephemerals list) add a column
	// and a table of their ephemeral znodes.
	zsessions, ephemerals := 0, 0
	for _, s := range st.Sessions.Sessions {
		if s.Ephemerals != nil {
			zsessions++
			ephemerals += len(s.Ephemerals)
		}
	}
	fmt.Fprintf(w, "\nSESSIONS: %d", len(st.Sessions.Sessions))
	if zsessions > 0 {
		fmt.Fprintf(w, ", %d ZooKeeper with %s", zsessions, plural(ephemerals, "ephemeral znode"))
	}
	fmt.Fprintln(w)
	if len(st.Sessions.Sessions) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	heading := "ID\tPROTOCOL\tPEER\tOPEN FOR\tHOLDS\tWAITS\tTTL"
	if zsessions > 0 {
		heading += "\tEPHEMERALS"
	}
	fmt.Fprintln(tw, heading)
	for _, s := range st.Sessions.Sessions {
		ttl := "-"
		if s.TTLSeconds > 0 {
			ttl = fmtSeconds(s.TTLSeconds)
			if !s.ExpiresAt.IsZero() {
				ttl += ", expires in " + fmtDuration(s.ExpiresAt.Sub(snow))
			}
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%d\t%s", s.ID, dash(s.Protocol), dash(s.Peer),
			fmtDuration(snow.Sub(s.OpenedAt.Time)), s.Held, s.Waiting, ttl)
		switch {
		case zsessions == 0:
		case s.Ephemerals == nil:
			fmt.Fprint(tw, "\t-")
		default:
			fmt.Fprintf(tw, "\t%d", len(s.Ephemerals))
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("latch status: %w", err)
	}
	if ephemerals == 0 {
		return nil
	}
	fmt.Fprintf(w, "\nEPHEMERAL ZNODES: %d\n", ephemerals)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PATH\tSESSION")
	for _, s := range st.Sessions.Sessions {
		for _, p := range s.Ephemerals {
			fmt.Fprintf(tw, "%s\t%d\n", p, s.ID)
		}
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("latch status: %w", err)
	}
	return nil
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func fmtSeconds(s float64) string { return fmtDuration(time.Duration(s * float64(time.Second))) }

// fmtDuration rounds d for a table: 850ms, 3.2s, 4m12s, 2h3m.
func fmtDuration(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	switch {
	case d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	}
	if r := d.Round(time.Second); r < time.Hour {
		return r.String()
	}
	return strings.TrimSuffix(d.Round(time.Minute).String(), "0s")
}

// newClient returns the admin API client of opts.
func newClient(opts Options) *admin.Client {
	if opts.TLS == nil {
		return admin.NewClient(opts.Addr)
	}
	addr := opts.Addr
	if !strings.Contains(addr, "://") {
		addr = "https://" + addr
	}
	c := admin.NewClient(addr)
	c.HTTP = &http.Client{Transport: &http.Transport{TLSClientConfig: opts.TLS}}
	return c
}
