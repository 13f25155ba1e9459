package server

import (
	"context"
	"fmt"

	"github.com/latchd/latch/internal/cache"
	"github.com/latchd/latch/internal/memcache"
)

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
// order, each built over s.node.
func (s *Server) frontEnds() ([]component, error) {
	var comps []component
	if addr := s.cfg.Memcache.Addr; addr != "" {
		mc, err := memcache.New(s.node, memcache.Config{
			Addr: addr,
			Cache: cache.Config{
				MemoryLimit: int64(s.cfg.Memcache.MemoryMB) << 20,
				MaxItemSize: s.cfg.Memcache.MaxItemSize,
			},
			Version: s.cfg.Server.Version,
			Logger:  s.logger,
		})
		if err != nil {
			return nil, fmt.Errorf("server: %w", err)
		}
		s.memcache = mc
		comps = append(comps, mc)
	}
	return comps, nil
}
