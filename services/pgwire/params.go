package main

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	pg "github.com/pganalyze/pg_query_go/v6"
)

// paramCount returns the highest $n of sql (0 for none).
func paramCount(sql string) (int, error) {
	res, err := pg.Scan(sql)
	if err != nil {
		return 0, syntaxError(err)
	}
	n := 0
	for _, t := range res.Tokens {
		if t.Token == pg.Token_PARAM {
			k, err := strconv.Atoi(sql[t.Start+1 : t.End])
			if err != nil || k < 1 || k > 65535 {
				return 0, &pgError{code: "42P02", msg: fmt.Sprintf("there is no parameter %s", sql[t.Start:t.End])}
			}
			n = max(n, k)
		}
	}
	return n, nil
}

// bindParams returns sql with each $n replaced by the literal of value n:
// a number as it is written, a boolean as TRUE or FALSE, NULL, and
// anything else as a quoted string (” doubled; standard_conforming_strings
// is on, so a backslash is itself). The scanner finds the $n tokens, so a
// $1 inside a string or a comment is left alone. oids are the types the
// client gave in Parse (0: unspecified), formats the Bind's parameter
// formats.
func bindParams(sql string, oids []uint32, formats []int16, values [][]byte) (string, error) {
	if len(values) == 0 {
		return sql, nil
	}
	lits := make([]string, len(values))
	for i, v := range values {
		var oid uint32
		if i < len(oids) {
			oid = oids[i]
		}
		format := int16(0)
		switch {
		case len(formats) == 1:
			format = formats[0]
		case i < len(formats):
			format = formats[i]
		}
		lit, err := literal(oid, format, v)
		if err != nil {
			return "", &pgError{code: "22P02", msg: fmt.Sprintf("parameter $%d: %v", i+1, err)}
		}
		lits[i] = lit
	}
	res, err := pg.Scan(sql)
	if err != nil {
		return "", syntaxError(err)
	}
	var b strings.Builder
	last := 0
	for _, t := range res.Tokens {
		if t.Token != pg.Token_PARAM {
			continue
		}
		k, _ := strconv.Atoi(sql[t.Start+1 : t.End])
		if k < 1 || k > len(lits) {
			return "", &pgError{code: "08P01", msg: fmt.Sprintf("bind message supplies %d parameters, but the statement uses $%d", len(lits), k)}
		}
		b.WriteString(sql[last:t.Start])
		// A space either side: "-$1" must not become "--5".
		b.WriteString(" " + lits[k-1] + " ")
		last = int(t.End)
	}
	b.WriteString(sql[last:])
	return b.String(), nil
}

