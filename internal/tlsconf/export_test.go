package tlsconf

import (
	"os"
	"sync/atomic"
	"time"
)

// SetClock makes f read the time from now, for tests of the checks.
func (f *Files) SetClock(now func() time.Time) { f.now = now }

// CountStats counts the files' stats from now on, into n, until the test
// calls the returned function.
func CountStats(n *atomic.Int64) (restore func()) {
	stat = func(name string) (os.FileInfo, error) {
		n.Add(1)
		return os.Stat(name)
	}
	return func() { stat = os.Stat }
}
