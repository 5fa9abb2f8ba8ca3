package windower

import (
	"math"
	"sort"
)

// Frames in memory: a partition's peer groups, each row's frame bounds
// and the pieces EXCLUDE leaves.

// partition describes the rows [ps, pe) of one partition, in sorted order,
// and their peer groups. Peer groups are numbered over the whole sorted
// input (groupOf, groupStart are shared by all partitions); g0 is the
// first group of this partition.
type partition struct {
	ps, pe int
	// lo, hi are the rows [lo, hi) of the partition to evaluate: all of
	// it, or a range of it when one partition is evaluated on several
	// goroutines (parallel.go).
	lo, hi   int
	hasOrder bool
	// groupOf[i] is row i's peer group; groupStart[g] is the first row of
	// group g, and groupStart[last group + 1] is the number of rows.
	groupOf    []int32
	groupStart []int32
	g0         int
	ngroups    int
}

// set makes p describe rows [ps, pe), all of them to evaluate.
func (p *partition) set(ps, pe int) {
	p.ps, p.pe = ps, pe
	p.lo, p.hi = ps, pe
	if !p.hasOrder {
		p.ngroups = 1
		return
	}
	p.g0 = int(p.groupOf[ps])
	p.ngroups = int(p.groupOf[pe-1]) - p.g0 + 1
}

// group returns row i's peer group, counted from 0 within the partition.
func (p *partition) group(i int) int {
	if !p.hasOrder {
		return 0
	}
	return int(p.groupOf[i]) - p.g0
}

// groupRow returns the first row of the partition's peer group g (0 <= g <= ngroups).
func (p *partition) groupRow(g int) int {
	if !p.hasOrder {
		if g == 0 {
			return p.ps
		}
		return p.pe
	}
	return int(p.groupStart[p.g0+g])
}

func (p *partition) peerStart(i int) int {
	if !p.hasOrder {
		return p.ps
	}
	return int(p.groupStart[p.groupOf[i]])
}

func (p *partition) peerEnd(i int) int {
	if !p.hasOrder {
		return p.pe
	}
	return int(p.groupStart[p.groupOf[i]+1])
}

// loadGroups numbers the peer groups of all n rows from peer-change flags
// (peerChange[i] is true where a group starts, including every partition
// start), on up to threads goroutines.
func loadGroups(peerChange []bool, groupOf, groupStart []int32, threads int) (groups, starts []int32) {
	groupOf = grow(groupOf, len(peerChange))
	return groupOf, flagStarts(peerChange, groupStart, groupOf, threads)
}

// rangeKey is the single ORDER BY key a RANGE frame with offsets measures
// distances on, in sorted order.
type rangeKey struct {
	v          *vector
	desc       bool
	nullsFirst bool
}

// framer computes frame bounds row by row. Bounds are monotonic in the
// row, so RANGE offsets are found with cursors that only move forward.
type framer struct {
	f   *frame
	key rangeKey
	p   *partition
	// Non-NULL rows of the partition (RANGE offsets).
	nnStart, nnEnd int
	startCur       int
	endCur         int
}

// reset prepares the framer for rows [p.lo, p.hi) of partition p. For
// RANGE offsets it finds the partition's non-NULL rows, which lie
// together at one end (the order's NULLs are first or last), and starts
// the cursors at row p.lo's bounds (seek).
func (fr *framer) reset(p *partition) {
	fr.p = p
	fr.nnStart, fr.nnEnd = p.ps, p.pe
	if fr.f.mode == modeRange && fr.key.v != nil && fr.key.v.nulls != nil {
		nulls := fr.key.v.nulls[p.ps:p.pe]
		if fr.key.nullsFirst {
			fr.nnStart += sort.Search(len(nulls), func(k int) bool { return !nulls[k] })
		} else {
			fr.nnEnd = p.ps + sort.Search(len(nulls), func(k int) bool { return nulls[k] })
		}
	}
	fr.startCur, fr.endCur = fr.nnStart, fr.nnStart
	if p.lo > fr.nnStart {
		fr.seek(p.lo)
	}
}

// bounds returns row i's frame [s, e), before exclusion, clamped to the partition.
func (fr *framer) bounds(i int) (s, e int) {
	p := fr.p
	s = fr.bound(i, &fr.f.start, true)
	e = fr.bound(i, &fr.f.end, false)
	if s < p.ps {
		s = p.ps
	}
	if e > p.pe {
		e = p.pe
	}
	if e < s {
		e = s
	}
	return s, e
}

