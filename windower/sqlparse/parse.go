// Package sqlparse turns the SQL text of a window query into the
// structured messages.WindowQuery a window job carries. It uses
// PostgreSQL's own parser (pg_query), so syntax and its errors are
// PostgreSQL's; it then resolves PostgreSQL's window semantics (default
// NULLS ordering, the default frame, named windows and window inheritance)
// so the windower gets every window call complete.
//
// Only the strata CLI links this package; worker binaries receive the
// parsed query and never link the PostgreSQL parser.
//
// The supported form is
//
//	SELECT item [, ...] FROM table
//	  [WHERE predicate [AND ...]]
//	  [WINDOW name AS (window_definition) [, ...]]
//	  [ORDER BY expr [ASC|DESC] [NULLS FIRST|LAST] [, ...]]
//	  [LIMIT n]
//
// where an item is a column, an arithmetic expression (+ - * / %) of
// columns and constants, or a window call
// func(args) [FILTER (WHERE predicate)] OVER (window_definition | name), and a
// predicate is `expr op constant` (op one of = <> != < <= > >=) or
// `expr IS [NOT] NULL`. Anything else is an error that names the construct
// and its line and column.
//
// A RANGE frame offset is a number or an interval constant: INTERVAL
// 'text', 'text'::interval or CAST('text' AS interval), with or without a
// field qualifier (INTERVAL '1' HOUR, INTERVAL '1-2' YEAR TO MONTH,
// INTERVAL '1 2:03' DAY TO MINUTE, INTERVAL '1.5' SECOND(0)). The text is
// read as PostgreSQL 17's interval input reads it (ParseInterval), with
// IntervalStyle at its default: every unit and abbreviation
// (microseconds to millennia), signs, fractions, @ and ago, hh:mm:ss,
// years-months, ISO 8601 and infinity. It becomes the months, days and
// microseconds of messages.Interval, which the windower applies with
// calendar arithmetic. An untyped string such as '1 day' is not taken
// for an interval: without the column's type it could as well be a
// number.
package sqlparse

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	pg "github.com/pganalyze/pg_query_go/v6"
	pgparser "github.com/pganalyze/pg_query_go/v6/parser"
	"github.com/strata-db/strata/messages"
)

var (
	// ErrSyntax is wrapped by errors for text PostgreSQL cannot parse.
	ErrSyntax = errors.New("sqlparse: syntax error")
	// ErrUnsupported is wrapped by errors for valid SQL outside the supported form.
	ErrUnsupported = errors.New("sqlparse: unsupported")
	// ErrInvalid is wrapped by errors PostgreSQL would also raise during
	// analysis (window inheritance rules, bad frame offsets).
	ErrInvalid = errors.New("sqlparse: invalid query")
)

// Error is a parse error at a position of the SQL text.
type Error struct {
	Kind   error // ErrSyntax, ErrUnsupported or ErrInvalid
	Offset int   // byte offset into the text; -1 when unknown
	Line   int   // 1-based; 0 when unknown
	Column int   // 1-based, in bytes
	Msg    string
}

func (e *Error) Error() string {
	if e.Line == 0 {
		return fmt.Sprintf("%v: %s", e.Kind, e.Msg)
	}
	return fmt.Sprintf("%v: line %d column %d: %s", e.Kind, e.Line, e.Column, e.Msg)
}

func (e *Error) Unwrap() error { return e.Kind }

type parser struct {
	sql     string
	windows map[string]*windowSpec
}

func (p *parser) errAt(kind error, loc int32, format string, a ...any) error {
	e := &Error{Kind: kind, Offset: int(loc), Msg: fmt.Sprintf(format, a...)}
	if loc >= 0 && int(loc) <= len(p.sql) {
		e.Line = 1 + strings.Count(p.sql[:loc], "\n")
		e.Column = int(loc) - strings.LastIndex(p.sql[:loc], "\n")
	}
	return e
}

