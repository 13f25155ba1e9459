package client

import "time"

// clock is the Client's source of time, for keepalives and for the
// deadlines after which it gives a session or a lease up. Tests replace it.
type clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine once d has passed.
	AfterFunc(d time.Duration, f func()) stopper
}

type stopper interface {
	Stop() bool
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) AfterFunc(d time.Duration, f func()) stopper { return time.AfterFunc(d, f) }
