package windower

// A reference evaluator written straight from the SQL definitions, with no
// attention to speed: every row's frame is the set of partition rows that
// satisfy the frame's start and end conditions, minus the exclusion.

import (
	"math"
	"math/big"
	"sort"
	"time"

	"github.com/strata-db/strata/messages"
)

// refVal is a nullable value of the test table.
type refVal struct {
	null bool
	i    int64
	f    float64
	s    string
	kind kind
}

type refTable struct {
	cols map[string][]refVal
	n    int
	// micros is the unit of the date and timestamp columns in
	// microseconds (1 for timestamps, a day for dates).
	micros map[string]int64
}

func refCompare(a, b refVal, nullsFirst bool) int {
	switch {
	case a.null && b.null:
		return 0
	case a.null:
		if nullsFirst {
			return -1
		}
		return 1
	case b.null:
		if nullsFirst {
			return 1
		}
		return -1
	}
	switch a.kind {
	case kindFloat:
		return compareFloat(a.f, b.f)
	case kindString:
		switch {
		case a.s < b.s:
			return -1
		case a.s > b.s:
			return 1
		}
		return 0
	}
	return cmpInt(a.i, b.i)
}

// refResult is a computed window value for one row.
type refResult = refVal

// refWindow evaluates one window call for every row of t.
func refWindow(t *refTable, w *messages.WindowCall) []refResult {
	n := t.n
	col := func(e messages.Expr) []refVal { return t.cols[e.Column] }
	// Partitions.
	var parts [][]int
	seen := map[int]bool{}
	for i := 0; i < n; i++ {
		if seen[i] {
			continue
		}
		var p []int
		for j := i; j < n; j++ {
			same := true
			for _, e := range w.PartitionBy {
				if refCompare(col(e)[i], col(e)[j], false) != 0 {
					same = false
				}
			}
			if same && !seen[j] {
				seen[j] = true
				p = append(p, j)
			}
		}
		parts = append(parts, p)
	}
	cmpOrder := func(a, b int) int {
		for _, o := range w.OrderBy {
			c := refCompare(col(o.Expr)[a], col(o.Expr)[b], o.NullsFirst)
			if o.Desc && !col(o.Expr)[a].null && !col(o.Expr)[b].null {
				c = -c
			}
			if c != 0 {
				return c
			}
		}
		return 0
	}
	fr := messages.DefaultFrame()
	if w.Frame != nil {
		fr = *w.Frame
	}
	out := make([]refResult, n)
	for _, p := range parts {
		sort.SliceStable(p, func(a, b int) bool { return cmpOrder(p[a], p[b]) < 0 })
		m := len(p)
		// Peer group of each position.
		grp := make([]int, m)
		for k := 1; k < m; k++ {
			grp[k] = grp[k-1]
			if cmpOrder(p[k-1], p[k]) != 0 {
				grp[k]++
			}
		}
		head, tail := refCalendarBounds(t, w, &fr, p, grp)
		for k := 0; k < m; k++ {
			i := p[k]
			out[i] = refRow(t, w, &fr, p, grp, k, head, tail)
		}
	}
	return out
}

func refOffset(v *messages.Value) (int64, float64) {
	switch {
	case v.Int != nil:
		return *v.Int, float64(*v.Int)
	case v.Float != nil:
		return int64(*v.Float), *v.Float
	}
	return 0, 0
}

// refAddInterval is PostgreSQL's timestamp + sign*interval on a
// timestamp in microseconds: the months (keeping the day of the month
// unless the new month is shorter), then the days, then the microseconds.
func refAddInterval(us int64, iv messages.Interval, sign int) int64 {
	t := time.UnixMicro(us).UTC()
	y, m, d := t.Date()
	first := time.Date(y, m+time.Month(sign*int(iv.Months)), 1, t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC)
	last := time.Date(first.Year(), first.Month()+1, 0, 0, 0, 0, 0, time.UTC).Day()
	t = time.Date(first.Year(), first.Month(), min(d, last), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC)
	t = t.AddDate(0, 0, sign*int(iv.Days))
	return t.UnixMicro() + int64(sign)*iv.Micros
}

// refCalendarBounds returns, when a bound of fr is an interval with
// months, the frame's first and end positions for each row of the
// partition p found as PostgreSQL finds them: the frame head and tail
// only move forward (nodeWindowAgg.c, update_frameheadpos and
// update_frametailpos), so a row whose bound lies before the previous
// row's, as adding a month can make it, keeps the previous row's. With
// constant offsets this is the definition; with months it is
// PostgreSQL's answer. nil for a bound without months.
func refCalendarBounds(t *refTable, w *messages.WindowCall, fr *messages.Frame, p, grp []int) (head, tail []int) {
	hasMonths := func(b messages.FrameBound) bool {
		iv, ok := b.Offset.Interval()
		return fr.Mode == messages.FrameRange && ok && iv.Months != 0
	}
	m := len(p)
	if hasMonths(fr.Start) {
		head = make([]int, m)
		h := 0
		for k := 0; k < m; k++ {
			for h < m && !inBound(t, w, fr, p, grp, k, h, fr.Start, true) {
				h++
			}
			head[k] = h
		}
	}
	if hasMonths(fr.End) {
		tail = make([]int, m)
		e := 0
		for k := 0; k < m; k++ {
			for e < m && inBound(t, w, fr, p, grp, k, e, fr.End, false) {
				e++
			}
			tail[k] = e
		}
	}
	return head, tail
}

