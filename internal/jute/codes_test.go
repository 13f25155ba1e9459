package jute

import "testing"

func TestOpString(t *testing.T) {
	for _, tc := range []struct {
		op   Op
		want string
	}{
		{OpCreate, "create"}, {OpGetChildren2, "getChildren2"}, {OpCreateContainer, "createContainer"},
		{OpMultiRead, "multiRead"}, {OpWhoAmI, "whoAmI"}, {OpCloseSession, "closeSession"},
		{OpCreateSession, "createSession"}, {OpError, "error"}, {OpPing, "ping"},
		{10, "Op(10)"}, {-2, "Op(-2)"}, {108, "Op(108)"},
	} {
		if got := tc.op.String(); got != tc.want {
			t.Errorf("Op(%d).String() = %q, want %q", int32(tc.op), got, tc.want)
		}
	}
}

// TestOpNumbers pins the numbers of ZooDefs.OpCode, which the table of
// names is keyed by.
func TestOpNumbers(t *testing.T) {
	want := map[Op]int32{
		OpCreate: 1, OpDelete: 2, OpExists: 3, OpGetData: 4, OpSetData: 5, OpGetACL: 6, OpSetACL: 7,
		OpGetChildren: 8, OpSync: 9, OpPing: 11, OpGetChildren2: 12, OpCheck: 13, OpMulti: 14,
		OpCreate2: 15, OpReconfig: 16, OpCheckWatches: 17, OpRemoveWatches: 18, OpCreateContainer: 19,
		OpDeleteContainer: 20, OpCreateTTL: 21, OpMultiRead: 22, OpAuth: 100, OpSetWatches: 101,
		OpSASL: 102, OpGetEphemerals: 103, OpGetAllChildrenNumber: 104, OpSetWatches2: 105,
		OpAddWatch: 106, OpWhoAmI: 107, OpCreateSession: -10, OpCloseSession: -11, OpError: -1,
	}
	for op, n := range want {
		if int32(op) != n {
			t.Errorf("%v = %d, want %d", op, int32(op), n)
		}
	}
	if len(opNames) != len(want)+1 { // and notification, 0
		t.Errorf("%d op names, want %d", len(opNames), len(want)+1)
	}
}

func TestCodeString(t *testing.T) {
	for _, tc := range []struct {
		c    Code
		want string
	}{
		{OK, "OK"}, {SystemError, "SYSTEMERROR"}, {RuntimeInconsistency, "RUNTIMEINCONSISTENCY"},
		{Unimplemented, "UNIMPLEMENTED"}, {BadArguments, "BADARGUMENTS"}, {NewConfigNoQuorum, "NEWCONFIGNOQUORUM"},
		{ReconfigInProgress, "RECONFIGINPROGRESS"}, {NoNode, "NONODE"}, {NodeExists, "NODEEXISTS"},
		{SessionExpired, "SESSIONEXPIRED"}, {SessionMoved, "SESSIONMOVED"}, {NoWatcher, "NOWATCHER"},
		{ReconfigDisabled, "RECONFIGDISABLED"}, {QuotaExceeded, "QUOTAEXCEEDED"}, {ThrottledOp, "THROTTLEDOP"},
		{-9, "Code(-9)"}, {-15, "Code(-15)"}, {-126, "Code(-126)"}, {1, "Code(1)"},
	} {
		if got := tc.c.String(); got != tc.want {
			t.Errorf("Code(%d).String() = %q, want %q", int32(tc.c), got, tc.want)
		}
	}
	// Every code ZooKeeper 3.8 defines, by number.
	defined := []int32{0, -1, -2, -3, -4, -5, -6, -7, -8, -12, -13, -14, -100, -101, -102, -103, -108,
		-110, -111, -112, -113, -114, -115, -118, -119, -120, -121, -122, -123, -124, -125, -127}
	for _, n := range defined {
		if _, ok := codeNames[Code(n)]; !ok {
			t.Errorf("code %d has no name", n)
		}
	}
	if len(codeNames) != len(defined) {
		t.Errorf("%d code names, want %d", len(codeNames), len(defined))
	}
}

func TestEventStateStrings(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{EventNone.String(), "None"},
		{EventNodeCreated.String(), "NodeCreated"},
		{EventNodeChildrenChanged.String(), "NodeChildrenChanged"},
		{EventPersistentWatchRemoved.String(), "PersistentWatchRemoved"},
		{EventType(9).String(), "EventType(9)"},
		{StateSyncConnected.String(), "SyncConnected"},
		{StateDisconnected.String(), "Disconnected"},
		{StateExpired.String(), "Expired"},
		{State(2).String(), "State(2)"},
		{WatcherAny.String(), "Any"},
		{WatcherChildren.String(), "Children"},
		{WatcherData.String(), "Data"},
		{WatcherType(0).String(), "WatcherType(0)"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
	if StateSyncConnected != 3 || StateDisconnected != 0 || StateExpired != -112 {
		t.Error("keeper state numbers differ from ZooKeeper's")
	}
	if XidWatch != -1 || XidPing != -2 || XidAuth != -4 || XidSetWatches != -8 {
		t.Error("special xids differ from ZooKeeper's")
	}
	if PermAll != 31 {
		t.Errorf("PermAll = %d, want 31", PermAll)
	}
}
