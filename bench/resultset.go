package main

import (
	"cmp"
	"fmt"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgtype"
)

// valueKind is the canonical kind of one result value. Systems disagree on
// result types (sum of bigint is numeric in PostgreSQL, HUGEINT in DuckDB,
// int64 in strata; avg is numeric or double), so results are compared as
// numbers: integers exactly, anything fractional within a relative tolerance.
// Strings (text, VARCHAR, utf8) are compared byte for byte.
type valueKind uint8

const (
	kindNull valueKind = iota
	kindInt
	kindFloat
	kindString
)

type value struct {
	kind valueKind
	i    int64
	f    float64
	s    string
}

func (v value) String() string {
	switch v.kind {
	case kindInt:
		return strconv.FormatInt(v.i, 10)
	case kindFloat:
		return strconv.FormatFloat(v.f, 'g', 12, 64)
	case kindString:
		// Quoted, so that an empty string, spaces and invalid UTF-8 show; a
		// long one cut, with its length, so a report cell stays readable.
		if utf8.RuneCountInString(v.s) > 40 {
			r := []rune(v.s)
			return fmt.Sprintf("%s... (%d bytes)", strconv.Quote(string(r[:40])), len(v.s))
		}
		return strconv.Quote(v.s)
	default:
		return "NULL"
	}
}

func (v value) float() float64 {
	if v.kind == kindInt {
		return float64(v.i)
	}
	return v.f
}

func intValue(i int64) value     { return value{kind: kindInt, i: i} }
func floatValue(f float64) value { return value{kind: kindFloat, f: f} }
func stringValue(s string) value { return value{kind: kindString, s: s} }

// canonical converts what a driver returns into a value. Timestamps become
// microseconds since the Unix epoch; text stays a string.
func canonical(v any) (value, error) {
	switch x := v.(type) {
	case nil:
		return value{}, nil
	case int64:
		return intValue(x), nil
	case int32:
		return intValue(int64(x)), nil
	case int16:
		return intValue(int64(x)), nil
	case int8:
		return intValue(int64(x)), nil
	case int:
		return intValue(int64(x)), nil
	case uint64:
		if x > math.MaxInt64 {
			return floatValue(float64(x)), nil
		}
		return intValue(int64(x)), nil
	case uint32:
		return intValue(int64(x)), nil
	case uint16:
		return intValue(int64(x)), nil
	case uint8:
		return intValue(int64(x)), nil
	case bool:
		if x {
			return intValue(1), nil
		}
		return intValue(0), nil
	case float64:
		return floatValue(x), nil
	case float32:
		return floatValue(float64(x)), nil
	case time.Time:
		return intValue(x.UnixMicro()), nil
	case *big.Int:
		if x.IsInt64() {
			return intValue(x.Int64()), nil
		}
		f, _ := new(big.Float).SetInt(x).Float64()
		return floatValue(f), nil
	case pgtype.Numeric:
		return numericValue(x)
	case fmt.Stringer:
		// DuckDB's DECIMAL and friends: parse their text.
		return parseNumber(x.String())
	case string:
		return stringValue(x), nil
	default:
		return value{}, fmt.Errorf("unsupported result type %T", v)
	}
}

func numericValue(n pgtype.Numeric) (value, error) {
	if !n.Valid {
		return value{}, nil
	}
	if n.NaN || n.InfinityModifier != pgtype.Finite {
		f, err := n.Float64Value()
		if err != nil {
			return value{}, err
		}
		return floatValue(f.Float64), nil
	}
	if n.Exp >= 0 && n.Int != nil {
		i := new(big.Int).Set(n.Int)
		if n.Exp > 0 {
			i.Mul(i, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(n.Exp)), nil))
		}
		if i.IsInt64() {
			return intValue(i.Int64()), nil
		}
	}
	f, err := n.Float64Value()
	if err != nil {
		return value{}, fmt.Errorf("numeric to float: %w", err)
	}
	return floatValue(f.Float64), nil
}

func parseNumber(s string) (value, error) {
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		return intValue(i), nil
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil {
		return value{}, fmt.Errorf("not a number: %q", s)
	}
	return floatValue(f), nil
}

