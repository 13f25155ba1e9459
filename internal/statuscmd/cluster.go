package statuscmd

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/latchd/latch/internal/admin"
)

// ClusterOptions configure "latch cluster".
type ClusterOptions struct {
	Options
	// Op is status, add, remove or transfer; ID and RaftAddr its
	// arguments; Token the admin token the actions need.
	Op, ID, RaftAddr, Token string
}

// RunCluster shows the cluster of the server at opts.Addr, or changes its
// membership (add, remove) or leader (transfer) through it and shows the
// result.
func RunCluster(ctx context.Context, opts ClusterOptions) error {
	c := newClient(opts.Options)
	var st admin.ClusterStatus
	var err error
	if opts.Op == "status" {
		st, err = c.Cluster(ctx)
	} else {
		st, err = c.ClusterAction(ctx, opts.Op, opts.ID, opts.RaftAddr, opts.Token)
	}
	if err != nil {
		return fmt.Errorf("latch cluster: %w", err)
	}
	if opts.JSON {
		return writeJSON(opts.Out, Status{Cluster: st})
	}
	writeCluster(opts.Out, st)
	return nil
}

// writeCluster prints the cluster line and its members.
func writeCluster(w io.Writer, c admin.ClusterStatus) {
	leader := c.Leader
	if leader == "" {
		leader = "none"
	}
	fmt.Fprintf(w, "CLUSTER: %s, node %s, leader %s, term %d, applied %d of %d\n",
		c.Mode, c.Node, leader, c.Term, c.AppliedIndex, c.CommitIndex)
	if len(c.Members) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MEMBER\tRAFT ADDRESS\tSTATE")
	for _, m := range c.Members {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", m.ID, m.RaftAddr, m.State)
	}
	tw.Flush()
}
