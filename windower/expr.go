package windower

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/internal/hugepage"
	"github.com/strata-db/strata/messages"
)

// Scalar expressions and predicates: compiled against the schema and
// evaluated over columns.

// expr is a compiled scalar expression.
type expr struct {
	col     int    // input column index, or -1
	colName string // the column's name when col >= 0
	konst   *vector
	op      byte
	args    [2]*expr
	kind    kind
	typ     arrow.DataType
}

// schemaInfo resolves column names.
type schemaInfo struct {
	schema *arrow.Schema
	kinds  []kind
}

func newSchemaInfo(s *arrow.Schema) (*schemaInfo, error) {
	si := &schemaInfo{schema: s, kinds: make([]kind, s.NumFields())}
	for i, f := range s.Fields() {
		k, err := kindOf(f.Type)
		if err != nil {
			// Columns of other types may exist; they fail only when used.
			k = 255
		}
		si.kinds[i] = k
	}
	return si, nil
}

func (si *schemaInfo) lookup(name string) (int, error) {
	idx := si.schema.FieldIndices(name)
	if len(idx) == 0 {
		// SQL folds unquoted identifiers to lower case; accept a unique case-insensitive match.
		found := -1
		for i, f := range si.schema.Fields() {
			if strings.EqualFold(f.Name, name) {
				if found >= 0 {
					return -1, fmt.Errorf("column %q is ambiguous", name)
				}
				found = i
			}
		}
		if found < 0 {
			return -1, fmt.Errorf("column %q does not exist", name)
		}
		idx = []int{found}
	}
	if len(idx) > 1 {
		return -1, fmt.Errorf("column %q is ambiguous", name)
	}
	if columnar.IsChangeColumn(si.schema.Field(idx[0]).Name) {
		// A keyed table's change columns are how its rows are resolved,
		// not part of the table a query sees.
		return -1, fmt.Errorf("column %q does not exist", name)
	}
	if si.kinds[idx[0]] == 255 {
		return -1, fmt.Errorf("column %q has unsupported type %s", name, si.schema.Field(idx[0]).Type)
	}
	return idx[0], nil
}

func compileExpr(si *schemaInfo, e *messages.Expr) (*expr, error) {
	switch {
	case e == nil:
		return nil, fmt.Errorf("missing expression")
	case e.Column != "":
		i, err := si.lookup(e.Column)
		if err != nil {
			return nil, err
		}
		return &expr{col: i, colName: si.schema.Field(i).Name, kind: si.kinds[i], typ: si.schema.Field(i).Type}, nil
	case e.Const != nil:
		v, err := constVector(e.Const)
		if err != nil {
			return nil, err
		}
		return &expr{col: -1, konst: v, kind: v.kind, typ: v.typ}, nil
	case e.Op != "":
		if len(e.Args) != 2 {
			return nil, fmt.Errorf("operator %s needs 2 arguments", e.Op)
		}
		a, err := compileExpr(si, e.Args[0])
		if err != nil {
			return nil, err
		}
		b, err := compileExpr(si, e.Args[1])
		if err != nil {
			return nil, err
		}
		for _, x := range []*expr{a, b} {
			if x.kind != kindInt && x.kind != kindFloat {
				return nil, fmt.Errorf("operator %s does not apply to %s", e.Op, x.kind)
			}
		}
		out := &expr{col: -1, op: e.Op[0], args: [2]*expr{a, b}, kind: kindInt, typ: arrow.PrimitiveTypes.Int64}
		if a.kind == kindFloat || b.kind == kindFloat {
			out.kind, out.typ = kindFloat, arrow.PrimitiveTypes.Float64
		}
		if e.Op == "%" && out.kind == kindFloat {
			return nil, fmt.Errorf("operator %% does not apply to floats")
		}
		return out, nil
	}
	return nil, fmt.Errorf("empty expression")
}

