package znode

import (
	"math"
	"strconv"
)

// Code is a ZooKeeper error code (KeeperException.Code); 0 is OK.
type Code int32

// The codes the tree answers, with ZooKeeper's values.
const (
	OK                      Code = 0
	RuntimeInconsistency    Code = -2
	Unimplemented           Code = -6
	BadArguments            Code = -8
	NoNode                  Code = -101
	NoAuth                  Code = -102
	BadVersion              Code = -103
	NoChildrenForEphemerals Code = -108
	NodeExists              Code = -110
	NotEmpty                Code = -111
	SessionExpired          Code = -112
	InvalidACL              Code = -114
	QuotaExceeded           Code = -125 // latch's limits (znodes, children, data, ephemerals)
)

var codeNames = map[Code]string{
	OK:                      "OK",
	RuntimeInconsistency:    "RUNTIMEINCONSISTENCY",
	Unimplemented:           "UNIMPLEMENTED",
	BadArguments:            "BADARGUMENTS",
	NoNode:                  "NONODE",
	NoAuth:                  "NOAUTH",
	BadVersion:              "BADVERSION",
	NoChildrenForEphemerals: "NOCHILDRENFOREPHEMERALS",
	NodeExists:              "NODEEXISTS",
	NotEmpty:                "NOTEMPTY",
	SessionExpired:          "SESSIONEXPIRED",
	InvalidACL:              "INVALIDACL",
	QuotaExceeded:           "QUOTAEXCEEDED",
}

// String names the code as ZooKeeper's Code enum does ("NONODE"), or
// "Code(n)" for a code the tree never answers.
func (c Code) String() string {
	if s, ok := codeNames[c]; ok {
		return s
	}
	return "Code(" + strconv.Itoa(int(c)) + ")"
}

// Stat is a znode's stat as ZooKeeper sends it.
type Stat struct {
	Czxid, Mzxid, Ctime, Mtime  int64
	Version, Cversion, Aversion int32
	EphemeralOwner              int64
	DataLength, NumChildren     int32
	Pzxid                       int64
}

// ACL is one entry of a znode's access control list.
type ACL struct {
	Perms      int32
	Scheme, ID string
}

// Permission bits of an ACL.
const (
	PermRead   = 1
	PermWrite  = 2
	PermCreate = 4
	PermDelete = 8
	PermAdmin  = 16
	PermAll    = 31
)

// The only ACL identity the tree accepts.
const (
	SchemeWorld = "world"
	IDAnyone    = "anyone"
)

// Mode is a create request's flags.
type Mode int32

// Create modes. TTL modes (5, 6) are answered Unimplemented; the front end
// answers them before they reach the tree.
const (
	Persistent           Mode = 0
	Ephemeral            Mode = 1
	PersistentSequential Mode = 2
	EphemeralSequential  Mode = 3
	Container            Mode = 4
)

func (m Mode) sequential() bool { return m == PersistentSequential || m == EphemeralSequential }
func (m Mode) ephemeral() bool  { return m == Ephemeral || m == EphemeralSequential }

// ContainerOwner is the EphemeralOwner of a container znode (Long.MIN_VALUE
// in ZooKeeper).
const ContainerOwner int64 = math.MinInt64

// OpKind says what an Op does. Its values are ZooKeeper's op codes.
type OpKind uint8

// Op kinds.
const (
	OpCreate  OpKind = 1
	OpDelete  OpKind = 2
	OpSetData OpKind = 5
	OpSetACL  OpKind = 7
	OpCheck   OpKind = 13
)

// Op is one write (or version check) inside Write or Multi.
type Op struct {
	Kind    OpKind
	Path    string
	Data    []byte // create, setData (borrowed: the tree copies what it keeps)
	ACL     []ACL  // create, setACL (borrowed)
	Mode    Mode   // create
	Version int32  // delete, setData, check, setACL: -1 = any
}

// Result is the answer to one Op.
type Result struct {
	Code Code
	Path string // create: the created path (with its sequence suffix)
	Stat Stat   // create, setData, setACL
}

// EventType is a watch event's type, with ZooKeeper's values.
type EventType int32

// Event types.
const (
	NodeCreated         EventType = 1
	NodeDeleted         EventType = 2
	NodeDataChanged     EventType = 3
	NodeChildrenChanged EventType = 4
)

// String names the type as ZooKeeper's Watcher.Event.EventType does.
func (e EventType) String() string {
	switch e {
	case NodeCreated:
		return "NodeCreated"
	case NodeDeleted:
		return "NodeDeleted"
	case NodeDataChanged:
		return "NodeDataChanged"
	case NodeChildrenChanged:
		return "NodeChildrenChanged"
	}
	return "EventType(" + strconv.Itoa(int(e)) + ")"
}

// Event is a watch trigger: a change of Type at Path.
type Event struct {
	Type EventType
	Path string
}

// SessionInfo describes one ZooKeeper session for status views.
type SessionInfo struct {
	ID         int64
	TimeoutMs  int32
	Ephemerals []string // sorted
}

// DefaultMaxData is Config.MaxData's default: 1 MiB less 1 KiB, leaving room
// in jute's 1,048,575-byte frame for a request's header, path and ACL.
const DefaultMaxData = 1<<20 - 1<<10

// Config holds the tree's limits. A limit that is exceeded answers
// QuotaExceeded and changes nothing.
type Config struct {
	MaxNodes      int // znodes in all, the four built-in ones included (<= 0: no limit)
	MaxChildren   int // children of one znode (<= 0: no limit)
	MaxData       int // bytes of one znode's data (0: DefaultMaxData; < 0: no limit)
	MaxEphemerals int // ephemerals of one session (<= 0: no limit)
}
