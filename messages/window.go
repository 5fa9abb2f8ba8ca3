package messages

import (
	"errors"
	"fmt"
	"sort"
)

// WindowQuery is the structured form of a window query, as a window job
// carries it. SQL text is parsed into it at the edge (the strata CLI); the
// windower validates it against the table's schema before doing any work.
//
//	SELECT <Select> FROM <Table> [WHERE <Where>] [ORDER BY <OrderBy>] [LIMIT <Limit>]
//
// Semantics are PostgreSQL's: every window call carries its own fully
// resolved PARTITION BY, ORDER BY and frame (named windows and window
// inheritance are resolved by the parser), NULLS FIRST/LAST is explicit in
// every SortItem, and a nil Frame is the SQL default frame (RANGE BETWEEN
// UNBOUNDED PRECEDING AND CURRENT ROW).
type WindowQuery struct {
	SQL     string       `msgpack:"sql,omitempty"` // the text it came from, for logs and errors
	Table   string       `msgpack:"table"`
	Select  []SelectItem `msgpack:"select"`
	Where   []Predicate  `msgpack:"where,omitempty"` // ANDed
	OrderBy []SortItem   `msgpack:"order_by,omitempty"`
	Limit   int64        `msgpack:"limit,omitempty"` // 0: no limit
}

// Kind makes a query a message of its own: the scheduler's catalog keeps
// the query of a pending window job in its wire encoding.
func (*WindowQuery) Kind() string { return "window_query" }

// SelectItem is one output column: a plain column (possibly computed), or a window call.
type SelectItem struct {
	Alias  string      `msgpack:"alias"`
	Expr   *Expr       `msgpack:"expr,omitempty"`   // a plain expression
	Window *WindowCall `msgpack:"window,omitempty"` // a window function call
}

// Expr is a scalar expression: a column, a constant, or a simple arithmetic
// operation on two expressions (enough for PARTITION BY a % 1000).
type Expr struct {
	Column string  `msgpack:"column,omitempty"`
	Const  *Value  `msgpack:"const,omitempty"`
	Op     string  `msgpack:"op,omitempty"` // + - * / %
	Args   []*Expr `msgpack:"args,omitempty"`
}

// Value is a typed constant. Exactly one field is set, or none for NULL.
type Value struct {
	Int    *int64   `msgpack:"i,omitempty"`
	Float  *float64 `msgpack:"f,omitempty"`
	String *string  `msgpack:"s,omitempty"`
	Bool   *bool    `msgpack:"b,omitempty"`
	// An interval, for RANGE offsets on timestamps and dates: PostgreSQL's
	// three fields, each set when it is not zero (and IntervalMicros when
	// all are zero). A value with only IntervalMicros, as written before
	// the other two existed, is that many microseconds. See Interval.
	IntervalMicros *int64 `msgpack:"iv,omitempty"`
	IntervalMonths *int32 `msgpack:"ivm,omitempty"`
	IntervalDays   *int32 `msgpack:"ivd,omitempty"`
}

// Interval is PostgreSQL's interval value. Its months, days and
// microseconds are kept apart because calendar arithmetic applies them
// one after the other (timestamp + interval adds the months first,
// clamping the day to the end of the month, then the days, then the
// microseconds): a month is no fixed number of days.
type Interval struct {
	Months int32
	Days   int32
	Micros int64
}

// IntervalValue returns the constant holding iv.
func IntervalValue(iv Interval) *Value {
	v := &Value{}
	if iv.Months != 0 {
		m := iv.Months
		v.IntervalMonths = &m
	}
	if iv.Days != 0 {
		d := iv.Days
		v.IntervalDays = &d
	}
	if iv.Micros != 0 || (iv.Months == 0 && iv.Days == 0) {
		us := iv.Micros
		v.IntervalMicros = &us
	}
	return v
}

