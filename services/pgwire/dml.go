package main

// The changes of keyed tables as SQL: INSERT, UPDATE and DELETE parsed
// from pg_query's tree into a changeStmt, and the small evaluator of the
// values they set. This is not windower/sqlparse: that package turns SQL
// text into a window query for the scheduler and the windower, which
// never see a change statement; these statements are pgwire's alone, and
// their expressions are evaluated here, over one row at a time, before
// they become change events (changes.go).

import (
	"encoding/hex"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	pg "github.com/pganalyze/pg_query_go/v6"
)

// conflict is what an INSERT does with a key that has a row.
type conflict int

const (
	conflictError   conflict = iota // plain INSERT: 23505
	conflictNothing                 // ON CONFLICT DO NOTHING
	conflictUpdate                  // ON CONFLICT (key) DO UPDATE SET ...
)

// setItem is one "col = expr" of UPDATE or DO UPDATE.
type setItem struct {
	col  string
	expr *pg.Node
}

// changeStmt is an INSERT, UPDATE or DELETE of one table, parsed but not
// checked against the table: values are evaluated when it runs (a
// Describe plans a statement with placeholders for its parameters).
type changeStmt struct {
	kind  string // INSERT, UPDATE, DELETE
	table string
	// INSERT: the columns named (nil: every column in table order) and
	// the VALUES rows.
	cols     []string
	values   [][]*pg.Node
	conflict conflict
	target   []string // ON CONFLICT (cols), if given
	// UPDATE, and INSERT's DO UPDATE.
	set []setItem
	// UPDATE, DELETE.
	where *pg.Node
}

func relationName(rv *pg.RangeVar, what string) (string, error) {
	if rv == nil {
		return "", notSupported(what + " without a table")
	}
	if rv.Catalogname != "" || (rv.Schemaname != "" && rv.Schemaname != "public") {
		return "", &pgError{code: "42P01", msg: fmt.Sprintf("relation \"%s.%s\" does not exist: strata's tables are in schema public", rv.Schemaname, rv.Relname)}
	}
	if rv.Alias != nil {
		return "", notSupported(what + " with a table alias")
	}
	return rv.Relname, nil
}

func planInsert(in *pg.InsertStmt) (*stmt, error) {
	table, err := relationName(in.Relation, "INSERT")
	if err != nil {
		return nil, err
	}
	switch {
	case in.WithClause != nil:
		return nil, notSupported("WITH in INSERT")
	case len(in.ReturningList) > 0:
		return nil, notSupported("INSERT ... RETURNING")
	case in.Override != pg.OverridingKind_OVERRIDING_NOT_SET:
		return nil, notSupported("INSERT ... OVERRIDING")
	}
	cs := &changeStmt{kind: "INSERT", table: table}
	for _, n := range in.Cols {
		rt := n.GetResTarget()
		if len(rt.Indirection) > 0 {
			return nil, notSupported("INSERT into a part of a column (subscripts, fields)")
		}
		cs.cols = append(cs.cols, rt.Name)
	}
	sel := in.SelectStmt.GetSelectStmt()
	if in.SelectStmt == nil {
		return nil, notSupported("INSERT ... DEFAULT VALUES")
	}
	if sel == nil || len(sel.ValuesLists) == 0 || sel.Op != pg.SetOperation_SETOP_NONE || len(sel.SortClause) > 0 || sel.LimitCount != nil || sel.LimitOffset != nil || sel.WithClause != nil {
		return nil, notSupported("INSERT ... SELECT (strata takes INSERT ... VALUES)")
	}
	for _, l := range sel.ValuesLists {
		cs.values = append(cs.values, l.GetList().Items)
	}
	if oc := in.OnConflictClause; oc != nil {
		if oc.Infer != nil {
			if oc.Infer.WhereClause != nil || oc.Infer.Conname != "" {
				return nil, notSupported("ON CONFLICT with a constraint name or WHERE")
			}
			for _, e := range oc.Infer.IndexElems {
				ie := e.GetIndexElem()
				if ie == nil || ie.Name == "" {
					return nil, notSupported("ON CONFLICT on an expression")
				}
				cs.target = append(cs.target, ie.Name)
			}
		}
		switch oc.Action {
		case pg.OnConflictAction_ONCONFLICT_NOTHING:
			cs.conflict = conflictNothing
		case pg.OnConflictAction_ONCONFLICT_UPDATE:
			if oc.WhereClause != nil {
				return nil, notSupported("ON CONFLICT DO UPDATE ... WHERE")
			}
			if cs.target == nil {
				// PostgreSQL's own rule.
				return nil, &pgError{code: "42601", msg: "ON CONFLICT DO UPDATE requires inference specification or constraint name"}
			}
			cs.conflict = conflictUpdate
			if cs.set, err = setItems(oc.TargetList); err != nil {
				return nil, err
			}
		default:
			return nil, notSupported("this ON CONFLICT action")
		}
	}
	return &stmt{tag: "INSERT", change: cs}, nil
}

