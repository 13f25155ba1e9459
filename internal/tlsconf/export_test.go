package tlsconf

import "time"

// SetClock makes f read the time from now, for tests of the checks.
func (f *Files) SetClock(now func() time.Time) { f.now = now }
