package windowbench

import (
	"fmt"
	"math/rand/v2"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/strata-db/strata/columnar"
)

// SeriesSchema is the schema of TableSeries: ts TIMESTAMP(us), x INT64.
func SeriesSchema() *arrow.Schema {
	return arrow.NewSchema([]arrow.Field{
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond}},
		{Name: "x", Type: arrow.PrimitiveTypes.Int64},
	}, nil)
}

// seriesBatch is the rows of TableSeries generated and written at once.
const seriesBatch = 65536

// WriteSeries writes TableSeries with rows rows as one committed container
// at dir, generated from seed a batch at a time, so its size costs no
// memory: row r has ts = r ms plus up to 5 ms of jitter (so the series is
// almost, not quite, in ts order) and x uniform in [0, 1e6). opts.Schema
// is the series'.
func WriteSeries(dir string, opts columnar.WriterOptions, rows int, seed uint64) (*columnar.Manifest, error) {
	rng := rand.New(rand.NewPCG(seed, uint64(len(TableSeries))))
	opts.Schema = SeriesSchema()
	w, err := columnar.Create(dir, opts)
	if err != nil {
		return nil, err
	}
	mem := memory.NewGoAllocator()
	for off := 0; off < rows; off += seriesBatch {
		n := min(seriesBatch, rows-off)
		b := array.NewRecordBuilder(mem, opts.Schema)
		ts, x := b.Field(0).(*array.TimestampBuilder), b.Field(1).(*array.Int64Builder)
		for i := 0; i < n; i++ {
			ts.Append(arrow.Timestamp(int64(off+i)*1000 + rng.Int64N(5000)))
			x.Append(rng.Int64N(1_000_000))
		}
		rec := b.NewRecordBatch()
		b.Release()
		err := w.Write(rec)
		rec.Release()
		if err != nil {
			w.Abort()
			return nil, fmt.Errorf("windowbench: write %s: %w", dir, err)
		}
	}
	m, err := w.Commit()
	if err != nil {
		return nil, fmt.Errorf("windowbench: commit %s: %w", dir, err)
	}
	return m, nil
}
