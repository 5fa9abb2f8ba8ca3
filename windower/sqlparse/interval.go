package sqlparse

// Interval input, ported from PostgreSQL 17's interval_in: ParseDateTime
// splits the text into fields, DecodeInterval reads them right to left
// (falling back to DecodeISO8601Interval), and AdjustIntervalForTypmod
// applies a field qualifier such as HOUR or DAY TO MINUTE. The session
// setting IntervalStyle is taken to be its default, postgres.

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"

	"github.com/strata-db/strata/messages"
)

// Interval field qualifiers as the parser gives them (INTERVAL_MASK of
// PostgreSQL's datetime.h field numbers) and the typmod without one.
const (
	maskMonth  = 1 << 1
	maskYear   = 1 << 2
	maskDay    = 1 << 3
	maskHour   = 1 << 10
	maskMinute = 1 << 11
	maskSecond = 1 << 12
	// IntervalFullRange is the field qualifier that restricts nothing.
	IntervalFullRange = 0x7FFF
	// IntervalFullPrecision is the precision that rounds nothing.
	IntervalFullPrecision = 0xFFFF
	maxIntervalPrecision  = 6
)

// ParseInterval parses interval text the way PostgreSQL's interval input
// does, with no field qualifier: '1 year 2 months', '@ 3 days ago',
// '1.5 hours', '-1 day +02:00', '1 2:03:04', '1-2', 'P1Y2M3DT4H5M6S',
// 'P0001-02-03T04:05:06', 'infinity', and so on. Errors carry
// PostgreSQL's messages.
func ParseInterval(s string) (messages.Interval, error) {
	return ParseIntervalTyped(s, IntervalFullRange, IntervalFullPrecision)
}

// ParseIntervalTyped parses interval text with a field qualifier, as in
// INTERVAL '1' HOUR or INTERVAL '1 2:03' DAY TO MINUTE: fields is the
// qualifier's mask (IntervalFullRange for none) and precision the number
// of fractional second digits kept (IntervalFullPrecision for all). The
// qualifier decides what a bare number means ('1' HOUR is an hour) and
// zeroes the fields below the last one named, as PostgreSQL does.
func ParseIntervalTyped(s string, fields, precision int) (messages.Interval, error) {
	var itm itmIn
	dtype, err := decodeIntervalText(s, fields, &itm)
	if err != nil {
		return messages.Interval{}, err
	}
	var iv messages.Interval
	switch dtype {
	case dtkLate: // +infinity: every field at its largest
		iv = messages.Interval{Months: math.MaxInt32, Days: math.MaxInt32, Micros: math.MaxInt64}
		return iv, nil // a field qualifier leaves infinity alone
	case dtkEarly:
		iv = messages.Interval{Months: math.MinInt32, Days: math.MinInt32, Micros: math.MinInt64}
		return iv, nil
	}
	months := int64(itm.year)*12 + int64(itm.mon)
	if months > math.MaxInt32 || months < math.MinInt32 {
		return iv, errors.New("interval out of range")
	}
	iv = messages.Interval{Months: int32(months), Days: itm.mday, Micros: itm.usec}
	return adjustForTypmod(iv, fields, precision)
}

// decodeIntervalText runs DecodeInterval, or DecodeISO8601Interval when
// the text is not in the traditional format.
func decodeIntervalText(s string, fields int, itm *itmIn) (int, error) {
	dterr := errBadFormat
	dtype := dtkDelta
	if !strings.ContainsRune(s, 0) {
		f, err := parseDateTime(s)
		dterr = err
		if err == nil {
			dtype, dterr = decodeInterval(f, fields, itm)
		}
		if dterr == errBadFormat {
			*itm = itmIn{}
			dtype, dterr = decodeISO8601Interval(s, itm)
		}
	}
	switch dterr {
	case nil:
		return dtype, nil
	case errFieldOverflow:
		return 0, fmt.Errorf("interval field value out of range: \"%s\"", s)
	}
	return 0, fmt.Errorf("invalid input syntax for type interval: \"%s\"", s)
}

// IntervalTypmod checks an interval type's modifiers (the list that
// INTERVAL ... HOUR TO SECOND(3) or interval(2) becomes) the way
// intervaltypmodin does and returns the field mask and precision.
func IntervalTypmod(mods []int64) (fields, precision int, err error) {
	if len(mods) == 0 {
		return IntervalFullRange, IntervalFullPrecision, nil
	}
	switch mods[0] {
	case maskYear, maskMonth, maskDay, maskHour, maskMinute, maskSecond,
		maskYear | maskMonth,
		maskDay | maskHour,
		maskDay | maskHour | maskMinute,
		maskDay | maskHour | maskMinute | maskSecond,
		maskHour | maskMinute,
		maskHour | maskMinute | maskSecond,
		maskMinute | maskSecond,
		IntervalFullRange:
	default:
		return 0, 0, errors.New("invalid INTERVAL type modifier")
	}
	fields, precision = int(mods[0]), IntervalFullPrecision
	switch len(mods) {
	case 1:
	case 2:
		switch p := mods[1]; {
		case p < 0:
			return 0, 0, fmt.Errorf("INTERVAL(%d) precision must not be negative", p)
		case p > maxIntervalPrecision:
			precision = maxIntervalPrecision // PostgreSQL warns and reduces it
		default:
			precision = int(p)
		}
	default:
		return 0, 0, errors.New("invalid INTERVAL type modifier")
	}
	return fields, precision, nil
}

