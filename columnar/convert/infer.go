package convert

import (
	"math/big"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
)

// InferRows is how many leading rows of a CSV file ImportCSV reads to
// infer the column types when no schema is given.
const InferRows = 20480

// The types a CSV column may be inferred as, narrowest first: a column
// takes the first that reads every one of its non-NULL values in the rows
// looked at, utf8 if none does (or all are NULL).
var inferTypes = []arrow.DataType{
	arrow.PrimitiveTypes.Int64,
	arrow.PrimitiveTypes.Float64,
	arrow.FixedWidthTypes.Boolean,
	arrow.FixedWidthTypes.Date32,
	naiveTimestamp,
	&arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"},
	arrow.BinaryTypes.String,
}

// fits returns the set of inferTypes (bit i for inferTypes[i]) that read
// v. A date is both a date32 and a timestamp without a zone (midnight); a
// timestamp with a zone offset is only a timestamptz, one without only a
// timestamp, so a column mixing the two is utf8. A timestamp more precise
// than microseconds fits neither, and is kept as text rather than rounded.
func fits(v string) uint8 {
	const (
		tInt64 = 1 << iota
		tFloat64
		tBool
		tDate
		tTimestamp
		tTimestampTZ
		tUTF8
	)
	m := uint8(tUTF8)
	if _, err := strconv.ParseInt(v, 10, 64); err == nil {
		m |= tInt64 | tFloat64
	} else if exactFloat(v) {
		m |= tFloat64
	}
	if _, err := strconv.ParseBool(v); err == nil {
		m |= tBool
	}
	if c, ok := scanCivil(v); ok && c.nsec%1000 == 0 {
		switch {
		case !c.hasTime:
			m |= tDate | tTimestamp
		case c.zoned:
			m |= tTimestampTZ
		default:
			m |= tTimestamp
		}
	}
	return m
}

// exactFloat reports whether v reads as a float64 without losing what it
// says beyond a decimal fraction's rounding: an integer too large for
// int64 is not a float64 unless it is one exactly (a 20-digit ID would
// otherwise lose its last digits).
func exactFloat(v string) bool {
	f, err := parseFloat(v, 64)
	if err != nil {
		return false
	}
	digits := strings.TrimLeft(v, "+-")
	if digits == "" || strings.Trim(digits, "0123456789") != "" {
		return true // not an integer
	}
	n, ok := new(big.Int).SetString(v, 10)
	if !ok {
		return false
	}
	exact, _ := new(big.Float).SetFloat64(f).Int(nil)
	return exact.Cmp(n) == 0
}

// parseFloat is strconv.ParseFloat restricted to decimal spellings (and
// NaN and infinities): no hexadecimal mantissas, no underscores, so that a
// column of hex IDs is not read as numbers.
func parseFloat(v string, bits int) (float64, error) {
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c >= '0' && c <= '9', c == '.', c == 'e', c == 'E', c == '+', c == '-':
		default:
			switch strings.ToLower(strings.TrimLeft(v, "+-")) {
			case "nan", "inf", "infinity":
				return strconv.ParseFloat(v, bits)
			}
			return 0, strconv.ErrSyntax
		}
	}
	return strconv.ParseFloat(v, bits)
}

// inferSchema returns the schema of CSV columns named names whose first
// rows are rows: every column nullable, of the first of inferTypes that
// reads all its non-NULL values.
func inferSchema(names []string, rows []probedRow, nulls []string) *arrow.Schema {
	fields := make([]arrow.Field, len(names))
	for c, name := range names {
		utf8Only := uint8(1) << (len(inferTypes) - 1)
		m := utf8Only // all NULL: utf8
		seen := false
		for _, row := range rows {
			v := row.rec[c]
			if slices.Contains(nulls, v) {
				continue
			}
			if !seen {
				m, seen = fits(v), true
			} else {
				m &= fits(v)
			}
			if m == utf8Only {
				break // nothing narrower is left
			}
		}
		t := 0
		for m&(1<<t) == 0 {
			t++
		}
		fields[c] = arrow.Field{Name: name, Type: inferTypes[t], Nullable: true}
	}
	return arrow.NewSchema(fields, nil)
}