func setItems(list []*pg.Node) ([]setItem, error) {
	var out []setItem
	for _, n := range list {
		rt := n.GetResTarget()
		if rt == nil || rt.Val == nil {
			return nil, notSupported("this SET item")
		}
		if rt.Val.GetMultiAssignRef() != nil {
			return nil, notSupported("SET (a, b) = (...)")
		}
		if len(rt.Indirection) > 0 {
			return nil, notSupported("SET of a part of a column (subscripts, fields)")
		}
		out = append(out, setItem{col: rt.Name, expr: rt.Val})
	}
	return out, nil
}

func planUpdate(up *pg.UpdateStmt) (*stmt, error) {
	table, err := relationName(up.Relation, "UPDATE")
	if err != nil {
		return nil, err
	}
	switch {
	case up.WithClause != nil:
		return nil, notSupported("WITH in UPDATE")
	case len(up.ReturningList) > 0:
		return nil, notSupported("UPDATE ... RETURNING")
	case len(up.FromClause) > 0:
		return nil, notSupported("UPDATE ... FROM")
	}
	cs := &changeStmt{kind: "UPDATE", table: table, where: up.WhereClause}
	if cs.set, err = setItems(up.TargetList); err != nil {
		return nil, err
	}
	return &stmt{tag: "UPDATE", change: cs}, nil
}

func planDelete(del *pg.DeleteStmt) (*stmt, error) {
	table, err := relationName(del.Relation, "DELETE")
	if err != nil {
		return nil, err
	}
	switch {
	case del.WithClause != nil:
		return nil, notSupported("WITH in DELETE")
	case len(del.ReturningList) > 0:
		return nil, notSupported("DELETE ... RETURNING")
	case len(del.UsingClause) > 0:
		return nil, notSupported("DELETE ... USING")
	}
	return &stmt{tag: "DELETE", change: &changeStmt{kind: "DELETE", table: table, where: del.WhereClause}}, nil
}

// ---- values ----

// The values the evaluator computes with: nil (NULL), int64, float64,
// bool, string (text), []byte, tsVal, dateVal, and unknownLit, a quoted
// literal whose type is the one it is assigned to or combined with (as
// PostgreSQL's "unknown").
type (
	tsVal      int64 // microseconds since 1970
	dateVal    int32 // days since 1970
	unknownLit string
)

// env is what column references of an expression read: the row being
// changed (UPDATE, DO UPDATE; nil in VALUES) and, in DO UPDATE, the row
// proposed for insertion (EXCLUDED).
type env struct {
	tbl      *tableCols
	row      []any // values as rowValue gives them
	excluded []any
	where    string // for errors: "UPDATE", "INSERT", ...
}

// tableCols are a keyed table's columns (the change columns left out),
// found by name as PostgreSQL does: an unquoted name is lower case, so
// an exact match first, then a unique case-insensitive one.
type tableCols struct {
	name   string
	fields []arrow.Field
}

func (tc *tableCols) index(name string) (int, error) {
	for i, f := range tc.fields {
		if f.Name == name {
			return i, nil
		}
	}
	found := -1
	for i, f := range tc.fields {
		if strings.EqualFold(f.Name, name) {
			if found >= 0 {
				found = -2
				break
			}
			found = i
		}
	}
	if found >= 0 {
		return found, nil
	}
	return 0, &pgError{code: "42703", msg: fmt.Sprintf("column %q of relation %q does not exist", name, tc.name)}
}