// Interval returns the interval v holds, if it holds one.
func (v *Value) Interval() (Interval, bool) {
	if v == nil || (v.IntervalMicros == nil && v.IntervalMonths == nil && v.IntervalDays == nil) {
		return Interval{}, false
	}
	var iv Interval
	if v.IntervalMonths != nil {
		iv.Months = *v.IntervalMonths
	}
	if v.IntervalDays != nil {
		iv.Days = *v.IntervalDays
	}
	if v.IntervalMicros != nil {
		iv.Micros = *v.IntervalMicros
	}
	return iv, true
}

// Sign returns -1, 0 or 1 as iv compares with the zero interval the way
// PostgreSQL compares intervals (interval_cmp): a month counts as 30 days
// and a day as 24 hours. A RANGE offset must not be negative by this
// measure, although its fields may have different signs.
func (iv Interval) Sign() int {
	const day = 86400 * 1000000
	// months*30 + days fits in int64, and so does that plus micros/day;
	// the remainder is in [0, day).
	q, r := iv.Micros/day, iv.Micros%day
	if r < 0 {
		q, r = q-1, r+day
	}
	whole := int64(iv.Months)*30 + int64(iv.Days) + q
	switch {
	case whole > 0:
		return 1
	case whole < 0:
		return -1
	case r > 0:
		return 1
	}
	return 0
}

// Predicate is `Left Op Right`, with Op one of = <> < <= > >= and Right a
// constant, or Op "is_null" / "is_not_null" with no Right.
type Predicate struct {
	Left  Expr   `msgpack:"left"`
	Op    string `msgpack:"op"`
	Right *Value `msgpack:"right,omitempty"`
}

// SortItem is one ORDER BY or PARTITION BY element.
type SortItem struct {
	Expr       Expr `msgpack:"expr"`
	Desc       bool `msgpack:"desc,omitempty"`
	NullsFirst bool `msgpack:"nulls_first,omitempty"` // SQL default: NULLS LAST for ASC, FIRST for DESC; the parser fills it in
}

// WindowCall is `Func(Args) [FILTER (WHERE Filter)] OVER (PARTITION BY ... ORDER BY ... Frame)`.
type WindowCall struct {
	Func        string      `msgpack:"func"`           // row_number, rank, ..., count, sum, avg, min, max
	Star        bool        `msgpack:"star,omitempty"` // count(*)
	Args        []*Expr     `msgpack:"args,omitempty"`
	Filter      []Predicate `msgpack:"filter,omitempty"` // ANDed; aggregates only
	PartitionBy []Expr      `msgpack:"partition_by,omitempty"`
	OrderBy     []SortItem  `msgpack:"order_by,omitempty"`
	Frame       *Frame      `msgpack:"frame,omitempty"` // nil: the SQL default frame
}

// Frame is a window frame clause.
type Frame struct {
	Mode    string     `msgpack:"mode"` // rows, range, groups
	Start   FrameBound `msgpack:"start"`
	End     FrameBound `msgpack:"end"`
	Exclude string     `msgpack:"exclude,omitempty"` // "", current_row, group, ties (no others when empty)
}

// FrameBound is one end of a frame.
type FrameBound struct {
	Kind   string `msgpack:"kind"` // unbounded_preceding, preceding, current_row, following, unbounded_following
	Offset *Value `msgpack:"offset,omitempty"`
}

// Frame modes, bound kinds and exclusions as they appear on the wire.
const (
	FrameRows   = "rows"
	FrameRange  = "range"
	FrameGroups = "groups"

	BoundUnboundedPreceding = "unbounded_preceding"
	BoundPreceding          = "preceding"
	BoundCurrentRow         = "current_row"
	BoundFollowing          = "following"
	BoundUnboundedFollowing = "unbounded_following"

	ExcludeNoOthers   = ""
	ExcludeCurrentRow = "current_row"
	ExcludeGroup      = "group"
	ExcludeTies       = "ties"
)

// Predicate operators other than the comparisons.
const (
	OpIsNull    = "is_null"
	OpIsNotNull = "is_not_null"
)

