package memcache

import "strings"

// protocolVersion is the memcached version whose protocol latch speaks:
// text and binary, with touch and gat, as memcached 1.6 and yrmcds speak
// them (the version and quit commands ignore extra tokens), without the
// meta commands. It is the version the version commands answer first and
// the stats' version: clients parse it (libmemcached reads numbers from the
// start of the version and fails on anything else; npm's memcached wants
// the first word to end in MAJOR.MINOR.PATCH, and throws otherwise), and
// libmemcached's memccapable picks by it what it expects of extra tokens
// (below 1.6: ERROR, as memcached 1.5 answered).
const protocolVersion = "1.6.0"

// wireVersion is what the version commands answer: protocolVersion, then,
// after a space, latch's own version v as "latch-" and one word, for
// example "1.6.0 latch-v0.4.0" or "1.6.0 latch-devel-0123abcd-dirty":
// characters other than letters, digits, '.' and '-' become '-'.
func wireVersion(v string) string {
	return protocolVersion + " latch-" + versionWord(v)
}

// versionWord turns v into one word of letters, digits, '.' and '-'.
func versionWord(v string) string {
	v = strings.TrimSpace(v)
	if v == "" {
		return "unknown"
	}
	return strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == '.' || r == '-' {
			return r
		}
		return '-'
	}, v)
}
