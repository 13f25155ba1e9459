package zookeeper_test

import (
	"bufio"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/latchd/latch/internal/jute"
	"github.com/latchd/latch/internal/latchtest"
)

// TestDifferential replays jute transcripts against Debian's ZooKeeper 3.8
// and against latch, and compares what each answers: every reply header
// (xid, err, zxid) and record, decoded with internal/jute's records, every
// watch event, and every connection the server closes, in order. Each
// scenario runs under its own root (/d-<name>-<random>), so one ZooKeeper
// serves them all.
//
// What differs by nature is normalised (see normalize): session ids become
// S1, S2... in their order of appearance; passwords are dropped (their
// length and whether they are all zero are kept); zxids (reply headers,
// stats' czxid, mzxid and pzxid) become their rank among the zxids the
// transcript shows (z0, z1...; 0 and -1 stay as they are); ctime and mtime
// are checked (ctime <= mtime, and the times of a transcript's zxids never
// go back as the zxids grow) and dropped, since two writes in one
// millisecond on one server and not on the other would make ranks flaky.
// Children are sorted (ZooKeeper lists them in its hash set's order), as
// are the events a closeSession fires on each connection (ZooKeeper ends
// a session's ephemerals in its hash set's order). Of srvr the keys are
// compared, of mntr whether latch's keys are ZooKeeper's (latchMntrKeys);
// their numbers and the version differ by nature. The built-in znodes'
// stats agree, with nothing normalised but their zxids (0). The
// differences latch keeps on purpose are steps marked deliberate, each
// with its reason; so is the one step left out (a lone check that
// succeeds, which ZooKeeper never answers).
func TestDifferential(t *testing.T) {
	zk := latchtest.StartZooKeeper(t)
	lt := startLatch(t)
	start := time.Now()
	for _, sc := range diffScenarios {
		t.Run(sc.name, func(t *testing.T) {
			root := "/d-" + sc.name + "-" + randHex(4)
			want := replay(t, zk, root, sc.steps, "zk")
			got := replay(t, lt, root, sc.steps, "latch")
			compareTranscripts(t, want, got)
		})
	}
	t.Logf("%d scenarios on both servers in %v", len(diffScenarios), time.Since(start).Round(time.Millisecond))
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// A scenario is a name and its steps, run in order on one server.
type scenario struct {
	name  string
	steps []step
}

type stepKind int

const (
	stepOpen       stepKind = iota // a new connection opens a session
	stepAttach                     // a new connection attaches another connection's session
	stepRequest                    // a request on a connection
	stepDrop                       // the client closes a connection's TCP connection
	stepProbe                      // has the server closed the connection? (else a ping)
	stepWord                       // a four-letter word on a connection of its own
	stepRawConnect                 // a connect request of the step's own
)

// A step is one thing a scenario does, on the connection named conn.
type step struct {
	kind stepKind
	conn string
	// stepRequest: the op, its xid (0: the connection's next), and its
	// record, built when the step runs (paths under the root, marks).
	op  jute.Op
	xid int32
	rec func(r *runner) []byte
	// stepAttach: whose session (with the last zxid its connection saw as
	// lastZxidSeen), and whether with a wrong password.
	of      string
	wrongPw bool
	// mark: remember the zxid of this step's reply under this name.
	mark string
	// closes: the server is to close the connection after its reply
	// (read until it does, within closeWait).
	closes bool
	// stepWord: the word, and how its answer is compared.
	word string
	cmp  wordCmp
	// deliberate: where latch differs from ZooKeeper on purpose: what
	// each answers, and why.
	deliberate *deliberate
	// unordered: the events this step fires come in no order that
	// ZooKeeper defines; each connection's are sorted.
	unordered bool
}

type wordCmp int

const (
	wordExact  wordCmp = iota // the whole answer
	wordKeys                  // the keys of its "key: value" lines
	wordSubset                // latch's keys are some of ZooKeeper's
)

// deliberate describes a step where latch answers otherwise than
// ZooKeeper on purpose: the step's outcome (a reply's code, or a probe's
// "open" or "closed") is checked against what each server is to answer,
// and the transcripts say only whether it was; the connection is not
// used again, as the servers' states may differ from there on.
type deliberate struct {
	why       string
	zk, latch string
}

func (s step) saving(mark string) step { s.mark = mark; return s }
func (s step) closing() step           { s.closes = true; return s }
func (s step) differs(why string, zk, latch string) step {
	s.deliberate = &deliberate{why: why, zk: zk, latch: latch}
	return s
}

// check logs whether outcome is what server is to answer.
func (d *deliberate) check(r *runner, zc *zconn, what, outcome string) {
	want := d.zk
	if r.server == "latch" {
		want = d.latch
	}
	if outcome == want {
		r.logf("%s: %s: the deliberate difference (%s)", zc.name, what, d.why)
	} else {
		r.logf("%s: %s -> %s, want %s (deliberate: %s)", zc.name, what, outcome, want, d.why)
	}
	zc.live = false
}

// Step constructors. Paths starting with "~" are under the scenario's root.

func open(c string) step { return step{kind: stepOpen, conn: c} }

// attach: connection c attaches the session of connection of with its
// password and the last zxid of seen.
func attach(c, of string) step { return step{kind: stepAttach, conn: c, of: of} }

func attachWrong(c, of string) step { return step{kind: stepAttach, conn: c, of: of, wrongPw: true} }

func drop(c string) step  { return step{kind: stepDrop, conn: c} }
func probe(c string) step { return step{kind: stepProbe, conn: c} }

func word(w string, cmp wordCmp) step { return step{kind: stepWord, conn: w, word: w, cmp: cmp} }

func request(c string, op jute.Op, rec func(r *runner) []byte) step {
	return step{kind: stepRequest, conn: c, op: op, rec: rec}
}

var anyone = []jute.ACL{{Perms: jute.PermAll, Scheme: "world", ID: "anyone"}}

func mkCreate(c string, op jute.Op, path, data string, flags int32) step {
	return request(c, op, func(r *runner) []byte {
		return (&jute.CreateRequest{Path: r.p(path), Data: []byte(data), ACL: anyone, Flags: flags}).Append(nil)
	})
}

func create(c, path, data string, flags int32) step {
	return mkCreate(c, jute.OpCreate, path, data, flags)
}
func create2(c, path, data string, flags int32) step {
	return mkCreate(c, jute.OpCreate2, path, data, flags)
}
func createContainer(c, path string, flags int32) step {
	return mkCreate(c, jute.OpCreateContainer, path, "", flags)
}

func createACL(c, path string, acl []jute.ACL) step {
	return request(c, jute.OpCreate, func(r *runner) []byte {
		return (&jute.CreateRequest{Path: r.p(path), ACL: acl}).Append(nil)
	})
}

func createTTL(c, path string, flags int32, ttl int64) step {
	return request(c, jute.OpCreateTTL, func(r *runner) []byte {
		b := (&jute.CreateRequest{Path: r.p(path), ACL: anyone, Flags: flags}).Append(nil)
		return jute.AppendLong(b, ttl)
	})
}

func del(c, path string, version int32) step {
	return request(c, jute.OpDelete, func(r *runner) []byte {
		return (&jute.DeleteRequest{Path: r.p(path), Version: version}).Append(nil)
	})
}

func exists(c, path string, watch bool) step {
	return request(c, jute.OpExists, func(r *runner) []byte {
		return (&jute.ExistsRequest{Path: r.p(path), Watch: watch}).Append(nil)
	})
}

func getData(c, path string, watch bool) step {
	return request(c, jute.OpGetData, func(r *runner) []byte {
		return (&jute.GetDataRequest{Path: r.p(path), Watch: watch}).Append(nil)
	})
}

func setData(c, path, data string, version int32) step {
	return request(c, jute.OpSetData, func(r *runner) []byte {
		return (&jute.SetDataRequest{Path: r.p(path), Data: []byte(data), Version: version}).Append(nil)
	})
}

func getChildren(c, path string, watch bool) step {
	return request(c, jute.OpGetChildren, func(r *runner) []byte {
		return (&jute.GetChildrenRequest{Path: r.p(path), Watch: watch}).Append(nil)
	})
}

func getChildren2(c, path string, watch bool) step {
	return request(c, jute.OpGetChildren2, func(r *runner) []byte {
		return (&jute.GetChildrenRequest{Path: r.p(path), Watch: watch}).Append(nil)
	})
}

func getACL(c, path string) step {
	return request(c, jute.OpGetACL, func(r *runner) []byte {
		return (&jute.GetACLRequest{Path: r.p(path)}).Append(nil)
	})
}

func setACL(c, path string, acl []jute.ACL, version int32) step {
	return request(c, jute.OpSetACL, func(r *runner) []byte {
		return (&jute.SetACLRequest{Path: r.p(path), ACL: acl, Version: version}).Append(nil)
	})
}

func check(c, path string, version int32) step {
	return request(c, jute.OpCheck, func(r *runner) []byte {
		return (&jute.CheckVersionRequest{Path: r.p(path), Version: version}).Append(nil)
	})
}

func syncReq(c, path string) step {
	return request(c, jute.OpSync, func(r *runner) []byte {
		return (&jute.SyncRequest{Path: r.p(path)}).Append(nil)
	})
}

func ping(c string) step {
	s := request(c, jute.OpPing, nil)
	s.xid = jute.XidPing
	return s
}

// closeSession: the session's ephemerals go in the order of ZooKeeper's
// hash set (latch's: path order), so the events they fire are sorted.
func closeSession(c string) step {
	s := request(c, jute.OpCloseSession, nil).closing()
	s.unordered = true
	return s
}

func watchesOp(c string, op jute.Op, path string, typ jute.WatcherType) step {
	return request(c, op, func(r *runner) []byte {
		return (&jute.CheckWatchesRequest{Path: r.p(path), Type: typ}).Append(nil)
	})
}

// setWatches: as the Java client sends it after a reconnect (xid -8),
// relative to the zxid of mark rel.
func setWatches(c, rel string, data, exist, child []string) step {
	s := request(c, jute.OpSetWatches, func(r *runner) []byte {
		ps := func(in []string) []string {
			out := make([]string, len(in))
			for i, p := range in {
				out[i] = r.p(p)
			}
			return out
		}
		z, ok := r.marks[rel]
		if !ok {
			r.t.Fatalf("no mark %q", rel)
		}
		return (&jute.SetWatches{RelativeZxid: z, DataWatches: ps(data), ExistWatches: ps(exist), ChildWatches: ps(child)}).Append(nil)
	})
	s.xid = jute.XidSetWatches
	return s
}

func auth(c, scheme, cred string) step {
	s := request(c, jute.OpAuth, func(*runner) []byte {
		return (&jute.AuthPacket{Scheme: scheme, Auth: []byte(cred)}).Append(nil)
	})
	s.xid = jute.XidAuth
	return s
}

// mop is one op of a multi.
type mop struct {
	op      jute.Op
	path    string
	data    string
	flags   int32
	version int32
}

func multi(c string, ops ...mop) step {
	return request(c, jute.OpMulti, func(r *runner) []byte {
		var m jute.MultiRequest
		for _, o := range ops {
			m.Ops = append(m.Ops, jute.MultiOp{Type: o.op, Path: r.p(o.path), Data: []byte(o.data), ACL: anyone, Flags: o.flags, Version: o.version})
		}
		return m.Append(nil)
	})
}

// raw: a request of op with the record given as is.
func raw(c string, op jute.Op, rec []byte) step {
	return request(c, op, func(*runner) []byte { return rec })
}

// The create modes.
const (
	persistent   = 0
	ephemeral    = 1
	sequential   = 2
	ephSeq       = 3
	containerFlg = 4
)

// diffScenarios are the transcripts TestDifferential replays. Every one
// starts with connection "a" opening a session and creating the root "~"
// (runner.begin).
var diffScenarios = []scenario{
	{"create-modes", []step{
		create("a", "~/p", "d", persistent),
		create("a", "~/e", "", ephemeral),
		create("a", "~/s-", "x", sequential),
		create("a", "~/es-", "", ephSeq),
		create("a", "~/c", "", containerFlg),
		create2("a", "~/p2", "dd", persistent),
		create2("a", "~/e2", "", ephemeral),
		create2("a", "~/s2-", "", sequential),
		create2("a", "~/es2-", "", ephSeq),
		create2("a", "~/c2", "", containerFlg),
		createContainer("a", "~/cc", containerFlg),
		createContainer("a", "~/cc-p", persistent),
		createContainer("a", "~/cc-e", ephemeral),
		create("a", "~/sc", "", persistent),
		// ZooKeeper takes a createContainer with a sequential flag as a
		// sequential container; latch's containers have no sequence, and
		// no client sends one (the Java client and go-zookeeper send
		// createContainer for the container mode only).
		createContainer("a", "~/sc/s-", sequential).
			differs("latch has no sequential containers: it refuses createContainer with a sequential flag", "OK", "BADARGUMENTS"),
		createContainer("a", "~/sc/es-", ephSeq).
			differs("latch has no sequential containers: it refuses createContainer with a sequential flag", "OK", "BADARGUMENTS"),
		createContainer("a", "~/cc-bad", 7),
		createContainer("a", "~/cc-ttl", 5),
		create("a", "~/cc-e/child", "", ephemeral),
		create("a", "~/bad-mode", "", 7),
		create("a", "~/ttl-mode", "", 5),
		createTTL("a", "~/ttl", 5, 1000),
		createTTL("a", "~/ttl0", 0, 1000),
		create("a", "~/c/child", "", persistent),
		create("a", "~/null", "", persistent),
		getData("a", "~/p", false),
		getData("a", "~/c", false),
		getData("a", "~/e2", false),
		getChildren2("a", "~", false),
		exists("a", "~/cc", false),
	}},
	{"create-errors", []step{
		create("a", "~/x", "", persistent),
		create("a", "~/x", "", persistent),
		create2("a", "~/x", "", ephemeral),
		create("a", "~/none/x", "", persistent),
		create2("a", "~/none/s-", "", sequential),
		create("a", "~/e", "", ephemeral),
		create("a", "~/e/child", "", persistent),
		create("a", "~/e/s-", "", ephSeq),
		create("a", "~/x/c", "", persistent),
		del("a", "~/x", -1),
		del("a", "~/x/c", -1),
		del("a", "~/x/c", -1),
		create("a", "~/v", "", persistent),
		setData("a", "~/v", "1", 0),
		setData("a", "~/v", "2", 0),
		setData("a", "~/v", "3", -1),
		del("a", "~/v", 0),
		check("a", "~/v", 0),
		// A check that succeeds, sent alone, ZooKeeper 3.8 never answers
		// (its FinalRequestProcessor has no reply for it; clients send
		// check only inside a multi); latch answers it OK. Not replayed:
		// ZooKeeper's silence would cost a timeout.
		check("a", "~/missing", -1),
		setData("a", "~/missing", "", -1),
		del("a", "~/missing", -1),
		del("a", "~/v", 2),
		getData("a", "~/v", false),
	}},
	{"bad-paths", []step{
		create("a", "a", "", persistent),
		create("a", "~/a/", "", persistent),
		create("a", "//", "", persistent),
		create("a", "~//b", "", persistent),
		create("a", "~/a/./b", "", persistent),
		create("a", "~/a/../b", "", persistent),
		create("a", "", "", persistent),
		create("a", "~/s/", "", sequential),
		create("a", "/", "", persistent),
		create("a", "/zookeeper", "", persistent),
		del("a", "/zookeeper", -1),
		del("a", "/zookeeper/quota", -1),
		del("a", "/", -1),
		del("a", "a", -1),
		setData("a", "//", "", -1),
		setData("a", "/a/", "", -1),
		getData("a", "a", false),
		getData("a", "/a/./b", false),
		exists("a", "//", false),
		exists("a", "~/a/", false),
		getChildren("a", "a", false),
		getChildren2("a", "//", false),
		getACL("a", "/a/"),
		create("a", "~/p", "", persistent),
		create("a", "~/p/", "", persistent),
		create("a", "~/p/", "", sequential),
		create("a", "~/p/\x00", "", persistent),
		create("a", "~/none/\x00", "", persistent),
		create("a", "~/p/\x01", "", persistent),
		exists("a", "~/p\x00", false),
		getData("a", "~/p\x00", false),
		exists("a", "~/p/", true),
		watchesOp("a", jute.OpCheckWatches, "~/p/", jute.WatcherData),
	}},
	{"sequence", []step{
		create("a", "~/q", "", persistent),
		create("a", "~/q/s-", "", sequential),
		create("a", "~/q/plain", "", persistent),
		create("a", "~/q/s-", "", ephSeq),
		del("a", "~/q/s-0000000000", -1),
		del("a", "~/q/plain", -1),
		getChildren2("a", "~/q", false),
		create2("a", "~/q/s-", "", sequential),
		create("a", "~/q/", "", sequential),
		create("a", "~/q/x", "", persistent),
		create("a", "~/q/x", "", persistent),
		create("a", "~/q/s-", "", sequential),
		getChildren2("a", "~/q", false),
		setData("a", "~/q", "", -1),
		getChildren2("a", "~/q", false),
	}},
	{"watches", []step{
		open("b"),
		create("a", "~/w", "0", persistent),
		getData("b", "~/w", true),
		exists("b", "~/w", true),
		getChildren("b", "~/w", true),
		getChildren2("b", "~", true),
		setData("a", "~/w", "1", -1),
		setData("a", "~/w", "2", -1),
		create("a", "~/w/c", "", persistent),
		create("a", "~/w/d", "", persistent),
		create("a", "~/n", "", persistent),
		exists("b", "~/missing", true),
		create("a", "~/missing", "", persistent),
		exists("b", "~/missing", true),
		getData("b", "~/missing", true),
		getChildren("b", "~/missing", true),
		del("a", "~/missing", -1),
		getData("b", "~/w", true),
		getData("a", "~/w", true),
		setData("a", "~/w", "3", -1),
		getData("b", "~/w", true),
		setData("b", "~/w", "4", -1),
		getData("b", "~/w/c", true),
		exists("b", "~/w/c", true),
		getChildren2("b", "~/w", true),
		getChildren("b", "~/w/c", true),
		del("a", "~/w/c", -1),
		getData("b", "~/w/d", true),
		setData("a", "~/w/d", "", 5),
		del("a", "~/w/d", 5),
		del("a", "~/w/d", 0),
		getData("b", "~/w", true),
		watchesOp("b", jute.OpCheckWatches, "~/w", jute.WatcherData),
		watchesOp("b", jute.OpCheckWatches, "~/w", jute.WatcherChildren),
		watchesOp("b", jute.OpCheckWatches, "~/w", jute.WatcherAny),
		watchesOp("b", jute.OpRemoveWatches, "~/w", jute.WatcherChildren),
		watchesOp("b", jute.OpRemoveWatches, "~/w", jute.WatcherData),
		watchesOp("b", jute.OpRemoveWatches, "~/w", jute.WatcherData),
		watchesOp("b", jute.OpCheckWatches, "~/w", jute.WatcherAny),
		exists("b", "~/w", true),
		getChildren("b", "~/w", true),
		watchesOp("b", jute.OpRemoveWatches, "~/w", jute.WatcherAny),
		watchesOp("b", jute.OpCheckWatches, "~/w", jute.WatcherAny),
		exists("b", "~/gone", true),
		watchesOp("b", jute.OpCheckWatches, "~/gone", jute.WatcherData),
		watchesOp("b", jute.OpRemoveWatches, "~/gone", jute.WatcherData),
		watchesOp("b", jute.OpCheckWatches, "~/none", jute.WatcherData),
		setData("a", "~/w", "5", -1),
		create("a", "~/gone", "", persistent),
	}},
	{"multi", []step{
		open("b"),
		create("a", "~/m", "", persistent),
		getChildren("b", "~/m", true),
		multi("a",
			mop{op: jute.OpCreate, path: "~/m/a", data: "a"},
			mop{op: jute.OpCreate2, path: "~/m/s-", flags: sequential},
			mop{op: jute.OpCreate, path: "~/m/s-", flags: sequential},
			mop{op: jute.OpCreateContainer, path: "~/m/c", flags: containerFlg},
			mop{op: jute.OpSetData, path: "~/m/a", data: "b", version: 0},
			mop{op: jute.OpCheck, path: "~/m/a", version: 1},
			mop{op: jute.OpCreate, path: "~/m/e", flags: ephemeral},
			mop{op: jute.OpDelete, path: "~/m/e", version: -1},
		),
		getChildren2("a", "~/m", false),
		getData("b", "~/m/a", true),
		multi("a",
			mop{op: jute.OpCreate, path: "~/m/x"},
			mop{op: jute.OpSetData, path: "~/m/a", data: "c", version: 7},
			mop{op: jute.OpCreate, path: "~/m/y"},
		),
		exists("a", "~/m/x", false),
		getChildren2("a", "~/m", false),
		multi("a",
			mop{op: jute.OpCreate, path: "~/m/s-", flags: sequential},
			mop{op: jute.OpCreate, path: "~/m/a"},
		),
		create("a", "~/m/s-", "", sequential),
		multi("a",
			mop{op: jute.OpDelete, path: "~/m/a", version: -1},
			mop{op: jute.OpCheck, path: "~/m/a", version: -1},
		),
		multi("a",
			mop{op: jute.OpCreate, path: "~/m/ok"},
			mop{op: jute.OpCreate, path: "~/m/bad/"},
		),
		multi("a",
			mop{op: jute.OpCreate, path: "~/m/ok"},
			mop{op: jute.OpCreate, path: "~/m/bad-mode", flags: 7},
		),
		multi("a",
			mop{op: jute.OpCreate, path: "~/m/ok"},
			mop{op: jute.OpCreateContainer, path: "~/m/notc", flags: persistent},
		),
		multi("a"),
		multi("a",
			mop{op: jute.OpCheck, path: "~/m", version: 0},
			mop{op: jute.OpDelete, path: "~/m/a", version: 1},
		),
		getChildren2("a", "~/m", false),
	}},
	{"acl", []step{
		create("a", "~/n", "", persistent),
		getACL("a", "~/n"),
		getACL("a", "~/missing"),
		setACL("a", "~/n", []jute.ACL{{Perms: jute.PermRead, Scheme: "world", ID: "anyone"}}, 0),
		getACL("a", "~/n"),
		exists("a", "~/n", false),
		setACL("a", "~/n", anyone, 0),
		setACL("a", "~/missing", anyone, -1),
		setData("a", "~/n", "x", -1),
		create("a", "~/n/c", "", persistent),
		getData("a", "~/n", false),
		setACL("a", "~/n", nil, -1),
		setACL("a", "~/n", []jute.ACL{}, -1),
		setACL("a", "~/n", []jute.ACL{{Perms: jute.PermAll, Scheme: "digest", ID: "nocolon"}}, -1),
		setACL("a", "~/n", []jute.ACL{{Perms: jute.PermAll, Scheme: "nosuch", ID: "x"}}, -1),
		setACL("a", "~/n", []jute.ACL{{Perms: jute.PermAll, Scheme: "world", ID: "someone"}}, -1),
		createACL("a", "~/empty", []jute.ACL{}),
		createACL("a", "~/nil", nil),
		createACL("a", "~/ro", []jute.ACL{{Perms: jute.PermRead, Scheme: "world", ID: "anyone"}}),
		setData("a", "~/ro", "x", -1),
		create("a", "~/ro/c", "", persistent),
		getData("a", "~/ro", false),
		setACL("a", "~/ro", anyone, -1),
		createACL("a", "~/wo", []jute.ACL{{Perms: jute.PermWrite | jute.PermAdmin, Scheme: "world", ID: "anyone"}}),
		getData("a", "~/wo", false),
		getChildren("a", "~/wo", false),
		exists("a", "~/wo", false),
		getACL("a", "~/wo"),
		setData("a", "~/wo", "w", -1),
		createACL("a", "~/nodel", []jute.ACL{{Perms: jute.PermRead | jute.PermCreate, Scheme: "world", ID: "anyone"}}),
		create("a", "~/nodel/c", "", persistent),
		del("a", "~/nodel/c", -1),
		getACL("a", "/zookeeper/config"),
		// A digest ACL: ZooKeeper takes it; latch, which authenticates
		// no one, refuses an ACL it could never grant anybody.
		create("a", "~/dg", "", persistent),
		setACL("a", "~/dg", []jute.ACL{{Perms: jute.PermAll, Scheme: "digest", ID: "u:p"}}, -1).
			differs("latch has no digest (nor any other) authentication: an ACL naming a digest identity would lock everyone out", "OK", "INVALIDACL"),
	}},
	{"sync-ping", []step{
		ping("a"),
		syncReq("a", "~"),
		syncReq("a", "/"),
		syncReq("a", "~/missing"),
		create("a", "~/x", "", persistent),
		ping("a"),
		getData("a", "~/x", false),
		ping("a"),
	}},
	{"builtin", []step{
		exists("a", "/zookeeper", false),
		getData("a", "/zookeeper", false),
		getChildren("a", "/zookeeper", false),
		getData("a", "/zookeeper/quota", false),
		getChildren2("a", "/zookeeper/quota", false),
		exists("a", "/zookeeper/config", false),
		getData("a", "/zookeeper/config", false),
		getACL("a", "/zookeeper"),
		getACL("a", "/zookeeper/quota"),
		setData("a", "/zookeeper/config", "x", -1),
		create("a", "/zookeeper/x", "", persistent),
		create("a", "/zookeeper/quota/x", "", persistent),
	}},
	{"close-session", []step{
		open("b"),
		open("c"),
		create("b", "~/e1", "", ephemeral),
		create("b", "~/e2", "", ephSeq),
		create("b", "~/p", "", persistent),
		create("b", "~/p/e", "", ephemeral),
		getChildren("a", "~", true),
		exists("a", "~/e1", true),
		getData("c", "~/p/e", true),
		getChildren("c", "~/p", true),
		exists("c", "~/e2-0000000001", true),
		closeSession("b"),
		getChildren2("a", "~", false),
		exists("c", "~/p/e", false),
	}},
	{"reattach", []step{
		open("b"),
		create("b", "~/e", "", ephemeral),
		getData("b", "~/e", true),
		attachWrong("x", "b"),
		// ZooKeeper closes the session's connection before it checks the
		// password (processConnectRequest); latch does not let a client
		// that does not know it disturb the session.
		probe("b").differs("an attach with a wrong password leaves the session's connection alone", "closed", "open"),
		exists("a", "~/e", false),
		attach("b2", "b"),
		probe("b"),
		exists("b2", "~/e", false),
		setData("a", "~/e", "1", -1),
		drop("b2"),
		attach("b3", "b"),
		getChildren("b3", "~", false),
		closeSession("b3"),
		attach("b4", "b"),
		exists("a", "~/e", false),
	}},
	{"set-watches", []step{
		open("b"),
		open("c"),
		create("a", "~/sw", "0", persistent),
		create("a", "~/sw/k", "", persistent),
		create("a", "~/gone", "", persistent),
		create("a", "~/same", "", persistent).saving("before"),
		setData("a", "~/sw", "1", -1),
		create("a", "~/sw/k2", "", persistent),
		del("a", "~/gone", -1),
		create("a", "~/new", "", persistent).saving("after"),
		drop("b"),
		attach("b2", "b"),
		setWatches("b2", "before",
			[]string{"~/sw", "~/gone", "~/same"},
			[]string{"~/sw", "~/missing", "~/new"},
			[]string{"~/sw", "~/gone", "~/same"}),
		drop("c"),
		attach("c2", "c"),
		setWatches("c2", "after",
			[]string{"~/sw", "~/gone", "~/same"},
			[]string{"~/sw", "~/missing", "~/new"},
			[]string{"~/sw", "~/gone", "~/same"}),
		setData("a", "~/sw", "2", -1),
		setData("a", "~/same", "2", -1),
		create("a", "~/missing", "", persistent),
		create("a", "~/same/k", "", persistent),
		create("a", "~/sw/k3", "", persistent),
		watchesOp("b2", jute.OpCheckWatches, "~/missing", jute.WatcherData),
		watchesOp("c2", jute.OpCheckWatches, "~/new", jute.WatcherData),
	}},
	{"auth", []step{
		open("b"),
		auth("a", "nosuch", "x").closing(),
		auth("b", "digest", "u:p").
			differs("latch has no authentication schemes: a client that asks for one fails rather than run unprotected unaware", "OK", "AUTHFAILED"),
	}},
	{"unsupported", []step{
		createTTL("a", "~/t", 5, 100),
		createTTL("a", "~/t", 6, 100),
		raw("a", jute.OpReconfig, reconfigRequest()),
		exists("a", "~", false),
		raw("a", jute.Op(77), nil).closing(),
	}},
	{"words", []step{
		word("ruok", wordExact),
		word("isro", wordExact),
		word("srvr", wordKeys),
		word("mntr", wordSubset),
	}},
}

// reconfigRequest is a ReconfigRequest: joining, leaving, new members
// and curConfigId.
func reconfigRequest() []byte {
	b := jute.AppendString(nil, "server.2=127.0.0.1:2888:3888")
	b = jute.AppendString(b, "")
	b = jute.AppendString(b, "")
	return jute.AppendLong(b, -1)
}

// closeWait bounds the wait for a server to close a connection; probeWait
// how long a connection that is to stay open stays silent before a probe
// pings it.
const (
	closeWait = 3 * time.Second
	probeWait = 200 * time.Millisecond
)

// A zconn is one connection of a transcript.
type zconn struct {
	name string
	c    net.Conn
	r    *bufio.Reader
	xid  int32
	sess int64
	pw   []byte
	last int64 // the last zxid of a reply (not a ping's)
	live bool  // pinged after each step, to collect its events
}

// A runner replays one scenario on one server into a transcript.
type runner struct {
	t      *testing.T
	server string
	addr   string
	root   string
	conns  map[string]*zconn
	order  []*zconn
	marks  map[string]int64
	// sessions opened, for closing them at the end, and whether closed.
	sessions []*zconn
	closed   map[int64]bool
	lines    []string
	// times are the (zxid, time) pairs of the stats read, and ctime <=
	// mtime checks, for checkTimes.
	times []ztime
	bad   []string
}

type ztime struct {
	zxid, ms int64
	where    string
}

// p maps a scenario path to the server's: "~" is the root.
func (r *runner) p(path string) string {
	if strings.HasPrefix(path, "~") {
		return r.root + path[1:]
	}
	return path
}

// logf adds a line to the transcript; the root is written "~".
func (r *runner) logf(format string, args ...any) {
	r.lines = append(r.lines, strings.ReplaceAll(fmt.Sprintf(format, args...), r.root, "~"))
}

// replay runs steps on the server at addr under root and returns the
// normalised transcript.
func replay(t *testing.T, addr, root string, steps []step, server string) []string {
	t.Helper()
	r := &runner{t: t, server: server, addr: addr, root: root, conns: map[string]*zconn{}, marks: map[string]int64{}, closed: map[int64]bool{}}
	defer r.cleanup()
	all := append([]step{open("a"), create("a", "~", "", persistent)}, steps...)
	for i, s := range all {
		from := len(r.lines)
		r.run(s)
		if s.kind != stepWord {
			r.collect()
		}
		if s.unordered {
			sortEvents(r.lines[from:])
		}
		if t.Failed() {
			t.Fatalf("%s: step %d failed", server, i)
		}
	}
	r.checkTimes()
	return normalize(r.lines, r.bad)
}

// sortEvents sorts each run of one connection's events in lines.
func sortEvents(lines []string) {
	conn := func(l string) (string, bool) {
		c, rest, _ := strings.Cut(l, ": ")
		return c, strings.HasPrefix(rest, "event ")
	}
	for i := 0; i < len(lines); {
		c, ev := conn(lines[i])
		j := i + 1
		for ev && j < len(lines) {
			if c2, ev2 := conn(lines[j]); c2 != c || !ev2 {
				break
			}
			j++
		}
		slices.Sort(lines[i:j])
		i = j
	}
}

// run carries out one step.
func (r *runner) run(s step) {
	switch s.kind {
	case stepOpen:
		zc := r.dial(s.conn)
		zc.connect(r, 0, nil, 0)
	case stepAttach:
		of := r.conns[s.of]
		if of == nil {
			r.t.Fatalf("attach of unknown connection %q", s.of)
		}
		// The old connection is no longer pinged: whether the server
		// closed it is for a probe step to tell.
		of.live = false
		pw := of.pw
		if s.wrongPw {
			pw = make([]byte, len(of.pw))
			for i := range pw {
				pw[i] = of.pw[i] ^ 0x5a
			}
		}
		zc := r.dial(s.conn)
		zc.connect(r, of.sess, pw, of.last)
		if zc.live && zc.sess == of.sess {
			zc.last = max(zc.last, of.last)
		}
	case stepDrop:
		zc := r.conn(s.conn)
		zc.c.Close()
		zc.live = false
		r.logf("%s: client closes the connection", zc.name)
	case stepProbe:
		zc := r.conn(s.conn)
		outcome := "closed"
		if r.probe(zc) {
			outcome = "open"
		}
		if s.deliberate != nil {
			s.deliberate.check(r, zc, "probe", outcome)
			return
		}
		r.logf("%s: %s", zc.name, outcome)
	case stepWord:
		r.fourLetter(s)
	case stepRequest:
		r.request(s)
	}
}

func (r *runner) conn(name string) *zconn {
	zc := r.conns[name]
	if zc == nil {
		r.t.Fatalf("no connection %q", name)
	}
	return zc
}

func (r *runner) dial(name string) *zconn {
	if r.conns[name] != nil {
		r.t.Fatalf("connection %q opened twice", name)
	}
	c, err := net.DialTimeout("tcp", r.addr, 5*time.Second)
	if err != nil {
		r.t.Fatalf("%s: %v", r.server, err)
	}
	zc := &zconn{name: name, c: c, r: bufio.NewReader(c)}
	r.conns[name] = zc
	r.order = append(r.order, zc)
	return zc
}

func (zc *zconn) send(b []byte) error {
	zc.c.SetWriteDeadline(time.Now().Add(closeWait))
	_, err := zc.c.Write(jute.AppendFrame(nil, b))
	return err
}

func (zc *zconn) frame(wait time.Duration) ([]byte, error) {
	zc.c.SetReadDeadline(time.Now().Add(wait))
	var hdr [4]byte
	if _, err := io.ReadFull(zc.r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > jute.MaxFrame {
		return nil, fmt.Errorf("frame of %d bytes", n)
	}
	b := make([]byte, n)
	_, err := io.ReadFull(zc.r, b)
	return b, err
}

// connect sends a ConnectRequest (with the readOnly byte, as the Java
// client does) and logs the response: a session, or the expired answer
// (and whether the server then closes).
func (zc *zconn) connect(r *runner, sess int64, pw []byte, lastZxid int64) {
	req := jute.ConnectRequest{LastZxidSeen: lastZxid, TimeOut: 10000, SessionID: sess, Passwd: pw, HasReadOnly: true}
	if pw == nil {
		req.Passwd = make([]byte, 16)
	}
	what := "open"
	if sess != 0 {
		what = fmt.Sprintf("attach {s:%d}", sess)
	}
	if err := zc.send(req.Append(nil)); err != nil {
		r.t.Fatalf("%s: %s: %v", r.server, zc.name, err)
	}
	b, err := zc.frame(closeWait)
	if err != nil {
		r.logf("%s: %s: no answer (%v)", zc.name, what, errClass(err))
		return
	}
	var resp jute.ConnectResponse
	d := jute.NewDecoder(b)
	resp.Decode(d)
	r.logf("%s: %s -> protocol %d timeout %d session {s:%d} passwd %s readOnly %v/%v%s", zc.name, what,
		resp.ProtocolVersion, resp.TimeOut, resp.SessionID, describePasswd(resp.Passwd), resp.HasReadOnly, resp.ReadOnly, leftover(d))
	if resp.SessionID == 0 {
		r.waitClosed(zc)
		return
	}
	zc.sess, zc.pw, zc.live = resp.SessionID, resp.Passwd, true
	if sess == 0 {
		r.sessions = append(r.sessions, zc)
	}
}

func describePasswd(pw []byte) string {
	if pw == nil {
		return "null"
	}
	if slices.ContainsFunc(pw, func(b byte) bool { return b != 0 }) {
		return fmt.Sprintf("%dB", len(pw))
	}
	return fmt.Sprintf("%dB of zeros", len(pw))
}

// leftover describes the bytes a decoder left unread, and its error.
func leftover(d *jute.Decoder) string {
	if d.Err() != nil {
		return fmt.Sprintf(" [decode: %v]", d.Err())
	}
	if d.Len() > 0 {
		return fmt.Sprintf(" [+%d bytes]", d.Len())
	}
	return ""
}

func errClass(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "closed"
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	}
	return "reset"
}

// waitClosed reads until the server closes zc, logging what it sends
// meanwhile, or gives up after closeWait.
func (r *runner) waitClosed(zc *zconn) {
	zc.live = false
	for {
		b, err := zc.frame(closeWait)
		if err != nil {
			if errClass(err) == "timeout" {
				r.logf("%s: still open after %v", zc.name, closeWait)
			} else {
				r.logf("%s: server closed the connection", zc.name)
			}
			return
		}
		r.logFrame(zc, b, jute.OpNotification, 0)
	}
}

// probe tells whether the server closed zc: it waits probeWait for the
// close, then pings. It logs the events that come first, and reports
// whether zc is open.
func (r *runner) probe(zc *zconn) bool {
	for {
		b, err := zc.frame(probeWait)
		if err != nil {
			if errClass(err) != "timeout" {
				zc.live = false
				return false
			}
			break
		}
		r.logFrame(zc, b, jute.OpNotification, 0)
	}
	zc.live = r.pingCollect(zc)
	return zc.live
}

// collect pings every live connection and logs the events that come
// before the ping's reply: ZooKeeper queues a watch's event on its
// connection when the write that fires it is applied, before any later
// reply there, and so does latch.
func (r *runner) collect() {
	for _, zc := range r.order {
		if zc.live && !r.pingCollect(zc) {
			r.logf("%s: server closed the connection", zc.name)
		}
	}
}

// pingCollect pings zc and logs the frames before the reply; false if the
// connection closed.
func (r *runner) pingCollect(zc *zconn) bool {
	if err := zc.send((&jute.RequestHeader{Xid: jute.XidPing, Type: jute.OpPing}).Append(nil)); err != nil {
		zc.live = false
		return false
	}
	for {
		b, err := zc.frame(closeWait)
		if err != nil {
			zc.live = false
			return false
		}
		var h jute.ReplyHeader
		h.Decode(jute.NewDecoder(b))
		if h.Xid == jute.XidPing {
			return true
		}
		r.logFrame(zc, b, jute.OpNotification, 0)
	}
}

// request sends the step's request and logs the frames up to its reply,
// and then, for a step that closes, up to the close.
func (r *runner) request(s step) {
	zc := r.conn(s.conn)
	xid := s.xid
	if xid == 0 {
		zc.xid++
		xid = zc.xid
	}
	b := (&jute.RequestHeader{Xid: xid, Type: s.op}).Append(nil)
	if s.rec != nil {
		b = append(b, s.rec(r)...)
	}
	if err := zc.send(b); err != nil {
		r.logf("%s: %v: send failed (%s)", zc.name, s.op, errClass(err))
		zc.live = false
		return
	}
	for {
		f, err := zc.frame(closeWait)
		if err != nil {
			r.logf("%s: %v: no reply (%s)", zc.name, s.op, errClass(err))
			zc.live = false
			return
		}
		var h jute.ReplyHeader
		h.Decode(jute.NewDecoder(f))
		if h.Xid == jute.XidWatch {
			r.logFrame(zc, f, jute.OpNotification, 0)
			continue
		}
		if s.deliberate != nil {
			s.deliberate.check(r, zc, s.op.String(), h.Err.String())
			return
		}
		if h.Xid != xid {
			r.logf("%s: %v: reply with xid %d, want %d", zc.name, s.op, h.Xid, xid)
		}
		if s.op != jute.OpPing && h.Zxid > 0 {
			zc.last = h.Zxid
		}
		if s.mark != "" {
			r.marks[s.mark] = h.Zxid
		}
		r.logFrame(zc, f, s.op, xid)
		break
	}
	if s.op == jute.OpCloseSession {
		r.closed[zc.sess] = true
	}
	if s.closes {
		r.waitClosed(zc)
	}
}

// logFrame logs a reply to op (or an event, when the header says so).
func (r *runner) logFrame(zc *zconn, f []byte, op jute.Op, xid int32) {
	d := jute.NewDecoder(f)
	var h jute.ReplyHeader
	h.Decode(d)
	if h.Xid == jute.XidWatch {
		var ev jute.WatcherEvent
		ev.Decode(d)
		r.logf("%s: event %v %v %s (zxid %d err %v)%s", zc.name, ev.Type, ev.State, ev.Path, h.Zxid, h.Err, leftover(d))
		return
	}
	if op == jute.OpNotification {
		r.logf("%s: unexpected reply xid %d zxid {z:%d} %v%s", zc.name, h.Xid, h.Zxid, h.Err, leftover(d))
		return
	}
	body := ""
	if h.Err == jute.OK {
		body = r.describe(op, d)
	}
	r.logf("%s: %v xid %d -> zxid {z:%d} %v%s%s", zc.name, op, h.Xid, h.Zxid, h.Err, body, leftover(d))
}

// describe decodes op's reply record.
func (r *runner) describe(op jute.Op, d *jute.Decoder) string {
	switch op {
	case jute.OpCreate:
		var resp jute.CreateResponse
		resp.Decode(d)
		return " path " + resp.Path
	case jute.OpCreate2, jute.OpCreateContainer, jute.OpCreateTTL:
		var resp jute.Create2Response
		resp.Decode(d)
		return " path " + resp.Path + " " + r.stat(resp.Stat)
	case jute.OpExists, jute.OpSetData, jute.OpSetACL:
		var st jute.Stat
		st.Decode(d)
		return " " + r.stat(st)
	case jute.OpGetData, jute.OpReconfig:
		var resp jute.GetDataResponse
		resp.Decode(d)
		return fmt.Sprintf(" data %s %s", quoteData(resp.Data), r.stat(resp.Stat))
	case jute.OpGetACL:
		var resp jute.GetACLResponse
		resp.Decode(d)
		return fmt.Sprintf(" acl %v %s", resp.ACL, r.stat(resp.Stat))
	case jute.OpGetChildren:
		var resp jute.GetChildrenResponse
		resp.Decode(d)
		return " children " + children(resp.Children)
	case jute.OpGetChildren2:
		var resp jute.GetChildren2Response
		resp.Decode(d)
		return " children " + children(resp.Children) + " " + r.stat(resp.Stat)
	case jute.OpSync:
		var resp jute.SyncResponse
		resp.Decode(d)
		return " path " + resp.Path
	case jute.OpMulti:
		var resp jute.MultiResponse
		resp.Decode(d)
		var b strings.Builder
		for _, res := range resp.Results {
			switch res.Type {
			case jute.OpError:
				fmt.Fprintf(&b, " [error %v]", res.Err)
			case jute.OpCreate:
				fmt.Fprintf(&b, " [create %s]", res.Path)
			case jute.OpCreate2:
				fmt.Fprintf(&b, " [create2 %s %s]", res.Path, r.stat(res.Stat))
			case jute.OpSetData:
				fmt.Fprintf(&b, " [setData %s]", r.stat(res.Stat))
			default:
				fmt.Fprintf(&b, " [%v]", res.Type)
			}
		}
		return b.String()
	}
	return ""
}

func quoteData(b []byte) string {
	if b == nil {
		return "null"
	}
	return strconv.Quote(string(b))
}

// children lists names sorted: ZooKeeper gives a node's children in its
// hash set's order, which means nothing.
func children(names []string) string {
	if names == nil {
		return "null"
	}
	s := slices.Clone(names)
	slices.Sort(s)
	return "[" + strings.Join(s, " ") + "]"
}

// stat formats a Stat with its zxids and owner marked for normalize, and
// its times checked (checkTimes) and left out.
func (r *runner) stat(st jute.Stat) string {
	where := fmt.Sprintf("line %d", len(r.lines)+1)
	if st.Ctime > st.Mtime {
		r.bad = append(r.bad, fmt.Sprintf("%s: %s: ctime %d after mtime %d", r.server, where, st.Ctime, st.Mtime))
	}
	r.times = append(r.times, ztime{st.Czxid, st.Ctime, where + " ctime"}, ztime{st.Mzxid, st.Mtime, where + " mtime"})
	owner := strconv.FormatInt(st.EphemeralOwner, 10)
	if st.EphemeralOwner > 0 {
		owner = fmt.Sprintf("{s:%d}", st.EphemeralOwner)
	}
	return fmt.Sprintf("{czxid {z:%d} mzxid {z:%d} pzxid {z:%d} version %d cversion %d aversion %d owner %s dataLength %d numChildren %d}",
		st.Czxid, st.Mzxid, st.Pzxid, st.Version, st.Cversion, st.Aversion, owner, st.DataLength, st.NumChildren)
}

// checkTimes checks that the times of the stats read go with their
// zxids: one zxid, one time; a later zxid, no earlier time. Built-in
// znodes (zxid 0) have time 0 on both servers.
func (r *runner) checkTimes() {
	ts := slices.Clone(r.times)
	sort.SliceStable(ts, func(i, j int) bool { return ts[i].zxid < ts[j].zxid })
	for i := 1; i < len(ts); i++ {
		a, b := ts[i-1], ts[i]
		if a.zxid == b.zxid && a.ms != b.ms || a.zxid < b.zxid && a.ms > b.ms {
			r.bad = append(r.bad, fmt.Sprintf("%s: time %d of zxid %#x (%s) and time %d of zxid %#x (%s) disagree",
				r.server, a.ms, a.zxid, a.where, b.ms, b.zxid, b.where))
		}
	}
}

// fourLetter sends a four-letter word on a connection of its own and logs
// the answer as s.cmp says.
func (r *runner) fourLetter(s step) {
	out, err := latchtest.ZooKeeperCommand(r.addr, s.word)
	if err != nil {
		r.logf("%s: %v", s.word, err)
		return
	}
	switch s.cmp {
	case wordExact:
		r.logf("%s: %q", s.word, out)
	case wordKeys, wordSubset:
		sep := ": "
		if s.word == "mntr" {
			sep = "\t"
		}
		var keys []string
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			if k, _, ok := strings.Cut(line, sep); ok {
				keys = append(keys, k)
			} else {
				keys = append(keys, "line without a value: "+strconv.Quote(line))
			}
		}
		slices.Sort(keys)
		if s.cmp == wordSubset {
			// The numbers differ by nature, and latch reports only some of
			// ZooKeeper 3.8's hundreds of metrics: ZooKeeper's transcript
			// lists those of latchMntrKeys it has, latch's every key it
			// has, so that they agree when every key of latch's is one of
			// ZooKeeper's and latchMntrKeys lists them.
			if r.server == "zk" {
				keys = slices.DeleteFunc(slices.Clone(latchMntrKeys), func(k string) bool { return !slices.Contains(keys, k) })
			}
		}
		r.logf("%s: keys %v", s.word, keys)
	}
}

