package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// Cluster is the Raft cluster the server's node belongs to, for
// GET /v1/cluster and the membership actions. Its methods may be slow (a
// request to the leader); they honour ctx.
type Cluster interface {
	// Status returns the node's view of the cluster.
	Status(ctx context.Context) (ClusterStatus, error)
	// Add adds a voting member id, reachable at raftAddr; Remove removes
	// one; Transfer hands the leadership to id ("" for any other member).
	// An error wraps ErrNoMember when id is not a member (Remove,
	// Transfer), ErrInvalidMember when raftAddr is not HOST:PORT or is
	// another member's (Add).
	Add(ctx context.Context, id, raftAddr string) error
	Remove(ctx context.Context, id string) error
	Transfer(ctx context.Context, id string) error
}

// Errors of a Cluster's membership actions, answered 404 and 400.
var (
	ErrNoMember      = errors.New("no such member")
	ErrInvalidMember = errors.New("invalid member")
)

// ClusterStatus is GET /v1/cluster.
type ClusterStatus struct {
	// Mode is "memory" (one node, nothing on disk), "durable" (one node,
	// on disk) or "cluster".
	Mode string `json:"mode"`
	// Node is the answering node's id; Leader the leader's, "" while
	// there is none.
	Node   string `json:"node"`
	Leader string `json:"leader"`
	// Members are the cluster's voters, in configuration order.
	Members []ClusterMember `json:"members"`
	// Term, CommitIndex and AppliedIndex are Raft's, as this node knows
	// them; the difference of the last two is how far its state lags.
	Term         uint64 `json:"term"`
	CommitIndex  uint64 `json:"commit_index"`
	AppliedIndex uint64 `json:"applied_index"`
}

// ClusterMember is one member of the cluster.
type ClusterMember struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
	// State is "leader", "follower" (its heartbeat commits), or
	// "unreachable" (none for a node TTL).
	State string `json:"state"`
}

// GET /v1/cluster
func (s *Server) getCluster(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Cluster == nil {
		s.writeJSON(w, http.StatusOK, ClusterStatus{Mode: "memory", Members: []ClusterMember{}})
		return
	}
	st, err := s.cfg.Cluster.Status(r.Context())
	if err != nil {
		s.writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	s.writeJSON(w, http.StatusOK, st)
}

// POST /v1/cluster/members (id, raft_addr), /v1/cluster/members/{id}/remove
// and /v1/cluster/transfer (id, optional).
func (s *Server) clusterAction(op string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.Cluster == nil {
			s.writeError(w, http.StatusConflict, "not a cluster node")
			return
		}
		var err error
		id := r.FormValue("id")
		switch op {
		case "add":
			if id == "" || r.FormValue("raft_addr") == "" {
				s.writeError(w, http.StatusBadRequest, "want id and raft_addr")
				return
			}
			if err := checkHostPort(r.FormValue("raft_addr")); err != nil {
				s.writeError(w, http.StatusBadRequest, err.Error())
				return
			}
			err = s.cfg.Cluster.Add(r.Context(), id, r.FormValue("raft_addr"))
		case "remove":
			id = r.PathValue("id")
			err = s.cfg.Cluster.Remove(r.Context(), id)
		case "transfer":
			err = s.cfg.Cluster.Transfer(r.Context(), id)
		}
		if err != nil {
			s.log.Warn("admin: cluster "+op+" failed", "id", id, "remote", r.RemoteAddr, "err", err)
			code := http.StatusBadGateway
			switch {
			case errors.Is(err, ErrNoMember):
				code = http.StatusNotFound
			case errors.Is(err, ErrInvalidMember):
				code = http.StatusBadRequest
			}
			s.writeError(w, code, err.Error())
			return
		}
		s.log.Info("admin: cluster "+op, "id", id, "remote", r.RemoteAddr)
		s.getCluster(w, r)
	}
}

// checkHostPort checks a new member's Raft address: HOST:PORT, with a host
// and a port number.
func checkHostPort(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if n, perr := strconv.Atoi(port); err != nil || host == "" || perr != nil || n < 1 || n > 65535 {
		return fmt.Errorf("raft_addr %q: want HOST:PORT", addr)
	}
	return nil
}

// Cluster reads GET /v1/cluster.
func (c *Client) Cluster(ctx context.Context) (ClusterStatus, error) {
	var st ClusterStatus
	err := c.getJSON(ctx, "/v1/cluster", &st)
	return st, err
}

// ClusterAction posts a membership action: op is "add" (id, raftAddr),
// "remove" (id) or "transfer" (id, or "" for any member). token is the
// admin token, if the server requires one.
func (c *Client) ClusterAction(ctx context.Context, op, id, raftAddr, token string) (ClusterStatus, error) {
	form := url.Values{}
	path := "/v1/cluster/transfer"
	switch op {
	case "add":
		path = "/v1/cluster/members"
		form.Set("id", id)
		form.Set("raft_addr", raftAddr)
	case "remove":
		path = "/v1/cluster/members/" + url.PathEscape(id) + "/remove"
	case "transfer":
		form.Set("id", id)
	default:
		return ClusterStatus{}, fmt.Errorf("admin: unknown cluster action %q", op)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.Base+path, strings.NewReader(form.Encode()))
	if err != nil {
		return ClusterStatus{}, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := c.do(req, token)
	if err != nil {
		return ClusterStatus{}, fmt.Errorf("admin: cluster %s: %w", op, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return ClusterStatus{}, fmt.Errorf("admin: cluster %s: %s: %s", op, resp.Status, bytes.TrimSpace(body))
	}
	var st ClusterStatus
	if err := json.Unmarshal(body, &st); err != nil {
		return ClusterStatus{}, fmt.Errorf("admin: cluster %s: %w", op, err)
	}
	return st, nil
}
