package resp

import (
	"crypto/sha1"
	"encoding/hex"
	"strings"
)

// Scripts. latch runs no Lua: the scripts that Redis lock libraries send
// are recognised, by the SHA1 of their exact text or by the SHA1 of their
// canonical form (Canonical), and each runs as one native lock operation
// (a template). A script that is not recognised is refused, never guessed.
//
// The table holds digests only: the libraries' script texts stay theirs.
// The tests read them from the installed libraries and check that each
// one is recognised as the template this table names.

// template is one native lock operation that stands for a family of
// scripts: what their KEYS and ARGV mean and how the reply is made.
type template uint8

const (
	tmplNone template = iota
	// tmplCAD: compare-and-delete. GET KEYS[1] == ARGV[1] → DEL: :1,
	// else :0.
	tmplCAD
	// tmplCADMissing: as tmplCAD, but :-1 when the key is not held
	// (redsync v4.12+).
	tmplCADMissing
	// tmplCAPX: compare-and-pexpire ARGV[2] ms: :1 or :0.
	tmplCAPX
	// tmplCAPXOrSetNX: compare-and-pexpire, else SET NX PX: :1 or :0
	// (redsync WithSetNXOnExtend).
	tmplCAPXOrSetNX
	// tmplExtendPy: redis-py's extend: ARGV token, ms, "0" (add to what
	// is left) or "1" (replace); :1 or :0.
	tmplExtendPy
	// tmplExtendPyAdd: redis-py 2.10-3.4's extend, which always adds.
	tmplExtendPyAdd
	// tmplObtain: bsm/redislock's obtain: SET NX PX ARGV[3], or re-obtain
	// when the first ARGV[2] bytes of the value agree: +OK or null.
	tmplObtain
	// tmplPTTLIf: bsm/redislock's TTL: PTTL if GET == ARGV[1], else :-3.
	tmplPTTLIf
	// tmplAcquireAll: node-redlock's acquire: every KEY free → SET PX
	// ARGV[2] each: #KEYS, else :0.
	tmplAcquireAll
	// tmplReleaseCount: node-redlock's release: DEL each key whose value
	// is ARGV[1]; the count.
	tmplReleaseCount
	// tmplExtendAll: node-redlock's extend: every key's value is ARGV[1]
	// → SET PX ARGV[2] each: #KEYS, else :0.
	tmplExtendAll
)

var templateNames = map[template]string{
	tmplCAD:          "compare-and-delete",
	tmplCADMissing:   "compare-and-delete (-1 when missing)",
	tmplCAPX:         "compare-and-pexpire",
	tmplCAPXOrSetNX:  "compare-and-pexpire or set-nx",
	tmplExtendPy:     "redis-py extend",
	tmplExtendPyAdd:  "redis-py extend (adding)",
	tmplObtain:       "redislock obtain",
	tmplPTTLIf:       "redislock pttl",
	tmplAcquireAll:   "redlock acquire",
	tmplReleaseCount: "redlock release",
	tmplExtendAll:    "redlock extend",
}

func (t template) String() string { return templateNames[t] }

// knownScripts maps the SHA1 of a script's exact text, or of its
// canonical form (prefixed "c:"), to its template. Sources: the scripts of
// go-redsync/redsync v1-v4, bsm/redislock v0.9, redis-py's Lock (2.10 to
// today), node-redlock 4.x and 5.x, and the compare-and-delete script of
// the Redis documentation's SET page.
var knownScripts = map[string]template{
	// redsync v4.12+: delete (-1 when missing), touch, touch-or-setnx.
	"e950836ed1e694540c503ef9972b8de518044d3b": tmplCADMissing,
	"d75bb8b5bd13532ddedd17762e772346e39b321e": tmplCAPX,
	"b6b55c439e02c6f52ffb8be7ec8c0d0ac816ea79": tmplCAPXOrSetNX,
	// redsync v1-v4.11: delete, touch.
	"00583931c4e4d483f6233879c133c71ed5393f9d": tmplCAD,
	"53692746b44cae854b8dfa32b177218bbe40baee": tmplCAPX,
	// bsm/redislock v0.9: obtain, refresh, release, pttl.
	"80a1b5f2cfccec3b7119ba7721d2127682b691a7": tmplObtain,
	"a7aba3bc5d6e99b3003da8b9d80a63b9f4092ecf": tmplCAPX,
	"cf0e94b2e9ffc7e04395cf88f7583fc309985910": tmplCAD,
	"6484da7d58920897fdc22b7f9afd1a3d47524ea8": tmplPTTLIf,
	// redis-py Lock: release, extend (3.5+), extend (2.10-3.4), reacquire.
	"c3f8721cbb97f72bc19e972846bd7aaf91901658": tmplCAD,
	"a4e8783852e6b949f9ef3a97212805108459a890": tmplExtendPy,
	"4a484ac024e9b025224cd9f8e1d59dbf3c15d00d": tmplExtendPyAdd,
	"1cac51482acf5858da00f6d685d68f886cd6b6b2": tmplCAPX,
	// node-redlock 4.2.0: lock, unlock, extend; 5.0.0-beta: acquire,
	// release, extend.
	"e5a322e2634ef59a516e8ea150cb085afafee684": tmplAcquireAll,
	"0f0f23b9048b36752b5be114f357ba083449f908": tmplReleaseCount,
	"ce46f80993d5dac20dd066eb301a4e37994bdbed": tmplExtendAll,
	"96da70f7716f27d278a5218544df37fd8b0a5e4c": tmplAcquireAll,
	"e4612211c9f8f51c257e26e056b0a654b3187242": tmplReleaseCount,
	"aed6f382e410db8ba7926d4e5e9aab410bf2a78a": tmplExtendAll,
}

