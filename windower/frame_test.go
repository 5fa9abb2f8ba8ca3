package windower

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/strata-db/strata/messages"
	"github.com/strata-db/strata/windower/sqlparse"
)

// TestFramerSeek checks that a framer started at any row of a partition
// (a range of rows one goroutine evaluates, framer.seek) gives every later
// row the bounds that a framer walked up from the partition's first row
// gives: RANGE offsets on integer, float and calendar keys, ASC and DESC,
// NULLs first and last, duplicate keys, fractional and unbounded offsets.
func TestFramerSeek(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for c := range 400 {
		checkFramerSeek(t, fmt.Sprint(c), randomRangeFrameCase(rng))
	}
	// Out of order once a month is taken away: 1970-03-30 23:00 gives
	// 1970-02-28 23:00, and 1970-03-31 00:00 gives 1970-02-28 00:00. A
	// cursor at the second row's frame that sought it found 02-28 01:00,
	// where the cursor walked from the first row stays at 03-30 23:00.
	key := &vector{kind: kindInt, ints: []int64{58*86400 + 3600, 88*86400 + 82800, 89 * 86400, 89*86400 + 3600}}
	fc := rangeFrameCase{ps: 0, pe: 4, peerChange: []bool{true, true, true, true}, key: rangeKey{v: key},
		f: frame{mode: modeRange, start: bound{kind: boundPreceding, cal: &calendarOffset{iv: messages.Interval{Months: 1}, unit: temporalUnit{perDay: 86400, microsPerUnit: 1e6}}},
			end: bound{kind: boundCurrentRow}}}
	fc.desc = describeRangeFrameCase(fc, true)
	checkFramerSeek(t, "month's end", fc)
}

// checkFramerSeek checks that a framer of case fc started at any row
// gives every later row the bounds that one walked from the first gives.
func checkFramerSeek(t *testing.T, name string, fc rangeFrameCase) {
	t.Helper()
	n := len(fc.peerChange)
	groupOf, groupStart := loadGroups(fc.peerChange, nil, nil, 1)
	p := partition{hasOrder: true, groupOf: groupOf, groupStart: groupStart}
	p.set(fc.ps, fc.pe)
	walk := framer{f: &fc.f, key: fc.key}
	walk.reset(&p)
	want := make([][2]int, n)
	for j := fc.ps; j < fc.pe; j++ {
		s, e := walk.bounds(j)
		want[j] = [2]int{s, e}
	}
	for i := fc.ps; i < fc.pe; i++ {
		q := p
		q.lo = i
		fr := framer{f: &fc.f, key: fc.key}
		fr.reset(&q)
		for j := i; j < fc.pe; j++ {
			if s, e := fr.bounds(j); [2]int{s, e} != want[j] {
				t.Fatalf("case %s (%s): started at row %d, row %d's frame is [%d, %d); walked from row %d, [%d, %d)",
					name, fc.desc, i, j, s, e, fc.ps, want[j][0], want[j][1])
			}
		}
	}
}

// rangeFrameCase is a RANGE frame with offsets over one partition
// [ps, pe) of sorted keys, with rows of other partitions around it.
type rangeFrameCase struct {
	f          frame
	key        rangeKey
	ps, pe     int
	peerChange []bool // where a peer group starts, as loadGroups takes them
	desc       string
}

