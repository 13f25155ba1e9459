package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/latchd/latch/internal/config"
)

// TestNewLogger: the logger writes in the format asked, from the level
// asked; newLevelLogger's level is the one a reload changes.
func TestNewLogger(t *testing.T) {
	tests := []struct {
		level, format string
		err           bool
		want          string // in the line of an info message; "" for none
	}{
		{level: "info", format: "text", want: "msg=hello"},
		{level: "info", format: "json", want: `"msg":"hello"`},
		{level: "warn", format: "text", want: ""},
		{level: "info", format: "xml", err: true},
		{level: "loud", format: "text", err: true},
	}
	for _, tt := range tests {
		var b bytes.Buffer
		l, err := newLogger(&b, config.LogConfig{Level: tt.level, Format: tt.format})
		if (err != nil) != tt.err {
			t.Errorf("newLogger(%s, %s) error = %v, want error %v", tt.level, tt.format, err, tt.err)
			continue
		}
		if err != nil {
			continue
		}
		l.Info("hello")
		if got := b.String(); tt.want == "" && got != "" || !strings.Contains(got, tt.want) {
			t.Errorf("newLogger(%s, %s) logged %q, want %q", tt.level, tt.format, got, tt.want)
		}
	}

	var b bytes.Buffer
	level := new(slog.LevelVar)
	l, err := newLevelLogger(&b, config.LogConfig{Level: "warn", Format: "text"}, level)
	if err != nil || level.Level() != slog.LevelWarn {
		t.Fatalf("newLevelLogger: level %v, error %v; want warn", level.Level(), err)
	}
	l.Debug("hidden")
	level.Set(slog.LevelDebug) // as a reload does
	l.Debug("shown")
	if got := b.String(); strings.Contains(got, "hidden") || !strings.Contains(got, "shown") {
		t.Errorf("logged %q, want the debug line after the level changed only", got)
	}
}