// constVector makes a one-row vector from a constant.
func constVector(c *messages.Value) (*vector, error) {
	v := &vector{}
	if _, ok := c.Interval(); ok {
		return nil, fmt.Errorf("an interval is allowed only as a RANGE frame offset")
	}
	switch {
	case c.Int != nil:
		v.kind, v.typ, v.ints = kindInt, arrow.PrimitiveTypes.Int64, []int64{*c.Int}
	case c.Float != nil:
		v.kind, v.typ, v.floats = kindFloat, arrow.PrimitiveTypes.Float64, []float64{*c.Float}
	case c.String != nil:
		v.kind, v.typ, v.strs = kindString, arrow.BinaryTypes.String, []string{*c.String}
	case c.Bool != nil:
		b := int64(0)
		if *c.Bool {
			b = 1
		}
		v.kind, v.typ, v.ints = kindBool, arrow.FixedWidthTypes.Boolean, []int64{b}
	default:
		// NULL of unknown type: an integer NULL.
		v.kind, v.typ, v.ints, v.nulls = kindInt, arrow.PrimitiveTypes.Int64, []int64{0}, []bool{true}
	}
	return v, nil
}

// String renders e as SQL, for error messages: "k0 / (c1 - 3)".
func (e *expr) String() string {
	switch {
	case e.col >= 0:
		return e.colName
	case e.konst != nil:
		v := e.konst
		switch {
		case v.isNull(0):
			return "NULL"
		case v.kind == kindFloat:
			return strconv.FormatFloat(v.floats[0], 'g', -1, 64)
		case v.kind == kindString:
			return "'" + strings.ReplaceAll(v.strs[0], "'", "''") + "'"
		case v.kind == kindBool:
			return strconv.FormatBool(v.ints[0] != 0)
		default:
			return strconv.FormatInt(v.ints[0], 10)
		}
	}
	arg := func(a *expr) string {
		if a.op != 0 {
			return "(" + a.String() + ")"
		}
		return a.String()
	}
	return arg(e.args[0]) + " " + string(e.op) + " " + arg(e.args[1])
}

// eval computes e over the n input rows in cols.
func (e *expr) eval(cols []*vector, n int) (*vector, error) {
	if e.col >= 0 {
		return cols[e.col], nil
	}
	if e.konst != nil {
		return broadcast(e.konst, n), nil
	}
	a, err := e.args[0].eval(cols, n)
	if err != nil {
		return nil, err
	}
	if c, ok := e.intConstArg(); ok {
		return e.evalIntConst(a, c, n, 1)
	}
	b, err := e.args[1].eval(cols, n)
	if err != nil {
		return nil, err
	}
	out := &vector{kind: e.kind, typ: e.typ}
	if a.nulls != nil || b.nulls != nil {
		out.nulls = hugepage.Make[bool](n, n)
		for i := range out.nulls {
			out.nulls[i] = a.isNull(i) || b.isNull(i)
		}
	}
	if e.kind == kindFloat {
		x, y := asFloats(a), asFloats(b)
		out.floats = hugepage.Make[float64](n, n)
		for i := range out.floats {
			switch e.op {
			case '+':
				out.floats[i] = x[i] + y[i]
			case '-':
				out.floats[i] = x[i] - y[i]
			case '*':
				out.floats[i] = x[i] * y[i]
			case '/':
				if y[i] == 0 && !out.isNull(i) {
					return nil, fmt.Errorf("%w in %s", ErrDivisionByZero, e)
				}
				out.floats[i] = x[i] / y[i]
			}
		}
		return out, nil
	}
	x, y := a.ints, b.ints
	out.ints = hugepage.Make[int64](n, n)
	for i := range out.ints {
		if out.isNull(i) {
			continue
		}
		var r int64
		ok := true
		switch e.op {
		case '+':
			r = x[i] + y[i]
			ok = (r > x[i]) == (y[i] > 0)
			if y[i] == 0 {
				ok = true
			}
		case '-':
			r = x[i] - y[i]
			ok = (r < x[i]) == (y[i] > 0)
			if y[i] == 0 {
				ok = true
			}
		case '*':
			r = x[i] * y[i]
			ok = x[i] == 0 || (r/x[i] == y[i] && !(x[i] == -1 && y[i] == math.MinInt64))
		case '/', '%':
			if y[i] == 0 {
				return nil, fmt.Errorf("%w in %s", ErrDivisionByZero, e)
			}
			if y[i] == -1 {
				// PostgreSQL: MinInt64 / -1 overflows; MinInt64 % -1 is 0.
				if e.op == '%' {
					r = 0
				} else {
					r, ok = -x[i], x[i] != math.MinInt64
				}
			} else if e.op == '/' {
				r = x[i] / y[i] // truncates toward zero, as PostgreSQL
			} else {
				r = x[i] % y[i] // sign of the dividend, as PostgreSQL
			}
		}
		if !ok {
			return nil, fmt.Errorf("%w: %d %c %d in %s", ErrOverflow, x[i], e.op, y[i], e)
		}
		out.ints[i] = r
	}
	return out, nil
}

