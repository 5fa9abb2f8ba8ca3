package windower

import (
	"fmt"
	"math"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/strata-db/strata/messages"
)

// The plan: a query compiled against the table's schema, with its
// window groups, calls and frames.

// frameMode, boundKind, exclusion: the compiled frame.
type frameMode uint8

const (
	modeRows frameMode = iota
	modeRange
	modeGroups
)

type boundKind uint8

const (
	boundUnboundedPreceding boundKind = iota
	boundPreceding
	boundCurrentRow
	boundFollowing
	boundUnboundedFollowing
)

type exclusion uint8

const (
	excludeNoOthers exclusion = iota
	excludeCurrentRow
	excludeGroup
	excludeTies
)

type bound struct {
	kind boundKind
	// off is the offset: rows or groups, or for RANGE in the order key's
	// unit (integer keys, dates in days, timestamps in their unit; an
	// interval without months, rounded down); foff for float keys.
	off  int64
	foff float64
	// offInf: a RANGE offset beyond every int64 key (off is MaxInt64).
	// offFrac: the RANGE offset is off and a fraction of the key's unit
	// (an interval of 1.5 seconds on a key in seconds).
	offInf, offFrac bool
	// cal: a RANGE interval offset with months on a date or timestamp
	// key, whose bound is computed row by row (calendar.go).
	cal *calendarOffset
}

// rangeTarget is a RANGE offset bound's target for a row whose integer
// key is v: v + sign*offset, as t (plus a fraction when frac is set), or
// inf = +1/-1 when it is beyond every key.
func (b *bound) rangeTarget(v, sign int64) (t int64, frac bool, inf int) {
	switch {
	case b.cal != nil:
		return b.cal.target(v, sign)
	case b.offInf:
		return 0, false, int(sign)
	}
	t, inf = addOverflow(v, sign*b.off, sign)
	if !b.offFrac || inf != 0 {
		return t, false, inf
	}
	if sign > 0 {
		return t, true, 0
	}
	// v - (off + f) = (t - 1) + (1 - f), with 0 < f < 1.
	if t == math.MinInt64 {
		return 0, false, -1
	}
	return t - 1, true, 0
}

// cmpTarget compares key k with a target from rangeTarget.
func cmpTarget(k, t int64, frac bool, inf int) int {
	switch {
	case inf > 0:
		return -1
	case inf < 0:
		return 1
	case frac && k <= t:
		return -1 // t < target < t+1
	case frac:
		return 1
	}
	return cmpInt(k, t)
}

type frame struct {
	mode       frameMode
	start, end bound
	exclude    exclusion
}

// wholePartition reports whether every row's frame is its whole partition.
func (f *frame) wholePartition(hasOrder bool) bool {
	if f.exclude != excludeNoOthers || f.start.kind != boundUnboundedPreceding {
		return false
	}
	if f.end.kind == boundUnboundedFollowing {
		return true
	}
	// Without ORDER BY all rows are peers: CURRENT ROW ends at the partition end.
	return !hasOrder && f.mode != modeRows && f.end.kind == boundCurrentRow
}

// sortKey is one compiled PARTITION BY or ORDER BY element.
type sortKey struct {
	expr       *expr
	desc       bool
	nullsFirst bool
}

// call is one compiled window call.
type call struct {
	item    int // select item index
	alias   string
	fn      fn
	star    bool
	args    []*expr
	filter  []predicate
	frame   frame
	outKind kind
	outTyp  arrow.DataType

	// Constant arguments.
	ntile  int64 // ntile bucket count (0 with ntileNull: NULL)
	nth    int64
	offset int64 // lag/lead
	argNil bool  // ntile/nth_value/lag offset is NULL: the result is NULL
	deflt  *vector
}

// windowGroup is the calls that share PARTITION BY and ORDER BY: one sort
// serves them all.
type windowGroup struct {
	partition []sortKey
	order     []sortKey
	calls     []*call
	signature string
}

// outputCol is one select item.
type outputCol struct {
	alias string
	expr  *expr // plain item
	call  *call // window item
}