// Parse parses one SELECT statement with window functions.
func Parse(sql string) (*messages.WindowQuery, error) {
	tree, err := pg.Parse(sql)
	if err != nil {
		var pe *pgparser.Error
		if errors.As(err, &pe) && pe.Cursorpos > 0 {
			return nil, (&parser{sql: sql}).errAt(ErrSyntax, int32(pe.Cursorpos-1), "%s", pe.Message)
		}
		return nil, &Error{Kind: ErrSyntax, Offset: -1, Msg: err.Error()}
	}
	p := &parser{sql: sql, windows: map[string]*windowSpec{}}
	if len(tree.Stmts) != 1 {
		return nil, &Error{Kind: ErrUnsupported, Offset: -1, Msg: fmt.Sprintf("%d statements; exactly one SELECT is supported", len(tree.Stmts))}
	}
	raw := tree.Stmts[0]
	sel := raw.Stmt.GetSelectStmt()
	if sel == nil {
		return nil, p.errAt(ErrUnsupported, raw.StmtLocation, "only SELECT statements are supported")
	}
	return p.selectStmt(sel)
}

func (p *parser) selectStmt(s *pg.SelectStmt) (*messages.WindowQuery, error) {
	switch {
	case s.Op != pg.SetOperation_SETOP_NONE:
		return nil, p.errAt(ErrUnsupported, 0, "UNION, INTERSECT and EXCEPT are not supported")
	case s.WithClause != nil:
		return nil, p.errAt(ErrUnsupported, s.WithClause.Location, "WITH is not supported")
	case len(s.DistinctClause) > 0:
		return nil, p.errAt(ErrUnsupported, 0, "DISTINCT is not supported")
	case len(s.GroupClause) > 0:
		return nil, p.errAt(ErrUnsupported, location(s.GroupClause[0]), "GROUP BY is not supported")
	case s.HavingClause != nil:
		return nil, p.errAt(ErrUnsupported, location(s.HavingClause), "HAVING is not supported")
	case len(s.ValuesLists) > 0:
		return nil, p.errAt(ErrUnsupported, 0, "VALUES is not supported")
	case s.IntoClause != nil:
		return nil, p.errAt(ErrUnsupported, 0, "SELECT INTO is not supported")
	case len(s.LockingClause) > 0:
		return nil, p.errAt(ErrUnsupported, location(s.LockingClause[0]), "locking clauses are not supported")
	case s.LimitOffset != nil:
		return nil, p.errAt(ErrUnsupported, location(s.LimitOffset), "OFFSET is not supported")
	}
	q := &messages.WindowQuery{SQL: p.sql}
	if len(s.FromClause) != 1 {
		return nil, p.errAt(ErrUnsupported, 0, "exactly one table in FROM is supported, got %d", len(s.FromClause))
	}
	rv := s.FromClause[0].GetRangeVar()
	if rv == nil {
		return nil, p.errAt(ErrUnsupported, location(s.FromClause[0]), "FROM must name a table (joins and subqueries are not supported)")
	}
	q.Table = rv.Relname
	tableNames := map[string]bool{rv.Relname: true}
	if rv.Alias != nil {
		tableNames = map[string]bool{rv.Alias.Aliasname: true}
	}
	ex := &exprParser{p: p, tables: tableNames}

	// Named windows, in order: a later one may refer to an earlier one.
	for _, n := range s.WindowClause {
		wd := n.GetWindowDef()
		if _, dup := p.windows[wd.Name]; dup {
			return nil, p.errAt(ErrInvalid, wd.Location, "window %q is already defined", wd.Name)
		}
		spec, err := p.windowDef(ex, wd)
		if err != nil {
			return nil, err
		}
		p.windows[wd.Name] = spec
	}

	used := map[string]int{}
	for _, n := range s.TargetList {
		rt := n.GetResTarget()
		item, err := p.selectItem(ex, rt)
		if err != nil {
			return nil, err
		}
		// Output names must be unique on the wire; PostgreSQL allows
		// duplicates, so later ones get a numeric suffix.
		if k := used[item.Alias]; k > 0 {
			used[item.Alias]++
			item.Alias = fmt.Sprintf("%s_%d", item.Alias, k+1)
		} else {
			used[item.Alias] = 1
		}
		q.Select = append(q.Select, item)
	}
	if s.WhereClause != nil {
		preds, err := ex.predicates(s.WhereClause, "WHERE")
		if err != nil {
			return nil, err
		}
		q.Where = preds
	}
	for _, n := range s.SortClause {
		sb := n.GetSortBy()
		// ORDER BY 2 names the second select item.
		if c := sb.Node.GetAConst(); c != nil {
			iv, ok := c.Val.(*pg.A_Const_Ival)
			if !ok || iv.Ival.Ival < 1 || int(iv.Ival.Ival) > len(q.Select) {
				return nil, p.errAt(ErrInvalid, sb.Location, "ORDER BY position is not in select list")
			}
			it, err := p.sortItem(ex, sb)
			if err != nil {
				return nil, err
			}
			it.Expr = messages.Expr{Column: q.Select[iv.Ival.Ival-1].Alias}
			q.OrderBy = append(q.OrderBy, it)
			continue
		}
		it, err := p.sortItem(ex, sb)
		if err != nil {
			return nil, err
		}
		q.OrderBy = append(q.OrderBy, it)
	}
	if s.LimitCount != nil {
		c := s.LimitCount.GetAConst()
		if c == nil {
			return nil, p.errAt(ErrUnsupported, location(s.LimitCount), "LIMIT must be an integer constant")
		}
		if !c.Isnull { // LIMIT NULL is no limit
			v, err := ex.constant(c)
			if err != nil {
				return nil, err
			}
			if v.Int == nil || *v.Int < 0 {
				return nil, p.errAt(ErrInvalid, c.Location, "LIMIT must be a non-negative integer")
			}
			if *v.Int == 0 {
				// LIMIT 0 returns no rows; the wire uses 0 for "no limit".
				return nil, p.errAt(ErrUnsupported, c.Location, "LIMIT 0 is not supported")
			}
			q.Limit = *v.Int
		}
	}
	if err := q.Validate(); err != nil {
		return nil, &Error{Kind: ErrInvalid, Offset: -1, Msg: err.Error()}
	}
	return q, nil
}