// latchMntrKeys are the keys of latch's mntr, each of which ZooKeeper's
// has too.
var latchMntrKeys = []string{
	"zk_avg_latency", "zk_ephemerals_count", "zk_global_sessions", "zk_max_latency", "zk_min_latency",
	"zk_num_alive_connections", "zk_outstanding_requests", "zk_packets_received", "zk_packets_sent",
	"zk_server_state", "zk_version", "zk_watch_count", "zk_znode_count",
}

// cleanup closes every session the scenario left open, so that none
// expires (consuming zxids, firing watches) during a later scenario.
func (r *runner) cleanup() {
	for _, zc := range r.order {
		zc.c.Close()
	}
	for _, s := range r.sessions {
		if r.closed[s.sess] {
			continue
		}
		c, err := net.DialTimeout("tcp", r.addr, 5*time.Second)
		if err != nil {
			continue
		}
		zc := &zconn{c: c, r: bufio.NewReader(c)}
		req := jute.ConnectRequest{TimeOut: 10000, SessionID: s.sess, Passwd: s.pw}
		if zc.send(req.Append(nil)) == nil {
			if _, err := zc.frame(closeWait); err == nil {
				zc.send((&jute.RequestHeader{Xid: 1, Type: jute.OpCloseSession}).Append(nil))
				zc.frame(closeWait)
			}
		}
		c.Close()
	}
}

