package raftrep

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/raft"
)

// Member is a member of the cluster as this node knows it.
type Member struct {
	ID    string `json:"id"`
	Addr  string `json:"raft_addr"`
	Voter bool   `json:"voter"`
	// Leader is set for the member this node knows as the leader.
	Leader bool `json:"leader"`
}

// Status is this node's view of the cluster.
type Status struct {
	ID     string `json:"id"`
	Leader string `json:"leader"` // "" while there is none
	// State is this node's Raft state: leader, follower, candidate or
	// shutdown.
	State   string   `json:"state"`
	Term    uint64   `json:"term"`
	Members []Member `json:"members"`
	Stats
}

// Status returns this node's view of the cluster.
func (r *Replicator) Status() (Status, error) {
	f := r.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return Status{}, fmt.Errorf("raftrep: configuration: %w", err)
	}
	_, leader := r.raft.LeaderWithID()
	st := Status{
		ID:     r.cfg.ID,
		Leader: string(leader),
		State:  stateName(r.raft.State()),
		Term:   r.raft.CurrentTerm(),
		Stats:  r.Counters(),
	}
	for _, s := range f.Configuration().Servers {
		st.Members = append(st.Members, Member{
			ID:     string(s.ID),
			Addr:   string(s.Address),
			Voter:  s.Suffrage == raft.Voter,
			Leader: s.ID == leader,
		})
	}
	return st, nil
}

// Members returns how many members the cluster has in the latest
// configuration this node knows (which may not be committed yet).
func (r *Replicator) Members() (int, error) {
	f := r.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return 0, fmt.Errorf("raftrep: configuration: %w", err)
	}
	return len(f.Configuration().Servers), nil
}

// LastSnapshot describes the newest snapshot in the node's data dir,
// whether the node took it or was sent it; ok is false while there is
// none, and for a node in memory.
func (r *Replicator) LastSnapshot() (info SnapshotInfo, ok bool) {
	if r.disk == nil {
		return SnapshotInfo{}, false
	}
	s, isOurs := r.disk.snaps.(*snapshotStore)
	if !isOurs {
		return SnapshotInfo{}, false
	}
	return s.Newest()
}

func stateName(s raft.RaftState) string {
	switch s {
	case raft.Leader:
		return "leader"
	case raft.Follower:
		return "follower"
	case raft.Candidate:
		return "candidate"
	}
	return "shutdown"
}

// adminRequest is a membership change, sent to the leader by a node that
// is not (kindAdmin), as one JSON line, answered by an adminAnswer line.
type adminRequest struct {
	Op   string `json:"op"` // add, remove, transfer
	ID   string `json:"id"`
	Addr string `json:"addr,omitempty"`
}

type adminAnswer struct {
	Err string `json:"err,omitempty"`
	// Kind names the sentinel Err wraps: "no-member" (ErrNoMember) or
	// "invalid" (ErrInvalidMember); "" for none.
	Kind string `json:"kind,omitempty"`
}

// Errors of membership requests, also when the leader answered them for
// another node.
var (
	// ErrNoMember: the request names a node that is not a member.
	ErrNoMember = errors.New("no such member")
	// ErrInvalidMember: an add names no address, or one that another
	// member has.
	ErrInvalidMember = errors.New("invalid member")
)

var answerKinds = map[string]error{"no-member": ErrNoMember, "invalid": ErrInvalidMember}

// answerErr is the leader's error, whose text it carries, wrapping the
// sentinel its kind names.
type answerErr struct {
	msg  string
	kind error
}

func (e answerErr) Error() string { return e.msg }
func (e answerErr) Unwrap() error { return e.kind }

// AddVoter adds a voting member; RemoveServer removes one; Transfer hands
// the leadership to id ("" for any other member). Each runs on the leader:
// a node that is not forwards it there.
func (r *Replicator) AddVoter(ctx context.Context, id, addr string) error {
	return r.admin(ctx, adminRequest{Op: "add", ID: id, Addr: addr})
}

func (r *Replicator) RemoveServer(ctx context.Context, id string) error {
	return r.admin(ctx, adminRequest{Op: "remove", ID: id})
}

func (r *Replicator) Transfer(ctx context.Context, id string) error {
	return r.admin(ctx, adminRequest{Op: "transfer", ID: id})
}

