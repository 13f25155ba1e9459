package jute

import "strconv"

// Op is a request's type (ZooDefs.OpCode): a RequestHeader's Type, a
// MultiHeader's Type.
type Op int32

// The op codes of ZooKeeper 3.8.
const (
	OpNotification         Op = 0
	OpCreate               Op = 1
	OpDelete               Op = 2
	OpExists               Op = 3
	OpGetData              Op = 4
	OpSetData              Op = 5
	OpGetACL               Op = 6
	OpSetACL               Op = 7
	OpGetChildren          Op = 8
	OpSync                 Op = 9
	OpPing                 Op = 11
	OpGetChildren2         Op = 12
	OpCheck                Op = 13
	OpMulti                Op = 14
	OpCreate2              Op = 15
	OpReconfig             Op = 16
	OpCheckWatches         Op = 17
	OpRemoveWatches        Op = 18
	OpCreateContainer      Op = 19
	OpDeleteContainer      Op = 20
	OpCreateTTL            Op = 21
	OpMultiRead            Op = 22
	OpAuth                 Op = 100
	OpSetWatches           Op = 101
	OpSASL                 Op = 102
	OpGetEphemerals        Op = 103
	OpGetAllChildrenNumber Op = 104
	OpSetWatches2          Op = 105
	OpAddWatch             Op = 106
	OpWhoAmI               Op = 107
	OpCreateSession        Op = -10
	OpCloseSession         Op = -11
	OpError                Op = -1 // a MultiHeader's type for a failed op's result
)

var opNames = map[Op]string{
	OpNotification:         "notification",
	OpCreate:               "create",
	OpDelete:               "delete",
	OpExists:               "exists",
	OpGetData:              "getData",
	OpSetData:              "setData",
	OpGetACL:               "getACL",
	OpSetACL:               "setACL",
	OpGetChildren:          "getChildren",
	OpSync:                 "sync",
	OpPing:                 "ping",
	OpGetChildren2:         "getChildren2",
	OpCheck:                "check",
	OpMulti:                "multi",
	OpCreate2:              "create2",
	OpReconfig:             "reconfig",
	OpCheckWatches:         "checkWatches",
	OpRemoveWatches:        "removeWatches",
	OpCreateContainer:      "createContainer",
	OpDeleteContainer:      "deleteContainer",
	OpCreateTTL:            "createTTL",
	OpMultiRead:            "multiRead",
	OpAuth:                 "auth",
	OpSetWatches:           "setWatches",
	OpSASL:                 "sasl",
	OpGetEphemerals:        "getEphemerals",
	OpGetAllChildrenNumber: "getAllChildrenNumber",
	OpSetWatches2:          "setWatches2",
	OpAddWatch:             "addWatch",
	OpWhoAmI:               "whoAmI",
	OpCreateSession:        "createSession",
	OpCloseSession:         "closeSession",
	OpError:                "error",
}

// String returns the op's name as ZooDefs.OpCode spells it ("getChildren2"),
// or "Op(n)" for a number ZooKeeper does not define.
func (o Op) String() string {
	if s, ok := opNames[o]; ok {
		return s
	}
	return "Op(" + strconv.Itoa(int(o)) + ")"
}

// Code is a ZooKeeper error code (KeeperException.Code): a ReplyHeader's
// Err, a failed multi op's result. OK is 0.
type Code int32

// The error codes of ZooKeeper 3.8. Codes from -1 to -99 are system errors,
// from -100 on API errors. ConnectionLoss, OperationTimeout and
// RequestTimeout are raised by clients themselves; ZooKeeper never sends them.
const (
	OK                           Code = 0
	SystemError                  Code = -1
	RuntimeInconsistency         Code = -2
	DataInconsistency            Code = -3
	ConnectionLoss               Code = -4
	MarshallingError             Code = -5
	Unimplemented                Code = -6
	OperationTimeout             Code = -7
	BadArguments                 Code = -8
	UnknownSession               Code = -12 // deprecated in ZooKeeper, never sent
	NewConfigNoQuorum            Code = -13
	ReconfigInProgress           Code = -14
	APIError                     Code = -100
	NoNode                       Code = -101
	NoAuth                       Code = -102
	BadVersion                   Code = -103
	NoChildrenForEphemerals      Code = -108
	NodeExists                   Code = -110
	NotEmpty                     Code = -111
	SessionExpired               Code = -112
	InvalidCallback              Code = -113
	InvalidACL                   Code = -114
	AuthFailed                   Code = -115
	SessionMoved                 Code = -118
	NotReadOnly                  Code = -119
	EphemeralOnLocalSession      Code = -120
	NoWatcher                    Code = -121
	RequestTimeout               Code = -122
	ReconfigDisabled             Code = -123
	SessionClosedRequireSASLAuth Code = -124
	QuotaExceeded                Code = -125
	ThrottledOp                  Code = -127
)

