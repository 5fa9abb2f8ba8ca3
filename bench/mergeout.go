package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/merger"
)

// mergeSuite is the outcome of the mergeout suite.
type mergeSuite struct {
	Containers, RowsPerContainer int
	Widths                       []int
	Grants                       []int64
	Repeats                      int
	Widthwise                    []mergeWidth
}

// mergeWidth holds one table width's cases.
type mergeWidth struct {
	Width    int
	BytesIn  int64 // uncompressed bytes of the K inputs
	DiskIn   int64 // bytes of the inputs' column files
	Floor    measure
	Cases    []mergeCase
	InputErr string // the inputs could not be made; no case ran
}

// mergeCase is one (width, grant) pair.
type mergeCase struct {
	Grant  int64
	Strata measure
	Stats  *merger.Stats // from the fastest strata run
	Duck   measure
}

func runMergeoutSuite(ctx context.Context, log *slog.Logger, sz sizes, dir string, p *peers) (*mergeSuite, error) {
	suite := &mergeSuite{
		Containers: sz.MergeContainers, RowsPerContainer: sz.MergeRows,
		Widths: sz.MergeWidths, Grants: sz.MergeGrants, Repeats: sz.MergeRepeats,
	}
	for _, width := range sz.MergeWidths {
		wdir := filepath.Join(dir, fmt.Sprintf("w%d", width))
		mw := runMergeWidth(ctx, log, sz, wdir, width, p)
		suite.Widthwise = append(suite.Widthwise, mw)
		if err := os.RemoveAll(wdir); err != nil {
			log.Warn("remove mergeout scratch", "dir", wdir, "err", err)
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	return suite, nil
}

func runMergeWidth(ctx context.Context, log *slog.Logger, sz sizes, wdir string, width int, p *peers) mergeWidth {
	mw := mergeWidth{Width: width}
	table := mergeTable{width: width, containers: sz.MergeContainers, rows: sz.MergeRows, seed: uint64(width)}
	start := time.Now()
	inputs, parquets, err := makeMergeInputs(table, wdir, &mw, true)
	if err != nil {
		mw.InputErr = err.Error()
		log.Error("mergeout inputs", "width", width, "err", err)
		return mw
	}
	log.Info("mergeout inputs written", "width", width, "containers", len(inputs), "raw_mib", mw.BytesIn/mib,
		"disk_mib", mw.DiskIn/mib, "seconds", time.Since(start).Seconds())

	out := filepath.Join(wdir, "out")
	// The floor runs under the collector of the suite's largest grant, the
	// one that collects least.
	floorGrant := int64(0)
	if len(sz.MergeGrants) > 0 {
		floorGrant = slices.Max(sz.MergeGrants)
	}
	mw.Floor = bestOfUnderGrant(ctx, floorGrant, sz.MergeRepeats, false, 0, func(ctx context.Context) error {
		defer os.RemoveAll(out)
		_, err := codecFloor(ctx, inputs, out)
		return err
	})
	log.Info("codec floor", "width", width, "seconds", mw.Floor.Seconds, "err", mw.Floor.Err)

	for _, grant := range sz.MergeGrants {
		mc := mergeCase{Grant: grant}
		mc.Strata = bestOfUnderGrant(ctx, grant, sz.MergeRepeats, false, 0, func(ctx context.Context) error {
			defer os.RemoveAll(out)
			var st *merger.Stats
			err := profiled(sz.ProfileDir, fmt.Sprintf("mergeout-w%d-%s", width, formatBytes(grant)), func() (err error) {
				st, err = strataMerge(ctx, log, inputs, out, filepath.Join(wdir, "tmp"), grant)
				return err
			})
			if err != nil {
				return err
			}
			if mc.Stats == nil || st.Duration < mc.Stats.Duration {
				mc.Stats = st
			}
			return nil
		})
		if mc.Stats != nil && mc.Stats.PeakBytes > grant {
			mc.Strata.Note = fmt.Sprintf("peak %d bytes over the grant", mc.Stats.PeakBytes)
		}
		if !p.duckOK() {
			mc.Duck = skipped(p.duckSkip)
		} else {
			mc.Duck = bestOf(ctx, sz.MergeRepeats, false, 0, func(ctx context.Context) error {
				return duckMerge(ctx, p, parquets, filepath.Join(wdir, "duck"), grant)
			})
		}
		log.Info("mergeout", "width", width, "grant_mib", grant/mib, "strata_s", mc.Strata.Seconds, "strata_err", mc.Strata.Err,
			"duckdb_s", mc.Duck.Seconds, "duckdb_err", mc.Duck.Err)
		mw.Cases = append(mw.Cases, mc)
		if ctx.Err() != nil {
			break
		}
	}
	return mw
}

// The names of the mergeout inputs: table, projection, and container i's ID.
const (
	mergeTableName  = "wide"
	mergeProjection = "by_k"
)

func mergeContainerID(i int) string { return fmt.Sprintf("c%04d", i) }

// makeMergeInputs writes the K inputs as strata containers and, with
// withParquet, as Parquet files with the same rows, for DuckDB. Inputs are
// written by a few goroutines at once: a container commit syncs every
// column file, so the writing waits on the disk far more than it computes.
func makeMergeInputs(t mergeTable, wdir string, mw *mergeWidth, withParquet bool) (containers, parquets []string, err error) {
	data := filepath.Join(wdir, "data")
	pqDir := filepath.Join(wdir, "parquet")
	if err := os.MkdirAll(pqDir, 0o755); err != nil {
		return nil, nil, err
	}
	key := columnar.SortKey{{Name: "k"}}
	containers = make([]string, t.containers)
	parquets = make([]string, t.containers)
	raw := make([]int64, t.containers)
	disk := make([]int64, t.containers)
	errs := make([]error, t.containers)
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(4, t.containers) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				rec := t.input(memory.DefaultAllocator, i)
				id := mergeContainerID(i)
				containers[i] = columnar.ContainerDir(data, mergeTableName, mergeProjection, id)
				parquets[i] = filepath.Join(pqDir, id+".parquet")
				raw[i] = uncompressedBytes(rec)
				m, err := writeContainer(containers[i], mergeTableName, mergeProjection, id, key, rec)
				if err == nil {
					disk[i] = m.CompressedBytes()
					if withParquet {
						err = writeParquetRecord(parquets[i], rec)
					}
				}
				rec.Release()
				if err != nil {
					errs[i] = fmt.Errorf("input %d of width %d: %w", i, t.width, err)
				}
			}
		}()
	}
	for i := range t.containers {
		next <- i
	}
	close(next)
	wg.Wait()
	for i := range t.containers {
		if errs[i] != nil {
			return nil, nil, errs[i]
		}
		mw.BytesIn += raw[i]
		mw.DiskIn += disk[i]
	}
	return containers, parquets, nil
}

