package main

import (
	"crypto/tls"
	"flag"

	"github.com/latchd/latch/internal/tlsconf"
)

// tlsFlags are the client TLS flags of latch run and latch status.
type tlsFlags struct {
	enable                    bool
	ca, cert, key, serverName string
}

// register defines the flags on fs.
func (f *tlsFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&f.enable, "tls", false, "speak TLS to the server (implied by the other --tls flags)")
	fs.StringVar(&f.ca, "tls-ca", "", "trust the server certificates signed by the CA certificates in this PEM `file` (default: the system's roots)")
	fs.StringVar(&f.cert, "tls-cert", "", "present the client certificate in this PEM `file`, for servers run with --tls-client-ca")
	fs.StringVar(&f.key, "tls-key", "", "the private key of --tls-cert, in this PEM `file`")
	fs.StringVar(&f.serverName, "tls-server-name", "", "expect this `name` in the server's certificate (default: the host of the address)")
}

// config returns the TLS configuration the flags ask for, or nil when they
// ask for none.
func (f *tlsFlags) config() (*tls.Config, error) {
	if !f.enable && f.ca == "" && f.cert == "" && f.key == "" && f.serverName == "" {
		return nil, nil
	}
	return tlsconf.Client(f.ca, f.cert, f.key, f.serverName)
}
