package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/columnar/depot"
	"github.com/strata-db/strata/columnar/store"
	"github.com/strata-db/strata/merger"
	"github.com/strata-db/strata/windower"
	"github.com/strata-db/strata/windower/sqlparse"
	"github.com/strata-db/strata/windower/windowbench"
)

// The store suite: strata's containers in an object store. The inputs of
// a few mergeout and window cases are uploaded to an S3 server running in
// this process (gofakes3, in memory, over HTTP on 127.0.0.1) and read back
// three ways: from the local directories they were written to, from the
// store through an empty depot (cold), and through the depot the cold run
// filled (warm).

// How a store case read its inputs.
const (
	readLocal = "local" // from the directories the inputs were written to
	readCold  = "cold"  // from the store through an empty depot
	readWarm  = "warm"  // through the depot the cold run filled
)

var storeReads = []string{readLocal, readCold, readWarm}

// Kinds of store case.
const (
	storeMergeout = "mergeout"
	storeWindow   = "window"
)

// storeQueries are the window queries of the store suite: one on integers
// and one on a string column.
var storeQueries = []string{"rownum_rank", "first_value_s"}

// storeSuite is the outcome of the store suite.
type storeSuite struct {
	Server  string // what served the store
	Repeats int
	Cases   []storeCase
}

// storeCase is one mergeout width or window query, read every way.
type storeCase struct {
	Kind  string // storeMergeout or storeWindow
	Name  string // "100 columns", or the query's name
	Width int    `json:",omitempty"` // mergeout: columns
	// Containers and RowsPerContainer describe the inputs.
	Containers, RowsPerContainer int
	CompressedBytes              int64 // bytes of the inputs' column files
	Grant                        int64
	Reads                        []storeRead // in storeReads order
	Err                          string      // the case could not be set up; no read ran
}

// storeRead is one way of reading a case's inputs: its best run.
type storeRead struct {
	Read          string
	Time          measure
	BlocksFetched int64 // from the store, in the best run
	BytesFetched  int64
	PeakBytes     int64 // of the job's budget
}

// read returns the figures of read, if the case has them.
func (c storeCase) read(read string) (storeRead, bool) {
	for _, r := range c.Reads {
		if r.Read == read {
			return r, true
		}
	}
	return storeRead{}, false
}

// s3Server is an S3 server in this process with one bucket.
type s3Server struct {
	url string // the store URL of the bucket
	hs  *httptest.Server
}

// s3Env is the AWS environment the SDK reads: credentials the server
// accepts, and no shared files of the user running the bench.
var s3Env = []string{
	"AWS_ACCESS_KEY_ID=strata-bench",
	"AWS_SECRET_ACCESS_KEY=strata-bench-secret",
	"AWS_REGION=us-east-1",
	"AWS_CONFIG_FILE=/dev/null",
	"AWS_SHARED_CREDENTIALS_FILE=/dev/null",
	"AWS_EC2_METADATA_DISABLED=true",
}

// startS3Server starts gofakes3 with its in-memory backend on a loopback
// listener and sets the AWS environment of this process to reach it.
func startS3Server(bucket string) (*s3Server, error) {
	backend := s3mem.New()
	if err := backend.CreateBucket(bucket); err != nil {
		return nil, fmt.Errorf("s3 server: create bucket %s: %w", bucket, err)
	}
	faker := gofakes3.New(backend, gofakes3.WithLogger(gofakes3.DiscardLog()))
	for _, kv := range s3Env {
		k, v, _ := strings.Cut(kv, "=")
		if err := os.Setenv(k, v); err != nil {
			return nil, err
		}
	}
	hs := httptest.NewServer(faker.Server())
	return &s3Server{url: fmt.Sprintf("s3://%s?endpoint=%s&region=us-east-1", bucket, hs.URL), hs: hs}, nil
}

func (s *s3Server) Close() { s.hs.Close() }

func runStoreSuite(ctx context.Context, log *slog.Logger, sz sizes, dir string) (*storeSuite, error) {
	srv, err := startS3Server("strata-bench")
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	st, err := store.Open(ctx, srv.url)
	if err != nil {
		return nil, fmt.Errorf("open the store: %w", err)
	}
	defer st.Close()
	suite := &storeSuite{Server: "gofakes3 " + gofakes3Version + " (in-memory backend), in the bench's process over HTTP on 127.0.0.1", Repeats: sz.StoreRepeats}
	for _, width := range sz.StoreWidths {
		wdir := filepath.Join(dir, fmt.Sprintf("w%d", width))
		c := runStoreMerge(ctx, log, sz, st, wdir, width)
		suite.Cases = append(suite.Cases, c)
		if err := os.RemoveAll(wdir); err != nil {
			log.Warn("remove store scratch", "dir", wdir, "err", err)
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	suite.Cases = append(suite.Cases, runStoreWindows(ctx, log, sz, st, filepath.Join(dir, "windows"))...)
	return suite, ctx.Err()
}

// gofakes3Version is the server's module version, as go.mod requires it.
const gofakes3Version = "v1.2.0"

// storeInput is one input container of a case: its directory and names.
type storeInput struct {
	dir, table, projection, id string
}

// upload puts the inputs into the store, a few containers at a time (an
// upload waits on the server's replies more than it computes).
func upload(ctx context.Context, st store.Store, ins []storeInput) error {
	errs := make([]error, len(ins))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(4, len(ins)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				in := ins[i]
				if _, err := store.Upload(ctx, st, in.dir, in.table, in.projection, in.id); err != nil {
					errs[i] = fmt.Errorf("upload %s: %w", in.dir, err)
				}
			}
		}()
	}
	for i := range ins {
		next <- i
	}
	close(next)
	wg.Wait()
	return errors.Join(errs...)
}