func randomRangeFrameCase(rng *rand.Rand) rangeFrameCase {
	before, rows, after := rng.IntN(4), 1+rng.IntN(60), rng.IntN(4)
	n := before + rows + after
	fc := rangeFrameCase{ps: before, pe: before + rows, peerChange: make([]bool, n)}
	v := &vector{kind: kindInt, ints: make([]int64, n)}
	isFloat, calendar := rng.IntN(3) == 0, false
	if isFloat {
		v = &vector{kind: kindFloat, floats: make([]float64, n)}
	} else {
		calendar = rng.IntN(3) == 0
	}
	fc.key = rangeKey{v: v, desc: rng.IntN(2) == 0, nullsFirst: rng.IntN(2) == 0}
	nulls := 0
	if rng.IntN(2) == 0 {
		nulls = rng.IntN(rows + 1)
		v.nulls = make([]bool, n)
	}
	// The partition's non-NULL keys, sorted in the frame's direction.
	floats := []float64{math.Inf(-1), -2.5, -1, 0, 0.5, 1, 2, 3.25, 7, math.Inf(1), math.NaN()}
	ints := make([]int64, rows-nulls)
	fs := make([]float64, rows-nulls)
	for k := range ints {
		ints[k] = int64(rng.IntN(3*rows)) - int64(rows)
		if calendar {
			// Timestamps in seconds, at hours of the day that put two rows
			// out of order once a month is added where the month is
			// shorter (2024-01-30 23:00 and 2024-01-31 01:00 plus a
			// month): days near the ends of months, or any.
			day := int64(rng.IntN(400))
			if rng.IntN(2) == 0 {
				day = []int64{27, 28, 29, 30, 58, 86, 87, 88, 89, 119, 120}[rng.IntN(11)]
			}
			ints[k] = day*86400 + []int64{0, 3600, 39600, 82800}[rng.IntN(4)]
		}
		fs[k] = floats[rng.IntN(len(floats))]
	}
	slices.Sort(ints)
	slices.SortFunc(fs, compareFloat)
	if fc.key.desc {
		slices.Reverse(ints)
		slices.Reverse(fs)
	}
	nn := fc.ps // the first non-NULL row
	if fc.key.nullsFirst {
		nn += nulls
	}
	for r := fc.ps; r < fc.pe; r++ {
		if r < nn || r >= nn+len(ints) {
			v.nulls[r] = true
			continue
		}
		if isFloat {
			v.floats[r] = fs[r-nn]
		} else {
			v.ints[r] = ints[r-nn]
		}
	}
	// Peer groups: a change of key or of NULL-ness, and the partitions' starts.
	for r := range n {
		switch {
		case r == 0 || r == fc.ps || r == fc.pe:
			fc.peerChange[r] = true
		case r < fc.ps || r > fc.pe:
			fc.peerChange[r] = rng.IntN(2) == 0
		case v.isNull(r) != v.isNull(r-1):
			fc.peerChange[r] = true
		case v.isNull(r):
		case isFloat:
			fc.peerChange[r] = compareFloat(v.floats[r], v.floats[r-1]) != 0
		default:
			fc.peerChange[r] = v.ints[r] != v.ints[r-1]
		}
	}
	fc.f = frame{mode: modeRange, start: randomRangeBound(rng, isFloat, calendar), end: randomRangeBound(rng, isFloat, calendar)}
	fc.desc = describeRangeFrameCase(fc, calendar)
	return fc
}

func randomRangeBound(rng *rand.Rand, isFloat, calendar bool) bound {
	kinds := []boundKind{boundUnboundedPreceding, boundPreceding, boundPreceding, boundCurrentRow, boundFollowing, boundFollowing, boundUnboundedFollowing}
	b := bound{kind: kinds[rng.IntN(len(kinds))]}
	if b.kind != boundPreceding && b.kind != boundFollowing {
		return b
	}
	switch {
	case isFloat:
		b.foff = []float64{0, 0.5, 1, 2.75, math.Inf(1)}[rng.IntN(5)]
	case calendar:
		// Months, days and hours on a key in seconds: computed row by
		// row. With months, the days may be negative ('1 month -1 day').
		iv := messages.Interval{Months: int32(rng.IntN(3)), Days: int32(rng.IntN(20)), Micros: int64(rng.IntN(3)) * 3600e6}
		if iv.Months > 0 {
			iv.Days -= 5
		}
		b.cal = &calendarOffset{iv: iv, unit: temporalUnit{perDay: 86400, microsPerUnit: 1e6}}
	case rng.IntN(8) == 0:
		b.off, b.offInf = math.MaxInt64, true
	default:
		b.off, b.offFrac = int64(rng.IntN(6)), rng.IntN(4) == 0
	}
	return b
}

func describeRangeFrameCase(fc rangeFrameCase, calendar bool) string {
	key, nulls := "integer", 0
	for r := fc.ps; r < fc.pe; r++ {
		if fc.key.v.isNull(r) {
			nulls++
		}
	}
	switch {
	case fc.key.v.kind == kindFloat:
		key = "float"
	case calendar:
		key = "timestamp, calendar offsets"
	}
	order := "ASC"
	if fc.key.desc {
		order = "DESC"
	}
	where := "NULLS LAST"
	if fc.key.nullsFirst {
		where = "NULLS FIRST"
	}
	return fmt.Sprintf("%s key %s %s, %d rows of which %d NULL, frame %+v", key, order, where, fc.pe-fc.ps, nulls, fc.f)
}

