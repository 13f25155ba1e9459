package raftrep

import (
	"errors"
	"log/slog"
	"strings"
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

// TestLogFormatted: a value Raft logs with hclog.Fmt is written formatted,
// as hclog would write it, not as the slice that holds it.
func TestLogFormatted(t *testing.T) {
	var b strings.Builder
	l := newHCLogger(slog.New(slog.NewTextHandler(&b, nil)))
	l.Info("initial configuration", "index", 1, "servers", hclog.Fmt("%+v", []struct{ ID string }{{"n1"}}))
	l.With("percent", hclog.Fmt("%0.2f%%", 12.5)).Warn("progress", "odd", hclog.Format{7})
	for _, want := range []string{`servers=[{ID:n1}]`, `percent=12.50%`, `odd=7`} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("log %q lacks %s", b.String(), want)
		}
	}
}