// plan is a query compiled against a schema.
type plan struct {
	schema  *schemaInfo
	where   []predicate
	outputs []outputCol
	groups  []*windowGroup
	orderBy []sortKey // final ORDER BY, over outputs (by alias) or input columns
	// orderByOut[i] is the output index the i-th ORDER BY item names, or -1.
	orderByOut []int
	limit      int64
	usedCols   []bool // input columns the query reads
	// strBytes is, by input column, the string bytes per row measured in
	// the input (measureStrings; nil: none measured), for sizing buffers.
	strBytes  []int64
	source    *messages.WindowQuery
	outSchema *arrow.Schema
}

// compile validates q against schema and compiles it. Every error is
// reported here, before any data is read.
func compile(q *messages.WindowQuery, schema *arrow.Schema) (*plan, error) {
	if q == nil {
		return nil, &QueryError{Reason: "nil query"}
	}
	if err := q.Validate(); err != nil {
		return nil, &QueryError{Reason: strings.TrimPrefix(err.Error(), messages.ErrInvalidQuery.Error()+": ")}
	}
	si, err := newSchemaInfo(schema)
	if err != nil {
		return nil, err
	}
	p := &plan{schema: si, limit: q.Limit, usedCols: make([]bool, schema.NumFields()), source: q}
	if p.where, err = compilePredicates(si, q.Where); err != nil {
		return nil, &QueryError{Reason: "where: " + err.Error()}
	}
	groupBySig := map[string]*windowGroup{}
	fields := make([]arrow.Field, 0, len(q.Select))
	for i := range q.Select {
		s := &q.Select[i]
		qerr := func(format string, a ...any) error {
			return &QueryError{Item: i + 1, Alias: s.Alias, Reason: fmt.Sprintf(format, a...)}
		}
		if s.Expr != nil {
			e, err := compileExpr(si, s.Expr)
			if err != nil {
				return nil, qerr("%v", err)
			}
			p.outputs = append(p.outputs, outputCol{alias: s.Alias, expr: e})
			fields = append(fields, arrow.Field{Name: s.Alias, Type: e.typ, Nullable: true})
			continue
		}
		c, part, order, err := compileCall(si, s.Window)
		if err != nil {
			return nil, qerr("%v", err)
		}
		c.item, c.alias = i, s.Alias
		sig := keySignature(s.Window.PartitionBy, s.Window.OrderBy)
		g := groupBySig[sig]
		if g == nil {
			g = &windowGroup{partition: part, order: order, signature: sig}
			groupBySig[sig] = g
			p.groups = append(p.groups, g)
		}
		g.calls = append(g.calls, c)
		p.outputs = append(p.outputs, outputCol{alias: s.Alias, call: c})
		fields = append(fields, arrow.Field{Name: s.Alias, Type: c.outTyp, Nullable: true})
	}
	p.outSchema = arrow.NewSchema(fields, nil)
	for i := range q.OrderBy {
		it := &q.OrderBy[i]
		out := -1
		if it.Expr.Column != "" {
			for j, o := range p.outputs {
				if o.alias == it.Expr.Column {
					out = j
					break
				}
			}
		}
		k := sortKey{desc: it.Desc, nullsFirst: it.NullsFirst}
		if out < 0 {
			e, err := compileExpr(si, &it.Expr)
			if err != nil {
				return nil, &QueryError{Reason: fmt.Sprintf("order by item %d: %v", i+1, err)}
			}
			k.expr = e
		}
		p.orderBy = append(p.orderBy, k)
		p.orderByOut = append(p.orderByOut, out)
	}
	p.markUsed()
	return p, nil
}

func keySignature(part []messages.Expr, order []messages.SortItem) string {
	var b strings.Builder
	for _, e := range part {
		fmt.Fprintf(&b, "P%s;", exprString(&e))
	}
	for _, s := range order {
		fmt.Fprintf(&b, "O%s,%v,%v;", exprString(&s.Expr), s.Desc, s.NullsFirst)
	}
	return b.String()
}

