package windower

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
)

// The window functions: one table of what each is and how each
// evaluation path computes it. The planner reads it to check a call and
// type its result; the in-memory path calls its evaluator once per
// partition; over a partition larger than the grant, the big-partition
// paths (halo.go, positional.go, cursor.go, carry.go, whole.go) choose by
// its family and properties. Adding a function is one entry here, its
// wire name and arity in package messages (functions_test.go checks the
// two agree), and its evaluator. The per-row work of the aggregates
// (aggregate.go) and of each family's big-partition evaluator still
// switches on the function: those switches stay where a call through
// the table for every row would cost speed.

// fn identifies a window function: an index into functions. The order
// carries no meaning; properties are looked up in the table.
type fn uint8

const (
	fnRowNumber fn = iota
	fnRank
	fnDenseRank
	fnPercentRank
	fnCumeDist
	fnNtile
	fnLag
	fnLead
	fnFirstValue
	fnLastValue
	fnNthValue
	fnCount
	fnSum
	fnAvg
	fnMin
	fnMax
	numFuncs
)

// family is how a function uses its partition, which decides how it is
// evaluated over a partition larger than the grant.
type family uint8

const (
	// famNumber: the row's position (row_number); a slice of a big
	// partition adds the rows before it.
	famNumber family = iota
	// famPeers: the row's peer group and, for some, the partition's size
	// (rank, dense_rank, percent_rank, cume_dist); no frame. Over a big
	// partition: cursors (the peer group's start is carried).
	famPeers
	// famNtile: the row's position and the partition's size. Over a big
	// partition: positional, after a first pass counts the rows.
	famNtile
	// famShift: the row a constant offset away (lag, lead); no frame.
	// Over a big partition: a halo, or a cursor for far offsets.
	famShift
	// famValue: a row of the frame (first_value, last_value, nth_value).
	// Over a big partition: a halo, positional (one UNBOUNDED end),
	// cursors, or pieces with EXCLUDE.
	famValue
	// famAggregate: an aggregate over the frame (count, sum, avg, min,
	// max); takes FILTER. Over a big partition: a first pass (the whole
	// partition), a carry (running), a halo or cursors.
	famAggregate
)

// fnInfo is one window function.
type fnInfo struct {
	name string
	// minArgs and maxArgs are the arguments it takes, as package messages
	// checks them on the wire.
	minArgs, maxArgs int
	family           family
	// extremum: min and max, the best row of the frame (monotonic deques
	// over sliding frames).
	extremum bool
	// neverNull: the result is never NULL (unless a constant argument is
	// NULL: call.neverNull).
	neverNull bool
	// partitionRows: the result depends on the partition's row count,
	// which a big partition's first pass or cursors learn.
	partitionRows bool
	// excludePieces: with EXCLUDE over a big partition, the frame is seen
	// as two pieces around the excluded rows (exclude.go).
	excludePieces bool
	// cursors is how many cursors it keeps over a big partition when it
	// is a cursor call (cursor.go), before those EXCLUDE adds.
	cursors int
	// peerFrame: its cursors see the frame GROUPS BETWEEN UNBOUNDED
	// PRECEDING AND CURRENT ROW whatever the call's frame (cume_dist).
	peerFrame bool
	// result checks the arguments, reads the constant ones into the call
	// and sets its result type.
	result func(c *call, name string) error
	// eval computes the call over one partition held in memory.
	eval func(cs *callState, p *partition)
}

// functions is the table, by fn. It is filled in by init because the
// evaluators it holds look properties up in it.
var functions [numFuncs]fnInfo

func init() { functions = functionTable() }

func functionTable() [numFuncs]fnInfo {
	return [numFuncs]fnInfo{
		fnRowNumber: {name: "row_number", family: famNumber, neverNull: true,
			result: resultInt, eval: (*callState).evalRowNumber},
		fnRank: {name: "rank", family: famPeers, neverNull: true,
			result: resultInt, eval: (*callState).evalRank},
		fnDenseRank: {name: "dense_rank", family: famPeers, neverNull: true,
			result: resultInt, eval: (*callState).evalDenseRank},
		fnPercentRank: {name: "percent_rank", family: famPeers, neverNull: true, partitionRows: true,
			result: resultFloat, eval: (*callState).evalPercentRank},
		fnCumeDist: {name: "cume_dist", family: famPeers, neverNull: true, partitionRows: true, cursors: 2, peerFrame: true,
			result: resultFloat, eval: (*callState).evalCumeDist},
		fnNtile: {name: "ntile", minArgs: 1, maxArgs: 1, family: famNtile, neverNull: true, partitionRows: true,
			result: resultNtile, eval: (*callState).evalNtile},
		fnLag: {name: "lag", minArgs: 1, maxArgs: 3, family: famShift, cursors: 1,
			result: resultShift, eval: (*callState).evalShift},
		fnLead: {name: "lead", minArgs: 1, maxArgs: 3, family: famShift, cursors: 1,
			result: resultShift, eval: (*callState).evalShift},
		fnFirstValue: {name: "first_value", minArgs: 1, maxArgs: 1, family: famValue, excludePieces: true, cursors: 2,
			result: resultOfArg, eval: (*callState).evalValue},
		fnLastValue: {name: "last_value", minArgs: 1, maxArgs: 1, family: famValue, excludePieces: true, cursors: 2,
			result: resultOfArg, eval: (*callState).evalValue},
		fnNthValue: {name: "nth_value", minArgs: 2, maxArgs: 2, family: famValue, cursors: 3,
			result: resultNth, eval: (*callState).evalValue},
		fnCount: {name: "count", minArgs: 0, maxArgs: 1, family: famAggregate, neverNull: true, cursors: 2,
			result: resultInt, eval: (*callState).evalAggregate},
		fnSum: {name: "sum", minArgs: 1, maxArgs: 1, family: famAggregate, cursors: 2,
			result: resultSum, eval: (*callState).evalAggregate},
		fnAvg: {name: "avg", minArgs: 1, maxArgs: 1, family: famAggregate, cursors: 2,
			result: resultAvg, eval: (*callState).evalAggregate},
		fnMin: {name: "min", minArgs: 1, maxArgs: 1, family: famAggregate, extremum: true, excludePieces: true, cursors: 2,
			result: resultExtremum, eval: (*callState).evalAggregate},
		fnMax: {name: "max", minArgs: 1, maxArgs: 1, family: famAggregate, extremum: true, excludePieces: true, cursors: 2,
			result: resultExtremum, eval: (*callState).evalAggregate},
	}
}