// eval evaluates an expression of constants and, where e has a row, the
// row's columns: arithmetic, ||, casts, NULL. What it cannot evaluate is
// refused with 0A000.
func (e *env) eval(n *pg.Node) (any, error) {
	switch {
	case n == nil:
		return nil, notSupported("an empty expression")
	case n.GetAConst() != nil:
		c := n.GetAConst()
		if c.Isnull {
			return nil, nil
		}
		switch v := c.Val.(type) {
		case *pg.A_Const_Ival:
			return int64(v.Ival.Ival), nil
		case *pg.A_Const_Fval:
			if i, err := strconv.ParseInt(v.Fval.Fval, 10, 64); err == nil {
				return i, nil
			}
			f, err := strconv.ParseFloat(v.Fval.Fval, 64)
			if err != nil {
				if strings.Trim(v.Fval.Fval, "0123456789") == "" {
					return nil, &pgError{code: "22003", msg: fmt.Sprintf("value %s is out of range for type bigint", v.Fval.Fval)}
				}
				return nil, &pgError{code: "22P02", msg: fmt.Sprintf("invalid number %q", v.Fval.Fval)}
			}
			return f, nil
		case *pg.A_Const_Sval:
			return unknownLit(v.Sval.Sval), nil
		case *pg.A_Const_Boolval:
			return v.Boolval.Boolval, nil
		case *pg.A_Const_Bsval:
			return nil, notSupported("bit-string constants")
		}
	case n.GetSetToDefault() != nil:
		return nil, nil // strata's columns have no defaults: NULL
	case n.GetColumnRef() != nil:
		return e.column(n.GetColumnRef())
	case n.GetTypeCast() != nil:
		tc := n.GetTypeCast()
		v, err := e.eval(tc.Arg)
		if err != nil {
			return nil, err
		}
		typ, err := castType(tc.TypeName)
		if err != nil {
			return nil, err
		}
		return assign(v, typ, true, "")
	case n.GetAExpr() != nil:
		return e.evalOp(n.GetAExpr())
	case n.GetParamRef() != nil:
		return nil, &pgError{code: "42P02", msg: fmt.Sprintf("there is no parameter $%d", n.GetParamRef().Number)}
	case n.GetFuncCall() != nil:
		return nil, notSupported(fmt.Sprintf("function %s() in %s", funcName(n.GetFuncCall()), e.where))
	}
	return nil, notSupported(fmt.Sprintf("this expression in %s (strata evaluates constants, parameters, the row's columns, + - * / %% ||, casts)", e.where))
}

func (e *env) column(cr *pg.ColumnRef) (any, error) {
	var names []string
	for _, f := range cr.Fields {
		s := f.GetString_()
		if s == nil {
			return nil, notSupported("* in " + e.where)
		}
		names = append(names, s.Sval)
	}
	row := e.row
	switch {
	case len(names) == 2 && names[0] == "excluded" && e.excluded != nil:
		row = e.excluded
	case len(names) == 2 && names[0] == e.tbl.name:
	case len(names) != 1:
		return nil, &pgError{code: "42P01", msg: fmt.Sprintf("missing FROM-clause entry for table %q", names[0])}
	}
	col := names[len(names)-1]
	i, err := e.tbl.index(col)
	if err != nil {
		return nil, err
	}
	if row == nil {
		return nil, &pgError{code: "42703", msg: fmt.Sprintf("column %q does not exist in %s: a VALUES row cannot refer to the table's columns", col, e.where)}
	}
	v := row[i]
	if v == nil {
		return nil, nil
	}
	switch e.tbl.fields[i].Type.ID() {
	case arrow.TIMESTAMP:
		return tsVal(v.(int64)), nil
	case arrow.DATE32:
		return dateVal(v.(int32)), nil
	}
	return v, nil
}

func (e *env) evalOp(a *pg.A_Expr) (any, error) {
	if a.Kind != pg.A_Expr_Kind_AEXPR_OP || len(a.Name) != 1 {
		return nil, notSupported(fmt.Sprintf("this operator in %s", e.where))
	}
	op := a.Name[0].GetString_().Sval
	r, err := e.eval(a.Rexpr)
	if err != nil {
		return nil, err
	}
	if a.Lexpr == nil { // prefix
		switch op {
		case "-":
			return arith("-", int64(0), r)
		case "+":
			return arith("+", int64(0), r)
		}
		return nil, notSupported("prefix operator " + op)
	}
	l, err := e.eval(a.Lexpr)
	if err != nil {
		return nil, err
	}
	switch op {
	case "+", "-", "*", "/", "%":
		return arith(op, l, r)
	case "||":
		if l == nil || r == nil {
			return nil, nil
		}
		return textOfValue(l) + textOfValue(r), nil
	}
	return nil, notSupported(fmt.Sprintf("operator %s in %s", op, e.where))
}

