package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/latchd/latch/client"
)

// FailoverResult is what failover measures. Times are in milliseconds from
// the SIGKILL of the leader.
type FailoverResult struct {
	System    string `json:"system"`
	Killed    string `json:"killed"`
	NewLeader string `json:"new_leader"`
	// Elected: a survivor first names a new leader (polled every 10 ms).
	Elected float64 `json:"elected_ms"`
	// FirstGrant: the first grant of a lock requested after the kill, on
	// any survivor; PerSurvivor the same on each.
	FirstGrant  float64   `json:"first_grant_ms"`
	PerSurvivor []float64 `json:"first_grant_per_survivor_ms"`
	// MaxGap: the longest time between two grants a prober saw across
	// the kill (the pause a busy client sees).
	MaxGap float64 `json:"max_gap_ms"`
	// Held: every lock of the holder (on a survivor, with a session TTL
	// and, for latch, a leased lock too) is still held by it, with the
	// same token, after the failover; SessionAlive: its client did not
	// give the session up.
	Held         bool `json:"held_after"`
	SessionAlive bool `json:"session_alive"`
	// WaiterGranted: a request waiting for the held lock through the
	// failover was granted once the holder released it.
	WaiterGranted bool `json:"waiter_granted"`
	// latch only: on a survivor, sessions whose TTL lapsed and leases
	// that ended, during the failover (metrics before and after).
	SessionExpiries *float64 `json:"session_expiries,omitempty"`
	LeaseExpiries   *float64 `json:"lease_expiries,omitempty"`
	ProbeErrors     int      `json:"probe_errors"`
	Notes           []string `json:"notes,omitempty"`
}

// probe records the grants of one prober: a loop of lock+unlock on a key
// of its own through one survivor.
type probe struct {
	mu     sync.Mutex
	grants [][2]time.Time // when each granted Lock was sent and answered
	errs   int
	last   string
}

func (p *probe) granted(sent time.Time) {
	p.mu.Lock()
	p.grants = append(p.grants, [2]time.Time{sent, time.Now()})
	p.mu.Unlock()
}

func (p *probe) failed(err error) {
	p.mu.Lock()
	p.errs++
	p.last = err.Error()
	p.mu.Unlock()
}

// after returns when the first Lock sent after t was granted.
func (p *probe) after(t time.Time) (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, g := range p.grants {
		if g[0].After(t) {
			return g[1], true
		}
	}
	return time.Time{}, false
}

// maxGap is the longest time between two grants answered at or after from.
func (p *probe) maxGap(from time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	var gap time.Duration
	prev := from
	for _, g := range p.grants {
		if g[1].Before(from) {
			prev = g[1]
			continue
		}
		gap = max(gap, g[1].Sub(prev))
		prev = g[1]
	}
	return gap
}