// storeRun is one run of a case over its inputs; it returns the fetched
// blocks and bytes and the peak of the job's budget.
type storeRun func(ctx context.Context, srcs []columnar.Source) (blocks, bytes, peak int64, err error)

// measureReads runs a case repeats times each way, local then cold then
// warm, keeping each way's fastest run. A cold run reads through a new,
// empty depot, which the warm run after it reads through again. With
// prefetch the depot fetches every column file in the background, as the
// merger asks it to.
func measureReads(ctx context.Context, log *slog.Logger, sz sizes, st store.Store, tmp string, ins []storeInput, prefetch bool, run storeRun) []storeRead {
	reads := make([]storeRead, len(storeReads))
	for i, r := range storeReads {
		reads[i].Read = r
	}
	record := func(i int, start time.Time, blocks, bytes, peak int64, err error) {
		r := &reads[i]
		if r.Time.Err != "" {
			return
		}
		if err != nil {
			r.Time = failed(err)
			log.Error("store run", "read", r.Read, "err", err)
			return
		}
		s := time.Since(start).Seconds()
		if r.Time.Runs == 0 || s < r.Time.Seconds {
			r.Time.Seconds, r.BlocksFetched, r.BytesFetched, r.PeakBytes = s, blocks, bytes, peak
		}
		r.Time.Runs++
	}
	local := make([]columnar.Source, len(ins))
	for i, in := range ins {
		local[i] = columnar.DirSource(in.dir)
	}
	for range sz.StoreRepeats {
		if ctx.Err() != nil {
			break
		}
		start := time.Now()
		b, n, peak, err := run(ctx, local)
		record(0, start, b, n, peak, err)

		ddir, err := os.MkdirTemp(tmp, "depot-")
		if err != nil {
			record(1, time.Now(), 0, 0, 0, err)
			break
		}
		d, err := depot.Open(ddir, st, depot.Options{Logger: log.With("component", "depot")})
		if err != nil {
			os.RemoveAll(ddir)
			record(1, time.Now(), 0, 0, 0, err)
			break
		}
		for i := 1; i <= 2; i++ { // cold, then warm through the same depot
			start := time.Now()
			srcs, release, err := acquireInputs(ctx, d, ins, prefetch)
			if err == nil {
				b, n, peak, err = run(ctx, srcs)
				release()
			}
			record(i, start, b, n, peak, err)
		}
		d.Close()
		if err := os.RemoveAll(ddir); err != nil {
			log.Warn("remove depot", "dir", ddir, "err", err)
		}
	}
	return reads
}

// acquireInputs returns the depot's sources of the inputs and what
// releases them; with prefetch the depot fetches each one's files in the
// background.
func acquireInputs(ctx context.Context, d *depot.Depot, ins []storeInput, prefetch bool) ([]columnar.Source, func(), error) {
	ctx, cancel := context.WithCancel(ctx)
	releases := []func(){cancel}
	release := func() {
		for _, r := range releases {
			r()
		}
	}
	srcs := make([]columnar.Source, 0, len(ins))
	for _, in := range ins {
		src, rel, err := d.Acquire(ctx, in.table, in.projection, in.id)
		if err != nil {
			release()
			return nil, nil, fmt.Errorf("acquire %s/%s/%s: %w", in.table, in.projection, in.id, err)
		}
		srcs = append(srcs, src)
		releases = append(releases, rel)
		if prefetch {
			d.Prefetch(ctx, src)
		}
	}
	return srcs, release, nil
}

