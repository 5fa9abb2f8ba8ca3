package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/jackc/pgx/v5"
	"github.com/strata-db/strata/windower/windowbench"
)

// windowTable is the data of the window suite (see windowbench.Table),
// which every system loads.
type windowTable = windowbench.Table

// writeWindowParquet writes the rows in id order to a Parquet file.
func writeWindowParquet(w *windowTable, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	props := parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Snappy))
	fw, err := pqarrow.NewFileWriter(windowbench.Schema(), f, props, pqarrow.DefaultWriterProps())
	if err != nil {
		f.Close()
		return fmt.Errorf("parquet writer %s: %w", path, err)
	}
	order := w.OrderBy(w.ID)
	for _, rec := range w.Records(memory.DefaultAllocator, order, 1<<16) {
		err = fw.Write(rec)
		rec.Release()
		if err != nil {
			fw.Close()
			return fmt.Errorf("write %s: %w", path, err)
		}
	}
	if err := fw.Close(); err != nil { // closes f too
		return fmt.Errorf("close %s: %w", path, err)
	}
	return nil
}

// copyWindowToPostgres loads the rows in id order into an existing table
// with COPY.
func copyWindowToPostgres(ctx context.Context, conn *pgx.Conn, w *windowTable, table string) error {
	n, err := conn.CopyFrom(ctx, pgx.Identifier{table}, windowbench.Columns, pgx.CopyFromSlice(w.N, func(i int) ([]any, error) {
		var s any
		if !w.SNull[i] {
			s = w.S[i]
		}
		return []any{w.ID[i], w.A[i], w.C[i], w.G[i], w.X[i], time.UnixMicro(w.T[i]).UTC(), s, w.K[i]}, nil
	}))
	if err != nil {
		return fmt.Errorf("copy into %s: %w", table, err)
	}
	if int(n) != w.N {
		return fmt.Errorf("copy into %s: %d rows copied, want %d", table, n, w.N)
	}
	return nil
}
