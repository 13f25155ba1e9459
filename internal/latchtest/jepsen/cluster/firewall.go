//go:build linux

package cluster

import (
	"bytes"
	"fmt"
	"os/exec"
	"strings"
)

// Firewall cuts nodes apart with nftables: a table of its own whose output
// chain drops the packets between pairs of IPs. Loopback packets pass the
// output hook once, so one rule per direction cuts a pair.
type Firewall struct {
	table string
}

// NewFirewall creates the table (replacing one of the same name).
func NewFirewall(table string) (*Firewall, error) {
	f := &Firewall{table: table}
	script := fmt.Sprintf("add table inet %[1]s\ndelete table inet %[1]s\ntable inet %[1]s {\n chain out {\n  type filter hook output priority 0; policy accept;\n }\n}\n", table)
	if err := nft(script); err != nil {
		return nil, err
	}
	return f, nil
}

// Cut drops every packet between the nodes of each pair, both ways.
func (f *Firewall) Cut(pairs ...[2]*Node) error {
	var b strings.Builder
	for _, p := range pairs {
		fmt.Fprintf(&b, "add rule inet %s out ip saddr %s ip daddr %s drop\n", f.table, p[0].IP, p[1].IP)
		fmt.Fprintf(&b, "add rule inet %s out ip saddr %s ip daddr %s drop\n", f.table, p[1].IP, p[0].IP)
	}
	return nft(b.String())
}

// Partition cuts every node of each side from every node of the others.
func (f *Firewall) Partition(sides ...[]*Node) error {
	var pairs [][2]*Node
	for i, a := range sides {
		for _, b := range sides[i+1:] {
			for _, x := range a {
				for _, y := range b {
					pairs = append(pairs, [2]*Node{x, y})
				}
			}
		}
	}
	return f.Cut(pairs...)
}

// Heal removes every cut.
func (f *Firewall) Heal() error {
	return nft(fmt.Sprintf("flush chain inet %s out\n", f.table))
}

// Close deletes the table.
func (f *Firewall) Close() error {
	return nft(fmt.Sprintf("delete table inet %s\n", f.table))
}

func nft(script string) error {
	cmd := exec.Command("nft", "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("cluster: nft: %w: %s\nscript:\n%s", err, bytes.TrimSpace(out.Bytes()), script)
	}
	return nil
}