// arith applies + - * / % to numbers: integers stay integers (overflow
// is 22003, division by zero 22012), a float makes a float; an unknown
// literal takes the other side's type.
func arith(op string, l, r any) (any, error) {
	if l == nil || r == nil {
		return nil, nil
	}
	num := func(v, other any) (any, error) {
		if u, ok := v.(unknownLit); ok {
			if _, isFloat := other.(float64); isFloat {
				return assign(u, arrow.PrimitiveTypes.Float64, false, "")
			}
			return assign(u, arrow.PrimitiveTypes.Int64, false, "")
		}
		switch v.(type) {
		case int64, float64:
			return v, nil
		}
		return nil, &pgError{code: "42883", msg: fmt.Sprintf("operator does not exist: %s %s %s", typeNameOf(l), op, typeNameOf(r))}
	}
	var err error
	if l, err = num(l, r); err != nil {
		return nil, err
	}
	if r, err = num(r, l); err != nil {
		return nil, err
	}
	li, lok := l.(int64)
	ri, rok := r.(int64)
	if lok && rok {
		overflow := &pgError{code: "22003", msg: "bigint out of range"}
		switch op {
		case "+":
			s := li + ri
			if (ri > 0 && s < li) || (ri < 0 && s > li) {
				return nil, overflow
			}
			return s, nil
		case "-":
			s := li - ri
			if (ri < 0 && s < li) || (ri > 0 && s > li) {
				return nil, overflow
			}
			return s, nil
		case "*":
			if li != 0 && ri != 0 {
				p := li * ri
				if p/ri != li || (li == -1 && ri == math.MinInt64) || (ri == -1 && li == math.MinInt64) {
					return nil, overflow
				}
				return p, nil
			}
			return int64(0), nil
		case "/", "%":
			if ri == 0 {
				return nil, &pgError{code: "22012", msg: "division by zero"}
			}
			if ri == -1 {
				if op == "%" {
					return int64(0), nil
				}
				if li == math.MinInt64 {
					return nil, overflow
				}
			}
			if op == "/" {
				return li / ri, nil
			}
			return li % ri, nil
		}
	}
	lf, rf := toFloat(l), toFloat(r)
	switch op {
	case "+":
		return lf + rf, nil
	case "-":
		return lf - rf, nil
	case "*":
		return lf * rf, nil
	case "/":
		if rf == 0 {
			return nil, &pgError{code: "22012", msg: "division by zero"}
		}
		return lf / rf, nil
	}
	return nil, &pgError{code: "42883", msg: "operator does not exist: double precision % double precision"}
}

func toFloat(v any) float64 {
	if i, ok := v.(int64); ok {
		return float64(i)
	}
	return v.(float64)
}

func typeNameOf(v any) string {
	switch v.(type) {
	case nil:
		return "unknown"
	case int64:
		return "bigint"
	case float64:
		return "double precision"
	case bool:
		return "boolean"
	case string:
		return "text"
	case []byte:
		return "bytea"
	case tsVal:
		return "timestamp"
	case dateVal:
		return "date"
	case unknownLit:
		return "unknown"
	}
	return fmt.Sprintf("%T", v)
}

func typeNameOfArrow(t arrow.DataType) string {
	oid, err := oidOf(t)
	if err != nil {
		return t.String()
	}
	return typeName[oid]
}

// textOfValue is a value's text form, as a cast to text gives it.
func textOfValue(v any) string {
	switch x := v.(type) {
	case unknownLit:
		return string(x)
	case string:
		return x
	case bool:
		if x {
			return "true"
		}
		return "false"
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case []byte:
		return `\x` + hex.EncodeToString(x)
	case tsVal:
		return time.UnixMicro(int64(x)).UTC().Format("2006-01-02 15:04:05.999999")
	case dateVal:
		return time.Unix(int64(x)*86400, 0).UTC().Format("2006-01-02")
	}
	return fmt.Sprint(v)
}

