package admin

import (
	"fmt"
	"time"

	"github.com/latchd/latch"
)

// timeLayout is RFC 3339 with nine fractional digits, always: fixed width,
// so that times sort as strings.
const timeLayout = "2006-01-02T15:04:05.000000000Z07:00"

// Time is a time in the JSON API: RFC 3339 in UTC with nanoseconds. The
// zero Time is left out of objects (omitzero).
type Time struct{ time.Time }

// MarshalJSON implements json.Marshaler.
func (t Time) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, len(timeLayout)+2)
	b = append(b, '"')
	b = t.UTC().AppendFormat(b, timeLayout)
	return append(b, '"'), nil
}

// UnmarshalJSON implements json.Unmarshaler; it accepts any RFC 3339 time.
func (t *Time) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	if len(b) < 2 || b[0] != '"' || b[len(b)-1] != '"' {
		return fmt.Errorf("admin: time %s is not a string", b)
	}
	v, err := time.Parse(time.RFC3339Nano, string(b[1:len(b)-1]))
	if err != nil {
		return fmt.Errorf("admin: %w", err)
	}
	t.Time = v
	return nil
}

// LockList is the answer of GET /v1/locks.
type LockList struct {
	Locks []Lock `json:"locks"`
	// Next, when set, is the after parameter that fetches the next page.
	Next string `json:"next,omitempty"`
	Time Time   `json:"time"` // when the list was taken
}

// Lock is one key of the lock table.
type Lock struct {
	Key string `json:"key"`
	// Mode is "exclusive" or "shared" while the key is held; empty
	// otherwise.
	Mode string `json:"mode,omitempty"`
	// Limit is the shared limit, 0 for none.
	Limit        uint32   `json:"limit,omitempty"`
	DelayedUntil Time     `json:"delayed_until,omitzero"`
	Holders      []Holder `json:"holders"`
	Waiters      []Waiter `json:"waiters"` // in queue order
}

// Holder is one holder of a key.
type Holder struct {
	// Session is 0 for a lease that outlived its session.
	Session     uint64  `json:"session"`
	Protocol    string  `json:"protocol,omitempty"`
	Peer        string  `json:"peer,omitempty"`
	Token       uint64  `json:"token,string"`
	AcquiredAt  Time    `json:"acquired_at"`
	HeldSeconds float64 `json:"held_seconds"`
	// LeaseExpiresAt is when the lease ends; absent without a lease.
	LeaseExpiresAt Time `json:"lease_expires_at,omitzero"`
	// Owner is the owner value of a lock held by value (Redis clients);
	// absent for a session's lock.
	Owner string `json:"owner,omitempty"`
}

// Waiter is one request waiting for a key.
type Waiter struct {
	Session       uint64  `json:"session"`
	Protocol      string  `json:"protocol,omitempty"`
	Peer          string  `json:"peer,omitempty"`
	Mode          string  `json:"mode"`
	Position      int     `json:"position"` // requests ahead of it in the queue: 0 at the head
	WaitingSince  Time    `json:"waiting_since"`
	WaitedSeconds float64 `json:"waited_seconds"`
	// Deadline is when the request gives up; absent when it waits forever.
	Deadline Time `json:"deadline,omitzero"`
	Keys     int  `json:"keys"` // how many keys the request names
}

// SessionList is the answer of GET /v1/sessions.
type SessionList struct {
	Sessions []Session `json:"sessions"`
	Time     Time      `json:"time"`
}

// Session is one live session.
type Session struct {
	ID         uint64  `json:"id"`
	Protocol   string  `json:"protocol,omitempty"`
	Peer       string  `json:"peer,omitempty"`
	OpenedAt   Time    `json:"opened_at"`
	TTLSeconds float64 `json:"ttl_seconds,omitempty"`
	ExpiresAt  Time    `json:"expires_at,omitzero"`
	Held       int     `json:"held"`
	Waiting    int     `json:"waiting"`
	// Ephemerals are the paths of a ZooKeeper session's ephemeral
	// znodes, in path order ([] when it has none); absent for any other
	// session.
	Ephemerals []string `json:"ephemerals,omitzero"`
}

// Released is the answer of POST /v1/locks/{key}/release.
type Released struct {
	Key      string `json:"key"`
	Released int    `json:"released"` // holders removed
}

// Ended is the answer of POST /v1/sessions/{id}/end.
type Ended struct {
	Session uint64 `json:"session"`
	Ended   bool   `json:"ended"`
}

// Error is the body of every error answer.
type Error struct {
	Error string `json:"error"`
}

func seconds(d time.Duration) float64 { return d.Seconds() }

func toLock(ki latch.KeyInfo, now time.Time) Lock {
	l := Lock{
		Key:          ki.Key,
		Limit:        ki.Limit,
		DelayedUntil: Time{ki.DelayedUntil},
		Holders:      make([]Holder, len(ki.Holders)),
		Waiters:      make([]Waiter, len(ki.Waiters)),
	}
	if len(ki.Holders) > 0 {
		l.Mode = ki.Mode.String()
	}
	for i, h := range ki.Holders {
		l.Holders[i] = Holder{
			Session:        uint64(h.Session),
			Protocol:       h.Protocol,
			Peer:           h.Peer,
			Token:          uint64(h.Token),
			AcquiredAt:     Time{h.Acquired},
			HeldSeconds:    seconds(max(now.Sub(h.Acquired), 0)),
			LeaseExpiresAt: Time{h.Expires},
			Owner:          h.Owner,
		}
	}
	for i, w := range ki.Waiters {
		l.Waiters[i] = Waiter{
			Session:       uint64(w.Session),
			Protocol:      w.Protocol,
			Peer:          w.Peer,
			Mode:          w.Mode.String(),
			Position:      w.Position,
			WaitingSince:  Time{w.Since},
			WaitedSeconds: seconds(max(now.Sub(w.Since), 0)),
			Deadline:      Time{w.Deadline},
			Keys:          w.Keys,
		}
	}
	return l
}

func toSession(si latch.SessionInfo) Session {
	return Session{
		ID:         uint64(si.ID),
		Protocol:   si.Protocol,
		Peer:       si.Peer,
		OpenedAt:   Time{si.Opened},
		TTLSeconds: seconds(si.TTL),
		ExpiresAt:  Time{si.Expires},
		Held:       si.Held,
		Waiting:    si.Waiting,
		Ephemerals: si.Ephemerals,
	}
}

// Reloaded is the answer of POST /v1/reload: what a reload of the
// settings changed, what it kept and why.
type Reloaded struct {
	// OK is true when every setting read was applied: Kept and Restart
	// are empty.
	OK bool `json:"ok"`
	// Changed names what runs with new settings from now on: certificates,
	// token files, the admin token, allow-lists, the log level.
	Changed []string `json:"changed"`
	// Kept names what kept its settings in force, each with the reason (a
	// certificate that does not load, a token file with an error).
	Kept []string `json:"kept"`
	// Restart names the settings that were changed but apply only after a
	// restart; they keep their values in force until then.
	Restart []string `json:"restart"`
}
