package dlock

import (
	"bufio"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	pb "github.com/latchd/latch/dlockpb"
)

// Token is an access token and what it allows. A request carrying it in
// access_token may do what the token allows, and is answered Unauthorized
// (version 2: General "Unauthorized: ...") otherwise.
type Token struct {
	// Value is the secret a request carries in access_token.
	Value string
	// ReadOnly limits the token to the requests that touch no lock: Ping
	// and, in version 3, Session. Lock, Unlock, Renew and Cancel are
	// refused. A read-only token suits health checks.
	ReadOnly bool
	// Prefixes, when not empty, limit the keys that Lock, Unlock and Renew
	// may name to those that start with one of them; a request naming any
	// other key is refused as a whole. Empty: every key.
	Prefixes []string
}

// allowsKey reports whether t lets a request name key.
func (t *Token) allowsKey(key string) bool {
	if len(t.Prefixes) == 0 {
		return true
	}
	for _, p := range t.Prefixes {
		if strings.HasPrefix(key, p) {
			return true
		}
	}
	return false
}

// allows reports why t does not allow req, or nil when it does.
func (t *Token) allows(req *pb.Request) error {
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
			if !t.allowsKey(k) {
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
	if len(s.cfg.Tokens) == 0 {
		return nil
	}
	got := []byte(req.GetAccessToken())
	var tok *Token
	// Compare with every token, so that the time taken does not tell
	// which one matched, or how much of it.
	for i := range s.cfg.Tokens {
		t := &s.cfg.Tokens[i]
		if subtle.ConstantTimeCompare(got, []byte(t.Value)) == 1 {
			tok = t
		}
	}
	if tok == nil || len(got) == 0 {
		return errUnauthorized
	}
	return tok.allows(req)
}

// checkTokens reports what is wrong with toks: an empty value or prefix, a
// value given twice, a read-only token with prefixes.
func checkTokens(toks []Token) error {
	var errs []error
	seen := make(map[string]bool, len(toks))
	for i, t := range toks {
		switch {
		case t.Value == "":
			errs = append(errs, fmt.Errorf("access token %d is empty", i+1))
		case seen[t.Value]:
			errs = append(errs, fmt.Errorf("access token %d is given twice", i+1))
		case t.ReadOnly && len(t.Prefixes) > 0:
			errs = append(errs, fmt.Errorf("access token %d is read-only and has key prefixes, which only lock rights use", i+1))
		}
		seen[t.Value] = true
		for _, p := range t.Prefixes {
			if p == "" {
				errs = append(errs, fmt.Errorf("access token %d has an empty key prefix", i+1))
			}
		}
	}
	return errors.Join(errs...)
}

// Rights of a token in a tokens file.
const (
	rightsLock = "lock"
	rightsRead = "read"
)

// LoadTokens reads access tokens from the file at path, as ReadTokens does.
func LoadTokens(path string) ([]Token, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("dlock: access tokens: %w", err)
	}
	defer f.Close()
	toks, err := ReadTokens(f)
	if err != nil {
		return nil, fmt.Errorf("dlock: access tokens in %s: %w", path, err)
	}
	return toks, nil
}

// ReadTokens reads access tokens, one per line:
//
//	TOKEN [RIGHTS [PREFIX...]]
//
// Fields are separated by white space. RIGHTS is "lock" (the default: every
// request) or "read" (Ping and Session only); the PREFIXes, after "lock",
// limit the keys the token may lock, unlock and renew to those that start
// with one of them. Empty lines and lines starting with '#' are skipped. A
// line with only a token is the format of earlier versions: it allows
// everything. A file without any token is an error, as it would refuse
// every request.
func ReadTokens(r io.Reader) ([]Token, error) {
	var toks []Token
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		t := Token{Value: f[0]}
		if len(f) > 1 {
			switch f[1] {
			case rightsLock:
				if len(f) > 2 {
					t.Prefixes = f[2:]
				}
			case rightsRead:
				if len(f) > 2 {
					return nil, fmt.Errorf("line %d: a read-only token takes no key prefix", n)
				}
				t.ReadOnly = true
			default:
				return nil, fmt.Errorf("line %d: rights %q: want %q or %q (TOKEN [RIGHTS [PREFIX...]])", n, f[1], rightsLock, rightsRead)
			}
		}
		toks = append(toks, t)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(toks) == 0 {
		return nil, errors.New("no token (one per line: TOKEN [RIGHTS [PREFIX...]]; '#' starts a comment)")
	}
	if err := checkTokens(toks); err != nil {
		return nil, err
	}
	return toks, nil
}