// civil is a date, and perhaps a time of day and a zone offset, as written
// in a CSV field.
type civil struct {
	year, month, day     int
	hour, min, sec, nsec int
	hasTime, zoned       bool
	offset               int // seconds east of UTC, if zoned
}

// scanCivil reads v as a date or a timestamp, the forms DuckDB and
// PostgreSQL read and write:
//
//	2024-01-15
//	2024-01-15 10:30[:00[.123456789]]    (or T for the space)
//	... followed by a zone: Z, +02:00, +0200, +02 (optionally after a space)
//
// It checks the calendar (no February 30th, no hour 24).
func scanCivil(v string) (c civil, ok bool) {
	if len(v) < 10 || v[4] != '-' || v[7] != '-' {
		return c, false
	}
	var ok1, ok2, ok3 bool
	c.year, ok1 = num(v[0:4])
	c.month, ok2 = num(v[5:7])
	c.day, ok3 = num(v[8:10])
	if !ok1 || !ok2 || !ok3 || c.month < 1 || c.month > 12 || c.day < 1 || c.day > daysIn(c.year, c.month) {
		return c, false
	}
	v = v[10:]
	if v == "" {
		return c, true
	}
	if v[0] != ' ' && v[0] != 'T' && v[0] != 't' {
		return c, false
	}
	v = v[1:]
	if len(v) < 5 || v[2] != ':' {
		return c, false
	}
	c.hour, ok1 = num(v[0:2])
	c.min, ok2 = num(v[3:5])
	if !ok1 || !ok2 || c.hour > 23 || c.min > 59 {
		return c, false
	}
	c.hasTime = true
	v = v[5:]
	if len(v) >= 3 && v[0] == ':' {
		if c.sec, ok1 = num(v[1:3]); !ok1 || c.sec > 59 {
			return c, false
		}
		v = v[3:]
		if len(v) > 0 && v[0] == '.' {
			n := 1
			for n < len(v) && v[n] >= '0' && v[n] <= '9' {
				n++
			}
			if n == 1 || n > 10 {
				return c, false
			}
			frac, _ := num(v[1:n])
			for range 10 - n {
				frac *= 10
			}
			c.nsec, v = frac, v[n:]
		}
	}
	if v == "" {
		return c, true
	}
	if len(v) > 1 && v[0] == ' ' && (v[1] == '+' || v[1] == '-') {
		v = v[1:]
	}
	if v == "Z" || v == "z" {
		c.zoned = true
		return c, true
	}
	if v[0] != '+' && v[0] != '-' {
		return c, false
	}
	sign := 1
	if v[0] == '-' {
		sign = -1
	}
	v = v[1:]
	var hh, mm, ss int
	switch {
	case len(v) == 2:
		hh, ok1 = num(v)
		ok2 = true
	case len(v) == 4:
		hh, ok1 = num(v[0:2])
		mm, ok2 = num(v[2:4])
	case len(v) == 5 && v[2] == ':':
		hh, ok1 = num(v[0:2])
		mm, ok2 = num(v[3:5])
	case len(v) == 8 && v[2] == ':' && v[5] == ':':
		hh, ok1 = num(v[0:2])
		mm, ok2 = num(v[3:5])
		ss, ok3 = num(v[6:8])
		ok2 = ok2 && ok3 && ss <= 59
	default:
		return c, false
	}
	if !ok1 || !ok2 || hh > 23 || mm > 59 {
		return c, false
	}
	c.zoned, c.offset = true, sign*(hh*3600+mm*60+ss)
	return c, true
}

// time returns c as a time: in its own offset if it has one, else in loc.
func (c civil) time(loc *time.Location) time.Time {
	if c.zoned {
		loc = time.FixedZone("", c.offset)
	}
	return time.Date(c.year, time.Month(c.month), c.day, c.hour, c.min, c.sec, c.nsec, loc)
}

// num parses a string of ASCII digits.
func num(s string) (int, bool) {
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int(s[i]-'0')
	}
	return n, len(s) > 0
}

func daysIn(year, month int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}
