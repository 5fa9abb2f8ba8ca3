package messages

// WindowQuery is the structured form of a window query, as a window job
// carries it. SQL text is parsed into it at the edge (the strata CLI); the
// windower validates it against the table's schema before doing any work.
//
//	SELECT <Select> FROM <Table> [WHERE <Where>] [ORDER BY <OrderBy>] [LIMIT <Limit>]
type WindowQuery struct {
	SQL     string       `msgpack:"sql,omitempty"` // the text it came from, for logs and errors
	Table   string       `msgpack:"table"`
	Select  []SelectItem `msgpack:"select"`
	Where   []Predicate  `msgpack:"where,omitempty"` // ANDed
	OrderBy []SortItem   `msgpack:"order_by,omitempty"`
	Limit   int64        `msgpack:"limit,omitempty"` // 0: no limit
}

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
	// Interval in microseconds, for RANGE offsets on timestamps; days for dates.
	IntervalMicros *int64 `msgpack:"iv,omitempty"`
}

// Predicate is `Expr Op Value`, with Op one of = <> < <= > >= IS NULL, IS NOT NULL.
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
	Filter      []Predicate `msgpack:"filter,omitempty"`
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