// adjustForTypmod is AdjustIntervalForTypmod: fields to the right of the
// last one the qualifier names are truncated, and fractional seconds are
// rounded to the precision.
func adjustForTypmod(iv messages.Interval, fields, precision int) (messages.Interval, error) {
	const usHour, usMinute = 3600 * 1000000, 60 * 1000000
	switch fields {
	case IntervalFullRange, maskSecond,
		maskDay | maskHour | maskMinute | maskSecond,
		maskHour | maskMinute | maskSecond,
		maskMinute | maskSecond:
		// fractional seconds: below
	case maskYear:
		iv.Months = iv.Months / 12 * 12
		iv.Days, iv.Micros = 0, 0
	case maskMonth, maskYear | maskMonth:
		iv.Days, iv.Micros = 0, 0
	case maskDay:
		iv.Micros = 0
	case maskHour, maskDay | maskHour:
		iv.Micros = iv.Micros / usHour * usHour
	case maskMinute, maskDay | maskHour | maskMinute, maskHour | maskMinute:
		iv.Micros = iv.Micros / usMinute * usMinute
	default:
		return iv, errors.New("invalid INTERVAL type modifier")
	}
	if precision != IntervalFullPrecision {
		if precision < 0 || precision > maxIntervalPrecision {
			return iv, fmt.Errorf("interval(%d) precision must be between 0 and %d", precision, maxIntervalPrecision)
		}
		scale := int64(1)
		for k := precision; k < maxIntervalPrecision; k++ {
			scale *= 10
		}
		half := scale / 2
		var ok bool
		if iv.Micros >= 0 {
			iv.Micros, ok = addInt64(iv.Micros, half)
		} else {
			iv.Micros, ok = addInt64(iv.Micros, -half)
		}
		if !ok {
			return iv, errors.New("interval out of range")
		}
		iv.Micros -= iv.Micros % scale
	}
	return iv, nil
}

// DecodeInterval's error codes and result types.
var (
	errBadFormat     = errors.New("bad format")
	errFieldOverflow = errors.New("field overflow")
)

const (
	dtkDelta = iota
	dtkLate
	dtkEarly
)

// itmIn is PostgreSQL's pg_itm_in: the interval's fields as they are read.
type itmIn struct {
	usec int64
	mday int32
	mon  int32
	year int32
}

// Field types from ParseDateTime.
const (
	ftNumber  = iota // digits, possibly with a decimal point
	ftString         // letters
	ftDate           // digits and two delimiters, or digits and letters
	ftTime           // digits with colons
	ftTZ             // a sign followed by digits (and : . -)
	ftSpecial        // a sign followed by letters
)

type dtField struct {
	s   string
	typ int
}

