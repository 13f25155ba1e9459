package memcache

import "strings"

// protocolVersion is the memcached version whose protocol latch speaks:
// text and binary, with touch and gat (memcached 1.5.3), without the meta
// commands (1.6). It is the version the version commands answer first and
// the stats' version: clients parse it (libmemcached reads numbers from the
// start of the version and fails on anything else; npm's memcached wants
// the first word to end in MAJOR.MINOR.PATCH, and throws otherwise).
//
// A client may expect the strictness of the version announced:
// libmemcached's memccapable checks that version and quit with extra tokens
// answer ERROR when the version reads as below 1.6, as memcached 1.5 did,
// and that they are ignored otherwise, as memcached 1.6 and yrmcds (whose
// "yrmcds version 1.1.9" it takes for 1.6 or later) do. Latch answers as
// memcached 1.5.
const protocolVersion = "1.5.3"

// wireVersion is what the version commands answer: protocolVersion, then,
// after a space, latch's own version v as "latch-" and one word, for
// example "1.5.3 latch-v0.4.0" or "1.5.3 latch-devel-0123abcd-dirty":
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