var marker = regexp.MustCompile(`\{([zs]):(-?\d+)\}`)

// normalize rewrites a transcript's marked values: zxids ({z:n}) as their
// rank among the transcript's (z0 the smallest; values <= 0 as they are),
// session ids ({s:n}) as S1, S2... in order of appearance (0 as is). The
// invariants that failed (bad) end it.
func normalize(lines, bad []string) []string {
	var zxids []int64
	sessions := map[int64]string{}
	for _, line := range lines {
		for _, m := range marker.FindAllStringSubmatch(line, -1) {
			v, _ := strconv.ParseInt(m[2], 10, 64)
			switch {
			case m[1] == "z" && v > 0:
				zxids = append(zxids, v)
			case m[1] == "s" && v != 0:
				if _, ok := sessions[v]; !ok {
					sessions[v] = fmt.Sprintf("S%d", len(sessions)+1)
				}
			}
		}
	}
	slices.Sort(zxids)
	zxids = slices.Compact(zxids)
	out := make([]string, 0, len(lines)+len(bad))
	for _, line := range lines {
		out = append(out, marker.ReplaceAllStringFunc(line, func(m string) string {
			sm := marker.FindStringSubmatch(m)
			v, _ := strconv.ParseInt(sm[2], 10, 64)
			if sm[1] == "s" {
				if v == 0 {
					return "0"
				}
				return sessions[v]
			}
			if v <= 0 {
				return strconv.FormatInt(v, 10)
			}
			i, _ := slices.BinarySearch(zxids, v)
			return "z" + strconv.Itoa(i)
		}))
	}
	for _, b := range bad {
		out = append(out, "INVARIANT: "+b)
	}
	return out
}

// compareTranscripts fails the test if the transcripts differ, printing
// them side by side, the lines that differ marked.
func compareTranscripts(t *testing.T, zk, lt []string) {
	t.Helper()
	if slices.Equal(zk, lt) {
		return
	}
	width := 0
	for _, l := range zk {
		width = max(width, len(l))
	}
	width = min(width, 110)
	var b strings.Builder
	fmt.Fprintf(&b, "transcripts differ (ZooKeeper 3.8 left, latch right; | marks a difference):\n")
	for i := range max(len(zk), len(lt)) {
		var l, r string
		if i < len(zk) {
			l = zk[i]
		}
		if i < len(lt) {
			r = lt[i]
		}
		mark := " "
		if l != r || i >= len(zk) || i >= len(lt) {
			mark = "|"
		}
		fmt.Fprintf(&b, "%3d %-*s %s %s\n", i, width, l, mark, r)
	}
	t.Error(b.String())
}
