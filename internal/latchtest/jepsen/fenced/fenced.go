// Package fenced is the resource a lock protects in a Jepsen-style run: a
// register per key holding a list of values, which refuses every read and
// write whose fencing token is below the newest token it has seen for the
// key. Holders read the list with their token and write it back with their
// value appended. With fencing off (the control run), it takes every token,
// as a resource that trusts its clients' locks would.
package fenced

import (
	"errors"
	"slices"
	"sync"

	"github.com/latchd/latch/internal/latchtest/jepsen/check"
)

// ErrStale: the token is below the newest the register has seen for the
// key; nothing was read or written.
var ErrStale = errors.New("fenced: stale token")

// Register is the fenced store. It is safe for concurrent use.
type Register struct {
	fencing bool
	mu      sync.Mutex
	keys    map[string]*entry
}

type entry struct {
	newest   uint64
	list     []int
	accepted []check.Accepted
}

// New returns an empty register; fencing false makes it take every token.
func New(fencing bool) *Register {
	return &Register{fencing: fencing, keys: make(map[string]*entry)}
}

func (r *Register) entry(key string) *entry {
	e := r.keys[key]
	if e == nil {
		e = &entry{}
		r.keys[key] = e
	}
	return e
}

// admit checks token against the newest seen for e, and records it.
func (r *Register) admit(e *entry, token uint64) error {
	if r.fencing && token < e.newest {
		return ErrStale
	}
	e.newest = max(e.newest, token)
	return nil
}

// Read returns key's list, read with token.
func (r *Register) Read(key string, token uint64) ([]int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.entry(key)
	if err := r.admit(e, token); err != nil {
		return nil, err
	}
	return slices.Clone(e.list), nil
}

// Write replaces key's list with list, written by owner with token; add
// is the value the owner appended (recorded with the accepted write).
func (r *Register) Write(key string, token uint64, owner string, list []int, add int) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.entry(key)
	if err := r.admit(e, token); err != nil {
		return err
	}
	e.list = slices.Clone(list)
	e.accepted = append(e.accepted, check.Accepted{Token: token, Owner: owner, Add: add})
	return nil
}

// State returns every key's list and the writes it accepted, in order.
func (r *Register) State() (map[string][]int, map[string][]check.Accepted) {
	r.mu.Lock()
	defer r.mu.Unlock()
	lists := make(map[string][]int, len(r.keys))
	accepted := make(map[string][]check.Accepted, len(r.keys))
	for k, e := range r.keys {
		lists[k] = slices.Clone(e.list)
		accepted[k] = slices.Clone(e.accepted)
	}
	return lists, accepted
}
