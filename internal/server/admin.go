package server

import (
	"crypto/tls"
	"errors"
	"net"

	"github.com/latchd/latch/internal/admin"
	"github.com/latchd/latch/internal/metrics"
)

// adminServer builds the admin HTTP server over s.node and s.metrics. It
// starts last, so that it is not ready before the front ends are, and
// stops first. tlsCfg, when not nil, makes it serve HTTPS.
func (s *Server) adminServer(tlsCfg *tls.Config) (*admin.Server, error) {
	token, err := s.cfg.Admin.LoadToken()
	if err != nil {
		return nil, err
	}
	ac := s.cfg.Admin.Config
	ac.Service = s.node
	if s.rep != nil {
		mode := "durable"
		if s.cfg.Cluster.Clustered() {
			mode = "cluster"
		}
		ac.Cluster = clusterView{s: s, mode: mode}
	}
	ac.Metrics = s.metrics
	ac.Token = token
	s.adminToken = token
	ac.Reload = s.Reload
	ac.Ready = s.readiness
	ac.Snapshot = s.snapshot
	ac.Logger = s.logger
	ac.Version = s.cfg.Server.Version
	ac.TLS = tlsCfg
	ad, err := admin.New(ac)
	if err != nil {
		return nil, err
	}
	s.admin = ad
	return ad, nil
}

// readiness is nil while the server serves, from the end of New to the
// start of Shutdown, once its node has caught up with its cluster (its
// clients' reads wait until then).
func (s *Server) readiness() error {
	if !s.ready.Load() {
		return errors.New("starting or shutting down")
	}
	if !s.node.CaughtUp() {
		return errors.New("catching up with the cluster")
	}
	return nil
}

// AdminAddr returns the address the admin HTTP server listens on, or nil
// when it is disabled.
func (s *Server) AdminAddr() net.Addr {
	if s.admin == nil {
		return nil
	}
	return s.admin.Addr()
}

// Metrics returns the server's metrics, for front ends and tests.
func (s *Server) Metrics() *metrics.Metrics {
	return s.metrics
}

// Ready is nil once the server serves: New has returned, Shutdown has not
// begun, and its node has caught up with its cluster. It is what /readyz
// answers, and what "latch serve" tells systemd (READY=1).
func (s *Server) Ready() error {
	return s.readiness()
}
