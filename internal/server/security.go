package server

import (
	"crypto/tls"

	"github.com/latchd/latch/internal/tlsconf"
)

// tlsConfig returns the TLS configuration every listener serves with, or
// nil when the configuration sets no certificate: then every listener
// serves plaintext.
func (s *Server) tlsConfig() (*tls.Config, error) {
	c := s.cfg.TLS
	if c.Cert == "" {
		return nil, nil
	}
	return tlsconf.Server(c.Cert, c.Key, c.ClientCA)
}
