package server

import (
	"crypto/tls"

	"github.com/latchd/latch/internal/tlsconf"
)

// tlsConfig returns the TLS configuration every listener serves with, or
// nil when the configuration sets no certificate: then every listener
// serves plaintext. Its certificate follows its files (s.tls: reloads,
// and handshakes after the files change).
func (s *Server) tlsConfig() (*tls.Config, error) {
	c := s.cfg.TLS
	if c.Cert == "" {
		return nil, nil
	}
	f, err := tlsconf.NewFiles("tls", c.Cert, c.Key, c.ClientCA, s.logger)
	if err != nil {
		return nil, err
	}
	s.tls = f
	return f.Server(), nil
}
