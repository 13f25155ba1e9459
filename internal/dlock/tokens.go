package dlock

import (
	"fmt"

	pb "github.com/latchd/latch/dlockpb"
	"github.com/latchd/latch/internal/netserve"
)

// tokenAllows reports why t does not allow req, or nil when it does: a
// read-only token allows Ping and Session only; key prefixes limit the
// keys of Lock, Unlock and Renew.
func tokenAllows(t *netserve.Token, req *pb.Request) error {
	switch typ := req.GetType(); typ {
	case pb.RequestType_Ping, pb.RequestType_Session:
		return nil
	default:
		if t.ReadOnly {
			return fmt.Errorf("%v: %w: the token is read-only", typ, errForbidden)
		}
		if typ != pb.RequestType_Lock && typ != pb.RequestType_Unlock && typ != pb.RequestType_Renew {
			return nil
		}
		for _, k := range req.GetLock().GetKeys() {
			if !t.AllowsKey(k) {
				if len(k) > 64 {
					k = k[:64] + "..."
				}
				return fmt.Errorf("%v of key %q: %w: the token allows only keys starting with %q",
					typ, k, errForbidden, t.Prefixes)
			}
		}
		return nil
	}
}

// authorize checks req's access token, when the server has tokens: it must
// be one of them, and allow req.
func (s *Server) authorize(req *pb.Request) error {
	toks := *s.tokens.Load()
	if len(toks) == 0 {
		return nil
	}
	tok := netserve.Match(toks, []byte(req.GetAccessToken()))
	if tok == nil {
		return errUnauthorized
	}
	return tokenAllows(tok, req)
}
