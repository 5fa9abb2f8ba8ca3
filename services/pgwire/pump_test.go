package main

import (
	"bytes"
	"context"
	"io"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/strata-db/strata/columnar"
)

// genResult writes one container of rows rows and the given columns
// (columnar.Generate's types: k0 int64, then c001_utf8, c002_float64, ...
// cycling through every type), as a window job's result would be.
func genResult(tb testing.TB, columns, rows int) string {
	tb.Helper()
	dir := tb.TempDir()
	ms, err := columnar.Generate(dir, columnar.GenOptions{Table: "r", Projection: "p", Columns: columns, Containers: 1, RowsPerContainer: rows})
	if err != nil {
		tb.Fatal(err)
	}
	return columnar.ContainerDir(dir, "r", "p", filepath.Base(ms[0].ID))
}

// countingWriter counts what the backend writes and how often.
type countingWriter struct{ bytes, writes int64 }

func (w *countingWriter) Write(p []byte) (int, error) {
	w.bytes += int64(len(p))
	w.writes++
	return len(p), nil
}

// pumpAll sends every row of the container at dir as DataRows in format
// (0 text, 1 binary) to w, as runWindow does.
func pumpAll(tb testing.TB, dir string, format int16, w io.Writer) int64 {
	tb.Helper()
	s := &session{be: pgproto3.NewBackend(nil, w)}
	cur, err := openCursor(dir, &stmt{limit: -1})
	if err != nil {
		tb.Fatal(err)
	}
	defer cur.close()
	done, err := s.pump(context.Background(), cur, []int16{format}, 0, s.sendDataRow)
	if err != nil || !done {
		tb.Fatalf("pump: done %v, %v", done, err)
	}
	if err := s.be.Flush(); err != nil {
		tb.Fatal(err)
	}
	return cur.sent
}

// BenchmarkPump: a 1M-row result sent as DataRows, text and binary, of
// the streamed benchmark's shape (k0 int64, c001_utf8) and of every
// type (16 columns). ns/row and the allocations of a row.
//
//	go test -run '^$' -bench Pump -benchtime 3x ./services/pgwire/
func BenchmarkPump(b *testing.B) {
	const rows = 1 << 20
	for _, shape := range []struct {
		name    string
		columns int
	}{{"int8,text", 2}, {"every_type", 16}} {
		dir := genResult(b, shape.columns, rows)
		for _, format := range []int16{0, 1} {
			name := shape.name + "/text"
			if format == 1 {
				name = shape.name + "/binary"
			}
			b.Run(name, func(b *testing.B) {
				b.ReportAllocs()
				var w countingWriter
				for range b.N {
					if n := pumpAll(b, dir, format, &w); n != rows {
						b.Fatalf("%d rows sent", n)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*rows), "ns/row")
				b.ReportMetric(float64(w.bytes)/float64(b.N*rows), "B/row")
				b.ReportMetric(float64(w.writes)/float64(b.N), "writes/op")
			})
		}
	}
}