// castType is the Arrow type of a cast's target.
func castType(tn *pg.TypeName) (arrow.DataType, error) {
	if tn == nil || len(tn.Names) == 0 || len(tn.ArrayBounds) > 0 {
		return nil, notSupported("this cast")
	}
	name := tn.Names[len(tn.Names)-1].GetString_().Sval
	switch name {
	case "int2", "smallint":
		return arrow.PrimitiveTypes.Int16, nil
	case "int4", "int", "integer":
		return arrow.PrimitiveTypes.Int32, nil
	case "int8", "bigint":
		return arrow.PrimitiveTypes.Int64, nil
	case "float4", "real":
		return arrow.PrimitiveTypes.Float32, nil
	case "float8", "numeric", "decimal":
		return arrow.PrimitiveTypes.Float64, nil
	case "text", "varchar", "bpchar", "char":
		return arrow.BinaryTypes.String, nil
	case "bool", "boolean":
		return arrow.FixedWidthTypes.Boolean, nil
	case "bytea":
		return arrow.BinaryTypes.Binary, nil
	case "timestamp":
		return &arrow.TimestampType{Unit: arrow.Microsecond}, nil
	case "timestamptz":
		return &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, nil
	case "date":
		return arrow.FixedWidthTypes.Date32, nil
	}
	return nil, notSupported("a cast to " + name)
}

// assign converts v to a value of type typ: as an assignment to a column
// of that type (explicit false: a number to text is fine, text to a
// number is not) or as a cast (explicit). col names the column in errors.
func assign(v any, typ arrow.DataType, explicit bool, col string) (any, error) {
	if v == nil {
		return nil, nil
	}
	tname := typeNameOfArrow(typ)
	mismatch := func() error {
		if explicit {
			return &pgError{code: "42846", msg: fmt.Sprintf("cannot cast type %s to %s", typeNameOf(v), tname)}
		}
		return &pgError{code: "42804", msg: fmt.Sprintf("column %q is of type %s but expression is of type %s", col, tname, typeNameOf(v))}
	}
	lit, isLit := v.(unknownLit)
	if s, ok := v.(string); ok && explicit {
		lit, isLit = unknownLit(s), true
	}
	bad := func(code string) error {
		return &pgError{code: code, msg: fmt.Sprintf("invalid input syntax for type %s: %q", tname, string(lit))}
	}
	switch typ.ID() {
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64, arrow.UINT8, arrow.UINT16, arrow.UINT32:
		var x int64
		switch y := v.(type) {
		case int64:
			x = y
		case float64:
			if math.IsNaN(y) || y >= 9223372036854775807 || y < -9223372036854775808 {
				return nil, &pgError{code: "22003", msg: tname + " out of range"}
			}
			x = int64(math.RoundToEven(y))
		case bool:
			if !explicit {
				return nil, mismatch()
			}
			if y {
				x = 1
			}
		default:
			if !isLit {
				return nil, mismatch()
			}
			var err error
			if x, err = strconv.ParseInt(strings.TrimSpace(string(lit)), 10, 64); err != nil {
				if isRangeErr(err) {
					return nil, &pgError{code: "22003", msg: fmt.Sprintf("value %q is out of range for type %s", string(lit), tname)}
				}
				return nil, bad("22P02")
			}
		}
		lo, hi := intRange(typ)
		if x < lo || x > hi {
			return nil, &pgError{code: "22003", msg: tname + " out of range" + colSuffix(col)}
		}
		return x, nil
	case arrow.FLOAT32, arrow.FLOAT64:
		var f float64
		switch y := v.(type) {
		case int64:
			f = float64(y)
		case float64:
			f = y
		default:
			if !isLit {
				return nil, mismatch()
			}
			s := strings.TrimSpace(strings.ToLower(string(lit)))
			switch s {
			case "nan":
				f = math.NaN()
			case "infinity", "inf", "+infinity":
				f = math.Inf(1)
			case "-infinity", "-inf":
				f = math.Inf(-1)
			default:
				var err error
				if f, err = strconv.ParseFloat(s, 64); err != nil {
					if isRangeErr(err) {
						return nil, &pgError{code: "22003", msg: fmt.Sprintf("%q is out of range for type %s", string(lit), tname)}
					}
					return nil, bad("22P02")
				}
			}
		}
		if typ.ID() == arrow.FLOAT32 && !math.IsInf(f, 0) && !math.IsNaN(f) && math.Abs(f) > math.MaxFloat32 {
			return nil, &pgError{code: "22003", msg: "value out of range: overflow" + colSuffix(col)}
		}
		return f, nil
	case arrow.BOOL:
		switch y := v.(type) {
		case bool:
			return y, nil
		case int64:
			if explicit {
				return y != 0, nil
			}
		}
		if !isLit {
			return nil, mismatch()
		}
		switch strings.ToLower(strings.TrimSpace(string(lit))) {
		case "t", "tr", "tru", "true", "y", "ye", "yes", "on", "1":
			return true, nil
		case "f", "fa", "fal", "fals", "false", "n", "no", "of", "off", "0":
			return false, nil
		}
		return nil, bad("22P02")
	case arrow.STRING, arrow.LARGE_STRING:
		return textOfValue(v), nil
	case arrow.BINARY, arrow.LARGE_BINARY:
		switch y := v.(type) {
		case []byte:
			return y, nil
		case string:
			if !explicit {
				return nil, mismatch()
			}
		}
		if !isLit {
			return nil, mismatch()
		}
		return parseBytea(string(lit))
	case arrow.TIMESTAMP:
		switch y := v.(type) {
		case tsVal:
			return y, nil
		case dateVal:
			return tsVal(int64(y) * 86400 * 1e6), nil
		}
		if !isLit {
			return nil, mismatch()
		}
		t, err := parseTimestamp(string(lit), typ.(*arrow.TimestampType).TimeZone != "")
		if err != nil {
			return nil, &pgError{code: "22007", msg: fmt.Sprintf("invalid input syntax for type %s: %q", tname, string(lit))}
		}
		return tsVal(t.UnixMicro()), nil
	case arrow.DATE32:
		switch y := v.(type) {
		case dateVal:
			return y, nil
		case tsVal:
			return dateVal(int32(math.Floor(float64(y) / 86400e6))), nil
		}
		if !isLit {
			return nil, mismatch()
		}
		t, err := time.Parse("2006-01-02", strings.TrimSpace(string(lit)))
		if err != nil {
			return nil, &pgError{code: "22007", msg: fmt.Sprintf("invalid input syntax for type date: %q", string(lit))}
		}
		return dateVal(int32(t.Unix() / 86400)), nil
	}
	return nil, notSupported(fmt.Sprintf("a value of type %s", typ))
}