// knownLines gives, for each script of knownScripts that reads its key as
// a string, the line of its first such read (redis.call of GET or
// GETRANGE): the line a Redis 7 names when that read fails with WRONGTYPE
// ("script: <sha1>, on @user_script:<line>."). A script text loaded by
// EVAL or SCRIPT LOAD has its line computed (readLine); the tests check
// these against the installed clients' texts.
var knownLines = map[string]int{
	"e950836ed1e694540c503ef9972b8de518044d3b": 2,
	"d75bb8b5bd13532ddedd17762e772346e39b321e": 2,
	"b6b55c439e02c6f52ffb8be7ec8c0d0ac816ea79": 2,
	"00583931c4e4d483f6233879c133c71ed5393f9d": 2,
	"53692746b44cae854b8dfa32b177218bbe40baee": 2,
	"80a1b5f2cfccec3b7119ba7721d2127682b691a7": 5,
	"a7aba3bc5d6e99b3003da8b9d80a63b9f4092ecf": 1,
	"cf0e94b2e9ffc7e04395cf88f7583fc309985910": 1,
	"6484da7d58920897fdc22b7f9afd1a3d47524ea8": 1,
	"c3f8721cbb97f72bc19e972846bd7aaf91901658": 2,
	"a4e8783852e6b949f9ef3a97212805108459a890": 2,
	"4a484ac024e9b025224cd9f8e1d59dbf3c15d00d": 2,
	"1cac51482acf5858da00f6d685d68f886cd6b6b2": 2,
	"0f0f23b9048b36752b5be114f357ba083449f908": 5,
	"ce46f80993d5dac20dd066eb301a4e37994bdbed": 4,
	"e4612211c9f8f51c257e26e056b0a654b3187242": 5,
	"aed6f382e410db8ba7926d4e5e9aab410bf2a78a": 4,
}

// canonicalScripts maps the SHA1 of a canonical form (Canonical) to its
// template: the same scripts written with other spacing, comments, quotes
// or command-name case are recognised too.
var canonicalScripts = map[string]template{
	"431f8b0689baa2a78179a9d84b54b5ae214d6570": tmplCADMissing,   // redsync v4.12+ delete
	"9d30577306265133f7a60d8c1b0eaaadc2e23103": tmplCAPXOrSetNX,  // redsync touch-or-setnx
	"dc8ad6110baa7f60ed379b4db40a165d3c7e1ae1": tmplCAPX,         // redsync touch, redislock refresh
	"8f4d42e76cbb4fad0f45e575441b8a269ebc173c": tmplCAD,          // redislock release, the SET page's script
	"30cd4ff7ff9dea263f0fc63566fdf123fef27591": tmplPTTLIf,       // redislock pttl
	"b19c94448ea1aebe54aa951eff3aac50ccb31f4e": tmplObtain,       // redislock obtain
	"6013ae0c95eeba7b3e33a88fc8d25a77f4b550fe": tmplCAD,          // redis-py release
	"d8a398966e7abc78a880ed5663c322deb19842b9": tmplExtendPy,     // redis-py extend
	"c71cad0a6ec0d7d5ebef9ee0a7da090bd349b10e": tmplCAPX,         // redis-py reacquire
	"ac8ebd377ea580fc4c09132a44e6ef8232ecc74a": tmplAcquireAll,   // redlock 4.2 and 5 acquire
	"d170c1b6d0d1e4e4392607d9d8789dc336c35116": tmplReleaseCount, // redlock 4.2 and 5 release
	"c7f6c5c6ca5364fbc13470f6ed147a8f6b7473a7": tmplExtendAll,    // redlock 4.2 and 5 extend
}

// scriptSHA returns the hex SHA1 of a script text, Redis's script name.
func scriptSHA(body []byte) string {
	sum := sha1.Sum(body)
	return hex.EncodeToString(sum[:])
}

