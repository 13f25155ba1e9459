package fsm

import (
	"errors"
	"testing"
	"time"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/znode"
)

// TestZSession: a ZooKeeper session's ephemerals end with it, whatever
// ends it, in the command that ends it; a write from a connection the
// session moved away from changes nothing.
func TestZSession(t *testing.T) {
	pw := []byte("0123456789abcdef")
	eph := AppendZOps(nil, []znode.Op{{Kind: znode.OpCreate, Path: "/e", Mode: znode.Ephemeral, ACL: []znode.ACL{{Perms: znode.PermAll, Scheme: "world", ID: "anyone"}}}})
	for _, tc := range []struct {
		name string
		end  func(s *State, id latch.SessionID, at int64) (Result, []latch.SessionID)
	}{
		{"expiry", func(s *State, id latch.SessionID, at int64) (Result, []latch.SessionID) {
			var r Result
			s.Apply(&Command{Op: OpTick, At: at + int64(5*time.Second)}, &r)
			_, ended := s.TakeZ(nil, nil)
			return r, ended
		}},
		{"close", func(s *State, id latch.SessionID, at int64) (Result, []latch.SessionID) {
			var r Result
			s.Apply(&Command{Op: OpEndSession, At: at, Session: id}, &r)
			_, ended := s.TakeZ(nil, nil)
			return r, ended
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newState(t)
			at := int64(time.Hour)
			var r Result
			s.Apply(&Command{Op: OpZOpen, At: at, TTL: 4 * time.Second, Value: pw}, &r)
			if r.Err != nil || r.Session == 0 {
				t.Fatalf("z-open: %+v", r)
			}
			id := r.Session
			s.Apply(&Command{Op: OpZWrite, At: at, Session: id, Value: eph}, &r)
			if r.Err != nil || len(r.Z) != 1 || r.Z[0].Code != znode.OK {
				t.Fatalf("z-write: %+v", r)
			}
			s.TakeZ(nil, nil)
			zxid := s.Tree().Zxid()
			if r, ended := tc.end(s, id, at+1); r.Err != nil || len(ended) != 1 || ended[0] != id {
				t.Fatalf("end: %+v, ended %v", r, ended)
			}
			if _, ok := s.Tree().Exists("/e"); ok {
				t.Error("ephemeral outlived its session")
			}
			if s.Tree().Zxid() <= zxid {
				t.Error("the session's end took no zxid")
			}
			s.Apply(&Command{Op: OpZAttach, At: at + 2, Session: id, Value: pw}, &r)
			if !errors.Is(r.Err, ErrZSession) {
				t.Errorf("attach of an ended session: %v, want ErrZSession", r.Err)
			}
		})
	}

	t.Run("moved", func(t *testing.T) {
		s := newState(t)
		var r Result
		s.Apply(&Command{Op: OpZOpen, At: 1, TTL: 4 * time.Second, Value: pw}, &r)
		id := r.Session
		s.Apply(&Command{Op: OpZAttach, At: 2, Session: id, Value: []byte("0123456789abcdeX")}, &r)
		if !errors.Is(r.Err, ErrZSession) {
			t.Fatalf("attach with a wrong password: %v", r.Err)
		}
		s.Apply(&Command{Op: OpZAttach, At: 2, Session: id, Value: pw}, &r)
		if r.Err != nil || r.Count != 1 || r.TTL != 4*time.Second {
			t.Fatalf("attach: %+v", r)
		}
		s.Apply(&Command{Op: OpZWrite, At: 3, Session: id, Gen: 0, Value: eph}, &r)
		if !errors.Is(r.Err, ErrSuperseded) {
			t.Errorf("write of the old generation: %v, want ErrSuperseded", r.Err)
		}
		if _, ok := s.Tree().Exists("/e"); ok {
			t.Error("a superseded write changed the tree")
		}
		// An attach proposed when the session was of generation 0 (its
		// connection given up on while it waited) comes after the one
		// that overtook it: it must not take the session back.
		s.Apply(&Command{Op: OpZAttach, At: 4, Session: id, Gen: 0, Value: pw}, &r)
		if !errors.Is(r.Err, ErrSuperseded) {
			t.Errorf("overtaken attach: %v, want ErrSuperseded", r.Err)
		}
		if g := s.Gen(id); g != 1 {
			t.Errorf("generation after an overtaken attach: %d, want 1", g)
		}
		s.Apply(&Command{Op: OpZAttach, At: 5, Session: id, Gen: 1, Value: pw}, &r)
		if r.Err != nil || r.Count != 2 {
			t.Errorf("attach of the current generation: %+v", r)
		}
	})
}