func (p *parser) selectItem(ex *exprParser, rt *pg.ResTarget) (messages.SelectItem, error) {
	if fc := rt.Val.GetFuncCall(); fc != nil {
		name := funcName(fc)
		if fc.Over == nil {
			if messages.IsAggregate(name) {
				return messages.SelectItem{}, p.errAt(ErrUnsupported, fc.Location, "aggregate %s without OVER is not supported (no GROUP BY queries)", name)
			}
			return messages.SelectItem{}, p.errAt(ErrUnsupported, fc.Location, "function %s is not supported", name)
		}
		w, err := p.windowCall(ex, fc)
		if err != nil {
			return messages.SelectItem{}, err
		}
		alias := rt.Name
		if alias == "" {
			alias = name
		}
		return messages.SelectItem{Alias: alias, Window: w}, nil
	}
	if cr := rt.Val.GetColumnRef(); cr != nil {
		for _, f := range cr.Fields {
			if f.GetAStar() != nil {
				return messages.SelectItem{}, p.errAt(ErrUnsupported, cr.Location, "SELECT * is not supported; name the columns")
			}
		}
	}
	e, err := ex.expr(rt.Val)
	if err != nil {
		return messages.SelectItem{}, err
	}
	alias := rt.Name
	if alias == "" {
		if e.Column != "" {
			alias = e.Column
		} else {
			alias = "?column?"
		}
	}
	return messages.SelectItem{Alias: alias, Expr: e}, nil
}

func funcName(fc *pg.FuncCall) string {
	var parts []string
	for _, n := range fc.Funcname {
		parts = append(parts, n.GetString_().GetSval())
	}
	if len(parts) == 2 && parts[0] == "pg_catalog" {
		parts = parts[1:]
	}
	return strings.Join(parts, ".")
}

