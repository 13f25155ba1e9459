//go:build linux

package jepsen

import (
	"testing"

	"github.com/hashicorp/raft"

	"github.com/latchd/latch/internal/replica/raftrep"
)

// TestCompareRaftLogs: two logs that agree, a deposed leader's tail of an
// older term, and an entry of one term that differs between two nodes.
func TestCompareRaftLogs(t *testing.T) {
	type e struct {
		term uint64
		data string
	}
	tests := []struct {
		name     string
		a, b     []e
		diverged int
	}{
		{"agree", []e{{1, "x"}, {1, "y"}, {2, "z"}}, []e{{1, "x"}, {1, "y"}, {2, "z"}}, 0},
		{"a deposed leader's tail", []e{{1, "x"}, {1, "y"}, {2, "z"}}, []e{{1, "x"}, {1, "y"}, {3, "w"}}, 0},
		{"one term, two entries", []e{{1, "x"}, {2, ""}, {2, "z"}}, []e{{1, "x"}, {2, "v"}, {2, "z"}}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dirs := map[string]string{}
			for id, entries := range map[string][]e{"a": tt.a, "b": tt.b} {
				dir := t.TempDir()
				s, err := raftrep.OpenLog(dir)
				if err != nil {
					t.Fatal(err)
				}
				var logs []*raft.Log
				for i, x := range entries {
					logs = append(logs, &raft.Log{Index: uint64(i + 1), Term: x.term, Type: raft.LogCommand, Data: []byte(x.data)})
				}
				if err := s.StoreLogs(logs); err != nil {
					t.Fatal(err)
				}
				s.Close()
				dirs[id] = dir
			}
			res, err := compareRaftLogs(dirs)
			if err != nil {
				t.Fatal(err)
			}
			if res.entries != 3 || res.diverged != tt.diverged {
				t.Errorf("compared %d, diverged %d; want 3, %d: %v", res.entries, res.diverged, tt.diverged, res.problems)
			}
		})
	}
}
