package netserve

import (
	"bufio"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// Token is an access token a client presents (dlock's access_token,
// Redis's AUTH), and what it allows. What "a change" is belongs to each
// protocol; the token only says whether it may make them, and on which
// keys.
type Token struct {
	// Value is the secret the client presents.
	Value string
	// ReadOnly limits the client to requests that change no lock (a ping,
	// a session's keep-alive, reads): a read-only token suits health
	// checks.
	ReadOnly bool
	// Prefixes, when not empty, limit the keys the client may name to
	// those that start with one of them. Empty: every key.
	Prefixes []string
}

// AllowsKey reports whether t lets a client name key.
func (t *Token) AllowsKey(key string) bool {
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

// Match returns the token of toks whose value is got, or nil when there is
// none (an empty got matches nothing). It compares got with every token, so
// that the time taken tells neither which one matched nor how much of it.
func Match(toks []Token, got []byte) *Token {
	var tok *Token
	for i := range toks {
		if subtle.ConstantTimeCompare(got, []byte(toks[i].Value)) == 1 {
			tok = &toks[i]
		}
	}
	if len(got) == 0 {
		return nil
	}
	return tok
}

// CheckTokens reports what is wrong with toks: an empty value or prefix, a
// value given twice, a read-only token with prefixes.
func CheckTokens(toks []Token) error {
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
		return nil, fmt.Errorf("access tokens: %w", err)
	}
	defer f.Close()
	toks, err := ReadTokens(f)
	if err != nil {
		return nil, fmt.Errorf("access tokens in %s: %w", path, err)
	}
	return toks, nil
}

// ReadTokens reads access tokens, one per line:
//
//	TOKEN [RIGHTS [PREFIX...]]
//
// Fields are separated by white space. RIGHTS is "lock" (the default:
// every request) or "read" (requests that change no lock); the PREFIXes,
// after "lock", limit the keys the token may name to those that start with
// one of them. Empty lines and lines starting with '#' are skipped. A line
// with only a token allows everything. A file without any token is an
// error, as it would refuse every client.
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
	if err := CheckTokens(toks); err != nil {
		return nil, err
	}
	return toks, nil
}