func (p *parser) windowCall(ex *exprParser, fc *pg.FuncCall) (*messages.WindowCall, error) {
	name := funcName(fc)
	if !messages.KnownWindowFunc(name) {
		return nil, p.errAt(ErrUnsupported, fc.Location, "window function %s is not supported", name)
	}
	switch {
	case fc.AggDistinct:
		return nil, p.errAt(ErrUnsupported, fc.Location, "DISTINCT is not implemented for window functions")
	case len(fc.AggOrder) > 0:
		return nil, p.errAt(ErrUnsupported, fc.Location, "aggregate ORDER BY is not implemented for window functions")
	case fc.AggWithinGroup:
		return nil, p.errAt(ErrUnsupported, fc.Location, "WITHIN GROUP is not supported")
	case fc.FuncVariadic:
		return nil, p.errAt(ErrUnsupported, fc.Location, "VARIADIC is not supported")
	}
	w := &messages.WindowCall{Func: name, Star: fc.AggStar}
	if fc.AggStar && name != "count" {
		return nil, p.errAt(ErrInvalid, fc.Location, "%s(*) must be used to call a parameterless aggregate function", name)
	}
	for _, a := range fc.Args {
		e, err := ex.expr(a)
		if err != nil {
			return nil, err
		}
		w.Args = append(w.Args, e)
	}
	if fc.AggFilter != nil {
		if !messages.IsAggregate(name) {
			return nil, p.errAt(ErrUnsupported, fc.Location, "FILTER is not implemented for non-aggregate window functions")
		}
		preds, err := ex.predicates(fc.AggFilter, "FILTER")
		if err != nil {
			return nil, err
		}
		w.Filter = preds
	}
	spec, err := p.overClause(ex, fc.Over)
	if err != nil {
		return nil, err
	}
	w.PartitionBy, w.OrderBy, w.Frame = spec.partition, spec.order, spec.frame
	return w, nil
}

// windowSpec is a resolved window definition.
type windowSpec struct {
	partition []messages.Expr
	order     []messages.SortItem
	frame     *messages.Frame // nil: default
}

func (p *parser) overClause(ex *exprParser, wd *pg.WindowDef) (*windowSpec, error) {
	// OVER name: the named window as it is.
	if wd.Name != "" && wd.Refname == "" && len(wd.PartitionClause) == 0 && len(wd.OrderClause) == 0 && wd.FrameOptions&frameNonDefault == 0 {
		spec, ok := p.windows[wd.Name]
		if !ok {
			return nil, p.errAt(ErrInvalid, wd.Location, "window %q does not exist", wd.Name)
		}
		return spec, nil
	}
	return p.windowDef(ex, wd)
}

// windowDef resolves a window definition, applying PostgreSQL's rules for
// copying a referenced window (parse_clause.c, transformWindowDefinitions).
func (p *parser) windowDef(ex *exprParser, wd *pg.WindowDef) (*windowSpec, error) {
	spec := &windowSpec{}
	var ref *windowSpec
	if wd.Refname != "" {
		r, ok := p.windows[wd.Refname]
		if !ok {
			return nil, p.errAt(ErrInvalid, wd.Location, "window %q does not exist", wd.Refname)
		}
		ref = r
		if len(wd.PartitionClause) > 0 {
			return nil, p.errAt(ErrInvalid, wd.Location, "cannot override PARTITION BY clause of window %q", wd.Refname)
		}
		if len(wd.OrderClause) > 0 && len(ref.order) > 0 {
			return nil, p.errAt(ErrInvalid, wd.Location, "cannot override ORDER BY clause of window %q", wd.Refname)
		}
		if ref.frame != nil {
			return nil, p.errAt(ErrInvalid, wd.Location, "cannot copy window %q because it has a frame clause", wd.Refname)
		}
		spec.partition = ref.partition
		spec.order = ref.order
	}
	for _, n := range wd.PartitionClause {
		e, err := ex.expr(n)
		if err != nil {
			return nil, err
		}
		spec.partition = append(spec.partition, *e)
	}
	for _, n := range wd.OrderClause {
		it, err := p.sortItem(ex, n.GetSortBy())
		if err != nil {
			return nil, err
		}
		spec.order = append(spec.order, it)
	}
	fr, err := p.frame(ex, wd, len(spec.order))
	if err != nil {
		return nil, err
	}
	spec.frame = fr
	return spec, nil
}

func (p *parser) sortItem(ex *exprParser, sb *pg.SortBy) (messages.SortItem, error) {
	if sb.SortbyDir == pg.SortByDir_SORTBY_USING {
		return messages.SortItem{}, p.errAt(ErrUnsupported, sb.Location, "ORDER BY ... USING is not supported")
	}
	var it messages.SortItem
	if c := sb.Node.GetAConst(); c == nil {
		e, err := ex.expr(sb.Node)
		if err != nil {
			return it, err
		}
		it.Expr = *e
	}
	it.Desc = sb.SortbyDir == pg.SortByDir_SORTBY_DESC
	switch sb.SortbyNulls {
	case pg.SortByNulls_SORTBY_NULLS_FIRST:
		it.NullsFirst = true
	case pg.SortByNulls_SORTBY_NULLS_LAST:
		it.NullsFirst = false
	default:
		it.NullsFirst = it.Desc // PostgreSQL: NULLs sort as larger than any value
	}
	return it, nil
}