// fnByName maps a function's name to its fn.
var fnByName = func() map[string]fn {
	m := make(map[string]fn, numFuncs)
	for f, info := range functionTable() {
		m[info.name] = fn(f)
	}
	return m
}()

func (f fn) info() *fnInfo { return &functions[f] }

func (f fn) String() string { return functions[f].name }

// isAggregate reports whether f is an aggregate (count, sum, avg, min,
// max): it takes FILTER and accumulates over its frame.
func (f fn) isAggregate() bool { return functions[f].family == famAggregate }

// neverNull reports whether every result of c is non-NULL.
func (c *call) neverNull() bool { return functions[c.fn].neverNull && !c.argNil }

// resultVector returns a vector of n results of c, all zero and not NULL.
func resultVector(c *call, n int) *vector { return newVector(c.outKind, c.outTyp, n, true) }

// constInt reads argument i, which must be an integer constant; null
// reports the NULL constant.
func (c *call) constInt(i int, name, what string) (v int64, null bool, err error) {
	a := c.args[i]
	if a.konst == nil {
		return 0, false, fmt.Errorf("%s: %s must be a constant (per-row values are not supported)", name, what)
	}
	if a.konst.nulls != nil {
		return 0, true, nil
	}
	if a.kind != kindInt {
		return 0, false, fmt.Errorf("%s: %s must be an integer, not %s", name, what, a.kind)
	}
	return a.konst.ints[0], false, nil
}

// Result rules: what each function's result is, from its arguments.

func resultInt(c *call, _ string) error {
	c.outKind, c.outTyp = kindInt, arrow.PrimitiveTypes.Int64
	return nil
}

func resultFloat(c *call, _ string) error {
	c.outKind, c.outTyp = kindFloat, arrow.PrimitiveTypes.Float64
	return nil
}

// resultOfArg: the first argument's type.
func resultOfArg(c *call, _ string) error {
	c.outKind, c.outTyp = c.args[0].kind, c.args[0].typ
	return nil
}

func resultNtile(c *call, name string) error {
	n, null, err := c.constInt(0, name, "the bucket count")
	if err != nil {
		return err
	}
	if !null && n <= 0 {
		return fmt.Errorf("argument of ntile must be greater than zero")
	}
	c.ntile, c.argNil = n, null
	return resultInt(c, name)
}

func resultShift(c *call, name string) error {
	c.outKind, c.outTyp = c.args[0].kind, c.args[0].typ
	c.offset = 1
	if len(c.args) >= 2 {
		n, null, err := c.constInt(1, name, "the offset")
		if err != nil {
			return err
		}
		c.offset, c.argNil = n, null
	}
	if len(c.args) < 3 {
		return nil
	}
	d := c.args[2]
	if d.konst == nil {
		return fmt.Errorf("%s: the default must be a constant", name)
	}
	if d.konst.nulls != nil {
		return nil
	}
	if d.kind != c.outKind && !(c.outKind == kindFloat && d.kind == kindInt) {
		return fmt.Errorf("%s: default of type %s does not match argument of type %s", name, d.kind, c.outKind)
	}
	if c.outKind == kindFloat && d.kind == kindInt {
		c.deflt = &vector{kind: kindFloat, floats: []float64{float64(d.konst.ints[0])}}
	} else {
		c.deflt = d.konst
	}
	return nil
}

func resultNth(c *call, name string) error {
	c.outKind, c.outTyp = c.args[0].kind, c.args[0].typ
	n, null, err := c.constInt(1, name, "the position")
	if err != nil {
		return err
	}
	if !null && n <= 0 {
		return fmt.Errorf("argument of nth_value must be greater than zero")
	}
	c.nth, c.argNil = n, null
	return nil
}

func resultSum(c *call, _ string) error {
	switch c.args[0].kind {
	case kindInt:
		if isTemporal(c.args[0].typ) {
			return fmt.Errorf("function sum(%s) does not exist", c.args[0].typ)
		}
		return resultInt(c, "")
	case kindFloat:
		if isFloat32(c.args[0].typ) {
			// PostgreSQL's sum(real) is real, added in real (aggInput.single).
			c.outKind, c.outTyp = kindFloat, arrow.PrimitiveTypes.Float32
			return nil
		}
		return resultFloat(c, "")
	}
	return fmt.Errorf("function sum(%s) does not exist", c.args[0].kind)
}

func resultAvg(c *call, _ string) error {
	if k := c.args[0].kind; (k != kindInt && k != kindFloat) || isTemporal(c.args[0].typ) {
		return fmt.Errorf("function avg(%s) does not exist", c.args[0].typ)
	}
	return resultFloat(c, "")
}

func resultExtremum(c *call, name string) error {
	if c.args[0].kind == kindBool {
		return fmt.Errorf("function %s(boolean) does not exist", name)
	}
	c.outKind, c.outTyp = c.args[0].kind, c.args[0].typ
	return nil
}