// ErrInvalidQuery is wrapped by every error WindowQuery.Validate returns.
var ErrInvalidQuery = errors.New("messages: invalid window query")

// DefaultFrame is the SQL default frame: RANGE BETWEEN UNBOUNDED PRECEDING
// AND CURRENT ROW (the whole partition when there is no ORDER BY, since then
// every row is a peer of every other).
func DefaultFrame() Frame {
	return Frame{Mode: FrameRange, Start: FrameBound{Kind: BoundUnboundedPreceding}, End: FrameBound{Kind: BoundCurrentRow}}
}

// Validate checks the query's shape: everything that can be checked without
// the table's schema (names, operators, frame syntax, constant frame
// offsets). The windower checks columns and types against the schema.
func (q *WindowQuery) Validate() error {
	if q.Table == "" {
		return fmt.Errorf("%w: no table", ErrInvalidQuery)
	}
	if err := ValidTable(q.Table); err != nil {
		return fmt.Errorf("%w: table: %v", ErrInvalidQuery, err)
	}
	if len(q.Select) == 0 {
		return fmt.Errorf("%w: empty select list", ErrInvalidQuery)
	}
	if q.Limit < 0 {
		return fmt.Errorf("%w: negative limit %d", ErrInvalidQuery, q.Limit)
	}
	seen := make(map[string]int, len(q.Select))
	for i, s := range q.Select {
		where := fmt.Sprintf("select item %d (%q)", i+1, s.Alias)
		if s.Alias == "" {
			return fmt.Errorf("%w: %s: empty alias", ErrInvalidQuery, where)
		}
		if j, dup := seen[s.Alias]; dup {
			return fmt.Errorf("%w: %s: alias also used by select item %d", ErrInvalidQuery, where, j+1)
		}
		seen[s.Alias] = i
		switch {
		case (s.Expr == nil) == (s.Window == nil):
			return fmt.Errorf("%w: %s: exactly one of expr and window must be set", ErrInvalidQuery, where)
		case s.Expr != nil:
			if err := s.Expr.validate(); err != nil {
				return fmt.Errorf("%w: %s: %v", ErrInvalidQuery, where, err)
			}
		default:
			if err := s.Window.validate(); err != nil {
				return fmt.Errorf("%w: %s: %v", ErrInvalidQuery, where, err)
			}
		}
	}
	for i := range q.Where {
		if err := q.Where[i].validate(); err != nil {
			return fmt.Errorf("%w: where predicate %d: %v", ErrInvalidQuery, i+1, err)
		}
	}
	for i := range q.OrderBy {
		if err := q.OrderBy[i].Expr.validate(); err != nil {
			return fmt.Errorf("%w: order by item %d: %v", ErrInvalidQuery, i+1, err)
		}
	}
	return nil
}

// maxExprDepth bounds expression nesting so a hostile message cannot recurse deeply.
const maxExprDepth = 32

func (e *Expr) validate() error { return e.validateDepth(0) }

func (e *Expr) validateDepth(depth int) error {
	if e == nil {
		return errors.New("missing expression")
	}
	if depth > maxExprDepth {
		return fmt.Errorf("expression nested deeper than %d", maxExprDepth)
	}
	set := 0
	if e.Column != "" {
		set++
	}
	if e.Const != nil {
		set++
	}
	if e.Op != "" {
		set++
	}
	if set != 1 {
		return errors.New("expression must have exactly one of column, const and op")
	}
	if e.Const != nil {
		return e.Const.validate()
	}
	if e.Op != "" {
		switch e.Op {
		case "+", "-", "*", "/", "%":
		default:
			return fmt.Errorf("unknown operator %q", e.Op)
		}
		if len(e.Args) != 2 {
			return fmt.Errorf("operator %q takes 2 arguments, got %d", e.Op, len(e.Args))
		}
		for _, a := range e.Args {
			if err := a.validateDepth(depth + 1); err != nil {
				return err
			}
		}
	} else if len(e.Args) != 0 {
		return errors.New("arguments without an operator")
	}
	return nil
}

