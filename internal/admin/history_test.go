package admin

import (
	"testing"
	"time"

	"github.com/latchd/latch/internal/metrics"
)

// snap builds a snapshot at second sec with the given totals: grants
// granted after waiting waitSum in all, every wait in the +Inf bucket.
func snap(sec int, grants, releases uint64, waitSum time.Duration) metrics.Snapshot {
	counts := make([]uint64, len(metrics.Bounds)+1)
	counts[len(counts)-1] = grants // every wait in the +Inf bucket
	return metrics.Snapshot{
		Time:      time.Unix(int64(sec), 0),
		Held:      int(grants - releases),
		Protocols: []metrics.ProtocolStats{{Protocol: "p", Grants: grants, Releases: releases}},
		Wait:      metrics.Histogram{Count: grants, Sum: waitSum, Counts: counts},
	}
}

func TestHistory(t *testing.T) {
	h := newHistory(3)
	if got := h.samples(time.Time{}); len(got) != 0 {
		t.Fatalf("empty history has %d samples", len(got))
	}
	h.record(snap(0, 0, 0, 0))
	if got := h.samples(time.Time{}); len(got) != 0 {
		t.Fatalf("one snapshot gave %d samples, want none (no interval yet)", len(got))
	}
	h.record(snap(2, 10, 4, 10*time.Second))  // 5 grants/s, 2 releases/s
	h.record(snap(2, 10, 4, 10*time.Second))  // no time passed: ignored
	h.record(snap(3, 10, 10, 10*time.Second)) // no grant: no wait
	h.record(snap(4, 12, 10, 16*time.Second)) // 2 grants, 3s each
	h.record(snap(5, 13, 10, 19*time.Second)) // the ring drops the oldest

	got := h.samples(time.Time{})
	want := []Sample{
		{Time: Time{time.Unix(3, 0)}, GrantsPerSecond: 0, ReleasesPerSecond: 6, Held: 0},
		{Time: Time{time.Unix(4, 0)}, GrantsPerSecond: 2, WaitMeanSeconds: 3, WaitP99Seconds: 3600, Held: 2},
		{Time: Time{time.Unix(5, 0)}, GrantsPerSecond: 1, WaitMeanSeconds: 3, WaitP99Seconds: 3600, Held: 3},
	}
	if len(got) != len(want) {
		t.Fatalf("samples = %+v, want %d", got, len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("sample %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if got := h.samples(time.Unix(4, 0)); len(got) != 1 || !got[0].Time.Equal(time.Unix(5, 0)) {
		t.Errorf("samples since 4s = %+v, want the last one", got)
	}
}

func TestTimeJSON(t *testing.T) {
	tm := Time{time.Date(2025, 3, 4, 5, 6, 7, 80, time.FixedZone("X", 3600))}
	b, err := tm.MarshalJSON()
	if err != nil || string(b) != `"2025-03-04T04:06:07.000000080Z"` {
		t.Fatalf("MarshalJSON = %s, %v", b, err)
	}
	var back Time
	if err := back.UnmarshalJSON(b); err != nil || !back.Equal(tm.Time) {
		t.Fatalf("UnmarshalJSON(%s) = %v, %v", b, back, err)
	}
	for _, bad := range []string{`12`, `"yesterday"`, `"`} {
		if err := back.UnmarshalJSON([]byte(bad)); err == nil {
			t.Errorf("UnmarshalJSON(%s) succeeded", bad)
		}
	}
}