// duckMerge has DuckDB produce the merged output: the same rows, sorted on
// the key, written as one LZ4 Parquet file, under memory_limit = grant, in a
// fresh database with all cores.
func duckMerge(ctx context.Context, p *peers, parquets []string, dir string, grant int64) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	d, err := openDuck(ctx, "")
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.setThreads(ctx, runtime.NumCPU()); err != nil {
		return err
	}
	if err := d.setMemory(ctx, grant, filepath.Join(dir, "spill")); err != nil {
		return err
	}
	out := filepath.Join(dir, "out.parquet")
	q := fmt.Sprintf("COPY (SELECT * FROM read_parquet(%s) ORDER BY k) TO %s (FORMAT parquet, COMPRESSION lz4_raw)",
		parquetList(parquets), sqlString(out))
	if err := d.exec(ctx, q); err != nil {
		return shortDuckError(err)
	}
	// strata's merge commits durably (fsync of its files and directory);
	// make DuckDB's output as durable, so both pay for it.
	return syncFile(out)
}

func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", path, err)
	}
	return nil
}

// shortDuckError keeps the first line of DuckDB's (long) out-of-memory text.
func shortDuckError(err error) error {
	s := err.Error()
	if i := strings.Index(s, "Out of Memory Error"); i >= 0 {
		s = s[i:]
		if j := strings.IndexByte(s, '\n'); j >= 0 {
			s = s[:j]
		}
		if len(s) > 200 {
			s = s[:200] + "..."
		}
		return fmt.Errorf("duckdb: %s", s)
	}
	return err
}