func (fr *framer) bound(i int, b *bound, isStart bool) int {
	p := fr.p
	switch b.kind {
	case boundUnboundedPreceding:
		return p.ps
	case boundUnboundedFollowing:
		return p.pe
	case boundCurrentRow:
		if fr.f.mode == modeRows {
			if isStart {
				return i
			}
			return i + 1
		}
		if isStart {
			return p.peerStart(i)
		}
		return p.peerEnd(i)
	}
	sign := boundSign(b)
	switch fr.f.mode {
	case modeRows:
		pos := addClamp(int64(i), sign*b.off)
		if !isStart {
			pos = addClamp(pos, 1)
		}
		return clampInt(pos, p.ps, p.pe)
	case modeGroups:
		g := addClamp(int64(p.group(i)), sign*b.off)
		if !isStart {
			g++
		}
		switch {
		case g <= 0:
			return p.ps
		case g >= int64(p.ngroups):
			return p.pe
		}
		return p.groupRow(int(g))
	}
	return fr.rangeBound(i, b, sign, isStart)
}

// rangeBound finds a RANGE offset bound with PostgreSQL's semantics: a row
// whose key is NULL has the NULL rows as its frame; other rows never reach
// the NULLs.
func (fr *framer) rangeBound(i int, b *bound, sign int64, isStart bool) int {
	v := fr.key.v
	if v.isNull(i) {
		if isStart {
			return fr.p.peerStart(i)
		}
		return fr.p.peerEnd(i)
	}
	desc := fr.key.desc
	cur := &fr.endCur
	if isStart {
		cur = &fr.startCur
	}
	if *cur < fr.nnStart {
		*cur = fr.nnStart
	}
	pos := *cur
	if v.kind == kindFloat {
		t := floatTarget(v.floats[i], b.foff, sign, desc, isStart)
		for pos < fr.nnEnd && !stops(compareFloat(v.floats[pos], t), desc, isStart) {
			pos++
		}
	} else {
		t, frac, inf := b.rangeTarget(v.ints[i], directed(sign, desc))
		for pos < fr.nnEnd && !stops(cmpTarget(v.ints[pos], t, frac, inf), desc, isStart) {
			pos++
		}
	}
	*cur = pos
	return pos
}

// seek places the RANGE offset cursors where row i's frame bounds are,
// by binary search over the partition's non-NULL rows, for a range of
// rows that starts at i inside its partition. From there they move
// forward row by row, as from the partition's first row; walking them up
// to i instead would compare the key of every row before i, a pass over
// the whole partition for each range that a thread evaluates. It does
// nothing for a row whose key is NULL (rangeBound uses no cursor there)
// or a frame without RANGE offsets.
//
// An interval with months is the exception: its targets are monotonic
// only up to the time of day (calendar.go), and the cursors, as
// PostgreSQL's, stay at the furthest bound of the rows before. Two rows
// whose targets are out of order fall within the last days of a month,
// less than calendarReach apart; so the cursors seek to the bounds of the
// first row that close to i, and walk from there to i's.
func (fr *framer) seek(i int) {
	v := fr.key.v
	if fr.f.mode != modeRange || v == nil || v.isNull(i) {
		return
	}
	for k, b := range [2]*bound{&fr.f.start, &fr.f.end} {
		if b.kind != boundPreceding && b.kind != boundFollowing {
			continue
		}
		isStart, cur := k == 0, &fr.endCur
		if isStart {
			cur = &fr.startCur
		}
		if b.cal == nil {
			*cur = fr.searchBound(i, b, isStart)
			continue
		}
		from := fr.calendarReachStart(i, b.cal)
		*cur = fr.searchBound(from, b, isStart)
		for r := from + 1; r <= i; r++ {
			fr.rangeBound(r, b, boundSign(b), isStart)
		}
	}
}

// searchBound returns where bound b of non-NULL row i is, by binary search
// over the partition's non-NULL rows.
func (fr *framer) searchBound(i int, b *bound, isStart bool) int {
	v, desc := fr.key.v, fr.key.desc
	from, n := fr.nnStart, fr.nnEnd-fr.nnStart
	if v.kind == kindFloat {
		t := floatTarget(v.floats[i], b.foff, boundSign(b), desc, isStart)
		return from + sort.Search(n, func(k int) bool { return stops(compareFloat(v.floats[from+k], t), desc, isStart) })
	}
	t, frac, inf := b.rangeTarget(v.ints[i], directed(boundSign(b), desc))
	return from + sort.Search(n, func(k int) bool { return stops(cmpTarget(v.ints[from+k], t, frac, inf), desc, isStart) })
}