// recognise returns the template of a script text, or tmplNone.
func recognise(body []byte) template {
	if t, ok := knownScripts[scriptSHA(body)]; ok {
		return t
	}
	sum := sha1.Sum([]byte(Canonical(body)))
	return canonicalScripts[hex.EncodeToString(sum[:])]
}

// Canonical returns the canonical form of a Lua script: its tokens
// separated by single spaces, without comments; string literals in double
// quotes, with their contents as written; and the command name that is the
// first argument of redis.call or redis.pcall in lower case. Two scripts
// that differ only in layout, comments, quote style or the case of their
// command names have the same canonical form. Input that does not lex as
// Lua still gives a form (the unlexable bytes as tokens); it just matches
// nothing known.
func Canonical(src []byte) string {
	toks := luaTokens(string(src))
	for i := 0; i+4 < len(toks); i++ {
		if toks[i] == "redis" && toks[i+1] == "." && (toks[i+2] == "call" || toks[i+2] == "pcall") &&
			toks[i+3] == "(" && strings.HasPrefix(toks[i+4], `"`) {
			toks[i+4] = strings.ToLower(toks[i+4])
		}
	}
	return strings.Join(toks, " ")
}

// readLine returns the line of a script's first read of a key as a string
// (redis.call of GET or GETRANGE), where Redis reports a WRONGTYPE error
// of the script; 0 when it has none.
func readLine(src []byte) int {
	toks, lines := luaTokenLines(string(src))
	for i := 0; i+4 < len(toks); i++ {
		if toks[i] == "redis" && toks[i+1] == "." && toks[i+2] == "call" && toks[i+3] == "(" {
			if c := strings.ToLower(toks[i+4]); c == `"get"` || c == `"getrange"` {
				return lines[i]
			}
		}
	}
	return 0
}

// luaTokens splits Lua source into tokens, dropping spaces and comments.
// Strings become one token each, in double quotes.
func luaTokens(s string) []string {
	toks, _ := luaTokenLines(s)
	return toks
}

// luaTokenLines is luaTokens, with the line (from 1) each token starts on.
func luaTokenLines(s string) (toks []string, lines []int) {
	line, seen := 1, 0
	at := func(i int) int {
		line += strings.Count(s[seen:i], "\n")
		seen = i
		return line
	}
	i, start := 0, 0 // start: where the last token began
	defer func() {
		for len(lines) < len(toks) {
			lines = append(lines, at(start))
		}
	}()
	for i < len(s) {
		for len(lines) < len(toks) {
			lines = append(lines, at(start))
		}
		start = i
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f':
			i++
		case strings.HasPrefix(s[i:], "--"):
			i += 2
			if lvl, ok := longBracket(s[i:]); ok {
				end := strings.Index(s[i:], "]"+strings.Repeat("=", lvl)+"]")
				if end < 0 {
					return toks, lines
				}
				i += end + lvl + 2
				continue
			}
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case c == '"' || c == '\'':
			j := i + 1
			for j < len(s) && s[j] != c {
				if s[j] == '\\' {
					j++
				}
				j++
			}
			j = min(j, len(s))
			toks = append(toks, `"`+s[i+1:j]+`"`)
			i = j + 1
		case c == '[':
			if lvl, ok := longBracket(s[i:]); ok {
				open := lvl + 2
				end := strings.Index(s[i+open:], "]"+strings.Repeat("=", lvl)+"]")
				if end < 0 {
					toks = append(toks, `"`+s[i+open:]+`"`)
					return toks, lines
				}
				toks = append(toks, `"`+s[i+open:i+open+end]+`"`)
				i += open + end + lvl + 2
				continue
			}
			toks = append(toks, "[")
			i++
		case isWord(c):
			j := i
			for j < len(s) && (isWord(s[j]) || s[j] == '.' && c >= '0' && c <= '9') {
				j++
			}
			toks = append(toks, s[i:j])
			i = j
		default:
			n := 1
			for _, op := range []string{"...", "..", "==", "~=", "<=", ">=", "::", "//", "<<", ">>"} {
				if strings.HasPrefix(s[i:], op) {
					n = len(op)
					break
				}
			}
			toks = append(toks, s[i:i+n])
			i += n
		}
	}
	return toks, lines
}

// longBracket reports whether s starts with a long bracket "[==[" and its
// level (the number of '=').
func longBracket(s string) (int, bool) {
	if len(s) < 2 || s[0] != '[' {
		return 0, false
	}
	lvl := 0
	for 1+lvl < len(s) && s[1+lvl] == '=' {
		lvl++
	}
	return lvl, 1+lvl < len(s) && s[1+lvl] == '['
}

func isWord(c byte) bool {
	return c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}
