package raftrep

import (
	"testing"
	"time"
)

func TestGatheringPlan(t *testing.T) {
	const commit = 2 * time.Millisecond
	type step struct {
		expect     int   // committed with it
		waitedCame *bool // then a wait ended, with or without commands
		wantExpect int
		wantWait   time.Duration
	}
	came, none := true, false
	tests := []struct {
		name  string
		steps []step
	}{
		{"one command: no wait", []step{{expect: 1, wantExpect: 0, wantWait: 0}}},
		{"several: half the commit", []step{{expect: 16, wantExpect: 16, wantWait: commit / 2}}},
		{"a wait that paid keeps waiting", []step{
			{expect: 8, wantExpect: 8, wantWait: commit / 2, waitedCame: &came},
			{expect: 8, wantExpect: 8, wantWait: commit / 2},
		}},
		{"waits in vain skip 1, 2, 4 entries", []step{
			{expect: 8, wantExpect: 8, wantWait: commit / 2, waitedCame: &none},
			{expect: 8}, // skipped
			{expect: 8, wantExpect: 8, wantWait: commit / 2, waitedCame: &none},
			{expect: 8}, {expect: 8},
			{expect: 8, wantExpect: 8, wantWait: commit / 2, waitedCame: &none},
			{expect: 8}, {expect: 8}, {expect: 8}, {expect: 8},
			{expect: 8, wantExpect: 8, wantWait: commit / 2, waitedCame: &came},
			{expect: 8, wantExpect: 8, wantWait: commit / 2},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var g gathering
			for i, s := range tt.steps {
				g.committed(s.expect, commit)
				expect, wait := g.plan()
				if expect != s.wantExpect || wait != s.wantWait {
					t.Fatalf("step %d: plan() = %d, %v; want %d, %v", i, expect, wait, s.wantExpect, s.wantWait)
				}
				if s.waitedCame != nil {
					g.waited(*s.waitedCame)
				}
			}
		})
	}
}

func TestGatheringSkipBounded(t *testing.T) {
	var g gathering
	for range 20 {
		g.waited(false)
	}
	if g.skip != maxSkip {
		t.Errorf("after 20 waits in vain, skip = %d, want %d", g.skip, maxSkip)
	}
}

func TestGatheringWaitBounded(t *testing.T) {
	var g gathering
	g.committed(8, 3*time.Second) // a commit slowed by a stall
	if _, wait := g.plan(); wait != maxWait {
		t.Errorf("after a 3 s commit, wait = %v, want %v", wait, maxWait)
	}
}