// Frame option bits (PostgreSQL's nodes/parsenodes.h).
const (
	frameNonDefault           = 0x00001
	frameRange                = 0x00002
	frameRows                 = 0x00004
	frameGroups               = 0x00008
	frameStartUnboundedPrec   = 0x00020
	frameEndUnboundedPrec     = 0x00040
	frameStartUnboundedFollow = 0x00080
	frameEndUnboundedFollow   = 0x00100
	frameStartCurrentRow      = 0x00200
	frameEndCurrentRow        = 0x00400
	frameStartOffsetPreceding = 0x00800
	frameEndOffsetPreceding   = 0x01000
	frameStartOffsetFollowing = 0x02000
	frameEndOffsetFollowing   = 0x04000
	frameExcludeCurrentRow    = 0x08000
	frameExcludeGroup         = 0x10000
	frameExcludeTies          = 0x20000
)

func (p *parser) frame(ex *exprParser, wd *pg.WindowDef, orderKeys int) (*messages.Frame, error) {
	o := wd.FrameOptions
	if o&frameNonDefault == 0 {
		return nil, nil
	}
	f := &messages.Frame{}
	switch {
	case o&frameRows != 0:
		f.Mode = messages.FrameRows
	case o&frameGroups != 0:
		f.Mode = messages.FrameGroups
	default:
		f.Mode = messages.FrameRange
	}
	switch {
	case o&frameStartUnboundedPrec != 0:
		f.Start.Kind = messages.BoundUnboundedPreceding
	case o&frameStartUnboundedFollow != 0:
		return nil, p.errAt(ErrInvalid, wd.Location, "frame start cannot be UNBOUNDED FOLLOWING")
	case o&frameStartCurrentRow != 0:
		f.Start.Kind = messages.BoundCurrentRow
	case o&frameStartOffsetPreceding != 0:
		f.Start.Kind = messages.BoundPreceding
	case o&frameStartOffsetFollowing != 0:
		f.Start.Kind = messages.BoundFollowing
	}
	switch {
	case o&frameEndUnboundedFollow != 0:
		f.End.Kind = messages.BoundUnboundedFollowing
	case o&frameEndUnboundedPrec != 0:
		return nil, p.errAt(ErrInvalid, wd.Location, "frame end cannot be UNBOUNDED PRECEDING")
	case o&frameEndCurrentRow != 0:
		f.End.Kind = messages.BoundCurrentRow
	case o&frameEndOffsetPreceding != 0:
		f.End.Kind = messages.BoundPreceding
	case o&frameEndOffsetFollowing != 0:
		f.End.Kind = messages.BoundFollowing
	}
	switch {
	case o&frameExcludeCurrentRow != 0:
		f.Exclude = messages.ExcludeCurrentRow
	case o&frameExcludeGroup != 0:
		f.Exclude = messages.ExcludeGroup
	case o&frameExcludeTies != 0:
		f.Exclude = messages.ExcludeTies
	}
	for _, b := range []struct {
		bound *messages.FrameBound
		node  *pg.Node
	}{{&f.Start, wd.StartOffset}, {&f.End, wd.EndOffset}} {
		if b.bound.Kind != messages.BoundPreceding && b.bound.Kind != messages.BoundFollowing {
			continue
		}
		v, err := ex.frameOffset(b.node)
		if err != nil {
			return nil, err
		}
		if v.IsNull() {
			return nil, p.errAt(ErrInvalid, location(b.node), "frame starting or ending offset must not be null")
		}
		iv, isInterval := v.Interval()
		if (v.Int != nil && *v.Int < 0) || (v.Float != nil && *v.Float < 0) || (isInterval && iv.Sign() < 0) {
			if f.Mode == messages.FrameRange {
				return nil, p.errAt(ErrInvalid, location(b.node), "invalid preceding or following size in window function")
			}
			return nil, p.errAt(ErrInvalid, location(b.node), "frame starting or ending offset must not be negative")
		}
		if f.Mode != messages.FrameRange && v.Int == nil {
			return nil, p.errAt(ErrInvalid, location(b.node), "%s frame offset must be an integer", strings.ToUpper(f.Mode))
		}
		if f.Mode == messages.FrameRange && orderKeys != 1 {
			return nil, p.errAt(ErrInvalid, location(b.node), "RANGE with offset PRECEDING/FOLLOWING requires exactly one ORDER BY column")
		}
		b.bound.Offset = v
	}
	if f.Mode == messages.FrameGroups && orderKeys == 0 {
		return nil, p.errAt(ErrInvalid, wd.Location, "GROUPS mode requires an ORDER BY clause")
	}
	return f, nil
}

