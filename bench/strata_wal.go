package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/strata-db/strata/messages"
	"github.com/strata-db/strata/walwriter"
)

// walProducers is how many goroutines feed the WAL at once, as many
// concurrent NATS deliveries would.
const walProducers = 64

var walTable = walwriter.Table{Name: "u", Columns: []messages.RowType{
	messages.RowInt64,
	messages.RowInt64, messages.RowInt64, messages.RowInt64, messages.RowInt64,
	messages.RowText, messages.RowText, messages.RowText,
}}

// strataWALFigures are the walwriter's figures for one workload.
type strataWALFigures struct {
	bytesPerUpdate          float64
	fullImageBytesPerUpdate float64
	updatesPerSecond        float64
	fsyncs                  uint64
}

// walEncodeRow is the walwriter row of r: bigints as 8 bytes, texts as bytes.
func walEncodeRow(r walRow) walwriter.Row {
	row := make(walwriter.Row, 0, 8)
	row = append(row, binary.BigEndian.AppendUint64(nil, uint64(r.id)))
	for _, v := range r.ints {
		row = append(row, binary.BigEndian.AppendUint64(nil, uint64(v)))
	}
	return append(row, []byte(r.s1), []byte(r.s2), []byte(r.s3))
}

// strataRowBytes is the size of a row's full image: per value a length
// varint (one byte at these sizes) and the bytes.
func strataRowBytes(r walRow) int {
	n := 0
	for _, v := range walEncodeRow(r) {
		n += 1 + len(v)
	}
	return n
}

func walKey(id int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(id)) }

// strataWAL logs every row once (its first image, not counted), then the
// updates from walProducers goroutines (each key always from the same
// producer, so each key's versions stay in order), and reports the bytes the
// updates added.
func strataWAL(ctx context.Context, log *slog.Logger, dir string, rows []walRow, updates []walUpdate) (strataWALFigures, error) {
	var f strataWALFigures
	w, err := walwriter.Open(dir, walwriter.Options{Tables: []walwriter.Table{walTable}, Logger: log.With("component", "walwriter")})
	if err != nil {
		return f, err
	}
	defer w.Close()

	cur := make([]walwriter.Row, len(rows))
	load := make([]walwriter.Update, len(rows))
	for i, r := range rows {
		cur[i] = walEncodeRow(r)
		load[i] = walwriter.Update{EventID: fmt.Sprintf("load-%d", i), Table: walTable.Name, Key: walKey(r.id), Row: cur[i]}
	}
	if err := appendAll(ctx, w, [][]walwriter.Update{load}); err != nil {
		return f, fmt.Errorf("load rows: %w", err)
	}
	before := w.Stats()

	perProducer := make([][]walwriter.Update, walProducers)
	for i, u := range updates {
		row := walEncodeRow(u.row)
		p := u.key % walProducers
		perProducer[p] = append(perProducer[p], walwriter.Update{
			EventID: fmt.Sprintf("upd-%d", i), Table: walTable.Name, Key: walKey(u.row.id), Row: row, Old: cur[u.key],
		})
		cur[u.key] = row
	}
	start := time.Now()
	if err := appendAll(ctx, w, perProducer); err != nil {
		return f, fmt.Errorf("updates: %w", err)
	}
	elapsed := time.Since(start)
	after := w.Stats()
	n := float64(len(updates))
	f.bytesPerUpdate = float64(after.Bytes-before.Bytes) / n
	f.fullImageBytesPerUpdate = float64(after.FullImageBytes-before.FullImageBytes) / n
	f.updatesPerSecond = n / elapsed.Seconds()
	f.fsyncs = after.Fsyncs - before.Fsyncs
	if err := w.Close(); err != nil {
		return f, err
	}
	return f, nil
}

// appendAll appends each list from its own goroutine, at most inFlight
// records outstanding per goroutine, and waits until all are durable.
func appendAll(ctx context.Context, w *walwriter.WAL, lists [][]walwriter.Update) error {
	const inFlight = 256
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	setErr := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
	}
	for _, list := range lists {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem := make(chan struct{}, inFlight)
			var pending sync.WaitGroup
			for _, u := range list {
				if ctx.Err() != nil {
					setErr(ctx.Err())
					break
				}
				sem <- struct{}{}
				pending.Add(1)
				err := w.AppendAsync(u, func(_ walwriter.LSN, err error) {
					if err != nil {
						setErr(err)
					}
					<-sem
					pending.Done()
				})
				if err != nil {
					<-sem
					pending.Done()
					setErr(err)
					break
				}
			}
			pending.Wait()
		}()
	}
	wg.Wait()
	return firstErr
}