// edgeArrays are arrays of every type oidOf maps, with NULLs and the
// values at the edges of each format (NaN, infinities, -0, exponent
// forms, extreme integers, empty and multi-byte strings, dates and
// timestamps before 1970 and 2000).
func edgeArrays() []arrow.Array {
	mem := memory.DefaultAllocator
	var out []arrow.Array
	add := func(b array.Builder, appendAll func()) {
		appendAll()
		b.AppendNull()
		out = append(out, b.NewArray())
	}
	bb := array.NewBooleanBuilder(mem)
	add(bb, func() { bb.AppendValues([]bool{true, false}, nil) })
	i8 := array.NewInt8Builder(mem)
	add(i8, func() { i8.AppendValues([]int8{0, -1, math.MinInt8, math.MaxInt8}, nil) })
	i16 := array.NewInt16Builder(mem)
	add(i16, func() { i16.AppendValues([]int16{0, -7, math.MinInt16, math.MaxInt16}, nil) })
	i32 := array.NewInt32Builder(mem)
	add(i32, func() { i32.AppendValues([]int32{0, -7, math.MinInt32, math.MaxInt32}, nil) })
	i64 := array.NewInt64Builder(mem)
	add(i64, func() { i64.AppendValues([]int64{0, 255, 256, -1, math.MinInt64, math.MaxInt64}, nil) })
	u8 := array.NewUint8Builder(mem)
	add(u8, func() { u8.AppendValues([]uint8{0, math.MaxUint8}, nil) })
	u16 := array.NewUint16Builder(mem)
	add(u16, func() { u16.AppendValues([]uint16{0, math.MaxUint16}, nil) })
	u32 := array.NewUint32Builder(mem)
	add(u32, func() { u32.AppendValues([]uint32{0, math.MaxUint32}, nil) })
	u64 := array.NewUint64Builder(mem)
	add(u64, func() { u64.AppendValues([]uint64{0, 1, 10000, 100000000, 123456789012, math.MaxUint64}, nil) })
	floats := []float64{0, math.Copysign(0, -1), 1, -1.5, 0.1, 1e-4, 9.99e-5, 1e-300, 123456.789, 1e6, 1e14, 1e15, 1e15 + 1, 1e300,
		math.MaxFloat64, math.SmallestNonzeroFloat64, math.NaN(), math.Inf(1), math.Inf(-1)}
	f32 := array.NewFloat32Builder(mem)
	add(f32, func() {
		for _, f := range floats {
			f32.Append(float32(f))
		}
		f32.AppendValues([]float32{math.MaxFloat32, math.SmallestNonzeroFloat32, 16777217, 0.3}, nil)
	})
	f64 := array.NewFloat64Builder(mem)
	add(f64, func() { f64.AppendValues(floats, nil) })
	strs := []string{"", "a", "héllo wörld", "日本語", "tab\tnew\nline\\", strings.Repeat("x", 300)}
	sb := array.NewStringBuilder(mem)
	add(sb, func() { sb.AppendValues(strs, nil) })
	lsb := array.NewLargeStringBuilder(mem)
	add(lsb, func() { lsb.AppendValues(strs, nil) })
	bins := [][]byte{{}, {0}, {0xde, 0xad, 0xbe, 0xef}, []byte("text")}
	bin := array.NewBinaryBuilder(mem, arrow.BinaryTypes.Binary)
	add(bin, func() { bin.AppendValues(bins, nil) })
	lbin := array.NewBinaryBuilder(mem, arrow.BinaryTypes.LargeBinary)
	add(lbin, func() { lbin.AppendValues(bins, nil) })
	d32 := array.NewDate32Builder(mem)
	add(d32, func() { d32.AppendValues([]arrow.Date32{0, 10957, -1, -719162, 2932896, 20000}, nil) })
	micros := []arrow.Timestamp{0, 1, -1, 946684800000000, 946684799999999, -62135596800000000, 253402300799999999, 1764790000123456, 1764790000100000}
	for _, tz := range []string{"", "UTC"} {
		ts := array.NewTimestampBuilder(mem, &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: tz})
		add(ts, func() { ts.AppendValues(micros, nil) })
	}
	return out
}

// Every type's encoder writes the bytes arrowValue and appendValue write,
// in text and in binary: what a client reads is unchanged.
func TestEncodersMatchAppendValue(t *testing.T) {
	for _, arr := range edgeArrays() {
		oid, err := oidOf(arr.DataType())
		if err != nil {
			t.Fatal(err)
		}
		for _, format := range []int16{0, 1} {
			enc := newEncoder(arr, oid, format)
			if enc == nil {
				t.Errorf("%s, format %d: no encoder", arr.DataType(), format)
				continue
			}
			for r := range arr.Len() {
				v := arrowValue(arr, r)
				if v == nil {
					continue
				}
				want, err := appendValue([]byte("prefix"), oid, format, v)
				if err != nil {
					t.Fatalf("%s row %d: %v", arr.DataType(), r, err)
				}
				if got := enc([]byte("prefix"), r); !bytes.Equal(got, want) {
					t.Errorf("%s, format %d, row %d (%v): %q, want %q", arr.DataType(), format, r, v, got, want)
				}
			}
		}
	}
}

// pump sends the DataRows a row-by-row arrowValue and appendValue would,
// byte for byte, for every type in text and binary, in writes of about
// flushBytes.
func TestPumpBytes(t *testing.T) {
	const rows = 20000
	dir := genResult(t, 16, rows)
	for _, format := range []int16{0, 1} {
		var got bytes.Buffer
		if n := pumpAll(t, dir, format, &got); n != rows {
			t.Fatalf("%d rows sent", n)
		}
		ct, err := columnar.Open(dir, columnar.OpenOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cols, err := arrowColumns(ct.Schema())
		if err != nil {
			t.Fatal(err)
		}
		cur, err := openCursor(dir, &stmt{limit: -1})
		if err != nil {
			t.Fatal(err)
		}
		var want []byte
		for {
			rec, err := cur.br.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			for r := range int(rec.NumRows()) {
				vals := make([][]byte, len(cols))
				for c := range cols {
					if v := arrowValue(rec.Column(c), r); v != nil {
						if vals[c], err = appendValue([]byte{}, cols[c].oid, format, v); err != nil {
							t.Fatal(err)
						}
					}
				}
				if want, err = (&pgproto3.DataRow{Values: vals}).Encode(want); err != nil {
					t.Fatal(err)
				}
			}
			rec.Release()
		}
		cur.close()
		if !bytes.Equal(got.Bytes(), want) {
			t.Fatalf("format %d: %d bytes sent, want %d; first difference at %d", format, got.Len(), len(want), firstDiff(got.Bytes(), want))
		}
	}
	var w countingWriter
	pumpAll(t, dir, 0, &w)
	if per := w.bytes / w.writes; per < flushBytes || per > 2*flushBytes {
		t.Errorf("%d writes of %d bytes on average, want about %d", w.writes, per, flushBytes)
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