// location returns a node's location, or -1.
func location(n *pg.Node) int32 {
	if n == nil {
		return -1
	}
	type located interface{ GetLocation() int32 }
	switch v := n.Node.(type) {
	case *pg.Node_ColumnRef:
		return v.ColumnRef.Location
	case *pg.Node_AConst:
		return v.AConst.Location
	case *pg.Node_AExpr:
		return v.AExpr.Location
	case *pg.Node_FuncCall:
		return v.FuncCall.Location
	case *pg.Node_TypeCast:
		return v.TypeCast.Location
	case *pg.Node_BoolExpr:
		return v.BoolExpr.Location
	case *pg.Node_NullTest:
		return v.NullTest.Location
	case *pg.Node_SubLink:
		return v.SubLink.Location
	case *pg.Node_RangeVar:
		return v.RangeVar.Location
	case *pg.Node_ParamRef:
		return v.ParamRef.Location
	}
	return -1
}

// exprParser converts expressions.
type exprParser struct {
	p      *parser
	tables map[string]bool
}

func (ex *exprParser) expr(n *pg.Node) (*messages.Expr, error) {
	p := ex.p
	switch v := n.Node.(type) {
	case *pg.Node_ColumnRef:
		var names []string
		for _, f := range v.ColumnRef.Fields {
			s := f.GetString_()
			if s == nil {
				return nil, p.errAt(ErrUnsupported, v.ColumnRef.Location, "* is not supported here")
			}
			names = append(names, s.Sval)
		}
		switch len(names) {
		case 1:
			return &messages.Expr{Column: names[0]}, nil
		case 2:
			if !ex.tables[names[0]] {
				return nil, p.errAt(ErrInvalid, v.ColumnRef.Location, "missing FROM-clause entry for table %q", names[0])
			}
			return &messages.Expr{Column: names[1]}, nil
		}
		return nil, p.errAt(ErrUnsupported, v.ColumnRef.Location, "qualified name %s is not supported", strings.Join(names, "."))
	case *pg.Node_AConst:
		c, err := ex.constant(v.AConst)
		if err != nil {
			return nil, err
		}
		return &messages.Expr{Const: c}, nil
	case *pg.Node_TypeCast:
		return ex.cast(v.TypeCast)
	case *pg.Node_AExpr:
		a := v.AExpr
		if a.Kind != pg.A_Expr_Kind_AEXPR_OP || len(a.Name) != 1 {
			return nil, p.errAt(ErrUnsupported, a.Location, "this operator is not supported in an expression")
		}
		op := a.Name[0].GetString_().GetSval()
		if a.Lexpr == nil { // unary
			r, err := ex.expr(a.Rexpr)
			if err != nil {
				return nil, err
			}
			switch op {
			case "+":
				return r, nil
			case "-":
				if r.Const != nil && r.Const.Int != nil && *r.Const.Int != math.MinInt64 {
					x := -*r.Const.Int
					return &messages.Expr{Const: &messages.Value{Int: &x}}, nil
				}
				if r.Const != nil && r.Const.Float != nil {
					x := -*r.Const.Float
					return &messages.Expr{Const: &messages.Value{Float: &x}}, nil
				}
				zero := int64(0)
				return &messages.Expr{Op: "-", Args: []*messages.Expr{{Const: &messages.Value{Int: &zero}}, r}}, nil
			}
			return nil, p.errAt(ErrUnsupported, a.Location, "prefix operator %s is not supported", op)
		}
		switch op {
		case "+", "-", "*", "/", "%":
		default:
			return nil, p.errAt(ErrUnsupported, a.Location, "operator %s is not supported in an expression (only + - * / %%)", op)
		}
		l, err := ex.expr(a.Lexpr)
		if err != nil {
			return nil, err
		}
		r, err := ex.expr(a.Rexpr)
		if err != nil {
			return nil, err
		}
		return &messages.Expr{Op: op, Args: []*messages.Expr{l, r}}, nil
	case *pg.Node_FuncCall:
		if v.FuncCall.Over != nil {
			return nil, p.errAt(ErrUnsupported, v.FuncCall.Location, "window functions are supported only at the top of a select item")
		}
		return nil, p.errAt(ErrUnsupported, v.FuncCall.Location, "function %s is not supported in an expression", funcName(v.FuncCall))
	}
	return nil, p.errAt(ErrUnsupported, location(n), "expression of this kind (%s) is not supported", nodeName(n))
}