func (r *Replicator) admin(ctx context.Context, req adminRequest) error {
	if req.ID == "" && req.Op != "transfer" {
		return errors.New("raftrep: a member needs an id")
	}
	if r.raft.State() == raft.Leader {
		return r.doAdmin(req)
	}
	addr, _ := r.raft.LeaderWithID()
	if addr == "" || r.cfg.Network == nil {
		return fmt.Errorf("raftrep: %s %s: no leader to ask", req.Op, req.ID)
	}
	c, err := r.cfg.Network.DialForward(ctx, string(addr))
	if err != nil {
		return fmt.Errorf("raftrep: %s %s: reaching the leader: %w", req.Op, req.ID, err)
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	line, _ := json.Marshal(req)
	if _, err := c.Write(append(append([]byte{kindAdmin}, line...), '\n')); err != nil {
		return fmt.Errorf("raftrep: %s %s: %w", req.Op, req.ID, err)
	}
	var ans adminAnswer
	if err := json.NewDecoder(c).Decode(&ans); err != nil {
		return fmt.Errorf("raftrep: %s %s: the leader's answer: %w", req.Op, req.ID, err)
	}
	if ans.Err != "" {
		if kind, ok := answerKinds[ans.Kind]; ok {
			return answerErr{ans.Err, kind}
		}
		return fmt.Errorf("raftrep: %s %s: %s", req.Op, req.ID, ans.Err)
	}
	return nil
}

// doAdmin runs a membership request on this node, the leader.
func (r *Replicator) doAdmin(req adminRequest) error {
	const timeout = 10 * time.Second
	if r.raft.State() != raft.Leader {
		// Deposed since the request was sent here: its configuration may
		// be behind the new leader's, so it does not judge the request.
		return errNotLeader
	}
	if req.Op == "transfer" && req.ID == "" {
		return r.adminErr(req, r.raft.LeadershipTransfer().Error())
	}
	f := r.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return r.adminErr(req, err)
	}
	var addr raft.ServerAddress
	for _, s := range f.Configuration().Servers {
		switch {
		case string(s.ID) == req.ID:
			addr = s.Address
		case req.Op == "add" && string(s.Address) == req.Addr:
			return fmt.Errorf("raftrep: add %s: address %s is member %s's: %w", req.ID, req.Addr, s.ID, ErrInvalidMember)
		}
	}
	var err error
	switch req.Op {
	case "add":
		if req.Addr == "" {
			return fmt.Errorf("raftrep: add %s: no raft address: %w", req.ID, ErrInvalidMember)
		}
		err = r.raft.AddVoter(raft.ServerID(req.ID), raft.ServerAddress(req.Addr), 0, timeout).Error()
	case "remove", "transfer":
		if addr == "" {
			return fmt.Errorf("raftrep: %s %s: %w", req.Op, req.ID, ErrNoMember)
		}
		if req.Op == "remove" {
			err = r.raft.RemoveServer(raft.ServerID(req.ID), 0, timeout).Error()
		} else {
			err = r.raft.LeadershipTransferToServer(raft.ServerID(req.ID), addr).Error()
		}
	default:
		return fmt.Errorf("raftrep: unknown membership request %q", req.Op)
	}
	return r.adminErr(req, err)
}

// adminErr is what Raft's err means for membership request req.
func (r *Replicator) adminErr(req adminRequest, err error) error {
	if errors.Is(err, raft.ErrNotLeader) {
		return errNotLeader
	}
	if err != nil {
		return fmt.Errorf("raftrep: %s %s: %w", req.Op, req.ID, err)
	}
	return nil
}

// serveAdmin answers one membership request from another node.
func (r *Replicator) serveAdmin(br *bufio.Reader, c net.Conn) {
	c.SetDeadline(time.Now().Add(30 * time.Second))
	line, err := br.ReadBytes('\n')
	if err != nil {
		return
	}
	var req adminRequest
	var ans adminAnswer
	if err := json.Unmarshal(line, &req); err != nil {
		ans.Err = "malformed request"
	} else if err := r.doAdmin(req); err != nil {
		ans.Err = err.Error()
		for kind, sentinel := range answerKinds {
			if errors.Is(err, sentinel) {
				ans.Kind = kind
			}
		}
	}
	out, _ := json.Marshal(ans)
	c.Write(append(out, '\n'))
}

// checkPeers warns when peers, the initial cluster this node was started
// with, differ from the members its data dir holds: the list only
// bootstraps a new cluster, and a node with state ignores it (as etcd
// does its --initial-cluster on a restart). Members change with
// AddVoter and RemoveServer.
func (r *Replicator) checkPeers(peers []Peer) {
	f := r.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return
	}
	var have []string
	for _, s := range f.Configuration().Servers {
		have = append(have, string(s.ID)+"="+string(s.Address))
	}
	var want []string
	for _, p := range peers {
		want = append(want, p.ID+"="+p.Addr)
	}
	slices.Sort(have)
	slices.Sort(want)
	if !slices.Equal(have, want) {
		r.log.Warn("raftrep: the initial cluster is ignored: this data dir already holds the cluster's members (change them with latch cluster add and remove)",
			"initial_cluster", strings.Join(want, ","), "members", strings.Join(have, ","))
	}
}
