package windower

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/strata-db/strata/messages"
)

// TestFunctionsMatchWire checks that the windower's function table and
// the wire's list (package messages) name the same functions with the
// same arities, and agree on which are aggregates.
func TestFunctionsMatchWire(t *testing.T) {
	for f := fn(0); f < numFuncs; f++ {
		info := f.info()
		if info.name == "" || info.result == nil || info.eval == nil {
			t.Errorf("function %d: incomplete table entry %+v", f, info)
			continue
		}
		lo, hi, ok := messages.WindowFuncArity(info.name)
		if !ok {
			t.Errorf("%s: not a window function on the wire", info.name)
			continue
		}
		if lo != info.minArgs || hi != info.maxArgs {
			t.Errorf("%s: wire takes %d to %d arguments, the windower %d to %d", info.name, lo, hi, info.minArgs, info.maxArgs)
		}
		if messages.IsAggregate(info.name) != f.isAggregate() {
			t.Errorf("%s: wire says aggregate %v, the windower %v", info.name, messages.IsAggregate(info.name), f.isAggregate())
		}
	}
	for _, name := range messages.WindowFuncNames() {
		if _, ok := fnByName[name]; !ok {
			t.Errorf("%s: on the wire but not in the windower's table", name)
		}
	}
	if got, want := len(fnByName), int(numFuncs); got != want {
		t.Errorf("%d names for %d functions: a name is used twice", got, want)
	}
}

// divideByConst agrees with Go's / and % (which are PostgreSQL's) on
// values and divisors around the 32-bit edges of its fast path.
func TestDivideByConst(t *testing.T) {
	xs := []int64{0, 1, -1, 2, 7, -7, 999, 1000, 1001, -1001, math.MaxUint32, math.MaxUint32 + 1, -math.MaxUint32,
		-math.MaxUint32 - 1, math.MaxInt32, math.MinInt32, math.MaxInt64, math.MinInt64, math.MinInt64 + 1, 123456789012}
	r := rand.New(rand.NewPCG(3, 4))
	for range 2000 {
		xs = append(xs, int64(r.Uint32())-int64(r.Uint32()), int64(r.Uint64()))
	}
	for _, c := range []int64{1, 2, 3, 7, 10, 1000, 1 << 20, 1<<31 - 1, 1 << 31, math.MaxUint32, math.MaxUint32 + 1,
		-2, -3, -1000, -math.MaxUint32, math.MaxInt64, math.MinInt64, math.MinInt64 + 1} {
		for _, rem := range []bool{false, true} {
			got := make([]int64, len(xs))
			divideByConst(xs, c, rem, got)
			for i, x := range xs {
				want := x / c
				if rem {
					want = x % c
				}
				if got[i] != want {
					t.Fatalf("%d by %d (remainder %v): got %d, want %d", x, c, rem, got[i], want)
				}
			}
		}
	}
}

// An integer expression with a constant divisor, addend or factor gives
// what the same expression gives with the constant as a column: values,
// NULLs, overflow and division by zero (only where a row is not NULL).
func TestExprIntConst(t *testing.T) {
	xs := []int64{0, 5, -5, 1000, -1001, math.MaxInt64, math.MinInt64, 1 << 40, 7}
	nullsAt := []bool{false, false, false, false, false, false, false, false, true}
	for _, c := range []int64{0, 1, -1, 2, -3, 1000, math.MaxInt64, math.MinInt64} {
		for _, op := range []byte{'+', '-', '*', '/', '%'} {
			for _, withNulls := range []bool{false, true} {
				a := &vector{kind: kindInt, ints: xs}
				if withNulls {
					a.nulls = nullsAt
				}
				cols := []*vector{a, broadcast(&vector{kind: kindInt, ints: []int64{c}}, len(xs))}
				konst := &expr{col: -1, konst: &vector{kind: kindInt, ints: []int64{c}}, kind: kindInt}
				viaConst := &expr{col: -1, op: op, kind: kindInt, args: [2]*expr{{col: 0, kind: kindInt}, konst}}
				viaColumn := &expr{col: -1, op: op, kind: kindInt, args: [2]*expr{{col: 0, kind: kindInt}, {col: 1, kind: kindInt}}}
				got, gotErr := viaConst.eval(cols, len(xs))
				want, wantErr := viaColumn.eval(cols, len(xs))
				name := fmt.Sprintf("x %c %d (NULLs %v)", op, c, withNulls)
				if (gotErr == nil) != (wantErr == nil) {
					t.Fatalf("%s: error %v, want %v", name, gotErr, wantErr)
				}
				if wantErr != nil {
					if !errors.Is(gotErr, ErrOverflow) && !errors.Is(gotErr, ErrDivisionByZero) {
						t.Fatalf("%s: error %v, want one like %v", name, gotErr, wantErr)
					}
					continue
				}
				for i := range xs {
					if got.isNull(i) != want.isNull(i) || (!want.isNull(i) && got.ints[i] != want.ints[i]) {
						t.Fatalf("%s: row %d: got %d (NULL %v), want %d (NULL %v)", name, i, got.ints[i], got.isNull(i), want.ints[i], want.isNull(i))
					}
				}
			}
		}
	}
}

// An integer expression with a constant computed over ranges of rows on
// several goroutines (evalOn) gives what it gives on one: the same
// values and NULLs, and the same error, the first failing row's, though a
// later range fails too or instead.
func TestExprIntConstThreads(t *testing.T) {
	defer func(old int) { parallelMinRows = old }(parallelMinRows)
	parallelMinRows = 4
	rng := rand.New(rand.NewPCG(3, 4))
	base := []int64{0, 5, -5, 1000, -1001, math.MaxInt64, math.MinInt64, 1 << 40, 7, 12345}
	for round := range 200 {
		n := 4 + rng.IntN(60)
		xs := make([]int64, n)
		var nulls []bool
		if round%2 == 1 {
			nulls = make([]bool, n)
		}
		for i := range xs {
			xs[i] = base[rng.IntN(len(base))]
			if nulls != nil {
				nulls[i] = rng.IntN(4) == 0
			}
		}
		c := base[rng.IntN(len(base))]
		if rng.IntN(4) == 0 {
			c = []int64{0, -1, 1, 3}[rng.IntN(4)]
		}
		op := "+-*/%"[rng.IntN(5)]
		cols := []*vector{{kind: kindInt, ints: xs, nulls: nulls}}
		konst := &expr{col: -1, konst: &vector{kind: kindInt, ints: []int64{c}}, kind: kindInt}
		e := &expr{col: -1, op: op, kind: kindInt, args: [2]*expr{{col: 0, kind: kindInt}, konst}}
		want, wantErr := e.eval(cols, n)
		for threads := 2; threads <= 4; threads++ {
			got, gotErr := e.evalOn(cols, n, threads)
			name := fmt.Sprintf("round %d: %v %c %d on %d threads", round, xs, op, c, threads)
			if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
				t.Fatalf("%s: error %v, want %v", name, gotErr, wantErr)
			}
			if wantErr != nil {
				continue
			}
			if !slices.Equal(got.ints, want.ints) || !slices.Equal(got.nulls, want.nulls) {
				t.Fatalf("%s: got %v %v, want %v %v", name, got.ints, got.nulls, want.ints, want.nulls)
			}
		}
	}
}
