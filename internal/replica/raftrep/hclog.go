package raftrep

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"

	"github.com/hashicorp/go-hclog"
)

// hclogger is Raft's logger (hclog) writing to a slog.Logger. Raft's
// levels map onto slog's; Trace becomes Debug-4.
type hclogger struct {
	l    *slog.Logger
	name string
	args []any
}

func newHCLogger(l *slog.Logger) hclog.Logger { return &hclogger{l: l} }

func slogLevel(level hclog.Level) slog.Level {
	switch level {
	case hclog.Trace:
		return slog.LevelDebug - 4
	case hclog.Debug:
		return slog.LevelDebug
	case hclog.Warn:
		return slog.LevelWarn
	case hclog.Error:
		return slog.LevelError
	}
	return slog.LevelInfo
}

func (h *hclogger) Log(level hclog.Level, msg string, args ...any) {
	if level == hclog.Off || level == hclog.NoLevel && !h.l.Enabled(context.Background(), slog.LevelInfo) {
		return
	}
	if h.name != "" {
		msg = h.name + ": " + msg
	}
	level = routine(level, msg, args)
	all := append(h.args[:len(h.args):len(h.args)], args...)
	for i, a := range all {
		if f, ok := a.(hclog.Format); ok {
			all[i] = formatted(f)
		}
	}
	h.l.Log(context.Background(), slogLevel(level), msg, all...)
}

// formatted is a value that Raft logs with hclog.Fmt: a format and its
// arguments, rendered as hclog renders it, when the record is written.
type formatted hclog.Format

func (f formatted) LogValue() slog.Value {
	if len(f) == 0 {
		return slog.StringValue("")
	}
	format, ok := f[0].(string)
	if !ok {
		return slog.StringValue(fmt.Sprint(f...))
	}
	return slog.StringValue(fmt.Sprintf(format, f[1:]...))
}

// routine lowers to Debug a warning of Raft's that is routine here: a
// follower refusing an AppendEntries whose previous entry it has not
// received yet. A commit notice (notice.go) meets it whenever it
// overtakes that entry on its way to the slower follower; Raft's own
// replication meets it after a leader change, and repairs it. A previous
// entry that the follower holds with another term (a divergent log) stays
// a warning.
func routine(level hclog.Level, msg string, args []any) hclog.Level {
	if level != hclog.Warn || msg != "failed to get previous log" {
		return level
	}
	var prev, last uint64
	var okPrev, okLast bool
	for i := 0; i+1 < len(args); i += 2 {
		switch args[i] {
		case "previous-index":
			prev, okPrev = args[i+1].(uint64)
		case "last-index":
			last, okLast = args[i+1].(uint64)
		}
	}
	if okPrev && okLast && prev > last {
		return hclog.Debug
	}
	return level
}

func (h *hclogger) Trace(msg string, args ...any) { h.Log(hclog.Trace, msg, args...) }
func (h *hclogger) Debug(msg string, args ...any) { h.Log(hclog.Debug, msg, args...) }
func (h *hclogger) Info(msg string, args ...any)  { h.Log(hclog.Info, msg, args...) }
func (h *hclogger) Warn(msg string, args ...any)  { h.Log(hclog.Warn, msg, args...) }
func (h *hclogger) Error(msg string, args ...any) { h.Log(hclog.Error, msg, args...) }

func (h *hclogger) enabled(level hclog.Level) bool {
	return h.l.Enabled(context.Background(), slogLevel(level))
}

func (h *hclogger) IsTrace() bool { return h.enabled(hclog.Trace) }
func (h *hclogger) IsDebug() bool { return h.enabled(hclog.Debug) }
func (h *hclogger) IsInfo() bool  { return h.enabled(hclog.Info) }
func (h *hclogger) IsWarn() bool  { return h.enabled(hclog.Warn) }
func (h *hclogger) IsError() bool { return h.enabled(hclog.Error) }

func (h *hclogger) ImpliedArgs() []any { return h.args }

func (h *hclogger) With(args ...any) hclog.Logger {
	return &hclogger{l: h.l, name: h.name, args: append(h.args[:len(h.args):len(h.args)], args...)}
}

func (h *hclogger) Name() string { return h.name }

func (h *hclogger) Named(name string) hclog.Logger {
	if h.name != "" {
		name = h.name + "." + name
	}
	return &hclogger{l: h.l, name: name, args: h.args}
}

func (h *hclogger) ResetNamed(name string) hclog.Logger {
	return &hclogger{l: h.l, name: name, args: h.args}
}

// SetLevel does nothing: the slog handler decides.
func (h *hclogger) SetLevel(hclog.Level) {}

func (h *hclogger) GetLevel() hclog.Level {
	switch {
	case h.IsTrace():
		return hclog.Trace
	case h.IsDebug():
		return hclog.Debug
	case h.IsInfo():
		return hclog.Info
	case h.IsWarn():
		return hclog.Warn
	}
	return hclog.Error
}

func (h *hclogger) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(h.StandardWriter(opts), "", 0)
}

func (h *hclogger) StandardWriter(*hclog.StandardLoggerOptions) io.Writer {
	return writerFunc(func(p []byte) (int, error) {
		h.Info(string(p))
		return len(p), nil
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
