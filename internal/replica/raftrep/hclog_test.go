package raftrep

import (
	"errors"
	"testing"

	"github.com/hashicorp/go-hclog"
)

func TestRoutine(t *testing.T) {
	notFound := errors.New("log not found")
	tests := []struct {
		name  string
		level hclog.Level
		msg   string
		args  []any
		want  hclog.Level
	}{
		{"entry not received yet", hclog.Warn, "failed to get previous log",
			[]any{"previous-index", uint64(12), "last-index", uint64(11), "error", notFound}, hclog.Debug},
		{"entry missing below the last", hclog.Warn, "failed to get previous log",
			[]any{"previous-index", uint64(5), "last-index", uint64(11), "error", notFound}, hclog.Warn},
		{"fields missing", hclog.Warn, "failed to get previous log",
			[]any{"error", notFound}, hclog.Warn},
		{"fields of another type", hclog.Warn, "failed to get previous log",
			[]any{"previous-index", 12, "last-index", 11}, hclog.Warn},
		{"a divergent log", hclog.Warn, "previous log term mis-match",
			[]any{"ours", uint64(3), "remote", uint64(4)}, hclog.Warn},
		{"another level", hclog.Error, "failed to get previous log",
			[]any{"previous-index", uint64(12), "last-index", uint64(11)}, hclog.Error},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := routine(tt.level, tt.msg, tt.args); got != tt.want {
				t.Errorf("routine(%v, %q) = %v, want %v", tt.level, tt.msg, got, tt.want)
			}
		})
	}
}
