package main

import (
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/latchd/latch/internal/admin"
	"github.com/latchd/latch/internal/sdnotify"
)

// readyPoll is how often "latch serve" asks its server whether it serves
// yet, to tell systemd.
const readyPoll = 50 * time.Millisecond

// serviceManager tells systemd how "latch serve" is doing when systemd
// started it with NOTIFY_SOCKET (Type=notify): READY=1 once the server
// serves (its front ends listen and its node has caught up with its
// cluster: what /readyz answers 200 to), RELOADING=1 then READY=1 around
// a SIGHUP reload, STOPPING=1 when shutdown begins, and STATUS= lines.
// Without NOTIFY_SOCKET it does nothing. A notification that fails is
// logged once and never stops the server.
type serviceManager struct {
	n      *sdnotify.Notifier
	logger *slog.Logger

	stop chan struct{} // closed when shutdown begins
	done chan struct{} // closed when the readiness watch ends

	mu     sync.Mutex
	ready  bool // READY=1 was sent
	failed bool // a notification failed (logged)
}

// newServiceManager returns the serviceManager of the socket named by
// NOTIFY_SOCKET's value socket.
func newServiceManager(socket string, logger *slog.Logger) *serviceManager {
	m := &serviceManager{logger: logger, stop: make(chan struct{}), done: make(chan struct{})}
	n, err := sdnotify.New(socket)
	if err != nil {
		logger.Warn("not telling systemd how the server is doing", "err", err)
		n = &sdnotify.Notifier{}
	}
	m.n = n
	return m
}

// notify sends lines, logging the first failure. Called with mu held.
func (m *serviceManager) notify(lines ...string) {
	if err := m.n.Notify(lines...); err != nil && !m.failed {
		m.failed = true
		m.logger.Warn("cannot notify systemd", "err", err)
	}
}

// watchReady sends READY=1 once ready returns nil, asking every
// readyPoll, unless shutdown begins first; until then STATUS says why it
// is not ready.
func (m *serviceManager) watchReady(ready func() error) {
	if !m.n.Enabled() {
		close(m.done)
		return
	}
	go func() {
		defer close(m.done)
		t := time.NewTicker(readyPoll)
		defer t.Stop()
		var said string
		for {
			m.mu.Lock()
			err := ready()
			if err == nil {
				m.ready = true
				m.notify(sdnotify.Ready, sdnotify.Status("serving"))
				m.mu.Unlock()
				return
			}
			if why := err.Error(); why != said {
				said = why
				m.notify(sdnotify.Status(why))
			}
			m.mu.Unlock()
			select {
			case <-t.C:
			case <-m.stop:
				return
			}
		}
	}()
}

// reload runs reload, telling systemd (RELOADING=1, then READY=1) when it
// was told the server is ready; before then a reload changes nothing it
// knows.
func (m *serviceManager) reload(reload func() admin.Reloaded) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.ready {
		reload()
		return
	}
	m.notify(sdnotify.Reloading, sdnotify.MonotonicUsec(), sdnotify.Status("reloading"))
	r := reload()
	m.notify(sdnotify.Ready, sdnotify.Status(fmt.Sprintf("serving; reloaded: %d changed, %d kept, %d need a restart",
		len(r.Changed), len(r.Kept), len(r.Restart))))
}

// stopping tells systemd that shutdown begins, after the readiness watch
// ended (so that READY=1 never follows STOPPING=1).
func (m *serviceManager) stopping() {
	close(m.stop)
	<-m.done
	m.mu.Lock()
	defer m.mu.Unlock()
	m.notify(sdnotify.Stopping, sdnotify.Status("shutting down"))
}