const (
	maxDateFields = 25  // MAXDATEFIELDS
	workBufLen    = 256 // interval_in's workbuf: the fields and their terminators
	tokMaxLen     = 10  // TOKMAXLEN: longer words match on their first ten letters
)

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
func isAlpha(c byte) bool { return (c|0x20) >= 'a' && (c|0x20) <= 'z' }
func isAlnum(c byte) bool { return isDigit(c) || isAlpha(c) }
func isSpace(c byte) bool { return c == ' ' || (c >= '\t' && c <= '\r') }
func isPunct(c byte) bool { return c > ' ' && c < 0x7f && !isAlnum(c) }
func toLower(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// parseDateTime is ParseDateTime: it breaks the text into fields.
func parseDateTime(s string) ([]dtField, error) {
	var out []dtField
	used := 0 // bytes of the work buffer used, terminators included
	i := 0
	at := func(k int) byte { // the byte at k, or NUL past the end
		if k < len(s) {
			return s[k]
		}
		return 0
	}
	for i < len(s) {
		c := s[i]
		if isSpace(c) {
			i++
			continue
		}
		if len(out) >= maxDateFields {
			return nil, errBadFormat
		}
		var b []byte
		appendc := func(c byte) error {
			if used+1 >= workBufLen {
				return errBadFormat
			}
			used++
			b = append(b, c)
			return nil
		}
		var typ int
		var err error
		take := func(ok func(byte) bool, lower bool) {
			for err == nil && ok(at(i)) {
				c := at(i)
				if lower {
					c = toLower(c)
				}
				err = appendc(c)
				i++
			}
		}
		switch {
		case isDigit(c):
			take(isDigit, false)
			switch d := at(i); {
			case d == ':':
				typ = ftTime
				take(func(c byte) bool { return c == ':' }, false)
				take(func(c byte) bool { return isDigit(c) || c == ':' || c == '.' }, false)
			case d == '-' || d == '/' || d == '.':
				if err == nil {
					err = appendc(d)
					i++
				}
				if isDigit(at(i)) {
					typ = ftDate
					if d == '.' {
						typ = ftNumber
					}
					take(isDigit, false)
					if at(i) == d {
						typ = ftDate
						take(func(c byte) bool { return c == d }, false)
						take(func(c byte) bool { return isDigit(c) || c == d }, false)
					}
				} else {
					typ = ftDate
					take(func(c byte) bool { return isAlnum(c) || c == d }, true)
				}
			default:
				typ = ftNumber
			}
		case c == '.':
			err = appendc(c)
			i++
			take(isDigit, false)
			typ = ftNumber
		case isAlpha(c):
			typ = ftString
			take(isAlpha, true)
			isDate := false
			switch d := at(i); {
			case d == '-' || d == '/' || d == '.':
				isDate = true
			case d == '+' || isDigit(d):
				_, known := lookupToken(dateTokens, string(b))
				isDate = !known
			}
			if isDate {
				typ = ftDate
				if err == nil {
					err = appendc(toLower(at(i)))
					i++
				}
				take(func(c byte) bool {
					return c == '+' || c == '-' || c == '/' || c == '_' || c == '.' || c == ':' || isAlnum(c)
				}, true)
			}
		case c == '+' || c == '-':
			err = appendc(c)
			i++
			for isSpace(at(i)) {
				i++
			}
			switch d := at(i); {
			case isDigit(d):
				typ = ftTZ
				take(func(c byte) bool { return isDigit(c) || c == ':' || c == '.' || c == '-' }, false)
			case isAlpha(d):
				typ = ftSpecial
				take(isAlpha, true)
			default:
				return nil, errBadFormat
			}
		case isPunct(c): // other punctuation only separates fields
			i++
			continue
		default:
			return nil, errBadFormat
		}
		if err != nil {
			return nil, err
		}
		used++ // the field's terminator
		out = append(out, dtField{s: string(b), typ: typ})
	}
	return out, nil
}

// Token types (datetime.h) and the units DecodeInterval knows.
const (
	tokUnits = iota
	tokAgo
	tokReserved
	tokIgnore
	tokOther // month and day names, AM/PM, AD/BC, "dst", "t": not in an interval
)

const (
	unitNone = iota // type IGNORE_DTF: a bare number takes its unit from the qualifier
	unitDead        // after "ago" or infinity: no number may precede
	unitMicro
	unitMilli
	unitSecond
	unitMinute
	unitHour
	unitDay
	unitWeek
	unitMonth
	unitYear
	unitDecade
	unitCentury
	unitMillennium
	unitOther // quarter, julian, dow, timezone...: not an interval unit
)

const (
	valLate  = 1
	valEarly = 2
)

type token struct{ typ, val int }

// deltaTokens is deltatktbl, the unit words DecodeUnits knows.
var deltaTokens = map[string]token{
	"@": {tokIgnore, 0}, "ago": {tokAgo, 0},
	"c": {tokUnits, unitCentury}, "cent": {tokUnits, unitCentury}, "centuries": {tokUnits, unitCentury}, "century": {tokUnits, unitCentury},
	"d": {tokUnits, unitDay}, "day": {tokUnits, unitDay}, "days": {tokUnits, unitDay},
	"dec": {tokUnits, unitDecade}, "decade": {tokUnits, unitDecade}, "decades": {tokUnits, unitDecade}, "decs": {tokUnits, unitDecade},
	"h": {tokUnits, unitHour}, "hour": {tokUnits, unitHour}, "hours": {tokUnits, unitHour}, "hr": {tokUnits, unitHour}, "hrs": {tokUnits, unitHour},
	"m": {tokUnits, unitMinute}, "min": {tokUnits, unitMinute}, "mins": {tokUnits, unitMinute}, "minute": {tokUnits, unitMinute}, "minutes": {tokUnits, unitMinute},
	"microsecon": {tokUnits, unitMicro},
	"mil":        {tokUnits, unitMillennium}, "millennia": {tokUnits, unitMillennium}, "millennium": {tokUnits, unitMillennium}, "mils": {tokUnits, unitMillennium},
	"millisecon": {tokUnits, unitMilli},
	"mon":        {tokUnits, unitMonth}, "mons": {tokUnits, unitMonth}, "month": {tokUnits, unitMonth}, "months": {tokUnits, unitMonth},
	"ms": {tokUnits, unitMilli}, "msec": {tokUnits, unitMilli}, "msecond": {tokUnits, unitMilli}, "mseconds": {tokUnits, unitMilli}, "msecs": {tokUnits, unitMilli},
	"qtr": {tokUnits, unitOther}, "quarter": {tokUnits, unitOther},
	"s": {tokUnits, unitSecond}, "sec": {tokUnits, unitSecond}, "second": {tokUnits, unitSecond}, "seconds": {tokUnits, unitSecond}, "secs": {tokUnits, unitSecond},
	"timezone": {tokUnits, unitOther}, "timezone_h": {tokUnits, unitOther}, "timezone_m": {tokUnits, unitOther},
	"us": {tokUnits, unitMicro}, "usec": {tokUnits, unitMicro}, "usecond": {tokUnits, unitMicro}, "useconds": {tokUnits, unitMicro}, "usecs": {tokUnits, unitMicro},
	"w": {tokUnits, unitWeek}, "week": {tokUnits, unitWeek}, "weeks": {tokUnits, unitWeek},
	"y": {tokUnits, unitYear}, "year": {tokUnits, unitYear}, "years": {tokUnits, unitYear}, "yr": {tokUnits, unitYear}, "yrs": {tokUnits, unitYear},
}

// dateTokens is datetktbl, the words DecodeSpecial knows (and
// ParseDateTime consults to tell a word from a time zone name).
var dateTokens = func() map[string]token {
	m := map[string]token{
		"+infinity": {tokReserved, valLate}, "infinity": {tokReserved, valLate}, "-infinity": {tokReserved, valEarly},
		"at": {tokIgnore, 0}, "on": {tokIgnore, 0},
		"d": {tokUnits, unitDay}, "h": {tokUnits, unitHour}, "m": {tokUnits, unitMonth}, "mm": {tokUnits, unitMinute},
		"s": {tokUnits, unitSecond}, "y": {tokUnits, unitYear},
		"dow": {tokUnits, unitOther}, "doy": {tokUnits, unitOther}, "isodow": {tokUnits, unitOther}, "isoyear": {tokUnits, unitOther},
		"j": {tokUnits, unitOther}, "jd": {tokUnits, unitOther}, "julian": {tokUnits, unitOther},
	}
	for _, w := range []string{"allballs", "epoch", "now", "today", "tomorrow", "yesterday"} {
		m[w] = token{tokReserved, 0}
	}
	for _, w := range []string{"ad", "am", "apr", "april", "aug", "august", "bc", "dec", "december", "dst",
		"feb", "february", "fri", "friday", "jan", "january", "jul", "july", "jun", "june", "mar", "march",
		"may", "mon", "monday", "nov", "november", "oct", "october", "pm", "sat", "saturday", "sep", "sept",
		"september", "sun", "sunday", "t", "thu", "thur", "thurs", "thursday", "tue", "tues", "tuesday",
		"wed", "wednesday", "weds"} {
		m[w] = token{tokOther, 0}
	}
	return m
}()

// lookupToken finds a lower-case word in a table, comparing at most its
// first tokMaxLen bytes as PostgreSQL's strncmp does.
func lookupToken(table map[string]token, w string) (token, bool) {
	if len(w) > tokMaxLen {
		w = w[:tokMaxLen]
	}
	t, ok := table[w]
	return t, ok
}

// Field masks (DTK_M) that catch a unit given twice.
const (
	fmYear = 1 << iota
	fmMonth
	fmDay
	fmHour
	fmMinute
	fmSecond
	fmMilli
	fmMicro
	fmWeek
	fmDecade
	fmCentury
	fmMillennium
	fmAllSecs = fmSecond | fmMilli | fmMicro
	fmDate    = fmYear | fmMonth | fmDay
	fmTime    = fmHour | fmMinute | fmAllSecs
)

const (
	usPerSec  = 1000000
	usPerMin  = 60 * usPerSec
	usPerHour = 60 * usPerMin
	usPerDay  = 24 * usPerHour
)

// decodeInterval is DecodeInterval: it reads the fields right to left so
// that a unit is seen before its number.
func decodeInterval(f []dtField, fields int, itm *itmIn) (int, error) {
	dtype := dtkDelta
	isBefore, parsingUnit := false, false
	fmask := 0
	typ := unitNone
	nf := len(f)
	for i := nf - 1; i >= 0; i-- {
		tmask := 0
		field := f[i].s
		switch f[i].typ {
		case ftTime:
			us, err := decodeTimeForInterval(field, fields)
			if err != nil {
				return 0, err
			}
			itm.usec = us
			tmask = fmTime
			typ, parsingUnit = unitDay, false
		case ftTZ, ftDate, ftNumber:
			if f[i].typ == ftTZ && strings.IndexByte(field[1:], ':') >= 0 {
				// A signed hh:mm[:ss]: like a time, with the sign.
				if us, err := decodeTimeForInterval(field[1:], fields); err == nil {
					if field[0] == '-' {
						if us == math.MinInt64 {
							return 0, errFieldOverflow
						}
						us = -us
					}
					itm.usec = us
					tmask = fmTime
					typ, parsingUnit = unitDay, false
					break
				}
			}
			var err error
			if typ, tmask, err = decodeNumberField(field, typ, fields, itm); err != nil {
				return 0, err
			}
			parsingUnit = false
		case ftString, ftSpecial:
			if parsingUnit {
				return 0, errBadFormat // two units in a row
			}
			tok, ok := lookupToken(deltaTokens, field)
			if !ok {
				tok, ok = lookupToken(dateTokens, field)
			}
			if !ok {
				return 0, errBadFormat
			}
			switch tok.typ {
			case tokIgnore:
				typ = unitNone
				continue
			case tokUnits:
				typ, parsingUnit = tok.val, true
			case tokAgo:
				if i != nf-1 {
					return 0, errBadFormat // "ago" only at the end
				}
				isBefore, typ = true, unitDead
			case tokReserved:
				tmask = fmDate | fmTime
				if (tok.val != valLate && tok.val != valEarly) || i != nf-1 {
					return 0, errBadFormat
				}
				dtype = dtkLate
				if tok.val == valEarly {
					dtype = dtkEarly
				}
				typ = unitDead
			default:
				return 0, errBadFormat
			}
		default:
			return 0, errBadFormat
		}
		if tmask&fmask != 0 {
			return 0, errBadFormat
		}
		fmask |= tmask
	}
	if fmask == 0 || parsingUnit {
		return 0, errBadFormat
	}
	if isBefore {
		if itm.usec == math.MinInt64 || itm.mday == math.MinInt32 || itm.mon == math.MinInt32 || itm.year == math.MinInt32 {
			return 0, errFieldOverflow
		}
		itm.usec, itm.mday, itm.mon, itm.year = -itm.usec, -itm.mday, -itm.mon, -itm.year
	}
	return dtype, nil
}

// decodeNumberField handles a number in DecodeInterval: its unit is typ,
// or, when no unit follows, the last field of the qualifier. It returns
// the unit for the field to its left and the field's mask.
func decodeNumberField(field string, typ, fields int, itm *itmIn) (int, int, error) {
	if typ == unitNone {
		switch fields {
		case maskYear:
			typ = unitYear
		case maskMonth, maskYear | maskMonth:
			typ = unitMonth
		case maskDay:
			typ = unitDay
		case maskHour, maskDay | maskHour:
			typ = unitHour
		case maskMinute, maskHour | maskMinute, maskDay | maskHour | maskMinute:
			typ = unitMinute
		default:
			typ = unitSecond
		}
	}
	val, rest, err := strtoi64(field)
	if err != nil {
		return 0, 0, err
	}
	var fval float64
	switch {
	case strings.HasPrefix(rest, "-"): // SQL "years-months"
		val2, rest2, err := strtoint(rest[1:])
		if err != nil || val2 < 0 || val2 >= 12 {
			return 0, 0, errFieldOverflow
		}
		if rest2 != "" {
			return 0, 0, errBadFormat
		}
		typ = unitMonth
		if field[0] == '-' {
			val2 = -val2
		}
		var ok1, ok2 bool
		val, ok1 = mulInt64(val, 12)
		val, ok2 = addInt64(val, int64(val2))
		if !ok1 || !ok2 {
			return 0, 0, errFieldOverflow
		}
	case strings.HasPrefix(rest, "."):
		if fval, err = parseFraction(rest); err != nil {
			return 0, 0, err
		}
		if field[0] == '-' {
			fval = -fval
		}
	case rest != "":
		return 0, 0, errBadFormat
	}
	tmask := 0
	ok := true
	switch typ {
	case unitMicro:
		ok = itm.adjustMicros(val, fval, 1)
		tmask = fmMicro
	case unitMilli:
		ok = itm.adjustMicros(val, fval, 1000)
		tmask = fmMilli
	case unitSecond:
		ok = itm.adjustMicros(val, fval, usPerSec)
		tmask = fmSecond
		if fval != 0 {
			tmask = fmAllSecs // fractional seconds are milli- and microseconds too
		}
	case unitMinute:
		ok = itm.adjustMicros(val, fval, usPerMin)
		tmask = fmMinute
	case unitHour:
		ok = itm.adjustMicros(val, fval, usPerHour)
		tmask = fmHour
		typ = unitDay // '1 2 hours' is a day and two hours
	case unitDay:
		ok = itm.adjustDays(val, 1) && itm.adjustFractMicros(fval, usPerDay)
		tmask = fmDay
	case unitWeek:
		ok = itm.adjustDays(val, 7) && itm.adjustFractDays(fval, 7)
		tmask = fmWeek
	case unitMonth:
		ok = itm.adjustMonths(val) && itm.adjustFractDays(fval, 30)
		tmask = fmMonth
	case unitYear:
		ok = itm.adjustYears(val, 1) && itm.adjustFractYears(fval, 1)
		tmask = fmYear
	case unitDecade:
		ok = itm.adjustYears(val, 10) && itm.adjustFractYears(fval, 10)
		tmask = fmDecade
	case unitCentury:
		ok = itm.adjustYears(val, 100) && itm.adjustFractYears(fval, 100)
		tmask = fmCentury
	case unitMillennium:
		ok = itm.adjustYears(val, 1000) && itm.adjustFractYears(fval, 1000)
		tmask = fmMillennium
	default:
		return 0, 0, errBadFormat
	}
	if !ok {
		return 0, 0, errFieldOverflow
	}
	return typ, tmask, nil
}

// decodeTimeForInterval is DecodeTimeForInterval: hh:mm, hh:mm:ss[.f] or
// mm:ss.f (and mm:ss under MINUTE TO SECOND), in microseconds.
func decodeTimeForInterval(s string, fields int) (int64, error) {
	hour, rest, err := strtoi64(s)
	if err != nil {
		return 0, err
	}
	if !strings.HasPrefix(rest, ":") {
		return 0, errBadFormat
	}
	m, rest, err := strtoint(rest[1:])
	if err != nil {
		return 0, err
	}
	min, sec, fsec := int64(m), int64(0), int64(0)
	switch {
	case rest == "":
		if fields == maskMinute|maskSecond { // mm:ss
			if hour > math.MaxInt32 || hour < math.MinInt32 {
				return 0, errFieldOverflow
			}
			hour, min, sec = 0, hour, min
		}
	case rest[0] == '.': // mm:ss.f, always
		if fsec, err = parseFractionalSecond(rest); err != nil {
			return 0, err
		}
		if hour > math.MaxInt32 || hour < math.MinInt32 {
			return 0, errFieldOverflow
		}
		hour, min, sec = 0, hour, min
	case rest[0] == ':':
		s, rest2, err := strtoint(rest[1:])
		if err != nil {
			return 0, err
		}
		sec = int64(s)
		switch {
		case strings.HasPrefix(rest2, "."):
			if fsec, err = parseFractionalSecond(rest2); err != nil {
				return 0, err
			}
		case rest2 != "":
			return 0, errBadFormat
		}
	default:
		return 0, errBadFormat
	}
	if hour < 0 || min < 0 || min > 59 || sec < 0 || sec > 60 || fsec < 0 || fsec > usPerSec {
		return 0, errFieldOverflow
	}
	us := fsec
	for _, p := range [][2]int64{{hour, usPerHour}, {min, usPerMin}, {sec, usPerSec}} {
		var ok bool
		if us, ok = mulAddInt64(p[0], p[1], us); !ok {
			return 0, errFieldOverflow
		}
	}
	return us, nil
}

// The Adjust* helpers of datetime.c: each reports false on overflow.

func (itm *itmIn) adjustFractMicros(frac float64, scale int64) bool {
	if frac == 0 {
		return true
	}
	frac *= float64(scale)
	us := int64(frac)
	frac -= float64(us)
	switch {
	case frac > 0.5:
		us++
	case frac < -0.5:
		us--
	}
	var ok bool
	itm.usec, ok = addInt64(itm.usec, us)
	return ok
}

func (itm *itmIn) adjustFractDays(frac float64, scale int) bool {
	if frac == 0 {
		return true
	}
	frac *= float64(scale)
	extra := int32(frac)
	var ok bool
	if itm.mday, ok = addInt32(itm.mday, extra); !ok {
		return false
	}
	return itm.adjustFractMicros(frac-float64(extra), usPerDay)
}

func (itm *itmIn) adjustFractYears(frac float64, scale int) bool {
	extra := int32(math.RoundToEven(frac * float64(scale) * 12))
	var ok bool
	itm.mon, ok = addInt32(itm.mon, extra)
	return ok
}

func (itm *itmIn) adjustMicros(val int64, fval float64, scale int64) bool {
	var ok bool
	if itm.usec, ok = mulAddInt64(val, scale, itm.usec); !ok {
		return false
	}
	return itm.adjustFractMicros(fval, scale)
}

func (itm *itmIn) adjustDays(val int64, scale int32) bool {
	if val < math.MinInt32 || val > math.MaxInt32 {
		return false
	}
	d, ok := mulInt32(int32(val), scale)
	if !ok {
		return false
	}
	itm.mday, ok = addInt32(itm.mday, d)
	return ok
}

func (itm *itmIn) adjustMonths(val int64) bool {
	if val < math.MinInt32 || val > math.MaxInt32 {
		return false
	}
	var ok bool
	itm.mon, ok = addInt32(itm.mon, int32(val))
	return ok
}

func (itm *itmIn) adjustYears(val int64, scale int32) bool {
	if val < math.MinInt32 || val > math.MaxInt32 {
		return false
	}
	y, ok := mulInt32(int32(val), scale)
	if !ok {
		return false
	}
	itm.year, ok = addInt32(itm.year, y)
	return ok
}

// parseFraction is ParseFraction: "." and optional digits, to the end.
func parseFraction(s string) (float64, error) {
	if s == "." {
		return 0, nil
	}
	for k := 1; k < len(s); k++ {
		if !isDigit(s[k]) {
			return 0, errBadFormat
		}
	}
	f, err := strconv.ParseFloat("0"+s, 64)
	if err != nil {
		return 0, errBadFormat
	}
	return f, nil
}

func parseFractionalSecond(s string) (int64, error) {
	f, err := parseFraction(s)
	if err != nil {
		return 0, err
	}
	return int64(math.RoundToEven(f * 1000000)), nil
}

// strtoi64 is strtoll in base 10: an optional sign and digits, returning
// the rest of s (all of s when there are no digits, as C does).
func strtoi64(s string) (int64, string, error) {
	k := 0
	for k < len(s) && isSpace(s[k]) {
		k++
	}
	neg := false
	if k < len(s) && (s[k] == '+' || s[k] == '-') {
		neg = s[k] == '-'
		k++
	}
	start := k
	var u uint64
	overflow := false
	for k < len(s) && isDigit(s[k]) {
		d := uint64(s[k] - '0')
		if u > (math.MaxUint64-d)/10 {
			overflow = true
		} else {
			u = u*10 + d
		}
		k++
	}
	if k == start {
		return 0, s, nil
	}
	limit := uint64(math.MaxInt64)
	if neg {
		limit++
	}
	if overflow || u > limit {
		return 0, s[k:], errFieldOverflow
	}
	if neg {
		return -int64(u-1) - 1, s[k:], nil
	}
	return int64(u), s[k:], nil
}

// strtoint is PostgreSQL's strtoint: strtol limited to int32.
func strtoint(s string) (int32, string, error) {
	v, rest, err := strtoi64(s)
	if err != nil {
		return 0, rest, err
	}
	if v < math.MinInt32 || v > math.MaxInt32 {
		return 0, rest, errFieldOverflow
	}
	return int32(v), rest, nil
}

func addInt64(a, b int64) (int64, bool) {
	r := a + b
	return r, (r > a) == (b > 0)
}

func mulInt64(a, b int64) (int64, bool) {
	if a == 0 || b == 0 {
		return 0, true
	}
	hi, lo := bits.Mul64(uabs(a), uabs(b))
	neg := (a < 0) != (b < 0)
	if hi != 0 || lo > math.MaxInt64+uint64(b2u(neg)) {
		return 0, false
	}
	if neg {
		return -int64(lo-1) - 1, true
	}
	return int64(lo), true
}

// mulAddInt64 returns sum + val*scale.
func mulAddInt64(val, scale, sum int64) (int64, bool) {
	p, ok := mulInt64(val, scale)
	if !ok {
		return 0, false
	}
	return addInt64(sum, p)
}

func addInt32(a, b int32) (int32, bool) {
	r := int64(a) + int64(b)
	return int32(r), r >= math.MinInt32 && r <= math.MaxInt32
}

func mulInt32(a, b int32) (int32, bool) {
	r := int64(a) * int64(b)
	return int32(r), r >= math.MinInt32 && r <= math.MaxInt32
}

func uabs(a int64) uint64 {
	if a < 0 {
		return uint64(-(a + 1)) + 1
	}
	return uint64(a)
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// decodeISO8601Interval is DecodeISO8601Interval: the "format with
// designators" (P1Y2M3DT4H5M6S, with W for weeks) and the "alternative
// format" (P0001-02-03T04:05:06 or P00010203T040506).
func decodeISO8601Interval(s string, itm *itmIn) (int, error) {
	if len(s) < 2 || s[0] != 'P' {
		return 0, errBadFormat
	}
	str := s[1:]
	datepart, havefield := true, false
	for str != "" {
		if str[0] == 'T' {
			datepart, havefield = false, false
			str = str[1:]
			continue
		}
		fieldstart := str
		val, fval, rest, err := parseISO8601Number(str)
		if err != nil {
			return 0, err
		}
		str = rest
		var unit byte
		if str != "" {
			unit, str = str[0], str[1:]
		}
		if datepart {
			switch unit {
			case 'Y':
				if !itm.adjustYears(val, 1) || !itm.adjustFractYears(fval, 1) {
					return 0, errFieldOverflow
				}
			case 'M':
				if !itm.adjustMonths(val) || !itm.adjustFractDays(fval, 30) {
					return 0, errFieldOverflow
				}
			case 'W':
				if !itm.adjustDays(val, 7) || !itm.adjustFractDays(fval, 7) {
					return 0, errFieldOverflow
				}
			case 'D':
				if !itm.adjustDays(val, 1) || !itm.adjustFractMicros(fval, usPerDay) {
					return 0, errFieldOverflow
				}
			case 'T', 0, '-':
				if unit != '-' && iso8601IntegerWidth(fieldstart) == 8 && !havefield {
					// Basic alternative format: YYYYMMDD.
					if !itm.adjustYears(val/10000, 1) || !itm.adjustMonths((val/100)%100) ||
						!itm.adjustDays(val%100, 1) || !itm.adjustFractMicros(fval, usPerDay) {
						return 0, errFieldOverflow
					}
					if unit == 0 {
						return dtkDelta, nil
					}
					datepart, havefield = false, false
					continue
				}
				// Extended alternative format: YYYY-MM-DD.
				if havefield {
					return 0, errBadFormat
				}
				if !itm.adjustYears(val, 1) || !itm.adjustFractYears(fval, 1) {
					return 0, errFieldOverflow
				}
				if unit == 0 {
					return dtkDelta, nil
				}
				if unit == 'T' {
					datepart, havefield = false, false
					continue
				}
				if val, fval, str, err = parseISO8601Number(str); err != nil {
					return 0, err
				}
				if !itm.adjustMonths(val) || !itm.adjustFractDays(fval, 30) {
					return 0, errFieldOverflow
				}
				if str == "" {
					return dtkDelta, nil
				}
				if str[0] == 'T' {
					datepart, havefield = false, false
					continue
				}
				if str[0] != '-' {
					return 0, errBadFormat
				}
				if val, fval, str, err = parseISO8601Number(str[1:]); err != nil {
					return 0, err
				}
				if !itm.adjustDays(val, 1) || !itm.adjustFractMicros(fval, usPerDay) {
					return 0, errFieldOverflow
				}
				if str == "" {
					return dtkDelta, nil
				}
				if str[0] == 'T' {
					datepart, havefield = false, false
					continue
				}
				return 0, errBadFormat
			default:
				return 0, errBadFormat
			}
		} else {
			switch unit {
			case 'H':
				if !itm.adjustMicros(val, fval, usPerHour) {
					return 0, errFieldOverflow
				}
			case 'M':
				if !itm.adjustMicros(val, fval, usPerMin) {
					return 0, errFieldOverflow
				}
			case 'S':
				if !itm.adjustMicros(val, fval, usPerSec) {
					return 0, errFieldOverflow
				}
			case 0, ':':
				if unit == 0 && iso8601IntegerWidth(fieldstart) == 6 && !havefield {
					// Basic alternative format: hhmmss. (PostgreSQL adds
					// the fraction as microseconds, not seconds.)
					if !itm.adjustMicros(val/10000, 0, usPerHour) || !itm.adjustMicros((val/100)%100, 0, usPerMin) ||
						!itm.adjustMicros(val%100, 0, usPerSec) || !itm.adjustFractMicros(fval, 1) {
						return 0, errFieldOverflow
					}
					return dtkDelta, nil
				}
				// Extended alternative format: hh:mm:ss.
				if havefield {
					return 0, errBadFormat
				}
				if !itm.adjustMicros(val, fval, usPerHour) {
					return 0, errFieldOverflow
				}
				if unit == 0 {
					return dtkDelta, nil
				}
				if val, fval, str, err = parseISO8601Number(str); err != nil {
					return 0, err
				}
				if !itm.adjustMicros(val, fval, usPerMin) {
					return 0, errFieldOverflow
				}
				if str == "" {
					return dtkDelta, nil
				}
				if str[0] != ':' {
					return 0, errBadFormat
				}
				if val, fval, str, err = parseISO8601Number(str[1:]); err != nil {
					return 0, err
				}
				if !itm.adjustMicros(val, fval, usPerSec) {
					return 0, errFieldOverflow
				}
				if str == "" {
					return dtkDelta, nil
				}
				return 0, errBadFormat
			default:
				return 0, errBadFormat
			}
		}
		havefield = true
	}
	return dtkDelta, nil
}

func iso8601IntegerWidth(s string) int {
	s = strings.TrimPrefix(s, "-")
	n := 0
	for n < len(s) && isDigit(s[n]) {
		n++
	}
	return n
}

// parseISO8601Number is ParseISO8601Number: a number as strtod reads it,
// at most 1e15 in magnitude, split into its integer part (towards zero)
// and fraction.
func parseISO8601Number(s string) (int64, float64, string, error) {
	if s == "" || !(isDigit(s[0]) || s[0] == '-' || s[0] == '.') {
		return 0, 0, s, errBadFormat
	}
	v, n, err := strtod(s)
	if err != nil || n == 0 {
		return 0, 0, s, errBadFormat
	}
	if math.IsNaN(v) || v < -1e15 || v > 1e15 {
		return 0, 0, s, errFieldOverflow
	}
	ip := math.Trunc(v)
	return int64(ip), v - ip, s[n:], nil
}

// strtod reads the longest prefix of s that C's strtod accepts (decimal
// and hexadecimal numbers, inf, infinity and nan), returning its length,
// 0 when there is none. An error is strtod's ERANGE (overflow, or a
// nonzero number too small for a normal double).
func strtod(s string) (float64, int, error) {
	k := 0
	for k < len(s) && isSpace(s[k]) {
		k++
	}
	numStart := k
	if k < len(s) && (s[k] == '+' || s[k] == '-') {
		k++
	}
	lower := strings.ToLower(s[k:])
	switch {
	case strings.HasPrefix(lower, "infinity"):
		return math.Inf(signOf(s[numStart])), k + 8, nil
	case strings.HasPrefix(lower, "inf"):
		return math.Inf(signOf(s[numStart])), k + 3, nil
	case strings.HasPrefix(lower, "nan"):
		end := k + 3
		if end < len(s) && s[end] == '(' {
			j := end + 1
			for j < len(s) && (isAlnum(s[j]) || s[j] == '_') {
				j++
			}
			if j < len(s) && s[j] == ')' {
				end = j + 1
			}
		}
		return math.NaN(), end, nil
	}
	hex := strings.HasPrefix(lower, "0x")
	digit, expChar, j := isDigit, byte('e'), k
	if hex {
		digit = func(c byte) bool { return isDigit(c) || ((c|0x20) >= 'a' && (c|0x20) <= 'f') }
		expChar, j = 'p', k+2
	}
	digits, nonzero := 0, false
	scan := func() {
		for j < len(s) && digit(s[j]) {
			nonzero = nonzero || s[j] != '0'
			j, digits = j+1, digits+1
		}
	}
	scan()
	if j < len(s) && s[j] == '.' {
		j++
		scan()
	}
	if digits == 0 {
		if hex { // "0x" with no digits: strtod reads the "0"
			return 0, k + 1, nil
		}
		return 0, 0, nil
	}
	num := s[numStart:j]
	if j < len(s) && (s[j]|0x20) == expChar {
		e := j + 1
		if e < len(s) && (s[e] == '+' || s[e] == '-') {
			e++
		}
		if e < len(s) && isDigit(s[e]) {
			for e < len(s) && isDigit(s[e]) {
				e++
			}
			num, j = s[numStart:e], e
		}
	}
	if hex && !strings.ContainsAny(num, "pP") {
		num += "p0" // Go wants the exponent of a hexadecimal float
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil {
		var ne *strconv.NumError
		if errors.As(err, &ne) && ne.Err == strconv.ErrRange {
			return v, j, errFieldOverflow
		}
		return 0, 0, nil
	}
	if nonzero && math.Abs(v) < 0x1p-1022 { // underflow: glibc sets ERANGE
		return v, j, errFieldOverflow
	}
	return v, j, nil
}

func signOf(c byte) int {
	if c == '-' {
		return -1
	}
	return 1
}