func nodeName(n *pg.Node) string {
	s := fmt.Sprintf("%T", n.Node)
	return strings.TrimPrefix(s, "*pg_query.Node_")
}

func (ex *exprParser) constant(c *pg.A_Const) (*messages.Value, error) {
	if c.Isnull {
		return &messages.Value{}, nil
	}
	switch v := c.Val.(type) {
	case *pg.A_Const_Ival:
		x := int64(v.Ival.Ival)
		return &messages.Value{Int: &x}, nil
	case *pg.A_Const_Fval:
		// Integers beyond 32 bits arrive as Float nodes.
		if x, err := strconv.ParseInt(v.Fval.Fval, 10, 64); err == nil {
			return &messages.Value{Int: &x}, nil
		}
		x, err := strconv.ParseFloat(v.Fval.Fval, 64)
		if err != nil {
			return nil, ex.p.errAt(ErrUnsupported, c.Location, "numeric constant %s does not fit in a float64", v.Fval.Fval)
		}
		return &messages.Value{Float: &x}, nil
	case *pg.A_Const_Sval:
		s := v.Sval.Sval
		return &messages.Value{String: &s}, nil
	case *pg.A_Const_Boolval:
		b := v.Boolval.Boolval
		return &messages.Value{Bool: &b}, nil
	}
	return nil, ex.p.errAt(ErrUnsupported, c.Location, "constant of this type is not supported")
}

func typeName(t *pg.TypeName) string {
	var parts []string
	for _, n := range t.Names {
		parts = append(parts, n.GetString_().GetSval())
	}
	if len(parts) == 2 && parts[0] == "pg_catalog" {
		parts = parts[1:]
	}
	return strings.Join(parts, ".")
}

// cast handles constant casts: numeric types pass through, others are errors.
func (ex *exprParser) cast(tc *pg.TypeCast) (*messages.Expr, error) {
	name := typeName(tc.TypeName)
	inner, err := ex.expr(tc.Arg)
	if err != nil {
		return nil, err
	}
	switch name {
	case "int2", "int4", "int8", "integer", "bigint", "smallint":
		if inner.Const != nil && inner.Const.String != nil {
			x, err := strconv.ParseInt(strings.TrimSpace(*inner.Const.String), 10, 64)
			if err != nil {
				return nil, ex.p.errAt(ErrInvalid, tc.Location, "invalid input syntax for type %s: %q", name, *inner.Const.String)
			}
			return &messages.Expr{Const: &messages.Value{Int: &x}}, nil
		}
		return inner, nil
	case "float4", "float8", "numeric", "real", "double precision":
		if inner.Const != nil && inner.Const.Int != nil {
			x := float64(*inner.Const.Int)
			return &messages.Expr{Const: &messages.Value{Float: &x}}, nil
		}
		if inner.Const != nil && inner.Const.String != nil {
			x, err := strconv.ParseFloat(strings.TrimSpace(*inner.Const.String), 64)
			if err != nil {
				return nil, ex.p.errAt(ErrInvalid, tc.Location, "invalid input syntax for type %s: %q", name, *inner.Const.String)
			}
			return &messages.Expr{Const: &messages.Value{Float: &x}}, nil
		}
		if inner.Const != nil {
			return inner, nil
		}
	case "text", "varchar":
		if inner.Const != nil && inner.Const.String != nil {
			return inner, nil
		}
	}
	return nil, ex.p.errAt(ErrUnsupported, tc.Location, "cast to %s is not supported here", name)
}