func (v *Value) validate() error {
	set := 0
	_, isInterval := v.Interval()
	for _, p := range []bool{v.Int != nil, v.Float != nil, v.String != nil, v.Bool != nil, isInterval} {
		if p {
			set++
		}
	}
	if set > 1 {
		return errors.New("constant with more than one value set")
	}
	return nil
}

// IsNull reports whether v is the NULL constant.
func (v *Value) IsNull() bool {
	if v == nil {
		return true
	}
	_, isInterval := v.Interval()
	return v.Int == nil && v.Float == nil && v.String == nil && v.Bool == nil && !isInterval
}

func (p *Predicate) validate() error {
	if err := p.Left.validate(); err != nil {
		return err
	}
	switch p.Op {
	case "=", "<>", "<", "<=", ">", ">=":
		if p.Right == nil {
			return fmt.Errorf("operator %q needs a right-hand constant", p.Op)
		}
		return p.Right.validate()
	case OpIsNull, OpIsNotNull:
		if p.Right != nil {
			return fmt.Errorf("operator %q takes no right-hand side", p.Op)
		}
		return nil
	default:
		return fmt.Errorf("unknown predicate operator %q", p.Op)
	}
}

// windowFuncArgs lists the window functions and aggregates a WindowCall may
// name, with the number of arguments each takes (min, max).
var windowFuncArgs = map[string][2]int{
	"row_number": {0, 0}, "rank": {0, 0}, "dense_rank": {0, 0},
	"percent_rank": {0, 0}, "cume_dist": {0, 0}, "ntile": {1, 1},
	"lag": {1, 3}, "lead": {1, 3},
	"first_value": {1, 1}, "last_value": {1, 1}, "nth_value": {2, 2},
	"count": {0, 1}, "sum": {1, 1}, "avg": {1, 1}, "min": {1, 1}, "max": {1, 1},
}

// IsAggregate reports whether fn is an aggregate used as a window function
// (these take FILTER and honour the frame).
func IsAggregate(fn string) bool {
	switch fn {
	case "count", "sum", "avg", "min", "max":
		return true
	}
	return false
}

// KnownWindowFunc reports whether fn is a function a WindowCall may name.
func KnownWindowFunc(fn string) bool { _, ok := windowFuncArgs[fn]; return ok }

// WindowFuncArity returns the fewest and most arguments fn takes, and
// whether a WindowCall may name it (count takes none only as count(*)).
func WindowFuncArity(fn string) (minArgs, maxArgs int, ok bool) {
	n, ok := windowFuncArgs[fn]
	return n[0], n[1], ok
}