// calendarReach is how far apart, in days, two keys whose targets under
// a month interval are out of order can be: the later key's day is at
// most three days past the earlier's (the 28th to the 31st, both the last
// day of the shorter month they land in), and its time of day earlier.
const calendarReach = 4

// calendarReachStart returns the first non-NULL row of the partition
// whose key is less than calendarReach days before non-NULL row i's, in
// the order's direction.
func (fr *framer) calendarReachStart(i int, cal *calendarOffset) int {
	v, desc := fr.key.v, fr.key.desc
	reach := calendarReach * cal.unit.perDay
	from := fr.nnStart
	return from + sort.Search(i-from, func(k int) bool {
		if desc {
			return v.ints[from+k] < addClamp(v.ints[i], reach)
		}
		return v.ints[from+k] > subClamp(v.ints[i], reach)
	})
}

// directed is an offset's sign in the order's direction: DESC, PRECEDING
// adds and FOLLOWING subtracts.
func directed(sign int64, desc bool) int64 {
	if desc {
		return -sign
	}
	return sign
}

// floatTarget is the key a float RANGE offset bound of row key base
// compares the rows' keys with: base plus or minus foff (sign, before
// the order's direction). An infinite key and an infinite offset that
// cancel it (+inf minus inf, -inf plus inf) are PostgreSQL's special
// case (in_range_float8_float8): every key but NaN lies within range,
// so the bound is the first row for a start and the first NaN for an
// end, a target of -inf or +inf in the order's direction.
func floatTarget(base, foff float64, sign int64, desc, isStart bool) float64 {
	t := base + float64(directed(sign, desc))*foff
	if t == t || base != base {
		return t
	}
	if isStart != desc {
		return math.Inf(-1)
	}
	return math.Inf(1)
}

// stops reports whether a row whose key compares c with a bound's target
// stops the bound's cursor. ASC, a start is the first row with key >=
// the target and an end the first with key > it; DESC, the first with
// key <= it and < it.
func stops(c int, desc, isStart bool) bool {
	if desc {
		c = -c
	}
	return c > 0 || (isStart && c == 0)
}

// addOverflow returns a+d, or inf = +1/-1 when the sum is beyond int64.
func addOverflow(a, d, sign int64) (int64, int) {
	r := a + d
	if (d > 0 && r < a) || (d < 0 && r > a) {
		if d > 0 {
			return 0, 1
		}
		return 0, -1
	}
	_ = sign
	return r, 0
}

func addClamp(a, b int64) int64 {
	r := a + b
	if b > 0 && r < a {
		return 1<<63 - 1
	}
	if b < 0 && r > a {
		return -1 << 63
	}
	return r
}

// subClamp is a - b, clamped to the int64 range where it overflows.
func subClamp(a, b int64) int64 {
	r := a - b
	if b < 0 && r < a {
		return 1<<63 - 1
	}
	if b > 0 && r > a {
		return -1 << 63
	}
	return r
}

func clampInt(v int64, lo, hi int) int {
	if v < int64(lo) {
		return lo
	}
	if v > int64(hi) {
		return hi
	}
	return int(v)
}

// pieces is a frame after exclusion: up to three row ranges, in order.
type pieces struct {
	r [3][2]int
	n int
}

func (ps *pieces) add(s, e int) {
	if s < e {
		ps.r[ps.n] = [2]int{s, e}
		ps.n++
	}
}

// framePieces returns row i's frame [s, e) minus the exclusion.
func framePieces(f *frame, p *partition, i, s, e int) pieces {
	var out pieces
	var xs, xe int
	switch f.exclude {
	case excludeNoOthers:
		out.add(s, e)
		return out
	case excludeCurrentRow:
		xs, xe = i, i+1
	default:
		xs, xe = p.peerStart(i), p.peerEnd(i)
	}
	out.add(s, min(e, xs))
	if f.exclude == excludeTies && i >= s && i < e {
		out.add(i, i+1)
	}
	out.add(max(s, xe), e)
	return out
}

func (ps *pieces) count() int {
	n := 0
	for k := 0; k < ps.n; k++ {
		n += ps.r[k][1] - ps.r[k][0]
	}
	return n
}

// at returns the k-th row (0-based) of the pieces, or -1.
func (ps *pieces) at(k int) int {
	for j := 0; j < ps.n; j++ {
		l := ps.r[j][1] - ps.r[j][0]
		if k < l {
			return ps.r[j][0] + k
		}
		k -= l
	}
	return -1
}