// frameOffset converts a frame offset: an integer, a number, or an
// interval constant (INTERVAL '1 month', '2 hours'::interval,
// INTERVAL '1' HOUR, CAST('1-2' AS interval YEAR TO MONTH), ...).
func (ex *exprParser) frameOffset(n *pg.Node) (*messages.Value, error) {
	if tc := n.GetTypeCast(); tc != nil && typeName(tc.TypeName) == "interval" {
		c := tc.Arg.GetAConst()
		if c == nil {
			return nil, ex.p.errAt(ErrUnsupported, tc.Location, "interval offset must be a constant")
		}
		if c.Isnull {
			return &messages.Value{}, nil
		}
		s, ok := c.Val.(*pg.A_Const_Sval)
		if !ok {
			return nil, ex.p.errAt(ErrUnsupported, tc.Location, "interval offset must be a string constant")
		}
		var mods []int64
		for _, m := range tc.TypeName.Typmods {
			mc := m.GetAConst()
			iv, ok := mc.GetVal().(*pg.A_Const_Ival)
			if mc == nil || !ok {
				return nil, ex.p.errAt(ErrInvalid, tc.Location, "interval type modifiers must be integer constants")
			}
			mods = append(mods, int64(iv.Ival.Ival))
		}
		fields, precision, err := IntervalTypmod(mods)
		if err != nil {
			return nil, ex.p.errAt(ErrInvalid, tc.Location, "%v", err)
		}
		iv, err := ParseIntervalTyped(s.Sval.Sval, fields, precision)
		if err != nil {
			return nil, ex.p.errAt(ErrInvalid, c.Location, "%v", err)
		}
		return messages.IntervalValue(iv), nil
	}
	e, err := ex.expr(n)
	if err != nil {
		return nil, err
	}
	if e.Const == nil {
		return nil, ex.p.errAt(ErrUnsupported, location(n), "frame offset must be a constant")
	}
	return e.Const, nil
}

// predicates converts an AND of simple predicates.
func (ex *exprParser) predicates(n *pg.Node, clause string) ([]messages.Predicate, error) {
	p := ex.p
	if b := n.GetBoolExpr(); b != nil {
		if b.Boolop != pg.BoolExprType_AND_EXPR {
			return nil, p.errAt(ErrUnsupported, b.Location, "%s supports only AND of simple predicates (no OR or NOT)", clause)
		}
		var out []messages.Predicate
		for _, a := range b.Args {
			ps, err := ex.predicates(a, clause)
			if err != nil {
				return nil, err
			}
			out = append(out, ps...)
		}
		return out, nil
	}
	if nt := n.GetNullTest(); nt != nil {
		e, err := ex.expr(nt.Arg)
		if err != nil {
			return nil, err
		}
		op := messages.OpIsNull
		if nt.Nulltesttype == pg.NullTestType_IS_NOT_NULL {
			op = messages.OpIsNotNull
		}
		return []messages.Predicate{{Left: *e, Op: op}}, nil
	}
	a := n.GetAExpr()
	if a == nil || a.Kind != pg.A_Expr_Kind_AEXPR_OP || len(a.Name) != 1 || a.Lexpr == nil {
		return nil, p.errAt(ErrUnsupported, location(n), "%s supports only `expression op constant` and IS [NOT] NULL", clause)
	}
	op := a.Name[0].GetString_().GetSval()
	flip := map[string]string{"=": "=", "<>": "<>", "!=": "<>", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
	if _, ok := flip[op]; !ok {
		return nil, p.errAt(ErrUnsupported, a.Location, "operator %s is not supported in %s", op, clause)
	}
	if op == "!=" {
		op = "<>"
	}
	l, err := ex.expr(a.Lexpr)
	if err != nil {
		return nil, err
	}
	r, err := ex.expr(a.Rexpr)
	if err != nil {
		return nil, err
	}
	switch {
	case r.Const != nil && l.Const == nil:
	case l.Const != nil && r.Const == nil:
		l, r, op = r, l, flip[op]
	default:
		return nil, p.errAt(ErrUnsupported, a.Location, "%s supports comparisons of an expression with a constant only", clause)
	}
	return []messages.Predicate{{Left: *l, Op: op, Right: r.Const}}, nil
}
