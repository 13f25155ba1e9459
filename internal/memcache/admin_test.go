package memcache

import (
	"testing"

	"github.com/latchd/latch"
)

// TestAdminFreesItemLock: a memcached lock is one lock, in the lock table
// and on the item. An operator who force-releases the key, or ends the
// holder's session, frees the item too: another connection can then write
// and lock it, and the old holder's unlock answers that it holds no lock.
// (Before the item cache moved under the node, both answered LOCKED after
// the lock table said the key was free.)
func TestAdminFreesItemLock(t *testing.T) {
	for _, tc := range []struct {
		name  string
		admin func(ts *testServer, holder latch.SessionID) error
	}{
		{"force-release", func(ts *testServer, _ latch.SessionID) error {
			n, err := ts.svc.ForceRelease("fk")
			if err == nil && n != 1 {
				t.Errorf("ForceRelease(fk) released %d holders, want 1", n)
			}
			return err
		}},
		{"end-session", func(ts *testServer, holder latch.SessionID) error {
			return ts.svc.EndSession(holder)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := newTestServer(t)
			a, b := ts.dialInteractive(), ts.dialInteractive()
			defer a.finish()
			defer b.finish()
			if got := a.exchange([]byte("set fk 0 0 1\r\nx\r\nlock fk\r\n")); string(got) != "STORED\r\nOK\r\n" {
				t.Fatalf("A: set, lock = %q", got)
			}
			locks := ts.svc.Locks("", "", 0)
			if len(locks) != 1 || len(locks[0].Holders) != 1 {
				t.Fatalf("lock table before the admin action: %+v", locks)
			}
			if err := tc.admin(ts, locks[0].Holders[0].Session); err != nil {
				t.Fatalf("admin action: %v", err)
			}
			if locks := ts.svc.Locks("", "", 0); len(locks) != 0 {
				t.Fatalf("lock table after the admin action: %+v", locks)
			}
			if st := ts.svc.ItemStats(); st.LockedItems != 0 {
				t.Fatalf("items still locked after the admin action: %d", st.LockedItems)
			}
			if got := b.exchange([]byte("set fk 0 0 1\r\ny\r\nlock fk\r\n")); string(got) != "STORED\r\nOK\r\n" {
				t.Fatalf("B: set, lock = %q, want STORED, OK", got)
			}
			if tc.name == "force-release" {
				// A's connection lives on, holding nothing: its writes
				// are refused and its unlock is not-locked.
				if got := a.exchange([]byte("set fk 0 0 1\r\nz\r\nunlock fk\r\n")); string(got) != "LOCKED\r\n"+rNotLocked {
					t.Fatalf("A after losing the lock: set, unlock = %q, want LOCKED, %q", got, rNotLocked)
				}
			}
			if got := b.exchange([]byte("get fk\r\nunlock fk\r\n")); string(got) != "VALUE fk 0 1\r\ny\r\nEND\r\nOK\r\n" {
				t.Fatalf("B: get, unlock = %q", got)
			}
		})
	}
}

// TestWritesObeyItemLocksOnly pins a decision: a key held over another
// protocol (dlock, here the service directly) is LOCKED to memcached's
// lock, but the item's writes still work: the holder holds the name, not
// the item.
func TestWritesObeyItemLocksOnly(t *testing.T) {
	ts := newTestServer(t)
	other, err := ts.svc.OpenSession(latch.SessionOptions{Protocol: "dlock"})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.Acquire(t.Context(), latch.LockRequest{Keys: []string{"xk"}}); err != nil {
		t.Fatal(err)
	}
	c := ts.dialInteractive()
	defer c.finish()
	if got := c.exchange([]byte("set xk 0 0 1\r\nx\r\nlock xk\r\nappend xk 0 0 1\r\ny\r\nget xk\r\n")); string(got) != "STORED\r\nLOCKED\r\nSTORED\r\nVALUE xk 0 2\r\nxy\r\nEND\r\n" {
		t.Fatalf("set, lock, append, get of a key held over dlock = %q", got)
	}
}