// loop runs cycle until ctx is done, pausing 10 ms after an error.
func (p *probe) loop(ctx context.Context, cycle func(ctx context.Context, granted func(time.Time)) error) {
	for ctx.Err() == nil {
		octx, cancel := context.WithTimeout(ctx, 20*time.Second)
		err := cycle(octx, p.granted)
		cancel()
		if err != nil && ctx.Err() == nil {
			p.failed(err)
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// cluster is what failover needs of latch or etcd.
type cluster interface {
	// leader returns the index of the leading node among the alive ones,
	// or -1 when none leads yet.
	leader(ctx context.Context, alive []int) int
	// hold takes the holder's locks through node i.
	hold(ctx context.Context, i int) error
	// cycle makes one lock+unlock through node i, calling granted with
	// the Lock's send time once it is granted.
	newProber(ctx context.Context, i int) (func(context.Context, func(time.Time)) error, error)
	// wait starts a request, through node i, for the holder's lock; it
	// reports on the channel when it was granted.
	wait(ctx context.Context, i int) (<-chan error, error)
	// check reports whether the holder still holds every lock, and
	// whether its session lives, as seen through the alive nodes.
	check(ctx context.Context, alive []int) (held, sessionAlive bool, notes []string)
	// release unlocks the holder's locks.
	release(ctx context.Context) error
	// expiries returns the session and lease expiries counted by node i
	// (latch), or false.
	expiries(ctx context.Context, i int) (sessions, leases float64, ok bool)
	close()
}

func failover(args []string) error {
	fs := flag.NewFlagSet("failover", flag.ContinueOnError)
	system := fs.String("system", "latch", "latch or etcd")
	dlock := fs.String("dlock", "", "latch: dlock `addresses` of the nodes, comma-separated")
	adminAddrs := fs.String("admin", "", "latch: admin `addresses` of the nodes, in the same order")
	ids := fs.String("ids", "", "latch: node ids, in the same order")
	endpoints := fs.String("endpoints", "", "etcd: client `addresses` of the members, comma-separated")
	pidList := fs.String("pids", "", "`pids` of the nodes, in the same order")
	ttl := fs.Duration("session-ttl", 5*time.Second, "the holder's session TTL")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ps, err := pids(*pidList)
	if err != nil {
		return err
	}
	var c cluster
	switch *system {
	case "latch":
		c = &latchCluster{dlock: list(*dlock), admin: list(*adminAddrs), ids: list(*ids), ttl: *ttl}
	case "etcd":
		c, err = newEtcdCluster(list(*endpoints), *ttl)
		if err != nil {
			return err
		}
	default:
		return fmt.Errorf("unknown system %q", *system)
	}
	defer c.close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	all := make([]int, len(ps))
	for i := range all {
		all[i] = i
	}
	var lead int
	for lead = c.leader(ctx, all); lead < 0; lead = c.leader(ctx, all) {
		if ctx.Err() != nil {
			return errors.New("no leader")
		}
		time.Sleep(50 * time.Millisecond)
	}
	var surv []int
	for _, i := range all {
		if i != lead {
			surv = append(surv, i)
		}
	}
	res := &FailoverResult{System: *system, Killed: strconv.Itoa(lead)}

	if err := c.hold(ctx, surv[0]); err != nil {
		return fmt.Errorf("hold: %w", err)
	}
	waited, err := c.wait(ctx, surv[len(surv)-1])
	if err != nil {
		return fmt.Errorf("wait: %w", err)
	}
	s0, l0, metricsOK := c.expiries(ctx, surv[0])
	pctx, stopProbes := context.WithCancel(ctx)
	defer stopProbes()
	var probes []*probe
	var wg sync.WaitGroup
	for _, i := range surv {
		cycle, err := c.newProber(ctx, i)
		if err != nil {
			return fmt.Errorf("prober: %w", err)
		}
		p := &probe{}
		probes = append(probes, p)
		wg.Go(func() { p.loop(pctx, cycle) })
	}
	time.Sleep(time.Second)

	killAt := time.Now()
	if err := syscall.Kill(ps[lead], syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill %d: %w", ps[lead], err)
	}
	ms := func(t time.Time) float64 { return math.Round(float64(t.Sub(killAt))/1e4) / 100 }
	for ctx.Err() == nil {
		if l := c.leader(ctx, surv); l >= 0 {
			res.Elected = ms(time.Now())
			res.NewLeader = strconv.Itoa(l)
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	res.FirstGrant = -1
	for _, p := range probes {
		var at time.Time
		for ctx.Err() == nil {
			var ok bool
			if at, ok = p.after(killAt); ok {
				break
			}
			if time.Since(killAt) > 20*time.Second {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		g := -1.0
		if !at.IsZero() {
			g = ms(at)
			if res.FirstGrant < 0 || g < res.FirstGrant {
				res.FirstGrant = g
			}
		}
		res.PerSurvivor = append(res.PerSurvivor, g)
	}
	time.Sleep(time.Second) // probes go on through the new leader
	stopProbes()
	wg.Wait()
	for _, p := range probes {
		res.MaxGap = max(res.MaxGap, math.Round(float64(p.maxGap(killAt.Add(-time.Second)))/1e4)/100)
		res.ProbeErrors += p.errs
		if p.errs > 0 {
			res.Notes = append(res.Notes, "probe error: "+p.last)
		}
	}

	var notes []string
	res.Held, res.SessionAlive, notes = c.check(ctx, surv)
	res.Notes = append(res.Notes, notes...)
	if metricsOK {
		if s1, l1, ok := c.expiries(ctx, surv[0]); ok {
			ds, dl := s1-s0, l1-l0
			res.SessionExpiries, res.LeaseExpiries = &ds, &dl
		}
	}
	select {
	case err := <-waited:
		res.Notes = append(res.Notes, fmt.Sprintf("the waiter was answered while the lock was held: %v", err))
	default:
		if err := c.release(ctx); err != nil {
			res.Notes = append(res.Notes, "release: "+err.Error())
		}
		select {
		case err := <-waited:
			res.WaiterGranted = err == nil
			if err != nil {
				res.Notes = append(res.Notes, "waiter: "+err.Error())
			}
		case <-time.After(10 * time.Second):
			res.Notes = append(res.Notes, "the waiter was not granted within 10 s of the release")
		}
	}
	enc := json.NewEncoder(os.Stdout)
	return enc.Encode(res)
}

// latchCluster drives latch through its Go client and admin API.
type latchCluster struct {
	dlock, admin, ids []string
	ttl               time.Duration

	holder        *client.Client
	locks         []*client.Lock
	clients       []*client.Client
	waiterLockKey string
}

const (
	latchHeldKey   = "failover:held"   // bound to the holder's session
	latchLeasedKey = "failover:leased" // with a lease of its own
)

func (l *latchCluster) dial(ctx context.Context, i int, opts ...client.Option) (*client.Client, error) {
	c, err := client.Dial(ctx, l.dlock[i], opts...)
	if err == nil {
		l.clients = append(l.clients, c)
	}
	return c, err
}

func (l *latchCluster) getJSON(ctx context.Context, i int, path string, v any) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+l.admin[i]+path, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

func (l *latchCluster) leader(ctx context.Context, alive []int) int {
	for _, i := range alive {
		var st struct {
			Leader string `json:"leader"`
		}
		if l.getJSON(ctx, i, "/v1/cluster", &st) != nil || st.Leader == "" {
			continue
		}
		for _, j := range alive {
			if l.ids[j] == st.Leader {
				return j
			}
		}
	}
	return -1
}

func (l *latchCluster) hold(ctx context.Context, i int) error {
	c, err := l.dial(ctx, i, client.SessionTTL(l.ttl))
	if err != nil {
		return err
	}
	l.holder = c
	a, err := c.Lock(ctx, []string{latchHeldKey})
	if err != nil {
		return err
	}
	b, err := c.Lock(ctx, []string{latchLeasedKey}, client.Lease(30*time.Second))
	if err != nil {
		return err
	}
	l.locks = []*client.Lock{a, b}
	return nil
}

func (l *latchCluster) newProber(ctx context.Context, i int) (func(context.Context, func(time.Time)) error, error) {
	c, err := l.dial(ctx, i)
	if err != nil {
		return nil, err
	}
	key := fmt.Sprintf("failover:probe:%d", i)
	return func(ctx context.Context, granted func(time.Time)) error {
		sent := time.Now()
		lk, err := c.Lock(ctx, []string{key})
		if err != nil {
			return err
		}
		granted(sent)
		return lk.Unlock(ctx)
	}, nil
}

func (l *latchCluster) wait(ctx context.Context, i int) (<-chan error, error) {
	c, err := l.dial(ctx, i)
	if err != nil {
		return nil, err
	}
	ch := make(chan error, 1)
	go func() {
		lk, err := c.Lock(ctx, []string{latchHeldKey})
		if err == nil && lk.Token() <= l.locks[0].Token() {
			err = fmt.Errorf("granted token %d, not above the holder's %d", lk.Token(), l.locks[0].Token())
		}
		ch <- err
	}()
	return ch, nil
}

func (l *latchCluster) check(ctx context.Context, alive []int) (held, sessionAlive bool, notes []string) {
	held = true
	for _, i := range alive {
		for _, lk := range l.locks {
			key := lk.Keys()[0]
			var st struct {
				Holders []struct {
					Token string `json:"token"`
				} `json:"holders"`
			}
			err := l.getJSON(ctx, i, "/v1/locks/"+key, &st)
			want := strconv.FormatUint(uint64(lk.Token()), 10)
			if err != nil || len(st.Holders) != 1 || st.Holders[0].Token != want {
				held = false
				notes = append(notes, fmt.Sprintf("node %s: %s = %+v, %v; want held with token %s", l.ids[i], key, st, err, want))
			}
			select {
			case <-lk.Done():
				held = false
				notes = append(notes, fmt.Sprintf("%s: the client gave it up: %v", key, lk.Err()))
			default:
			}
		}
	}
	sessionAlive = l.holder.Err() == nil
	if !sessionAlive {
		notes = append(notes, "holder: "+l.holder.Err().Error())
	}
	return held, sessionAlive, notes
}

func (l *latchCluster) release(ctx context.Context) error {
	var errs []error
	for _, lk := range l.locks {
		errs = append(errs, lk.Unlock(ctx))
	}
	return errors.Join(errs...)
}

// expiries reads latch_session_expiries_total and
// latch_releases_total{cause="lease_expiry"} from node i's /metrics.
func (l *latchCluster) expiries(ctx context.Context, i int) (sessions, leases float64, ok bool) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+l.admin[i]+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, false
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		name, val, found := strings.Cut(line, " ")
		if !found || strings.HasPrefix(line, "#") {
			continue
		}
		v, err := strconv.ParseFloat(val, 64)
		if err != nil {
			continue
		}
		switch {
		case strings.HasPrefix(name, "latch_session_expiries_total"):
			sessions += v
		case strings.HasPrefix(name, "latch_releases_total") && strings.Contains(name, `cause="lease_expiry"`):
			leases += v
		}
	}
	return sessions, leases, sc.Err() == nil
}

func (l *latchCluster) close() {
	for _, c := range l.clients {
		c.Close()
	}
}

// etcdCluster drives etcd: one client per member, pinned to it.
type etcdCluster struct {
	eps     []string
	cli     []*clientv3.Client
	ttl     time.Duration
	session *concurrency.Session
	mutex   *concurrency.Mutex
	others  []*concurrency.Session
}

const etcdHeldKey = "/failover/held"

func newEtcdCluster(eps []string, ttl time.Duration) (*etcdCluster, error) {
	e := &etcdCluster{eps: eps, ttl: ttl}
	for _, ep := range eps {
		c, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 5 * time.Second})
		if err != nil {
			e.close()
			return nil, err
		}
		e.cli = append(e.cli, c)
	}
	return e, nil
}

func (e *etcdCluster) leader(ctx context.Context, alive []int) int {
	for _, i := range alive {
		sctx, cancel := context.WithTimeout(ctx, time.Second)
		st, err := e.cli[i].Status(sctx, e.eps[i])
		cancel()
		if err != nil || st.Leader == 0 {
			continue
		}
		for _, j := range alive {
			sctx, cancel := context.WithTimeout(ctx, time.Second)
			sj, err := e.cli[j].Status(sctx, e.eps[j])
			cancel()
			if err == nil && sj.Header.MemberId == st.Leader {
				return j
			}
		}
	}
	return -1
}

func (e *etcdCluster) newSession(i int) (*concurrency.Session, error) {
	s, err := concurrency.NewSession(e.cli[i], concurrency.WithTTL(int(e.ttl.Seconds())))
	if err == nil {
		e.others = append(e.others, s)
	}
	return s, err
}

func (e *etcdCluster) hold(ctx context.Context, i int) error {
	s, err := e.newSession(i)
	if err != nil {
		return err
	}
	e.session = s
	e.mutex = concurrency.NewMutex(s, etcdHeldKey)
	return e.mutex.Lock(ctx)
}

func (e *etcdCluster) newProber(ctx context.Context, i int) (func(context.Context, func(time.Time)) error, error) {
	s, err := e.newSession(i)
	if err != nil {
		return nil, err
	}
	m := concurrency.NewMutex(s, fmt.Sprintf("/failover/probe/%d", i))
	return func(ctx context.Context, granted func(time.Time)) error {
		sent := time.Now()
		if err := m.Lock(ctx); err != nil {
			return err
		}
		granted(sent)
		return m.Unlock(ctx)
	}, nil
}

func (e *etcdCluster) wait(ctx context.Context, i int) (<-chan error, error) {
	s, err := e.newSession(i)
	if err != nil {
		return nil, err
	}
	ch := make(chan error, 1)
	go func() { ch <- concurrency.NewMutex(s, etcdHeldKey).Lock(ctx) }()
	return ch, nil
}

func (e *etcdCluster) check(ctx context.Context, alive []int) (held, sessionAlive bool, notes []string) {
	select {
	case <-e.session.Done():
		notes = append(notes, "the holder's session ended")
	default:
		sessionAlive = true
	}
	held = true
	for _, i := range alive {
		gctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		r, err := e.cli[i].Get(gctx, e.mutex.Key())
		cancel()
		if err != nil || len(r.Kvs) != 1 || clientv3.LeaseID(r.Kvs[0].Lease) != e.session.Lease() {
			held = false
			notes = append(notes, fmt.Sprintf("member %d: the holder's key: %v, %v", i, r, err))
			continue
		}
		// The holder's key is the first of the lock's prefix.
		gctx, cancel = context.WithTimeout(ctx, 2*time.Second)
		first, err := e.cli[i].Get(gctx, etcdHeldKey+"/", clientv3.WithFirstCreate()...)
		cancel()
		if err != nil || len(first.Kvs) == 0 || string(first.Kvs[0].Key) != e.mutex.Key() {
			held = false
			notes = append(notes, fmt.Sprintf("member %d: the first waiter is not the holder: %v", i, err))
		}
	}
	return held, sessionAlive, notes
}

func (e *etcdCluster) release(ctx context.Context) error { return e.mutex.Unlock(ctx) }

func (e *etcdCluster) expiries(context.Context, int) (float64, float64, bool) { return 0, 0, false }

func (e *etcdCluster) close() {
	for _, s := range e.others {
		s.Orphan()
	}
	for _, c := range e.cli {
		c.Close()
	}
}