var codeNames = map[Code]string{
	OK:                           "OK",
	SystemError:                  "SYSTEMERROR",
	RuntimeInconsistency:         "RUNTIMEINCONSISTENCY",
	DataInconsistency:            "DATAINCONSISTENCY",
	ConnectionLoss:               "CONNECTIONLOSS",
	MarshallingError:             "MARSHALLINGERROR",
	Unimplemented:                "UNIMPLEMENTED",
	OperationTimeout:             "OPERATIONTIMEOUT",
	BadArguments:                 "BADARGUMENTS",
	UnknownSession:               "UNKNOWNSESSION",
	NewConfigNoQuorum:            "NEWCONFIGNOQUORUM",
	ReconfigInProgress:           "RECONFIGINPROGRESS",
	APIError:                     "APIERROR",
	NoNode:                       "NONODE",
	NoAuth:                       "NOAUTH",
	BadVersion:                   "BADVERSION",
	NoChildrenForEphemerals:      "NOCHILDRENFOREPHEMERALS",
	NodeExists:                   "NODEEXISTS",
	NotEmpty:                     "NOTEMPTY",
	SessionExpired:               "SESSIONEXPIRED",
	InvalidCallback:              "INVALIDCALLBACK",
	InvalidACL:                   "INVALIDACL",
	AuthFailed:                   "AUTHFAILED",
	SessionMoved:                 "SESSIONMOVED",
	NotReadOnly:                  "NOTREADONLY",
	EphemeralOnLocalSession:      "EPHEMERALONLOCALSESSION",
	NoWatcher:                    "NOWATCHER",
	RequestTimeout:               "REQUESTTIMEOUT",
	ReconfigDisabled:             "RECONFIGDISABLED",
	SessionClosedRequireSASLAuth: "SESSIONCLOSEDREQUIRESASLAUTH",
	QuotaExceeded:                "QUOTAEXCEEDED",
	ThrottledOp:                  "THROTTLEDOP",
}

// String returns the code's name as KeeperException.Code spells it
// ("NONODE"), or "Code(n)" for a number ZooKeeper does not define.
func (c Code) String() string {
	if s, ok := codeNames[c]; ok {
		return s
	}
	return "Code(" + strconv.Itoa(int(c)) + ")"
}

// Special xids (ClientCnxn): a reply or request with one of these is not
// part of a connection's ordered stream of requests and replies.
const (
	XidWatch      int32 = -1 // a reply carrying a WatcherEvent
	XidPing       int32 = -2 // a ping and its reply
	XidAuth       int32 = -4 // an AuthPacket and its reply
	XidSetWatches int32 = -8 // setWatches as the Java and node clients send it on reconnecting
)

// EventType is a WatcherEvent's type (Watcher.Event.EventType).
type EventType int32

// The event types of ZooKeeper 3.8.
const (
	EventNone                   EventType = -1 // a change of state, not of a znode
	EventNodeCreated            EventType = 1
	EventNodeDeleted            EventType = 2
	EventNodeDataChanged        EventType = 3
	EventNodeChildrenChanged    EventType = 4
	EventDataWatchRemoved       EventType = 5
	EventChildWatchRemoved      EventType = 6
	EventPersistentWatchRemoved EventType = 7
)

var eventNames = map[EventType]string{
	EventNone:                   "None",
	EventNodeCreated:            "NodeCreated",
	EventNodeDeleted:            "NodeDeleted",
	EventNodeDataChanged:        "NodeDataChanged",
	EventNodeChildrenChanged:    "NodeChildrenChanged",
	EventDataWatchRemoved:       "DataWatchRemoved",
	EventChildWatchRemoved:      "ChildWatchRemoved",
	EventPersistentWatchRemoved: "PersistentWatchRemoved",
}

// String returns the event type's name as ZooKeeper spells it
// ("NodeDeleted"), or "EventType(n)".
func (e EventType) String() string {
	if s, ok := eventNames[e]; ok {
		return s
	}
	return "EventType(" + strconv.Itoa(int(e)) + ")"
}

// State is a WatcherEvent's keeper state (Watcher.Event.KeeperState).
type State int32

// The keeper states of ZooKeeper 3.8. A server sends SyncConnected with
// every znode event; the others are the client's own reports.
const (
	StateUnknown           State = -1 // deprecated
	StateDisconnected      State = 0
	StateNoSyncConnected   State = 1 // deprecated
	StateSyncConnected     State = 3
	StateAuthFailed        State = 4
	StateConnectedReadOnly State = 5
	StateSaslAuthenticated State = 6
	StateClosed            State = 7
	StateExpired           State = -112
)

var stateNames = map[State]string{
	StateUnknown:           "Unknown",
	StateDisconnected:      "Disconnected",
	StateNoSyncConnected:   "NoSyncConnected",
	StateSyncConnected:     "SyncConnected",
	StateAuthFailed:        "AuthFailed",
	StateConnectedReadOnly: "ConnectedReadOnly",
	StateSaslAuthenticated: "SaslAuthenticated",
	StateClosed:            "Closed",
	StateExpired:           "Expired",
}

// String returns the state's name as ZooKeeper spells it ("SyncConnected"),
// or "State(n)".
func (s State) String() string {
	if n, ok := stateNames[s]; ok {
		return n
	}
	return "State(" + strconv.Itoa(int(s)) + ")"
}

// WatcherType is the type of a checkWatches or removeWatches request
// (Watcher.WatcherType): which of a path's watches it means.
type WatcherType int32

// The watcher types of ZooKeeper 3.8.
const (
	WatcherChildren WatcherType = 1
	WatcherData     WatcherType = 2
	WatcherAny      WatcherType = 3
)

// String returns the watcher type's name ("Children"), or "WatcherType(n)".
func (w WatcherType) String() string {
	switch w {
	case WatcherChildren:
		return "Children"
	case WatcherData:
		return "Data"
	case WatcherAny:
		return "Any"
	}
	return "WatcherType(" + strconv.Itoa(int(w)) + ")"
}

// ACL permission bits (ZooDefs.Perms).
const (
	PermRead   int32 = 1 << 0
	PermWrite  int32 = 1 << 1
	PermCreate int32 = 1 << 2
	PermDelete int32 = 1 << 3
	PermAdmin  int32 = 1 << 4
	PermAll    int32 = PermRead | PermWrite | PermCreate | PermDelete | PermAdmin
)