func colSuffix(col string) string {
	if col == "" {
		return ""
	}
	return fmt.Sprintf(" (column %q)", col)
}

func isRangeErr(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

func intRange(t arrow.DataType) (int64, int64) {
	switch t.ID() {
	case arrow.INT8:
		return math.MinInt8, math.MaxInt8
	case arrow.INT16:
		return math.MinInt16, math.MaxInt16
	case arrow.INT32:
		return math.MinInt32, math.MaxInt32
	case arrow.UINT8:
		return 0, math.MaxUint8
	case arrow.UINT16:
		return 0, math.MaxUint16
	case arrow.UINT32:
		return 0, math.MaxUint32
	}
	return math.MinInt64, math.MaxInt64
}

// parseBytea reads bytea's hex form (\x...) or, without a backslash,
// the bytes as they are.
func parseBytea(s string) (any, error) {
	if h, ok := strings.CutPrefix(s, `\x`); ok {
		b, err := hex.DecodeString(h)
		if err != nil {
			return nil, &pgError{code: "22P02", msg: fmt.Sprintf("invalid hexadecimal data for type bytea: %q", s)}
		}
		return b, nil
	}
	if strings.Contains(s, `\`) {
		return nil, notSupported("bytea's escape format (write '\\x' and hex digits)")
	}
	return []byte(s), nil
}

// parseTimestamp reads a timestamp as PostgreSQL writes one with
// DateStyle ISO: a date, a time to the microsecond, and (for
// timestamptz; a timestamp ignores it) a zone offset; no offset is UTC.
func parseTimestamp(s string, withZone bool) (time.Time, error) {
	s = strings.TrimSpace(s)
	for _, layout := range []string{"2006-01-02 15:04:05.999999Z07:00", "2006-01-02 15:04:05.999999Z07", "2006-01-02T15:04:05.999999Z07:00",
		"2006-01-02 15:04:05.999999", "2006-01-02T15:04:05.999999", "2006-01-02 15:04", "2006-01-02"} {
		t, err := time.Parse(layout, s)
		if err != nil {
			continue
		}
		if !withZone {
			// timestamp without time zone: the wall clock as written.
			y, mo, d := t.Date()
			h, mi, sec := t.Clock()
			t = time.Date(y, mo, d, h, mi, sec, t.Nanosecond(), time.UTC)
		}
		return t, nil
	}
	return time.Time{}, fmt.Errorf("bad timestamp %q", s)
}