// inBound reports whether position r satisfies bound b relative to
// position k (as a start bound when start is true).
func inBound(t *refTable, w *messages.WindowCall, fr *messages.Frame, p []int, grp []int, k, r int, b messages.FrameBound, start bool) bool {
	switch b.Kind {
	case messages.BoundUnboundedPreceding, messages.BoundUnboundedFollowing:
		return true
	}
	var dist int64 // signed distance of r from k's bound position in the frame's unit
	off := int64(0)
	if b.Offset != nil {
		off, _ = refOffset(b.Offset)
	}
	if b.Kind == messages.BoundPreceding {
		off = -off
	}
	if b.Kind == messages.BoundCurrentRow {
		off = 0
	}
	cmp := func(d int64) bool { // d: r's position relative to k's target; start: d >= 0; end: d <= 0
		if start {
			return d >= 0
		}
		return d <= 0
	}
	switch fr.Mode {
	case messages.FrameRows:
		dist = int64(r) - (int64(k) + off)
		return cmp(dist)
	case messages.FrameGroups:
		dist = int64(grp[r]) - (int64(grp[k]) + off)
		return cmp(dist)
	}
	// RANGE.
	if b.Kind == messages.BoundCurrentRow {
		return cmp(int64(grp[r] - grp[k]))
	}
	o := w.OrderBy[0]
	kv, rv := t.cols[o.Expr.Column][p[k]], t.cols[o.Expr.Column][p[r]]
	if kv.null || rv.null {
		// NULLs are peers of each other; in the sort direction they lie
		// beyond every value (after them with NULLS LAST), so an offset
		// cannot reach them from a value nor a value from them.
		if kv.null && rv.null {
			return true
		}
		after := rv.null != o.NullsFirst // r lies after every value k could target
		if kv.null {
			after = !kv.null || o.NullsFirst
		}
		if start {
			return after
		}
		return !after
	}
	if o.Desc {
		off = -off
	}
	var c int
	if iv, ok := b.Offset.Interval(); ok {
		// Dates become timestamps at midnight, as in PostgreSQL.
		unit := t.micros[o.Expr.Column]
		sign := 1
		if (b.Kind == messages.BoundPreceding) != o.Desc {
			sign = -1
		}
		c = cmpInt(rv.i*unit, refAddInterval(kv.i*unit, iv, sign))
	} else if kv.kind == kindFloat {
		_, fo := refOffset(b.Offset)
		if b.Kind == messages.BoundPreceding {
			fo = -fo
		}
		if o.Desc {
			fo = -fo
		}
		if tgt := kv.f + fo; tgt != tgt && kv.f == kv.f {
			// +inf - inf or -inf + inf: PostgreSQL's in_range takes every
			// key but NaN to be within range, and NaN beyond it.
			c = 0
			if rv.f != rv.f {
				c = 1
			}
		} else {
			c = compareFloat(rv.f, tgt)
		}
	} else {
		tgt := new(big.Int).Add(big.NewInt(kv.i), big.NewInt(off))
		c = big.NewInt(rv.i).Cmp(tgt)
	}
	if o.Desc {
		c = -c
	}
	return cmp(int64(c))
}

