package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
)

// FailoverResult is what failover measures. Times are in milliseconds from
// the SIGKILL of the leader.
type FailoverResult struct {
	Killed  int `json:"killed_pid"`
	Clients int `json:"clients"`
	// FirstGrant: the first grant of a lock asked (its create sent)
	// after the kill, to any client: it needs a write committed by the
	// ensemble that is left. NextGrant: the first grant any client saw
	// after the kill, whenever it asked.
	FirstGrant float64 `json:"first_grant_ms"`
	NextGrant  float64 `json:"next_grant_ms"`
	// MaxGap: the longest time between two grants, from a second before
	// the kill to the end.
	MaxGap float64 `json:"max_gap_ms"`
	// GrantsBefore: grants in the second before the kill (the clients
	// were busy); GrantsAfter: in the second after FirstGrant.
	GrantsBefore int `json:"grants_before"`
	GrantsAfter  int `json:"grants_after"`
	// Landed: the clients on each server before the kill; OnKilled how
	// many were on the killed one (they had to move).
	Landed     map[string]int `json:"landed"`
	Errors     int            `json:"errors"`
	Violations int            `json:"violations"`
	Notes      []string       `json:"notes,omitempty"`
}

// failover has clients contend on one lock through the recipe, SIGKILLs
// the leader (--kill, found by the script), and times the next grant.
func failover(args []string) error {
	fs := flag.NewFlagSet("failover", flag.ContinueOnError)
	servers := fs.String("servers", "127.0.0.1:2181", "the ensemble's client `addresses`, comma-separated")
	kill := fs.Int("kill", 0, "`pid` of the leader, to SIGKILL")
	killedAddr := fs.String("killed-addr", "", "the killed server's client `address`, to count the clients on it")
	clients := fs.Int("clients", 8, "sessions contending on the lock")
	settle := fs.Duration("settle", time.Second, "contention before the kill")
	limit := fs.Duration("limit", 30*time.Second, "give up waiting for a grant after the kill")
	if err := fs.Parse(args); err != nil {
		return err
	}
	srvs := list(*servers)
	if *kill <= 0 || *clients < 1 || len(srvs) == 0 {
		return fmt.Errorf("want --kill, --clients and --servers")
	}
	cs := make([]*zk.Conn, *clients)
	for i := range cs {
		c, err := dial(srvs)
		if err != nil {
			return err
		}
		defer c.Close()
		cs[i] = c
	}
	res := &FailoverResult{Killed: *kill, Clients: *clients, Landed: map[string]int{}}
	for _, c := range cs {
		res.Landed[c.Server()]++
	}
	dir := fmt.Sprintf("/zkbench/failover-%d", time.Now().UnixNano())
	if err := ensure(cs[0], dir); err != nil {
		return err
	}

	type grant struct{ asked, at time.Time }
	var (
		mu       sync.Mutex
		grants   []grant
		lastErr  string
		stop     atomic.Bool
		holder   atomic.Int64
		errCount atomic.Int64
		viol     atomic.Int64
		wg       sync.WaitGroup
	)
	holder.Store(-1)
	for i, c := range cs {
		l := newLocker(c, dir)
		wg.Go(func() {
			for !stop.Load() {
				asked := time.Now()
				_, err := l.lock()
				if err == nil {
					at := time.Now()
					if prev := holder.Swap(int64(i)); prev != -1 {
						viol.Add(1)
					}
					mu.Lock()
					grants = append(grants, grant{asked, at})
					mu.Unlock()
					holder.Store(-1)
					err = l.unlock()
				}
				if err != nil {
					errCount.Add(1)
					mu.Lock()
					lastErr = err.Error()
					mu.Unlock()
					l.abandon()
					time.Sleep(10 * time.Millisecond)
				}
			}
		})
	}
	time.Sleep(*settle)

	killAt := time.Now()
	if err := killPID(*kill); err != nil {
		stop.Store(true)
		wg.Wait()
		return fmt.Errorf("kill %d: %w", *kill, err)
	}
	ms := func(t time.Time) float64 { return math.Round(float64(t.Sub(killAt))/1e4) / 100 }
	res.FirstGrant, res.NextGrant = -1, -1
	var first time.Time
	for time.Since(killAt) < *limit && first.IsZero() {
		time.Sleep(5 * time.Millisecond)
		mu.Lock()
		for _, g := range grants {
			if g.asked.After(killAt) && (first.IsZero() || g.at.Before(first)) {
				first = g.at
			}
		}
		mu.Unlock()
	}
	time.Sleep(time.Second) // the clients go on through the new leader
	stop.Store(true)
	// A locker stuck on a watch ends with its watchTimeout, at most.
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	sort.Slice(grants, func(i, j int) bool { return grants[i].at.Before(grants[j].at) })
	if !first.IsZero() {
		res.FirstGrant = ms(first)
	}
	prev := killAt.Add(-time.Second)
	for _, g := range grants {
		if g.at.After(killAt) && res.NextGrant < 0 {
			res.NextGrant = ms(g.at)
		}
		if g.at.After(killAt.Add(-time.Second)) && !g.at.After(killAt) {
			res.GrantsBefore++
		}
		if !first.IsZero() && g.at.After(first) && !g.at.After(first.Add(time.Second)) {
			res.GrantsAfter++
		}
		if g.at.After(prev) {
			res.MaxGap = max(res.MaxGap, math.Round(float64(g.at.Sub(prev))/1e4)/100)
			prev = g.at
		}
	}
	if res.FirstGrant < 0 {
		res.MaxGap = -1
		res.Notes = append(res.Notes, fmt.Sprintf("no grant of a lock asked after the kill within %v", *limit))
	}
	res.Errors = int(errCount.Load())
	res.Violations = int(viol.Load())
	if lastErr != "" {
		res.Notes = append(res.Notes, "last client error: "+lastErr)
	}
	if *killedAddr != "" {
		res.Notes = append(res.Notes, fmt.Sprintf("%d of %d clients were on the killed server", res.Landed[*killedAddr], *clients))
	}
	return json.NewEncoder(os.Stdout).Encode(res)
}

// killPID kills process pid at once (SIGKILL on Unix).
func killPID(pid int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Kill()
}
