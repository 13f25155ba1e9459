// Package tlsconf builds the crypto/tls configurations of latch's servers
// and clients from PEM files: a server certificate for every listener, and
// optionally the CA that client certificates must chain to; a client's CA
// pool, certificate and server name.
//
// Every configuration it returns requires TLS 1.2 or later and otherwise
// keeps crypto/tls's defaults (cipher suites, curves), which are safe.
// Server and Client read their files once; Files keeps a configuration in
// step with its files, read again on Reload and, when they change, during
// handshakes, so that certificates rotate without a restart.
package tlsconf