// WindowFuncNames returns the names of the functions a WindowCall may
// name, sorted.
func WindowFuncNames() []string {
	names := make([]string, 0, len(windowFuncArgs))
	for name := range windowFuncArgs {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

func (w *WindowCall) validate() error {
	n, ok := windowFuncArgs[w.Func]
	if !ok {
		return fmt.Errorf("unknown window function %q", w.Func)
	}
	if w.Star {
		if w.Func != "count" || len(w.Args) != 0 {
			return fmt.Errorf("%s(*) is not a function; only count(*) is", w.Func)
		}
	} else if len(w.Args) < n[0] || len(w.Args) > n[1] || (w.Func == "count" && len(w.Args) == 0) {
		return fmt.Errorf("%s takes %d to %d arguments, got %d", w.Func, n[0], n[1], len(w.Args))
	}
	for i, a := range w.Args {
		if err := a.validate(); err != nil {
			return fmt.Errorf("%s argument %d: %v", w.Func, i+1, err)
		}
	}
	if len(w.Filter) > 0 && !IsAggregate(w.Func) {
		return fmt.Errorf("FILTER is implemented only for aggregate functions, not %s", w.Func)
	}
	for i := range w.Filter {
		if err := w.Filter[i].validate(); err != nil {
			return fmt.Errorf("%s filter %d: %v", w.Func, i+1, err)
		}
	}
	for i := range w.PartitionBy {
		if err := w.PartitionBy[i].validate(); err != nil {
			return fmt.Errorf("partition by item %d: %v", i+1, err)
		}
	}
	for i := range w.OrderBy {
		if err := w.OrderBy[i].Expr.validate(); err != nil {
			return fmt.Errorf("order by item %d: %v", i+1, err)
		}
	}
	if w.Frame != nil {
		if err := w.Frame.validate(len(w.OrderBy)); err != nil {
			return fmt.Errorf("frame: %v", err)
		}
	}
	return nil
}

var boundRank = map[string]int{
	BoundUnboundedPreceding: 0, BoundPreceding: 1, BoundCurrentRow: 2, BoundFollowing: 3, BoundUnboundedFollowing: 4,
}

func (f *Frame) validate(orderKeys int) error {
	switch f.Mode {
	case FrameRows, FrameRange, FrameGroups:
	default:
		return fmt.Errorf("unknown frame mode %q", f.Mode)
	}
	switch f.Exclude {
	case ExcludeNoOthers, ExcludeCurrentRow, ExcludeGroup, ExcludeTies:
	default:
		return fmt.Errorf("unknown frame exclusion %q", f.Exclude)
	}
	s, ok := boundRank[f.Start.Kind]
	if !ok {
		return fmt.Errorf("unknown frame start %q", f.Start.Kind)
	}
	e, ok := boundRank[f.End.Kind]
	if !ok {
		return fmt.Errorf("unknown frame end %q", f.End.Kind)
	}
	// PostgreSQL's rules (gram.y / parse_clause.c).
	switch {
	case f.Start.Kind == BoundUnboundedFollowing:
		return errors.New("frame start cannot be UNBOUNDED FOLLOWING")
	case f.End.Kind == BoundUnboundedPreceding:
		return errors.New("frame end cannot be UNBOUNDED PRECEDING")
	case f.Start.Kind == BoundCurrentRow && e < s:
		return errors.New("frame starting from current row cannot have preceding rows")
	case f.Start.Kind == BoundFollowing && e < s:
		return errors.New("frame starting from following row cannot have preceding rows")
	}
	for _, b := range []FrameBound{f.Start, f.End} {
		hasOffset := b.Kind == BoundPreceding || b.Kind == BoundFollowing
		if !hasOffset {
			if b.Offset != nil {
				return fmt.Errorf("%s takes no offset", b.Kind)
			}
			continue
		}
		if b.Offset.IsNull() {
			return errors.New("frame offset must not be null")
		}
		if err := b.Offset.validate(); err != nil {
			return err
		}
		iv, isInterval := b.Offset.Interval()
		switch {
		case b.Offset.Int != nil && *b.Offset.Int < 0,
			b.Offset.Float != nil && !(*b.Offset.Float >= 0):
			return errors.New("frame offset must not be negative")
		case isInterval && iv.Sign() < 0:
			// PostgreSQL's words (in_range_timestamp_interval).
			return errors.New("invalid preceding or following size in window function: the interval offset is negative")
		case b.Offset.String != nil || b.Offset.Bool != nil:
			return errors.New("frame offset must be a number or an interval")
		}
		if f.Mode != FrameRange && b.Offset.Int == nil {
			return fmt.Errorf("%s frame offset must be an integer", f.Mode)
		}
		if f.Mode == FrameRange && orderKeys != 1 {
			return fmt.Errorf("RANGE with offset PRECEDING/FOLLOWING requires exactly one ORDER BY column, got %d", orderKeys)
		}
	}
	if f.Mode == FrameGroups && orderKeys == 0 {
		return errors.New("GROUPS mode requires an ORDER BY clause")
	}
	return nil
}