// compareValues orders NULL first, then numbers by value, then strings
// byte-wise.
func compareValues(a, b value) int {
	switch {
	case a.kind == kindNull && b.kind == kindNull:
		return 0
	case a.kind == kindNull:
		return -1
	case b.kind == kindNull:
		return 1
	case a.kind == kindString && b.kind == kindString:
		return strings.Compare(a.s, b.s)
	case a.kind == kindString:
		return 1
	case b.kind == kindString:
		return -1
	case a.kind == kindInt && b.kind == kindInt:
		return cmp.Compare(a.i, b.i)
	default:
		return cmp.Compare(a.float(), b.float())
	}
}

// relTolerance bounds the relative difference of two fractional results
// (different summation orders give different roundings).
const relTolerance = 1e-9

// sameValue reports whether two results agree: integers exactly, anything
// fractional within relTolerance, strings byte for byte (a string never
// equals a number).
func sameValue(a, b value) bool {
	switch {
	case a.kind == kindNull || b.kind == kindNull:
		return a.kind == b.kind
	case a.kind == kindString || b.kind == kindString:
		return a.kind == b.kind && a.s == b.s
	case a.kind == kindInt && b.kind == kindInt:
		return a.i == b.i
	default:
		x, y := a.float(), b.float()
		if x == y {
			return true
		}
		scale := math.Max(1, math.Max(math.Abs(x), math.Abs(y)))
		return math.Abs(x-y) <= relTolerance*scale
	}
}

// resultSet holds a query's rows, row-major, in canonical form.
type resultSet struct {
	cols int
	vals []value
}

func newResultSet(cols int) *resultSet { return &resultSet{cols: cols} }

func (r *resultSet) rows() int { return len(r.vals) / max(1, r.cols) }

func (r *resultSet) row(i int) []value { return r.vals[i*r.cols : (i+1)*r.cols] }

func (r *resultSet) append(row []value) { r.vals = append(r.vals, row...) }

// sortRows orders the rows lexicographically, for queries whose result order
// is not defined by an ORDER BY.
func (r *resultSet) sortRows() {
	n := r.rows()
	idx := make([]int32, n)
	for i := range idx {
		idx[i] = int32(i)
	}
	slices.SortFunc(idx, func(a, b int32) int {
		ra, rb := r.row(int(a)), r.row(int(b))
		for c := range ra {
			if d := compareValues(ra[c], rb[c]); d != 0 {
				return d
			}
		}
		return 0
	})
	sorted := make([]value, 0, len(r.vals))
	for _, i := range idx {
		sorted = append(sorted, r.row(int(i))...)
	}
	r.vals = sorted
}

// mismatch describes the first difference between two result sets.
type mismatch struct {
	Row         int // index in the compared (sorted) order; -1 for a shape difference
	Left, Right string
	Reason      string
}

func (m *mismatch) String() string {
	if m.Row < 0 {
		return m.Reason
	}
	return fmt.Sprintf("%s at row %d: %s vs %s", m.Reason, m.Row, m.Left, m.Right)
}

// diffResults compares two result sets already in comparable order and
// returns the first difference, or nil.
func diffResults(a, b *resultSet) *mismatch {
	if a.cols != b.cols {
		return &mismatch{Row: -1, Reason: fmt.Sprintf("%d columns vs %d", a.cols, b.cols)}
	}
	n := min(a.rows(), b.rows())
	for i := 0; i < n; i++ {
		ra, rb := a.row(i), b.row(i)
		for c := range ra {
			if !sameValue(ra[c], rb[c]) {
				return &mismatch{Row: i, Left: formatRow(ra), Right: formatRow(rb), Reason: fmt.Sprintf("column %d differs", c+1)}
			}
		}
	}
	if a.rows() != b.rows() {
		m := &mismatch{Row: n, Reason: fmt.Sprintf("%d rows vs %d", a.rows(), b.rows())}
		m.Left, m.Right = "(end)", "(end)"
		if n < a.rows() {
			m.Left = formatRow(a.row(n))
		}
		if n < b.rows() {
			m.Right = formatRow(b.row(n))
		}
		return m
	}
	return nil
}

func formatRow(r []value) string {
	s := make([]string, len(r))
	for i, v := range r {
		s[i] = v.String()
	}
	return "(" + strings.Join(s, ", ") + ")"
}