func exprString(e *messages.Expr) string {
	switch {
	case e == nil:
		return "?"
	case e.Column != "":
		return fmt.Sprintf("%q", e.Column)
	case e.Const != nil:
		v := e.Const
		switch {
		case v.Int != nil:
			return fmt.Sprint(*v.Int)
		case v.Float != nil:
			return fmt.Sprint(*v.Float)
		case v.String != nil:
			return fmt.Sprintf("'%s'", *v.String)
		case v.Bool != nil:
			return fmt.Sprint(*v.Bool)
		}
		return "NULL"
	case len(e.Args) == 2:
		return "(" + exprString(e.Args[0]) + e.Op + exprString(e.Args[1]) + ")"
	}
	return "?"
}

// returnsAsRead reports whether the result holds input column c as it is
// read: the column is an output item, no row is filtered out, and the
// rows come in input order (no ORDER BY, and no window group sorts them:
// each is numbered by hash, or has neither PARTITION BY nor ORDER BY).
func (p *plan) returnsAsRead(c int) bool {
	if len(p.where) > 0 || len(p.orderBy) > 0 {
		return false
	}
	for _, g := range p.groups {
		if !unsortedGroup(g) && (len(g.partition) > 0 || len(g.order) > 0) {
			return false
		}
	}
	for _, o := range p.outputs {
		if o.expr != nil && o.expr.col == c {
			return true
		}
	}
	return false
}

func (p *plan) markUsed() {
	var mark func(e *expr)
	mark = func(e *expr) {
		if e == nil {
			return
		}
		if e.col >= 0 {
			p.usedCols[e.col] = true
		}
		mark(e.args[0])
		mark(e.args[1])
	}
	for _, pr := range p.where {
		mark(pr.left)
	}
	for _, o := range p.outputs {
		mark(o.expr)
	}
	for _, g := range p.groups {
		for _, k := range g.partition {
			mark(k.expr)
		}
		for _, k := range g.order {
			mark(k.expr)
		}
		for _, c := range g.calls {
			for _, a := range c.args {
				mark(a)
			}
			for _, f := range c.filter {
				mark(f.left)
			}
		}
	}
	for _, k := range p.orderBy {
		mark(k.expr)
	}
}

func compileCall(si *schemaInfo, w *messages.WindowCall) (*call, []sortKey, []sortKey, error) {
	f, ok := fnByName[w.Func]
	if !ok {
		return nil, nil, nil, fmt.Errorf("function %s does not exist", w.Func)
	}
	c := &call{fn: f, star: w.Star}
	var part, order []sortKey
	for i := range w.PartitionBy {
		e, err := compileExpr(si, &w.PartitionBy[i])
		if err != nil {
			return nil, nil, nil, fmt.Errorf("partition by: %v", err)
		}
		// Partitions only need equal keys together; any order will do.
		part = append(part, sortKey{expr: e})
	}
	for i := range w.OrderBy {
		e, err := compileExpr(si, &w.OrderBy[i].Expr)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("order by: %v", err)
		}
		order = append(order, sortKey{expr: e, desc: w.OrderBy[i].Desc, nullsFirst: w.OrderBy[i].NullsFirst})
	}
	for i, a := range w.Args {
		e, err := compileExpr(si, a)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("%s argument %d: %v", w.Func, i+1, err)
		}
		c.args = append(c.args, e)
	}
	var err error
	if c.filter, err = compilePredicates(si, w.Filter); err != nil {
		return nil, nil, nil, fmt.Errorf("filter: %v", err)
	}
	fr := messages.DefaultFrame()
	if w.Frame != nil {
		fr = *w.Frame
	}
	if c.frame, err = compileFrame(&fr, order); err != nil {
		return nil, nil, nil, err
	}
	if err := functions[f].result(c, w.Func); err != nil {
		return nil, nil, nil, err
	}
	// A key that repeats an earlier one, in either direction, orders
	// nothing the first did not, and rows equal on the first are equal on
	// it: it is dropped, after the frame was checked against the keys as
	// written (RANGE with an offset wants exactly one). Every path then
	// sorts on, and compares peers by, the same keys (the sorted runs'
	// key left repeats out while the group kept them).
	part = withoutRepeats(part, w.PartitionBy, func(e messages.Expr) messages.Expr { return e })
	order = withoutRepeats(order, w.OrderBy, func(s messages.SortItem) messages.Expr { return s.Expr })
	return c, part, order, nil
}

