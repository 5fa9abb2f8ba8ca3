package main

import (
	"crypto/md5"
	"fmt"
	"hash/fnv"
	"math/big"
	"math/bits"
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
	ext := uint64(0)
	if x < 0 {
		ext = ^uint64(0)
	}
	a.hi, _ = bits.Add64(a.hi, ext, carry)
}

// addProduct adds x*y.
func (a *int128) addProduct(x, y int64) {
	neg := (x < 0) != (y < 0)
	ux, uy := uint64(x), uint64(y)
	if x < 0 {
		ux = -ux
	}
	if y < 0 {
		uy = -uy
	}
	hi, lo := bits.Mul64(ux, uy)
	if neg {
		lo = ^lo + 1
		hi = ^hi
		if lo == 0 {
			hi++
		}
	}
	var carry uint64
	a.lo, carry = bits.Add64(a.lo, lo, 0)
	a.hi, _ = bits.Add64(a.hi, hi, carry)
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
type spillSummer struct {
	rows    int64
	counts  []int64
	sums    []int128
	wsums   []int128 // [0] unused
	strings []bool   // column is hashed
	vals    [][]int64
	valid   [][]bool
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

// add folds one result batch in.
func (s *spillSummer) add(rec arrow.RecordBatch) error {
	if int(rec.NumCols()) != len(s.counts) {
		return fmt.Errorf("result has %d columns, the query %d outputs", rec.NumCols(), len(s.counts))
	}
	n := int(rec.NumRows())
	s.rows += int64(n)
	for c := range s.counts {
		vals, valid := s.vals[c][:0], s.valid[c][:0]
		arr := rec.Column(c)
		for i := range n {
			null := arr.IsNull(i)
			valid = append(valid, !null)
			var v int64
			if !null {
				var err error
				if v, err = spillValue(arr, i, s.strings[c]); err != nil {
					return fmt.Errorf("column %s: %w", rec.Schema().Field(c).Name, err)
				}
				s.counts[c]++
				s.sums[c].add(v)
			}
			vals = append(vals, v)
		}
		s.vals[c], s.valid[c] = vals, valid
	}
	w, wok := s.vals[0], s.valid[0]
	for c := 1; c < len(s.counts); c++ {
		for i := range n {
			if wok[i] && s.valid[c][i] {
				s.wsums[c].addProduct(w[i], s.vals[c][i])
			}
		}
	}
	return nil
}

func spillValue(arr arrow.Array, i int, hashed bool) (int64, error) {
	switch a := arr.(type) {
	case *array.Int64:
		return a.Value(i), nil
	case *array.Int32:
		return int64(a.Value(i)), nil
	case *array.Uint32:
		return int64(a.Value(i)), nil
	case *array.String:
		if hashed {
			return md5Prefix28(a.Value(i)), nil
		}
	case *array.LargeString:
		if hashed {
			return md5Prefix28(a.Value(i)), nil
		}
	}
	return 0, fmt.Errorf("unsupported result type %s for the checksum", arr.DataType())
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
