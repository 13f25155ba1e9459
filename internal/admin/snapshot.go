package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// GET /v1/snapshot: a backup of the node's committed state, one file
// (internal/backup), taken without stopping the node. It is an admin
// action: it carries every lock, session and item, so it needs the admin
// token when one is set.
func (s *Server) getSnapshot(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Snapshot == nil {
		s.writeError(w, http.StatusNotImplemented, "this server takes no snapshots")
		return
	}
	start := time.Now()
	file, name, err := s.cfg.Snapshot(r.Context())
	if err != nil {
		s.log.Warn("admin: snapshot failed", "remote", r.RemoteAddr, "err", err)
		s.writeError(w, http.StatusServiceUnavailable, "snapshot: "+err.Error())
		return
	}
	s.log.Info("admin: snapshot", "bytes", len(file), "took", time.Since(start), "remote", r.RemoteAddr)
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(len(file)))
	w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", name))
	w.Write(file)
}

// Snapshot fetches GET /v1/snapshot and returns the backup file as the
// server sent it, whole (a short body is an error). token is the admin
// token, if the server requires one.
func (c *Client) Snapshot(ctx context.Context, token string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.Base+"/v1/snapshot", nil)
	if err != nil {
		return nil, fmt.Errorf("admin client: %w", err)
	}
	resp, err := c.do(req, token)
	if err != nil {
		return nil, fmt.Errorf("admin client: snapshot: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return nil, fmt.Errorf("admin client: snapshot: %s: %s", resp.Status, errorText(body))
	}
	file, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("admin client: snapshot: after %d bytes: %w", len(file), err)
	}
	if resp.ContentLength >= 0 && int64(len(file)) != resp.ContentLength {
		return nil, fmt.Errorf("admin client: snapshot: %d bytes of %d", len(file), resp.ContentLength)
	}
	return file, nil
}

// errorText is the message of an API error body, or the body.
func errorText(body []byte) string {
	var e Error
	if err := json.Unmarshal(body, &e); err == nil && e.Error != "" {
		return e.Error
	}
	return string(body)
}