// intConstArg returns the constant of an integer operation whose right
// operand is a non-NULL integer constant, which evalIntConst computes.
func (e *expr) intConstArg() (int64, bool) {
	if k := e.args[1].konst; k != nil && e.kind == kindInt && k.kind == kindInt && !k.isNull(0) {
		return k.ints[0], true
	}
	return 0, false
}

// remainderBounds returns the least and greatest values of e when e is
// an integer remainder by a constant: a % 1000 is -999 to 999 (the
// remainder takes the dividend's sign), whatever a holds.
func (e *expr) remainderBounds() (lo, hi int64, ok bool) {
	if e.op != '%' || e.args[1] == nil {
		return 0, 0, false
	}
	c, ok := e.intConstArg()
	if !ok || c == 0 || c == math.MinInt64 {
		return 0, 0, false
	}
	m := max(c, -c) - 1
	return -m, m, true
}

// evalOn is eval on up to threads goroutines: an integer operation with a
// constant (a % 1000, t / 3600), the usual computed PARTITION BY key, is
// computed over ranges of rows at once, its operand first; any other
// expression as eval computes it.
func (e *expr) evalOn(cols []*vector, n, threads int) (*vector, error) {
	if threads <= 1 || n < parallelMinRows || e.col >= 0 || e.konst != nil {
		return e.eval(cols, n)
	}
	c, ok := e.intConstArg()
	if !ok {
		return e.eval(cols, n)
	}
	a, err := e.args[0].evalOn(cols, n, threads)
	if err != nil {
		return nil, err
	}
	return e.evalIntConst(a, c, n, threads)
}

