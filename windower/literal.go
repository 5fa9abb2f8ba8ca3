package windower

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
)

// coerceLiteral gives a string constant compared with an expression of
// another kind the expression's type, as PostgreSQL resolves a quoted
// literal (of type unknown) against the other operand of a comparison:
// '41' against an integer is 41, '2024-01-15' against a date is that day,
// '2024-01-15 10:30:00+02' against a timestamptz that instant. BI tools
// and clients of the simple protocol send their parameters so. Any other
// constant is returned as it is.
func coerceLiteral(l *expr, r *vector) (*vector, error) {
	if r.kind != kindString || l.kind == kindString || r.nulls != nil {
		return r, nil
	}
	s := strings.TrimSpace(r.strs[0])
	out := &vector{kind: l.kind, typ: l.typ}
	bad := func(typ string) error {
		return fmt.Errorf("invalid input syntax for type %s: %q", typ, r.strs[0])
	}
	switch l.kind {
	case kindFloat:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, bad("double precision")
		}
		out.floats = []float64{f}
	case kindBool:
		b, ok := parseBoolLiteral(s)
		if !ok {
			return nil, bad("boolean")
		}
		out.ints = []int64{0}
		if b {
			out.ints[0] = 1
		}
	default:
		switch t := l.typ.(type) {
		case *arrow.Date32Type:
			d, err := time.Parse(time.DateOnly, s)
			if err != nil {
				return nil, bad("date")
			}
			out.ints = []int64{int64(arrow.Date32FromTime(d))}
		case *arrow.TimestampType:
			v, err := parseTimestampLiteral(s, t)
			if err != nil {
				name := "timestamp"
				if t.TimeZone != "" {
					name = "timestamp with time zone"
				}
				return nil, bad(name)
			}
			out.ints = []int64{v}
		default:
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return nil, bad("integer")
			}
			out.ints = []int64{n}
		}
	}
	return out, nil
}

// parseBoolLiteral reads PostgreSQL's spellings of a boolean.
func parseBoolLiteral(s string) (value, ok bool) {
	switch strings.ToLower(s) {
	case "t", "true", "y", "yes", "on", "1":
		return true, true
	case "f", "false", "n", "no", "off", "0":
		return false, true
	}
	return false, false
}

// timestampLayouts are the forms a timestamp literal may take: a date,
// then a time to the minute or the second with up to nine fractional
// digits, after a space or a T.
var timestampLayouts = []string{
	"2006-01-02", "2006-01-02 15:04", "2006-01-02 15:04:05.999999999",
	"2006-01-02T15:04", "2006-01-02T15:04:05.999999999",
}

// parseTimestampLiteral reads s as a value of t, in t's unit. A zone
// (Z, +HH, +HH:MM, +HHMM after the time) places the instant of a
// timestamptz; without one it is read in UTC, the session's zone. A
// timestamp without time zone ignores a zone, as PostgreSQL does.
func parseTimestampLiteral(s string, t *arrow.TimestampType) (int64, error) {
	local, zone := splitZone(s)
	var when time.Time
	var err error
	for _, layout := range timestampLayouts {
		if when, err = time.ParseInLocation(layout, local, time.UTC); err == nil {
			break
		}
	}
	if err != nil {
		return 0, err
	}
	if zone != nil && t.TimeZone != "" {
		when = time.Date(when.Year(), when.Month(), when.Day(), when.Hour(), when.Minute(), when.Second(), when.Nanosecond(), zone)
	}
	switch t.Unit {
	case arrow.Second:
		return when.Unix(), nil
	case arrow.Millisecond:
		return when.UnixMilli(), nil
	case arrow.Microsecond:
		return when.UnixMicro(), nil
	default:
		return when.UnixNano(), nil
	}
}

// splitZone cuts a trailing zone off a timestamp literal: Z, or a sign
// after the time with hours and optional minutes. It returns the rest
// and the zone, or nil when there is none.
func splitZone(s string) (string, *time.Location) {
	if strings.HasSuffix(s, "Z") || strings.HasSuffix(s, "z") {
		return strings.TrimSpace(s[:len(s)-1]), time.UTC
	}
	i := strings.LastIndexAny(s, "+-")
	if i <= len("2006-01-02") { // the date's own dashes
		return s, nil
	}
	off := strings.ReplaceAll(s[i+1:], ":", "")
	if len(off) != 2 && len(off) != 4 {
		return s, nil
	}
	hh, err1 := strconv.Atoi(off[:2])
	mm := 0
	var err2 error
	if len(off) == 4 {
		mm, err2 = strconv.Atoi(off[2:])
	}
	if err1 != nil || err2 != nil || hh > 15 || mm > 59 {
		return s, nil
	}
	secs := hh*3600 + mm*60
	if s[i] == '-' {
		secs = -secs
	}
	return strings.TrimSpace(s[:i]), time.FixedZone("", secs)
}
