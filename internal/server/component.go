package server

import "context"

// A component is a front end the server runs beside the lock service: the
// listener of one protocol, or the admin HTTP server.
//
// The server calls Start once, in order, before New returns; and Shutdown
// once, in reverse order, for every component whose Start succeeded.
type component interface {
	// Name names the component in logs and errors, for example "memcache".
	Name() string

	// Start begins serving and returns once the component is ready (its
	// listener bound) or has failed. It does not block while serving: the
	// component runs its own goroutines.
	Start() error

	// Shutdown stops the component: it stops accepting, closes its
	// connections, and returns when its goroutines have ended. When ctx is
	// done first, it closes what is left at once and returns ctx.Err().
	Shutdown(ctx context.Context) error
}

// frontEnds returns the components s's configuration enables, in start
// order. There are none yet: the memcached, dlock and admin HTTP front ends
// join here, each built over s.node, as their protocols arrive.
func (s *Server) frontEnds() ([]component, error) {
	return nil, nil
}
