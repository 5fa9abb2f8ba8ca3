package main

import (
	"crypto/md5"
	"errors"
	"fmt"
	"hash/fnv"
	"math/big"
	"math/bits"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// The spill suite compares results by count and checksum: fetching ten
// or a hundred million rows from every system and sorting them would
// take longer than the queries. Every system computes the same exact
// integer aggregates over the query's output, in its timed run:
//
//	count(*), and for each output column c (V = c, or for a string
//	column the first 28 bits of md5(c) as an integer):
//	count(c), sum(V), and beside the first column, sum(W * V) with W
//	the first column's V, which ties each row's values together.
//
// The peers compute it in SQL (exact: numeric in PostgreSQL, HUGEINT in
// DuckDB, returned as text); strata in Go over its result batches, in
// 128-bit integers. NULLs are skipped as SQL's aggregates skip them.

// spillChecksumSQL is the checksum query over q's output in the dialect
// of PostgreSQL (pg) or DuckDB.
func spillChecksumSQL(q windowQuery, stringCols []string, pg bool) string {
	v := func(c string) string {
		if !contains(stringCols, c) {
			return c
		}
		if pg {
			return fmt.Sprintf("('x' || substr(md5(%s), 1, 7))::bit(28)::bigint", c)
		}
		return fmt.Sprintf("('0x' || substr(md5(%s), 1, 7))::BIGINT", c)
	}
	text := func(e string) string {
		if pg {
			return e + "::text"
		}
		return e + "::VARCHAR"
	}
	aggs := []string{text("count(*)")}
	w := v(q.Outputs[0])
	for i, c := range q.Outputs {
		aggs = append(aggs, text(fmt.Sprintf("count(%s)", c)), text(fmt.Sprintf("sum(%s)", v(c))))
		if i > 0 {
			aggs = append(aggs, text(fmt.Sprintf("sum((%s) * (%s))", w, v(c))))
		}
	}
	return fmt.Sprintf("SELECT %s FROM (%s) q", strings.Join(aggs, ", "), q.Text())
}

// int128 is a signed 128-bit accumulator.
type int128 struct{ hi, lo uint64 }

func (a *int128) add(x int64) {
	var carry uint64
	a.lo, carry = bits.Add64(a.lo, uint64(x), 0)
	a.hi, _ = bits.Add64(a.hi, uint64(x>>63), carry) // x's sign extended
}

// addProduct adds x*y: the unsigned product of x's and y's bits, its
// high word less y where x is negative and x where y is (mod 2^64).
func (a *int128) addProduct(x, y int64) {
	hi, lo := bits.Mul64(uint64(x), uint64(y))
	hi -= uint64(x>>63)&uint64(y) + uint64(y>>63)&uint64(x)
	var carry uint64
	a.lo, carry = bits.Add64(a.lo, lo, 0)
	a.hi, _ = bits.Add64(a.hi, hi, carry)
}

// addInt128 adds b.
func (a *int128) addInt128(b int128) {
	var carry uint64
	a.lo, carry = bits.Add64(a.lo, b.lo, 0)
	a.hi, _ = bits.Add64(a.hi, b.hi, carry)
}

func (a int128) String() string {
	v := new(big.Int).SetUint64(a.hi)
	v.Lsh(v, 64).Or(v, new(big.Int).SetUint64(a.lo))
	if a.hi>>63 == 1 {
		v.Sub(v, new(big.Int).Lsh(big.NewInt(1), 128))
	}
	return v.String()
}

// md5Prefix28 is the first 28 bits of md5(s), what
// ('x' || substr(md5(s), 1, 7))::bit(28) reads.
func md5Prefix28(s string) int64 {
	d := md5.Sum([]byte(s))
	return int64(d[0])<<20 | int64(d[1])<<12 | int64(d[2])<<4 | int64(d[3]>>4)
}

// spillSummer computes the checksum of a result from its Arrow batches.
// Its sums are additive: batches may be folded by several summers and
// the summers merged (spillFold).
type spillSummer struct {
	rows    int64
	counts  []int64
	sums    []int128
	wsums   []int128 // [0] unused
	strings []bool   // column is hashed
	vals    [][]int64
	valid   [][]bool // nil: no NULL in the batch
}

func newSpillSummer(q windowQuery, stringCols []string) *spillSummer {
	n := len(q.Outputs)
	s := &spillSummer{counts: make([]int64, n), sums: make([]int128, n), wsums: make([]int128, n), strings: make([]bool, n),
		vals: make([][]int64, n), valid: make([][]bool, n)}
	for i, c := range q.Outputs {
		s.strings[i] = contains(stringCols, c)
	}
	return s
}

// add folds one result batch in, a column at a time: as the peers'
// aggregates read a column, not a row at a time through an interface.
func (s *spillSummer) add(rec arrow.RecordBatch) error {
	if int(rec.NumCols()) != len(s.counts) {
		return fmt.Errorf("result has %d columns, the query %d outputs", rec.NumCols(), len(s.counts))
	}
	n := int(rec.NumRows())
	s.rows += int64(n)
	for c := range s.counts {
		vals, valid, err := spillValues(rec.Column(c), s.strings[c], s.vals[c], s.valid[c])
		if err != nil {
			return fmt.Errorf("column %s: %w", rec.Schema().Field(c).Name, err)
		}
		s.vals[c], s.valid[c] = vals, valid
		sum, count := &s.sums[c], int64(0)
		if valid == nil {
			for _, v := range vals {
				sum.add(v)
			}
			count = int64(n)
		} else {
			for i, v := range vals {
				if valid[i] {
					sum.add(v)
					count++
				}
			}
		}
		s.counts[c] += count
	}
	w, wok := s.vals[0], s.valid[0]
	for c := 1; c < len(s.counts); c++ {
		vals, ok, sum := s.vals[c], s.valid[c], &s.wsums[c]
		switch {
		case wok == nil && ok == nil:
			for i, v := range vals {
				sum.addProduct(w[i], v)
			}
		default:
			for i, v := range vals {
				if (wok == nil || wok[i]) && (ok == nil || ok[i]) {
					sum.addProduct(w[i], v)
				}
			}
		}
	}
	return nil
}

// spillValues returns arr's values as the checksum sums them (a string
// hashed by md5Prefix28; a NULL's value is whatever the storage held,
// since the sums skip it) and which are not NULL (nil: all), in the
// storage of vals and valid.
func spillValues(arr arrow.Array, hashed bool, vals []int64, valid []bool) ([]int64, []bool, error) {
	n := arr.Len()
	vals = slices.Grow(vals[:0], n)[:n]
	valid = valid[:0]
	if arr.NullN() > 0 {
		valid = slices.Grow(valid, n)[:n]
		for i := range n {
			valid[i] = arr.IsValid(i)
		}
	} else {
		valid = nil
	}
	switch a := arr.(type) {
	case *array.Int64:
		copy(vals, a.Int64Values())
	case *array.Int32:
		for i, v := range a.Int32Values() {
			vals[i] = int64(v)
		}
	case *array.Uint32:
		for i, v := range a.Uint32Values() {
			vals[i] = int64(v)
		}
	case *array.String, *array.LargeString:
		if !hashed {
			return nil, nil, fmt.Errorf("unsupported result type %s for the checksum", arr.DataType())
		}
		strs := a.(interface{ Value(int) string })
		for i := range n {
			if valid == nil || valid[i] {
				vals[i] = md5Prefix28(strs.Value(i))
			}
		}
	default:
		return nil, nil, fmt.Errorf("unsupported result type %s for the checksum", arr.DataType())
	}
	if valid != nil {
		for i, ok := range valid {
			if !ok {
				vals[i] = 0
			}
		}
	}
	return vals, valid, nil
}

// merge adds o's sums to s's.
func (s *spillSummer) merge(o *spillSummer) {
	s.rows += o.rows
	for c := range s.counts {
		s.counts[c] += o.counts[c]
		s.sums[c].addInt128(o.sums[c])
		s.wsums[c].addInt128(o.wsums[c])
	}
}

// spillFold folds result batches into a checksum on workers goroutines,
// each with a summer of its own, merged at the end: the peers compute
// the checksum on every thread they run the query on. One worker folds
// on the caller's goroutine.
type spillFold struct {
	summers []*spillSummer
	batches chan arrow.RecordBatch // nil: one worker, the caller
	errs    chan error
	err     error // the caller's fold's
}

func newSpillFold(q windowQuery, stringCols []string, workers int) *spillFold {
	if workers <= 1 {
		return &spillFold{summers: []*spillSummer{newSpillSummer(q, stringCols)}}
	}
	f := &spillFold{batches: make(chan arrow.RecordBatch, workers), errs: make(chan error, workers)}
	for range workers {
		s := newSpillSummer(q, stringCols)
		f.summers = append(f.summers, s)
		go func() {
			var err error
			for rec := range f.batches {
				if err == nil {
					err = s.add(rec)
				}
				rec.Release()
			}
			f.errs <- err
		}()
	}
	return f
}

// add folds rec in, or hands it to a worker; the fold releases it.
func (f *spillFold) add(rec arrow.RecordBatch) {
	if f.batches != nil {
		f.batches <- rec
		return
	}
	if f.err == nil {
		f.err = f.summers[0].add(rec)
	}
	rec.Release()
}

// result waits for every batch handed in and returns the checksum.
func (f *spillFold) result() (spillSum, error) {
	errs := []error{f.err}
	if f.batches != nil {
		close(f.batches)
		for range f.summers {
			errs = append(errs, <-f.errs)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return spillSum{}, err
	}
	s := f.summers[0]
	for _, o := range f.summers[1:] {
		s.merge(o)
	}
	return s.result(), nil
}

// result is the checksum as the SQL form returns it.
func (s *spillSummer) result() spillSum {
	fields := []string{fmt.Sprint(s.rows)}
	for c := range s.counts {
		fields = append(fields, fmt.Sprint(s.counts[c]), s.sums[c].String())
		if c > 0 {
			fields = append(fields, s.wsums[c].String())
		}
	}
	return newSpillSum(fields)
}

// spillSum is one system's count and checksum of a query's output.
type spillSum struct {
	Rows   int64
	Sum    string   // a short digest of Fields
	Fields []string // the aggregates, as the checksum query returns them
}

func newSpillSum(fields []string) spillSum {
	s := spillSum{Fields: fields}
	fmt.Sscan(fields[0], &s.Rows)
	h := fnv.New64a()
	for _, f := range fields {
		h.Write([]byte(f))
		h.Write([]byte{0})
	}
	s.Sum = fmt.Sprintf("%016x", h.Sum64())
	return s
}

// same reports whether two checksums agree, and if not, where.
func (s spillSum) same(o spillSum) (bool, string) {
	if len(s.Fields) != len(o.Fields) {
		return false, fmt.Sprintf("%d aggregates against %d", len(s.Fields), len(o.Fields))
	}
	for i := range s.Fields {
		if s.Fields[i] != o.Fields[i] {
			return false, fmt.Sprintf("aggregate %d: %s against %s", i, s.Fields[i], o.Fields[i])
		}
	}
	return true, ""
}