// withoutRepeats returns keys, compiled from items, without the keys
// whose expression an earlier item has.
func withoutRepeats[T any](keys []sortKey, items []T, expr func(T) messages.Expr) []sortKey {
	seen := map[string]bool{}
	out := keys[:0:0]
	for i, k := range keys {
		e := expr(items[i])
		if s := exprString(&e); !seen[s] {
			seen[s] = true
			out = append(out, k)
		}
	}
	return out
}

func isTemporal(t arrow.DataType) bool {
	return t.ID() == arrow.DATE32 || t.ID() == arrow.TIMESTAMP
}

func compileFrame(f *messages.Frame, order []sortKey) (frame, error) {
	var out frame
	switch f.Mode {
	case messages.FrameRows:
		out.mode = modeRows
	case messages.FrameRange:
		out.mode = modeRange
	case messages.FrameGroups:
		out.mode = modeGroups
	default:
		return out, fmt.Errorf("unknown frame mode %q", f.Mode)
	}
	switch f.Exclude {
	case messages.ExcludeNoOthers:
	case messages.ExcludeCurrentRow:
		out.exclude = excludeCurrentRow
	case messages.ExcludeGroup:
		out.exclude = excludeGroup
	case messages.ExcludeTies:
		out.exclude = excludeTies
	default:
		return out, fmt.Errorf("unknown frame exclusion %q", f.Exclude)
	}
	var err error
	if out.start, err = compileBound(&f.Start, out.mode, order); err != nil {
		return out, fmt.Errorf("frame start: %v", err)
	}
	if out.end, err = compileBound(&f.End, out.mode, order); err != nil {
		return out, fmt.Errorf("frame end: %v", err)
	}
	return out, nil
}

func compileBound(b *messages.FrameBound, mode frameMode, order []sortKey) (bound, error) {
	var out bound
	switch b.Kind {
	case messages.BoundUnboundedPreceding:
		out.kind = boundUnboundedPreceding
	case messages.BoundPreceding:
		out.kind = boundPreceding
	case messages.BoundCurrentRow:
		out.kind = boundCurrentRow
	case messages.BoundFollowing:
		out.kind = boundFollowing
	case messages.BoundUnboundedFollowing:
		out.kind = boundUnboundedFollowing
	default:
		return out, fmt.Errorf("unknown frame bound %q", b.Kind)
	}
	if out.kind != boundPreceding && out.kind != boundFollowing {
		return out, nil
	}
	o := b.Offset
	if o.IsNull() {
		return out, fmt.Errorf("frame offset must not be null")
	}
	if mode != modeRange {
		if o.Int == nil {
			return out, fmt.Errorf("frame offset must be an integer")
		}
		if *o.Int < 0 {
			return out, fmt.Errorf("frame offset must not be negative")
		}
		out.off = *o.Int
		return out, nil
	}
	if len(order) != 1 {
		return out, fmt.Errorf("RANGE with offset PRECEDING/FOLLOWING requires exactly one ORDER BY column")
	}
	key := order[0].expr
	switch {
	case key.kind == kindFloat:
		switch {
		case o.Float != nil:
			out.foff = *o.Float
		case o.Int != nil:
			out.foff = float64(*o.Int)
		default:
			return out, fmt.Errorf("RANGE offset for a float order key must be a number")
		}
		if !(out.foff >= 0) {
			return out, fmt.Errorf("invalid preceding or following size in window function")
		}
	case key.kind == kindInt && isTemporal(key.typ):
		iv, ok := o.Interval()
		if !ok {
			what := "timestamp"
			if key.typ.ID() == arrow.DATE32 {
				what = "date"
			}
			return out, fmt.Errorf("RANGE offset for a %s order key must be an interval", what)
		}
		u, _ := temporalUnitOf(key.typ)
		if err := intervalBound(&out, iv, u); err != nil {
			return out, err
		}
	case key.kind == kindInt:
		if o.Int == nil {
			return out, fmt.Errorf("RANGE offset for an integer order key must be an integer")
		}
		out.off = *o.Int
	default:
		return out, fmt.Errorf("RANGE with offset is not supported for an order key of type %s", key.typ)
	}
	if out.off < 0 {
		return out, fmt.Errorf("invalid preceding or following size in window function")
	}
	return out, nil
}