// runStoreMerge measures one mergeout width: the mergeout suite's inputs
// (StoreContainers of StoreRows rows), merged within StoreGrant.
func runStoreMerge(ctx context.Context, log *slog.Logger, sz sizes, st store.Store, wdir string, width int) storeCase {
	c := storeCase{Kind: storeMergeout, Name: fmt.Sprintf("%d columns", width), Width: width,
		Containers: sz.StoreContainers, RowsPerContainer: sz.StoreRows, Grant: sz.StoreGrant}
	table := mergeTable{width: width, containers: sz.StoreContainers, rows: sz.StoreRows, seed: uint64(width)}
	var mw mergeWidth
	start := time.Now()
	dirs, _, err := makeMergeInputs(table, wdir, &mw, false)
	if err != nil {
		c.Err = err.Error()
		log.Error("store inputs", "width", width, "err", err)
		return c
	}
	c.CompressedBytes = mw.DiskIn
	ins := make([]storeInput, len(dirs))
	for i, d := range dirs {
		ins[i] = storeInput{dir: d, table: mergeTableName, projection: mergeProjection, id: mergeContainerID(i)}
	}
	if err := upload(ctx, st, ins); err != nil {
		c.Err = err.Error()
		return c
	}
	// The next width's inputs have the same names.
	defer func() {
		if err := st.DeletePrefix(context.WithoutCancel(ctx), mergeTableName+"/"); err != nil {
			log.Warn("remove store inputs", "width", width, "err", err)
		}
	}()
	log.Info("store inputs uploaded", "width", width, "containers", len(ins), "disk_mib", mw.DiskIn/mib, "seconds", time.Since(start).Seconds())
	out, tmp := filepath.Join(wdir, "out"), filepath.Join(wdir, "tmp")
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		c.Err = err.Error()
		return c
	}
	c.Reads = measureReads(ctx, log, sz, st, tmp, ins, true, func(ctx context.Context, srcs []columnar.Source) (int64, int64, int64, error) {
		defer os.RemoveAll(out)
		ms, err := merger.MergeSources(ctx, srcs, out, merger.Options{Grant: sz.StoreGrant, TempDir: tmp, Logger: log.With("component", "merger")})
		if err != nil {
			return 0, 0, 0, err
		}
		return ms.BlocksFetched, ms.BytesFetched, ms.PeakBytes, nil
	})
	for _, r := range c.Reads {
		log.Info("store mergeout", "width", width, "read", r.Read, "seconds", r.Time.Seconds, "fetched_mib", r.BytesFetched/mib, "err", r.Time.Err)
	}
	return c
}

// runStoreWindows measures storeQueries over the window suite's table,
// without prefetch: the windower reads only the columns a query needs.
func runStoreWindows(ctx context.Context, log *slog.Logger, sz sizes, st store.Store, dir string) []storeCase {
	var queries []windowQuery
	for _, q := range windowQueries() {
		for _, name := range storeQueries {
			if q.Name == name {
				queries = append(queries, q)
			}
		}
	}
	cases := make([]storeCase, len(queries))
	for i, q := range queries {
		cases[i] = storeCase{Kind: storeWindow, Name: q.Name, Containers: 1, RowsPerContainer: sz.StoreWindowRows, Grant: strataWindowGrant}
	}
	fail := func(err error) []storeCase {
		for i := range cases {
			cases[i].Err = err.Error()
		}
		log.Error("store windows", "err", err)
		return cases
	}
	data := windowbench.Generate(sz.StoreWindowRows, sz.WindowGroups, 20260101)
	tmp := filepath.Join(dir, "tmp")
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return fail(err)
	}
	// The queries read table w, stored in id order.
	const projection, id = "by_id", "c0001"
	cdir := columnar.ContainerDir(filepath.Join(dir, "data"), windowbench.TableByID, projection, id)
	opts := columnar.WriterOptions{Table: windowbench.TableByID, Projection: projection, ID: id, SortKey: columnar.SortKey{{Name: "id"}}}
	m, err := data.WriteContainer(cdir, opts, data.OrderBy(data.ID))
	if err != nil {
		return fail(fmt.Errorf("window input: %w", err))
	}
	ins := []storeInput{{dir: cdir, table: windowbench.TableByID, projection: projection, id: id}}
	if err := upload(ctx, st, ins); err != nil {
		return fail(err)
	}
	for i, q := range queries {
		cases[i].CompressedBytes = m.CompressedBytes()
		wq, err := sqlparse.Parse(q.Text())
		if err != nil {
			cases[i].Err = err.Error()
			continue
		}
		cases[i].Reads = measureReads(ctx, log, sz, st, tmp, ins, false, func(ctx context.Context, srcs []columnar.Source) (int64, int64, int64, error) {
			res, err := windower.RunSources(ctx, wq, srcs, windower.Options{Grant: strataWindowGrant, TempDir: tmp, Threads: runtime.NumCPU()})
			if err != nil {
				return 0, 0, 0, err
			}
			defer res.Close()
			for {
				rec, err := res.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					return 0, 0, 0, err
				}
				rec.Release()
			}
			ws := res.Stats()
			return ws.BlocksFetched, ws.BytesFetched, ws.PeakBytes, nil
		})
		for _, r := range cases[i].Reads {
			log.Info("store window", "query", q.Name, "read", r.Read, "seconds", r.Time.Seconds, "fetched_mib", r.BytesFetched/mib, "err", r.Time.Err)
		}
	}
	return cases
}
