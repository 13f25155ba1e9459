package admin

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/latchd/latch"
)

// Page sizes of GET /v1/locks.
const (
	defaultLimit = 500
	maxLimit     = 10000
)

// writeJSON answers v as JSON with the given status.
func (s *Server) writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	if err := enc.Encode(v); err != nil {
		s.log.Debug("admin: writing a response", "err", err)
	}
}

// writeError answers {"error": msg}.
func (s *Server) writeError(w http.ResponseWriter, status int, msg string) {
	s.writeJSON(w, status, Error{Error: msg})
}

// GET /v1/locks?prefix=&after=&limit=
func (s *Server) getLocks(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := defaultLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			s.writeError(w, http.StatusBadRequest, fmt.Sprintf("invalid limit %q: want a positive integer", v))
			return
		}
		limit = min(n, maxLimit)
	}
	// One more than asked tells whether there is a next page.
	infos := s.cfg.Service.Locks(q.Get("prefix"), q.Get("after"), limit+1)
	now := time.Now()
	list := LockList{Locks: make([]Lock, 0, min(len(infos), limit)), Time: Time{now}}
	for i, ki := range infos {
		if i == limit {
			list.Next = infos[limit-1].Key
			break
		}
		list.Locks = append(list.Locks, toLock(ki, now))
	}
	s.writeJSON(w, http.StatusOK, list)
}

// GET /v1/locks/{key...}
func (s *Server) getLock(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("key")
	ki, ok := s.cfg.Service.Lock(key)
	if !ok {
		s.writeError(w, http.StatusNotFound, fmt.Sprintf("key %q is neither held nor waited for", key))
		return
	}
	s.writeJSON(w, http.StatusOK, toLock(ki, time.Now()))
}

// GET /v1/sessions
func (s *Server) getSessions(w http.ResponseWriter, r *http.Request) {
	infos := s.cfg.Service.Sessions()
	list := SessionList{Sessions: make([]Session, len(infos)), Time: Time{time.Now()}}
	for i, si := range infos {
		list.Sessions[i] = toSession(si)
	}
	s.writeJSON(w, http.StatusOK, list)
}

// POST /v1/locks/{key...}/release
func (s *Server) releaseLock(w http.ResponseWriter, r *http.Request) {
	key, ok := strings.CutSuffix(r.PathValue("key"), "/release")
	if !ok {
		s.writeError(w, http.StatusNotFound, "want POST /v1/locks/{key}/release")
		return
	}
	reason := r.FormValue("reason")
	n, err := s.cfg.Service.ForceRelease(key)
	if err != nil {
		status := http.StatusInternalServerError
		if errors.Is(err, latch.ErrInvalidKey) {
			status = http.StatusBadRequest
		} else if errors.Is(err, latch.ErrShutdown) {
			status = http.StatusServiceUnavailable
		}
		s.log.Warn("admin: force-release failed", "key", key, "remote", r.RemoteAddr, "reason", reason, "err", err)
		s.writeError(w, status, err.Error())
		return
	}
	s.log.Info("admin: force-release", "key", key, "holders", n, "remote", r.RemoteAddr, "reason", reason)
	s.writeJSON(w, http.StatusOK, Released{Key: key, Released: n})
}

// POST /v1/sessions/{id}/end
func (s *Server) endSession(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseUint(r.PathValue("id"), 10, 64)
	if err != nil || id == 0 {
		s.writeError(w, http.StatusBadRequest, fmt.Sprintf("invalid session id %q", r.PathValue("id")))
		return
	}
	reason := r.FormValue("reason")
	if err := s.cfg.Service.EndSession(latch.SessionID(id)); err != nil {
		status := http.StatusInternalServerError
		if errors.Is(err, latch.ErrNoSession) {
			status = http.StatusNotFound
		}
		s.log.Warn("admin: end-session failed", "session", id, "remote", r.RemoteAddr, "reason", reason, "err", err)
		s.writeError(w, status, err.Error())
		return
	}
	s.log.Info("admin: end-session", "session", id, "remote", r.RemoteAddr, "reason", reason)
	s.writeJSON(w, http.StatusOK, Ended{Session: id, Ended: true})
}

// authorize lets a request through to h if no token is in force or it
// carries "Authorization: Bearer TOKEN".
func (s *Server) authorize(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		want := s.token.Load()
		if want == nil {
			h.ServeHTTP(w, r)
			return
		}
		auth := r.Header.Get("Authorization")
		tok, ok := strings.CutPrefix(auth, "Bearer ")
		got := sha256.Sum256([]byte(strings.TrimSpace(tok)))
		if !ok || subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
			s.log.Warn("admin: refused an action without a valid token", "method", r.Method, "path", r.URL.Path,
				"remote", r.RemoteAddr, "token_given", auth != "")
			w.Header().Set("WWW-Authenticate", `Bearer realm="latch admin"`)
			s.writeError(w, http.StatusUnauthorized, "admin token required: Authorization: Bearer TOKEN")
			return
		}
		h.ServeHTTP(w, r)
	})
}

// reload serves POST /v1/reload: the server reloads its settings, as on
// SIGHUP, and the answer says what changed and what was kept (200 either
// way: Reloaded.OK tells).
func (s *Server) reload(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Reload == nil {
		s.writeError(w, http.StatusNotImplemented, "this server cannot reload")
		return
	}
	s.log.Info("admin: reload", "remote", r.RemoteAddr)
	s.writeJSON(w, http.StatusOK, s.cfg.Reload())
}
