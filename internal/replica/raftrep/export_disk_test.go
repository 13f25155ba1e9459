package raftrep

// SetExitHalted replaces what ends a node that a disk error halted, and
// returns a function that puts it back.
func SetExitHalted(f func(msg string)) (restore func()) {
	old := exitHalted
	exitHalted = f
	return func() { exitHalted = old }
}

// ClearHaltOn is ClearHalt on another file system.
var ClearHaltOn = clearHalt
