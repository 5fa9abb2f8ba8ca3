package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/strata-db/strata/columnar"
)

// writeContainer writes record batches, already sorted on key, as one
// committed strata container at dir.
func writeContainer(dir, table, projection, id string, key columnar.SortKey, recs ...arrow.RecordBatch) (*columnar.Manifest, error) {
	if len(recs) == 0 {
		return nil, fmt.Errorf("container %s: no rows", dir)
	}
	w, err := columnar.Create(dir, columnar.WriterOptions{
		Table: table, Projection: projection, ID: id,
		Schema: recs[0].Schema(), SortKey: key,
	})
	if err != nil {
		return nil, err
	}
	for _, rec := range recs {
		if err := w.Write(rec); err != nil {
			w.Abort()
			return nil, err
		}
	}
	return w.Commit()
}

// codecFloor does the unavoidable work of a mergeout with no merge at all:
// it decompresses every block of every input column and compresses the same
// rows into one output container (inputs concatenated, column by column).
// Each column file is opened once and each block decoded once. Columns are
// copied by GOMAXPROCS goroutines at once, as the merger gathers them.
func codecFloor(ctx context.Context, inputs []string, out string) (*columnar.IOStats, error) {
	stats := new(columnar.IOStats)
	cs := make([]*columnar.Container, len(inputs))
	for i, dir := range inputs {
		c, err := columnar.Open(dir, columnar.OpenOptions{Stats: stats})
		if err != nil {
			return nil, fmt.Errorf("codec floor: %w", err)
		}
		defer c.Close()
		cs[i] = c
	}
	m := cs[0].Manifest()
	w, err := columnar.Create(out, columnar.WriterOptions{
		Table: m.Table, Projection: m.Projection, ID: "floor",
		Schema: cs[0].Schema(), BlockRows: m.BlockRows, Stats: stats,
	})
	if err != nil {
		return nil, fmt.Errorf("codec floor: %w", err)
	}
	// WriteColumn and FinishColumn may run concurrently for different columns.
	cols := make(chan int)
	errs := make(chan error, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for col := range cols {
				if err := copyColumnOfAll(ctx, w, cs, col); err != nil {
					errs <- err
					for range cols { // drain, so the feeder finishes
					}
					return
				}
			}
		}()
	}
	for col := range cs[0].Schema().NumFields() {
		cols <- col
	}
	close(cols)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		w.Abort()
		return nil, fmt.Errorf("codec floor: %w", err)
	}
	if _, err := w.Commit(); err != nil {
		return nil, fmt.Errorf("codec floor: %w", err)
	}
	return stats, nil
}

// copyColumnOfAll copies column col of every container, in order, and
// finishes the column.
func copyColumnOfAll(ctx context.Context, w *columnar.Writer, cs []*columnar.Container, col int) error {
	for _, c := range cs {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := copyColumn(w, c, col); err != nil {
			return err
		}
	}
	return w.FinishColumn(col)
}

func copyColumn(w *columnar.Writer, c *columnar.Container, col int) error {
	r, err := c.OpenColumn(col)
	if err != nil {
		return err
	}
	defer r.Close()
	for {
		arr, err := r.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		err = w.WriteColumn(col, arr)
		arr.Release()
		if err != nil {
			return err
		}
	}
}