func literal(oid uint32, format int16, v []byte) (string, error) {
	if v == nil {
		return "NULL", nil
	}
	if format == 1 {
		switch oid {
		case oidInt2:
			if len(v) == 2 {
				return strconv.Itoa(int(int16(binary.BigEndian.Uint16(v)))), nil
			}
		case oidInt4:
			if len(v) == 4 {
				return strconv.Itoa(int(int32(binary.BigEndian.Uint32(v)))), nil
			}
		case oidInt8:
			if len(v) == 8 {
				return strconv.FormatInt(int64(binary.BigEndian.Uint64(v)), 10), nil
			}
		case oidFloat4:
			if len(v) == 4 {
				return numberLiteral(float64(math.Float32frombits(binary.BigEndian.Uint32(v))))
			}
		case oidFloat8:
			if len(v) == 8 {
				return numberLiteral(math.Float64frombits(binary.BigEndian.Uint64(v)))
			}
		case oidBool:
			if len(v) == 1 {
				return strings.ToUpper(strconv.FormatBool(v[0] != 0)), nil
			}
		case oidText, 1043: // text, varchar
			return quote(string(v))
		case oidTimestamp, oidTimestamptz:
			// Microseconds since 2000-01-01 UTC.
			if len(v) == 8 {
				us := int64(binary.BigEndian.Uint64(v))
				t := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(us) * time.Microsecond)
				zone := ""
				if oid == oidTimestamptz {
					zone = "+00"
				}
				return quote(t.Format("2006-01-02 15:04:05.999999") + zone)
			}
		case oidDate:
			// Days since 2000-01-01.
			if len(v) == 4 {
				d := int32(binary.BigEndian.Uint32(v))
				return quote(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, int(d)).Format("2006-01-02"))
			}
		case oidBytea:
			return quote(`\x` + hex.EncodeToString(v))
		default:
			return "", fmt.Errorf("binary parameters of type %d are not supported", oid)
		}
		return "", fmt.Errorf("binary value of %d bytes for type %d", len(v), oid)
	}
	s := string(v)
	switch oid {
	case oidInt2, oidInt4, oidInt8:
		if _, err := strconv.ParseInt(s, 10, 64); err != nil {
			return "", fmt.Errorf("invalid input syntax for type integer: %q", s)
		}
		return s, nil
	case oidFloat4, oidFloat8, oidNumeric:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return "", fmt.Errorf("invalid input syntax for a number: %q", s)
		}
		return numberLiteral(f)
	case oidBool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return "", fmt.Errorf("invalid input syntax for type boolean: %q", s)
		}
		return strings.ToUpper(strconv.FormatBool(b)), nil
	case 0:
		// Unspecified: a number stays a number, anything else is a string.
		if _, err := strconv.ParseInt(s, 10, 64); err == nil {
			return s, nil
		}
		if f, err := strconv.ParseFloat(s, 64); err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) && strings.ContainsAny(s, ".eE") {
			return s, nil
		}
	}
	return quote(s)
}

func numberLiteral(f float64) (string, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "", fmt.Errorf("%v cannot be a constant here", f)
	}
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(s, ".e") {
		s += ".0"
	}
	return s, nil
}

func quote(s string) (string, error) {
	if strings.IndexByte(s, 0) >= 0 {
		return "", fmt.Errorf("invalid byte sequence: a string with a NUL")
	}
	return "'" + strings.ReplaceAll(s, "'", "''") + "'", nil
}

// inferParams gives each $n the type its place implies: compared with a
// column of the table (col op $n, $n op col), that column's type; after
// LIMIT or OFFSET, bigint. Others stay 0 (unknown: described as text).
// cols maps the table's column names to their types.
func inferParams(sql string, n int, cols map[string]uint32) []uint32 {
	oids := make([]uint32, n)
	res, err := pg.Scan(sql)
	if err != nil {
		return oids
	}
	toks := res.Tokens
	text := func(i int) string {
		if i < 0 || i >= len(toks) {
			return ""
		}
		return strings.ToLower(sql[toks[i].Start:toks[i].End])
	}
	isOp := func(s string) bool {
		switch s {
		case "=", "<>", "!=", "<", ">", "<=", ">=", "+", "-", "*", "/":
			return true
		}
		return false
	}
	for i, t := range toks {
		if t.Token != pg.Token_PARAM {
			continue
		}
		k, err := strconv.Atoi(sql[t.Start+1 : t.End])
		if err != nil || k < 1 || k > n {
			continue
		}
		switch {
		case text(i-1) == "limit" || text(i-1) == "offset":
			oids[k-1] = oidInt8
		case isOp(text(i-1)) && cols[text(i-2)] != 0:
			oids[k-1] = cols[text(i-2)]
		case isOp(text(i+1)) && cols[text(i+2)] != 0:
			oids[k-1] = cols[text(i+2)]
		}
	}
	return oids
}

// placeholder is a literal of type oid that stands for a parameter while
// a statement is described before its values are known.
func placeholder(oid uint32) []byte {
	switch oid {
	case oidInt2, oidInt4, oidInt8, oidFloat4, oidFloat8, oidNumeric, oidOid:
		return []byte("1")
	case oidBool:
		return []byte("true")
	case oidDate:
		return []byte("2000-01-01")
	case oidTimestamp:
		return []byte("2000-01-01 00:00:00")
	case oidTimestamptz:
		return []byte("2000-01-01 00:00:00+00")
	}
	return []byte("")
}