// evalIntConst computes e = a op c for an integer a and a non-NULL
// integer constant c, as eval does row by row (the same results and
// errors) without broadcasting c, over ranges of rows on up to threads
// goroutines; its error is the first failing row's, as on one. Division
// and remainder of values and divisors that fit in 32 bits use the
// divisor's multiplicative inverse (Lemire, Kaser and Kurz, "Faster
// remainder by direct computation", 2019) instead of a 64-bit division
// per row.
func (e *expr) evalIntConst(a *vector, c int64, n, threads int) (*vector, error) {
	out := &vector{kind: e.kind, typ: e.typ, ints: hugepage.Make[int64](n, n)}
	if a.nulls != nil {
		out.nulls = slices.Clone(a.nulls[:n])
	}
	if (e.op == '/' || e.op == '%') && c == 0 {
		if (out.nulls == nil && n > 0) || slices.Contains(out.nulls, false) {
			return nil, fmt.Errorf("%w in %s", ErrDivisionByZero, e)
		}
		return out, nil // every row NULL: no division happens
	}
	if threads < 1 || n < parallelMinRows {
		threads = 1
	}
	ranges := splitRows(n, threads)
	errs := make([]error, len(ranges))
	parallelFor(len(ranges), func(r int) {
		lo, hi := ranges[r][0], ranges[r][1]
		var nulls []bool
		if out.nulls != nil {
			nulls = out.nulls[lo:hi]
		}
		errs[r] = e.intConst(a.ints[lo:hi], c, nulls, out.ints[lo:hi])
	})
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// intConst sets o to x (op) c, row by row, and 0 where nulls says NULL;
// c is not 0 for a division.
func (e *expr) intConst(x []int64, c int64, nulls []bool, o []int64) error {
	null := func(i int) bool { return nulls != nil && nulls[i] }
	overflow := func(i int) error {
		return fmt.Errorf("%w: %d %c %d in %s", ErrOverflow, x[i], e.op, c, e)
	}
	switch e.op {
	case '+':
		for i, v := range x {
			r := v + c
			if (r > v) != (c > 0) && c != 0 && !null(i) {
				return overflow(i)
			}
			o[i] = r
		}
	case '-':
		for i, v := range x {
			r := v - c
			if (r < v) != (c > 0) && c != 0 && !null(i) {
				return overflow(i)
			}
			o[i] = r
		}
	case '*':
		for i, v := range x {
			r := v * c
			if v != 0 && (r/v != c || (v == -1 && c == math.MinInt64)) && !null(i) {
				return overflow(i)
			}
			o[i] = r
		}
	case '/', '%':
		if c == -1 {
			for i, v := range x {
				if e.op == '%' {
					continue // MinInt64 % -1 is 0, as PostgreSQL
				}
				if v == math.MinInt64 && !null(i) {
					return overflow(i)
				}
				o[i] = -v
			}
			break
		}
		divideByConst(x, c, e.op == '%', o)
	}
	for i, isNull := range nulls {
		if isNull {
			o[i] = 0
		}
	}
	return nil
}

// divideByConst stores x[i] / c (rem: x[i] % c) in o, truncated toward
// zero with the sign of the dividend, as Go and PostgreSQL do; c is
// neither 0 nor -1.
func divideByConst(x []int64, c int64, rem bool, o []int64) {
	d := uint64(c)
	if c < 0 {
		d = -d
	}
	if d == 1 {
		for i, v := range x {
			if rem {
				o[i] = 0
			} else {
				o[i] = v // c is 1
			}
		}
		return
	}
	if d > math.MaxUint32 {
		for i, v := range x {
			if rem {
				o[i] = v % c
			} else {
				o[i] = v / c
			}
		}
		return
	}
	m := math.MaxUint64/d + 1 // ceil(2^64 / d)
	if rem {
		// The remainder alone, in a loop of its own: its common case, a
		// value from 0 to 2^32-1, takes one test and two multiplications.
		for i, v := range x {
			if u := uint64(v); u <= math.MaxUint32 {
				o[i] = int64(hiMul(m*u, d))
				continue
			}
			if v < 0 && -v > 0 && -v <= math.MaxUint32 {
				o[i] = -int64(hiMul(m*uint64(-v), d))
				continue
			}
			o[i] = v % c
		}
		return
	}
	for i, v := range x {
		u := uint64(v)
		if v < 0 {
			u = -u
		}
		if u > math.MaxUint32 {
			if rem {
				o[i] = v % c
			} else {
				o[i] = v / c
			}
			continue
		}
		low := m * u
		var q, r uint64
		if rem {
			r, _ = bits.Mul64(low, d)
		} else {
			q, _ = bits.Mul64(m, u)
		}
		switch {
		case rem && v < 0:
			o[i] = -int64(r)
		case rem:
			o[i] = int64(r)
		case (v < 0) != (c < 0):
			o[i] = -int64(q)
		default:
			o[i] = int64(q)
		}
	}
}

// hiMul is the high 64 bits of a*b.
func hiMul(a, b uint64) uint64 {
	hi, _ := bits.Mul64(a, b)
	return hi
}

func asFloats(v *vector) []float64 {
	if v.kind == kindFloat {
		return v.floats
	}
	f := make([]float64, len(v.ints))
	for i, x := range v.ints {
		f[i] = float64(x)
	}
	return f
}

func broadcast(c *vector, n int) *vector {
	out := &vector{kind: c.kind, typ: c.typ}
	switch c.kind {
	case kindFloat:
		out.floats = hugepage.Make[float64](n, n)
		for i := range out.floats {
			out.floats[i] = c.floats[0]
		}
	case kindString:
		out.strs = hugepage.Make[string](n, n)
		for i := range out.strs {
			out.strs[i] = c.strs[0]
		}
	default:
		out.ints = hugepage.Make[int64](n, n)
		for i := range out.ints {
			out.ints[i] = c.ints[0]
		}
	}
	if c.nulls != nil && c.nulls[0] {
		out.nulls = hugepage.Make[bool](n, n)
		for i := range out.nulls {
			out.nulls[i] = true
		}
	}
	return out
}

// predicate is a compiled `expr op const` test.
type predicate struct {
	left  *expr
	op    string
	right *vector // one row; nil for IS [NOT] NULL
}

func compilePredicates(si *schemaInfo, ps []messages.Predicate) ([]predicate, error) {
	out := make([]predicate, 0, len(ps))
	for i := range ps {
		p := &ps[i]
		l, err := compileExpr(si, &p.Left)
		if err != nil {
			return nil, fmt.Errorf("predicate %d: %v", i+1, err)
		}
		cp := predicate{left: l, op: p.Op}
		switch p.Op {
		case messages.OpIsNull, messages.OpIsNotNull:
		case "=", "<>", "<", "<=", ">", ">=":
			if p.Right == nil {
				return nil, fmt.Errorf("predicate %d: %s needs a constant", i+1, p.Op)
			}
			r, err := constVector(p.Right)
			if err == nil {
				r, err = coerceLiteral(l, r)
			}
			if err != nil {
				return nil, fmt.Errorf("predicate %d: %v", i+1, err)
			}
			lnum := l.kind == kindInt || l.kind == kindFloat
			rnum := r.kind == kindInt || r.kind == kindFloat
			if !(r.nulls != nil || l.kind == r.kind || (lnum && rnum)) {
				return nil, fmt.Errorf("predicate %d: cannot compare %s with %s", i+1, l.kind, r.kind)
			}
			cp.right = r
		default:
			return nil, fmt.Errorf("predicate %d: unknown operator %q", i+1, p.Op)
		}
		out = append(out, cp)
	}
	return out, nil
}

// evalPredicates returns, for each of the n rows, whether all predicates
// are true (SQL: NULL counts as false).
func evalPredicates(ps []predicate, cols []*vector, n int) ([]bool, error) {
	keep := hugepage.Make[bool](n, n)
	for i := range keep {
		keep[i] = true
	}
	for _, p := range ps {
		v, err := p.left.eval(cols, n)
		if err != nil {
			return nil, err
		}
		for i := 0; i < n; i++ {
			if !keep[i] {
				continue
			}
			null := v.isNull(i)
			switch p.op {
			case messages.OpIsNull:
				keep[i] = null
				continue
			case messages.OpIsNotNull:
				keep[i] = !null
				continue
			}
			if null || p.right.nulls != nil {
				keep[i] = false
				continue
			}
			c := compareConst(v, i, p.right)
			switch p.op {
			case "=":
				keep[i] = c == 0
			case "<>":
				keep[i] = c != 0
			case "<":
				keep[i] = c < 0
			case "<=":
				keep[i] = c <= 0
			case ">":
				keep[i] = c > 0
			case ">=":
				keep[i] = c >= 0
			}
		}
	}
	return keep, nil
}

func compareConst(v *vector, i int, c *vector) int {
	switch {
	case v.kind == kindString:
		return strings.Compare(v.strs[i], c.strs[0])
	case v.kind == kindFloat || c.kind == kindFloat:
		var x, y float64
		if v.kind == kindFloat {
			x = v.floats[i]
		} else {
			x = float64(v.ints[i])
		}
		if c.kind == kindFloat {
			y = c.floats[0]
		} else {
			y = float64(c.ints[0])
		}
		return compareFloat(x, y)
	default:
		return cmpInt(v.ints[i], c.ints[0])
	}
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// compareFloat orders floats as PostgreSQL does: NaN equals NaN and is
// greater than every other value; -0 equals 0.
func compareFloat(a, b float64) int {
	an, bn := a != a, b != b
	switch {
	case an && bn:
		return 0
	case an:
		return 1
	case bn:
		return -1
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
