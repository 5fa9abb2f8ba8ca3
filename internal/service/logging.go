package service

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// NewLogger returns a logger writing to w in format "text" or "json" at the
// given level ("debug", "info", "warn", "error").
//
// Values are typed the same way in both formats, so that a query over the
// JSON logs need not guess: a duration (a time.Duration attribute, such as
// elapsed, grace, retry_in) is a number of seconds, never nanoseconds or
// "1.5s"; sizes (grant, memory, bytes and every key ending in _bytes) are
// numbers of bytes, never "100MiB". README, "Operating strata", lists the
// keys.
func NewLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv, ReplaceAttr: typedValues}
	switch strings.ToLower(format) {
	case "text", "":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	default:
		return nil, fmt.Errorf("log format %q: want text or json", format)
	}
}

// typedValues writes durations as seconds.
func typedValues(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		return slog.Float64(a.Key, a.Value.Duration().Seconds())
	}
	return a
}