func refRow(t *refTable, w *messages.WindowCall, fr *messages.Frame, p []int, grp []int, k int, head, tail []int) refResult {
	m := len(p)
	i := p[k]
	ngroups := grp[m-1] + 1
	intRes := func(v int64) refResult { return refVal{i: v, kind: kindInt} }
	fltRes := func(v float64) refResult { return refVal{f: v, kind: kindFloat} }
	argCol := func(a int) []refVal { return t.cols[w.Args[a].Column] }
	firstPeer := k
	for firstPeer > 0 && grp[firstPeer-1] == grp[k] {
		firstPeer--
	}
	lastPeer := k
	for lastPeer < m-1 && grp[lastPeer+1] == grp[k] {
		lastPeer++
	}
	_ = ngroups
	switch w.Func {
	case "row_number":
		return intRes(int64(k + 1))
	case "rank":
		return intRes(int64(firstPeer + 1))
	case "dense_rank":
		return intRes(int64(grp[k] + 1))
	case "percent_rank":
		if m == 1 {
			return fltRes(0)
		}
		return fltRes(float64(firstPeer) / float64(m-1))
	case "cume_dist":
		return fltRes(float64(lastPeer+1) / float64(m))
	case "ntile":
		nb := *w.Args[0].Const.Int
		// Bucket sizes: the first m%nb buckets have one row more.
		size := int64(m) / nb
		rem := int64(m) % nb
		row := int64(0)
		for b := int64(1); b <= nb; b++ {
			sz := size
			if b <= rem {
				sz++
			}
			if int64(k) < row+sz {
				return intRes(b)
			}
			row += sz
		}
		return intRes(nb)
	case "lag", "lead":
		off := int64(1)
		if len(w.Args) > 1 {
			off = *w.Args[1].Const.Int
		}
		if w.Func == "lag" {
			off = -off
		}
		r := int64(k) + off
		if r >= 0 && r < int64(m) {
			return argCol(0)[p[r]]
		}
		if len(w.Args) > 2 {
			c := w.Args[2].Const
			v := argCol(0)[i]
			switch {
			case c.Int != nil && v.kind == kindFloat:
				return refVal{f: float64(*c.Int), kind: kindFloat}
			case c.Int != nil:
				return refVal{i: *c.Int, kind: kindInt}
			case c.Float != nil:
				return refVal{f: *c.Float, kind: kindFloat}
			case c.String != nil:
				return refVal{s: *c.String, kind: kindString}
			}
		}
		return refVal{null: true}
	}
	// Frame rows, in order.
	var rows []int
	for r := 0; r < m; r++ {
		inStart := inBound(t, w, fr, p, grp, k, r, fr.Start, true)
		if head != nil {
			inStart = r >= head[k]
		}
		inEnd := inBound(t, w, fr, p, grp, k, r, fr.End, false)
		if tail != nil {
			inEnd = r < tail[k]
		}
		if !inStart || !inEnd {
			continue
		}
		switch fr.Exclude {
		case messages.ExcludeCurrentRow:
			if r == k {
				continue
			}
		case messages.ExcludeGroup:
			if grp[r] == grp[k] {
				continue
			}
		case messages.ExcludeTies:
			if grp[r] == grp[k] && r != k {
				continue
			}
		}
		rows = append(rows, p[r])
	}
	switch w.Func {
	case "first_value", "last_value", "nth_value":
		idx := 0
		switch w.Func {
		case "last_value":
			idx = len(rows) - 1
		case "nth_value":
			idx = int(*w.Args[1].Const.Int) - 1
		}
		if idx < 0 || idx >= len(rows) {
			return refVal{null: true}
		}
		return argCol(0)[rows[idx]]
	}
	// Aggregates: rows that count.
	var vals []refVal
	for _, r := range rows {
		if !refFilter(t, w.Filter, r) {
			continue
		}
		if w.Star {
			vals = append(vals, refVal{})
			continue
		}
		v := argCol(0)[r]
		if !v.null {
			vals = append(vals, v)
		}
	}
	switch w.Func {
	case "count":
		return intRes(int64(len(vals)))
	}
	if len(vals) == 0 {
		return refVal{null: true}
	}
	switch w.Func {
	case "sum", "avg":
		if vals[0].kind == kindFloat {
			s, finite := 0.0, true
			for _, v := range vals {
				s += v.f
				finite = finite && !math.IsInf(v.f, 0) && !math.IsNaN(v.f)
			}
			if finite && math.IsInf(s, 0) {
				return refVal{null: true, s: "overflow"} // float8pl's 22003
			}
			if w.Func == "avg" {
				return fltRes(s / float64(len(vals)))
			}
			return fltRes(s)
		}
		s := new(big.Int)
		for _, v := range vals {
			s.Add(s, big.NewInt(v.i))
		}
		if w.Func == "avg" {
			f, _ := new(big.Rat).SetFrac(s, big.NewInt(int64(len(vals)))).Float64()
			return fltRes(f)
		}
		if !s.IsInt64() {
			return refVal{null: true, s: "overflow"}
		}
		return intRes(s.Int64())
	case "min", "max":
		best := vals[0]
		for _, v := range vals[1:] {
			c := refCompare(v, best, false)
			if (w.Func == "min" && c < 0) || (w.Func == "max" && c > 0) {
				best = v
			}
		}
		return best
	}
	panic("reference: unknown function " + w.Func)
}

func refFilter(t *refTable, ps []messages.Predicate, r int) bool {
	for _, p := range ps {
		v := t.cols[p.Left.Column][r]
		switch p.Op {
		case messages.OpIsNull:
			if !v.null {
				return false
			}
			continue
		case messages.OpIsNotNull:
			if v.null {
				return false
			}
			continue
		}
		if v.null {
			return false
		}
		var c int
		if v.kind == kindFloat {
			c = compareFloat(v.f, float64(*p.Right.Int))
		} else {
			c = cmpInt(v.i, *p.Right.Int)
		}
		ok := false
		switch p.Op {
		case "=":
			ok = c == 0
		case "<>":
			ok = c != 0
		case "<":
			ok = c < 0
		case "<=":
			ok = c <= 0
		case ">":
			ok = c > 0
		case ">=":
			ok = c >= 0
		}
		if !ok {
			return false
		}
	}
	return true
}

func floatsClose(a, b float64) bool {
	if a == b || (math.IsNaN(a) && math.IsNaN(b)) {
		return true
	}
	d := math.Abs(a - b)
	return d <= 1e-9*math.Max(1, math.Max(math.Abs(a), math.Abs(b)))
}