// TestFramerFloatInRange checks the frames of RANGE offsets on float
// keys, infinities and NaN among them, against PostgreSQL's rule row by
// row (pgInRangeFloat): a frame starts at the first row the start bound
// holds for and ends before the first row past the end bound.
func TestFramerFloatInRange(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	offsets := []float64{0, 0.5, 1, 2.75, math.Inf(1)}
	for c := 0; c < 600; {
		fc := randomRangeFrameCase(rng)
		v := fc.key.v
		if v.kind != kindFloat {
			continue
		}
		c++
		kinds := []boundKind{boundPreceding, boundFollowing}
		fc.f.start = bound{kind: kinds[rng.IntN(2)], foff: offsets[rng.IntN(len(offsets))]}
		fc.f.end = bound{kind: kinds[rng.IntN(2)], foff: offsets[rng.IntN(len(offsets))]}
		fc.desc = describeRangeFrameCase(fc, false)
		groupOf, groupStart := loadGroups(fc.peerChange, nil, nil, 1)
		p := partition{hasOrder: true, groupOf: groupOf, groupStart: groupStart}
		p.set(fc.ps, fc.pe)
		fr := framer{f: &fc.f, key: fc.key}
		fr.reset(&p)
		desc := fc.key.desc
		for i := fc.ps; i < fc.pe; i++ {
			s, e := fr.bounds(i)
			if v.isNull(i) {
				continue
			}
			base := v.floats[i]
			// The rows PostgreSQL's frame holds: from the first row the
			// start bound holds for, up to the first row past the end
			// bound (its head and tail cursors); NULL keys never.
			ws, we := fr.nnEnd, fr.nnEnd
			for r := fr.nnStart; r < fr.nnEnd; r++ {
				if pgInRangeFloat(v.floats[r], base, fc.f.start.foff, (fc.f.start.kind == boundPreceding) != desc, desc) {
					ws = r
					break
				}
			}
			for r := fr.nnStart; r < fr.nnEnd; r++ {
				if !pgInRangeFloat(v.floats[r], base, fc.f.end.foff, (fc.f.end.kind == boundPreceding) != desc, !desc) {
					we = r
					break
				}
			}
			we = max(we, ws)
			if s != ws || e != we {
				t.Fatalf("case %d (%s): row %d (key %v): frame [%d, %d), PostgreSQL's [%d, %d)", c, fc.desc, i, base, s, e, ws, we)
			}
		}
	}
}

// pgInRangeFloat is PostgreSQL's in_range_float8_float8: whether val
// lies within offset of base (sub: below it), as a frame bound tests a
// row's key against the current row's (less: val <= base -/+ offset, else
// val >= it). NaN is larger than every other value and equal to itself;
// an infinite base with an infinite offset that would cancel it (+inf
// minus inf, -inf plus inf) has every other value in range.
func pgInRangeFloat(val, base, offset float64, sub, less bool) bool {
	switch {
	case math.IsNaN(val):
		return math.IsNaN(base) || !less
	case math.IsNaN(base):
		return less
	case math.IsInf(offset, 1) && math.IsInf(base, 0) && (sub == (base > 0)):
		return true
	}
	sum := base + offset
	if sub {
		sum = base - offset
	}
	if less {
		return val <= sum
	}
	return val >= sum
}

