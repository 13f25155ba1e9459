package engine

import (
	"bytes"
	"fmt"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/latchd/latch"
)

// TestCaptureOwned: a capture open across each change of owned holds (the
// model sequences of TestCaptureModel have none) writes the snapshot of
// the instant it was taken.
func TestCaptureOwned(t *testing.T) {
	tests := []struct {
		name   string
		change func(e *Engine) error
	}{
		{"replace the owner", func(e *Engine) error {
			_, _, _, err := e.ReplaceOwner(2, "a", "bob", false)
			return err
		}},
		{"take over", func(e *Engine) error {
			_, _, _, err := e.ReplaceOwner(2, "a", "bob", true)
			return err
		}},
		{"renew", func(e *Engine) error {
			_, _, _, err := e.RenewOwned(2, "a", time.Minute)
			return err
		}},
		{"release", func(e *Engine) error {
			_, err := e.ReleaseOwned(2, "a")
			return err
		}},
		{"acquire another", func(e *Engine) error {
			_, _, err := e.AcquireOwned(2, []string{"c"}, []byte("carol"), time.Second)
			return err
		}},
		{"the lease ends", func(e *Engine) error {
			e.Tick(int64(time.Hour))
			return nil
		}},
	}
	for _, tt := range tests {
		for _, steps := range []int{0, 1} { // changed before any Step, or after one
			t.Run(tt.name, func(t *testing.T) {
				e := New(Config{})
				for _, k := range []string{"a", "b"} {
					if _, _, err := e.AcquireOwned(1, []string{k}, []byte("alice"), time.Second); err != nil {
						t.Fatal(err)
					}
				}
				want := e.AppendSnapshot(nil)
				c := e.Capture()
				c.Step(steps)
				if err := tt.change(e); err != nil {
					t.Fatal(err)
				}
				if !c.Step(math.MaxInt) {
					t.Fatal("Step(MaxInt) left the capture incomplete")
				}
				if got := c.AppendTo(nil); !bytes.Equal(got, want) {
					t.Fatalf("the capture wrote\n%x\nwant\n%x", got, want)
				}
				if e.capture != nil {
					t.Fatal("the complete capture is still open")
				}
			})
		}
	}
}

// TestCaptureClosed: a capture replaced by another, or closed, is told of
// no more changes; the engine keeps one open at most.
func TestCaptureClosed(t *testing.T) {
	e := New(Config{})
	s, _ := e.OpenSession(0, SessionOptions{})
	if _, _, err := e.Acquire(0, s, latch.LockRequest{Keys: []string{"a"}}); err != nil {
		t.Fatal(err)
	}
	first := e.Capture()
	second := e.Capture()
	if first.open || e.capture != second {
		t.Fatal("a second Capture left the first open")
	}
	if first.Step(math.MaxInt) {
		t.Fatal("a capture replaced half way reports itself complete")
	}
	second.Close()
	second.Close()
	if e.capture != nil {
		t.Fatal("Close left the capture open")
	}
	if _, err := e.Release(1, s, []string{"a"}); err != nil {
		t.Fatal(err)
	}
}

// TestCaptureAcrossRebuild: the maps of sessions, keys and waiters drain
// far below their peaks, and are rebuilt smaller (peakmap), while a
// capture ranges over them, before it reaches them or half way; the
// capture ranges over the maps it began with and still writes the
// snapshot of its instant, without the entries made after it.
func TestCaptureAcrossRebuild(t *testing.T) {
	const nkeys, nwaiters = 4096, 1100
	for _, between := range []int{0, 10, 600, 2500, 5000} {
		t.Run(fmt.Sprintf("steps of %d", between), func(t *testing.T) {
			e := New(Config{})
			holder, _ := e.OpenSession(0, SessionOptions{})
			keys := make([]string, nkeys)
			for i := range keys {
				keys[i] = fmt.Sprintf("k%04d", i)
			}
			if _, _, err := e.Acquire(0, holder, latch.LockRequest{Keys: keys, Lease: time.Hour}); err != nil {
				t.Fatal(err)
			}
			var waiting []latch.SessionID
			for i := range nwaiters {
				s, _ := e.OpenSession(0, SessionOptions{})
				res, _, err := e.Acquire(0, s, latch.LockRequest{Keys: keys[i : i+1], Wait: latch.WaitForever})
				if err != nil || res.Waiter == 0 {
					t.Fatalf("queue a waiter: %+v, %v", res, err)
				}
				waiting = append(waiting, s)
			}
			want := e.AppendSnapshot(nil)
			maps := [3]uintptr{mapOf(e.keys), mapOf(e.sessions), mapOf(e.waiters)}
			c := e.Capture()
			c.Step(between)
			for _, s := range waiting { // sessions and waiters drain: both maps are rebuilt
				if _, err := e.EndSession(1, s); err != nil {
					t.Fatal(err)
				}
			}
			c.Step(between)
			if _, err := e.Release(2, holder, keys[100:]); err != nil { // and keys
				t.Fatal(err)
			}
			c.Step(between)
			// Entries made after the capture, in the new maps.
			s, _ := e.OpenSession(3, SessionOptions{})
			if _, _, err := e.Acquire(3, s, latch.LockRequest{Keys: []string{"new", keys[200]}}); err != nil {
				t.Fatal(err)
			}
			if _, _, err := e.Acquire(3, s, latch.LockRequest{Keys: keys[:1], Wait: latch.WaitForever}); err != nil {
				t.Fatal(err)
			}
			if !c.Step(math.MaxInt) {
				t.Fatal("Step(MaxInt) left the capture incomplete")
			}
			if got := c.AppendTo(nil); !bytes.Equal(got, want) {
				t.Fatalf("the capture wrote %d bytes, not the %d of its instant", len(got), len(want))
			}
			if mapOf(e.keys) == maps[0] || mapOf(e.sessions) == maps[1] || mapOf(e.waiters) == maps[2] {
				t.Fatal("a map was not rebuilt")
			}
		})
	}
}

// mapOf returns the identity of map m.
func mapOf(m any) uintptr { return reflect.ValueOf(m).Pointer() }
