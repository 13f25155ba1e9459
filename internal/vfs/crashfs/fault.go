package crashfs

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
)

// Op is the kind of an operation, as a Fault sees it.
type Op int

// The operations of an FS and of its files. Close and Name are not
// operations: they change nothing that a crash could lose, and cannot
// fail by a Fault.
const (
	OpOpen     Op = iota + 1 // FS.OpenFile without O_CREATE
	OpCreate                 // FS.OpenFile with O_CREATE, whether or not the file exists
	OpReadAt                 // File.ReadAt
	OpWriteAt                // File.WriteAt
	OpSize                   // File.Size
	OpTruncate               // File.Truncate
	OpSync                   // File.Sync
	OpDatasync               // File.Datasync
	OpRemove                 // FS.Remove
	OpRename                 // FS.Rename
	OpMkdir                  // FS.Mkdir
	OpReadDir                // FS.ReadDir
	OpStat                   // FS.Stat
	OpSyncDir                // FS.SyncDir
	OpSyncAll                // FS.SyncAll
)

var opNames = [...]string{
	OpOpen:     "open",
	OpCreate:   "create",
	OpReadAt:   "read",
	OpWriteAt:  "write",
	OpSize:     "size",
	OpTruncate: "truncate",
	OpSync:     "sync",
	OpDatasync: "datasync",
	OpRemove:   "remove",
	OpRename:   "rename",
	OpMkdir:    "mkdir",
	OpReadDir:  "readdir",
	OpStat:     "stat",
	OpSyncDir:  "syncdir",
	OpSyncAll:  "syncall",
}

// String returns the name of op that its errors carry (*fs.PathError's
// Op): "open", "write", "syncdir" and so on.
func (op Op) String() string {
	if op > 0 && int(op) < len(opNames) {
		return opNames[op]
	}
	return "Op(" + strconv.Itoa(int(op)) + ")"
}

// Event is an operation about to run, as a Fault sees it.
type Event struct {
	// Seq numbers the FS's operations from 1 on: FS.Ops returns the
	// Seq of the last one. Operations on the FS's files count too.
	Seq int
	Op  Op
	// Name is the name the caller passed, or, for a method of a File,
	// the name the file was opened with; for Rename, the old name.
	Name string
	// NewName is Rename's new name.
	NewName string
	// Off is the offset of a ReadAt or a WriteAt, or Truncate's size.
	Off int64
	// Len is the length of a ReadAt's or a WriteAt's buffer.
	Len int
}

// A Fault decides whether an operation fails: it is called before every
// operation, and the error it returns, if not nil, fails the operation
// before it changes anything, and is wrapped in the operation's error.
// Two failures leave a trace: a WriteAt failed by a *ShortWrite writes
// part of its bytes, and a failed sync loses the dirty sectors it was to
// make durable (see the package doc). A Fault that only returns nil can record a trace.
//
// A Fault runs with the FS locked: it must not call the FS or its files.
type Fault func(Event) error

// ErrKilled, wrapped by the error a Fault returns, fails the operation as
// if the process had died before it made the call: nothing changes, and a
// sync that fails so loses nothing (where any other error of a sync marks
// its sectors lost, see File.Sync). A test stops a workload at an
// operation with it, then calls Kill, to look at what a kill there leaves.
var ErrKilled = errors.New("crashfs: the process was killed")

// ShortWrite, returned by a Fault for a WriteAt, makes the write put the
// first N bytes of its buffer (all of them if N is larger), then fail
// with Err, or with syscall.ENOSPC (a full disk) if Err is nil. Returned
// for any other operation, it fails the operation as its Err would.
type ShortWrite struct {
	N   int
	Err error
}

func (e *ShortWrite) Error() string {
	return fmt.Sprintf("short write of %d bytes: %v", e.N, e.err())
}

// Unwrap returns the error the write fails with.
func (e *ShortWrite) Unwrap() error { return e.err() }

func (e *ShortWrite) err() error {
	if e.Err == nil {
		return syscall.ENOSPC
	}
	return e.Err
}

// ErrCrashed is the error of every method of a File opened before a Kill
// or a PowerLoss: the process that held it is gone. It wraps
// os.ErrClosed.
var ErrCrashed = fmt.Errorf("crashfs: file opened before a crash: %w", os.ErrClosed)

// errUnsupportedFlag is the error of OpenFile with a flag the model does
// not know (O_APPEND, O_SYNC, ...): better than a model that ignores it.
var errUnsupportedFlag = fmt.Errorf("crashfs: flag not modelled: %w", errors.ErrUnsupported)