// TestRangeFloatInfinities runs frames of infinite RANGE offsets over
// float keys -Infinity to Infinity and NaN, against what PostgreSQL 15
// returned for the same query and rows.
func TestRangeFloatInfinities(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "f", Type: arrow.PrimitiveTypes.Float64, Nullable: true}}, nil)
	b := array.NewRecordBuilder(memory.NewGoAllocator(), schema)
	defer b.Release()
	for i, f := range []float64{math.Inf(-1), -1, 0, 2, math.Inf(1), math.Inf(1), math.NaN()} {
		b.Field(0).(*array.Int64Builder).Append(int64(i + 1))
		b.Field(1).(*array.Float64Builder).Append(f)
	}
	b.Field(0).(*array.Int64Builder).Append(8)
	b.Field(1).(*array.Float64Builder).AppendNull()
	rec := b.NewRecordBatch()
	defer rec.Release()
	q, err := sqlparse.Parse(`SELECT id,
	 count(*) OVER (ORDER BY f RANGE BETWEEN 'Infinity'::float8 PRECEDING AND 'Infinity'::float8 PRECEDING) AS pp,
	 min(id) OVER (ORDER BY f RANGE BETWEEN 'Infinity'::float8 PRECEDING AND 'Infinity'::float8 PRECEDING) AS ppmin,
	 count(*) OVER (ORDER BY f RANGE BETWEEN 'Infinity'::float8 FOLLOWING AND 'Infinity'::float8 FOLLOWING) AS ff,
	 min(id) OVER (ORDER BY f RANGE BETWEEN 'Infinity'::float8 FOLLOWING AND 'Infinity'::float8 FOLLOWING) AS ffmin,
	 count(*) OVER (ORDER BY f DESC RANGE BETWEEN 'Infinity'::float8 PRECEDING AND 'Infinity'::float8 PRECEDING) AS dpp,
	 count(*) OVER (ORDER BY f DESC RANGE BETWEEN 'Infinity'::float8 FOLLOWING AND 'Infinity'::float8 FOLLOWING) AS dff
	FROM t ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	// PostgreSQL 15, the same query over
	// (1,'-Infinity'),(2,-1),(3,0),(4,2),(5,'Infinity'),(6,'Infinity'),(7,'NaN'),(8,NULL).
	want := []string{
		"1|1|6|1|6|1|",
		"1|1|2|5|2|1|",
		"1|1|2|5|2|1|",
		"1|1|2|5|2|1|",
		"6|1|2|5|2|6|",
		"6|1|2|5|2|6|",
		"1|7|1|7|1|1|",
		"1|8|1|8|1|1|",
	}
	for i := range want {
		want[i] = fmt.Sprintf("%d|%s", i+1, want[i])
	}
	for _, threads := range []int{1, 2, 3} {
		res, err := RunRecords(context.Background(), q, schema, []arrow.RecordBatch{rec}, Options{Grant: 64 << 20, Threads: threads})
		if err != nil {
			t.Fatal(err)
		}
		got := drain(t, res)
		res.Close()
		if !slices.Equal(got, want) {
			t.Errorf("threads %d: got\n%s\nPostgreSQL 15:\n%s", threads, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}

// TestExactSumNonFinite checks that the streamed path's exact float sum
// takes infinities and NaN as a plain float sum does, and that removing
// them restores the finite sum: in the partials an infinity turned every
// partial into NaN, one more a value, and a sliding sum over a column
// with one took time and memory quadratic in its rows.
func TestExactSumNonFinite(t *testing.T) {
	inf, nan := math.Inf(1), math.NaN()
	cases := []struct {
		add, remove []float64
		want        float64
	}{
		{add: []float64{1, inf, 2}, want: inf},
		{add: []float64{1, -inf, 2}, want: -inf},
		{add: []float64{inf, -inf}, want: nan},
		{add: []float64{1, nan}, want: nan},
		{add: []float64{1e16, inf, 1, -1e16}, remove: []float64{inf}, want: 1},
		{add: []float64{0.1, nan, -inf, 0.2}, remove: []float64{-inf, nan}, want: 0.1 + 0.2},
	}
	for _, c := range cases {
		s, copied := exactSumOf(c.add, c.remove)
		for _, got := range []float64{s.value(), copied.value()} {
			if !floatsClose(got, c.want) || math.IsNaN(got) != math.IsNaN(c.want) {
				t.Errorf("add %v, remove %v: sum %v, want %v", c.add, c.remove, got, c.want)
			}
		}
		if len(s.partials) > len(c.add) {
			t.Errorf("add %v: %d partials", c.add, len(s.partials))
		}
	}
	// Many values beside one infinity: the partials stay few.
	var s exactSum
	s.add(inf, 1)
	for i := range 10000 {
		s.add(float64(i%7)/3, 1)
	}
	if len(s.partials) > 4 || s.value() != inf {
		t.Errorf("10000 values beside +inf: %d partials, sum %v", len(s.partials), s.value())
	}
}

// exactSumOf returns the exact sum of add less remove, and a copy of it
// made by addSum.
func exactSumOf(add, remove []float64) (s, copied *exactSum) {
	s, copied = &exactSum{}, &exactSum{}
	for _, x := range add {
		s.add(x, 1)
	}
	for _, x := range remove {
		s.add(x, -1)
	}
	copied.addSum(s, 1)
	return s, copied
}

// TestExactSumHuge checks that the streamed path's exact float sum keeps
// values near float8's limit without overflowing its partials: a frame
// that slides past two of them held both for a moment, the partials
// turned to NaN, and every later frame read NaN.
func TestExactSumHuge(t *testing.T) {
	huge := math.MaxFloat64 / 1.5
	cases := []struct {
		add, remove []float64
		want        float64 // NaN: overflows
	}{
		{add: []float64{huge, huge}, remove: []float64{huge}, want: huge},
		{add: []float64{math.MaxFloat64, 0.5, -math.MaxFloat64}, want: 0.5},
		{add: []float64{-huge, 3, -huge, 1e300}, remove: []float64{-huge}, want: -huge + 1e300 + 3},
		{add: []float64{huge, 1e-300, huge}, remove: []float64{huge, huge}, want: 1e-300},
		{add: []float64{huge, huge}, want: math.NaN()},
		{add: []float64{-huge, 2, -huge}, remove: []float64{2}, want: math.NaN()},
	}
	for _, c := range cases {
		s, copied := exactSumOf(c.add, c.remove)
		for _, sum := range []*exactSum{s, copied} {
			got := sum.value()
			if math.IsNaN(c.want) {
				if !sum.overflows(got) {
					t.Errorf("add %v, remove %v: sum %v, want an overflow", c.add, c.remove, got)
				}
				continue
			}
			if got != c.want || sum.overflows(got) {
				t.Errorf("add %v, remove %v: sum %v, want %v", c.add, c.remove, got, c.want)
			}
		}
	}
}
