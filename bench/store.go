package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/columnar/depot"
	"github.com/strata-db/strata/columnar/store"
	"github.com/strata-db/strata/internal/heaplimit"
	"github.com/strata-db/strata/merger"
	"github.com/strata-db/strata/windower"
	"github.com/strata-db/strata/windower/sqlparse"
	"github.com/strata-db/strata/windower/windowbench"
)

// The store suite: strata's containers in an object store. The inputs of
// a few mergeout and window cases are uploaded to an S3 server and read
// back three ways: from the local directories they were written to, from
// the store through an empty depot (cold), and through the depot the cold
// run filled (warm). The server is SeaweedFS (`weed mini`, a child process
// with its data in the suite's scratch directory) when the weed binary is
// there (--weed, default ../bin/weed, which `make local S3=1` builds),
// else gofakes3 in this process (in memory); either way over HTTP on
// 127.0.0.1, and the report says which.

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
	// ServerName is the S3 server's name (serverSeaweedFS or
	// serverGofakes3; empty in results of runs before it was recorded),
	// and Server describes it in a sentence of the report.
	ServerName string `json:",omitempty"`
	Server     string
	// CPUs are the server's and the job's when the server ran on CPUs
	// of its own (empty: they shared every core).
	CPUs    cpuSplit `json:",omitzero"`
	Repeats int
	// WindowRepeats are a window query's runs each way (0 in results of
	// runs before it: Repeats).
	WindowRepeats int `json:",omitempty"`
	Cases         []storeCase
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

// The S3 servers the store suite runs against.
const (
	serverSeaweedFS = "SeaweedFS"
	serverGofakes3  = "gofakes3"
)

// s3Server is the store suite's S3 server, with one bucket.
type s3Server struct {
	url  string // the store URL of the bucket
	name string // serverSeaweedFS or serverGofakes3
	desc string // the server, for the report
	cpus cpuSplit
	pid  int // weed's process; 0 for gofakes3
	stop func() error
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

// startS3Server sets the AWS environment of this process to s3Env and
// starts SeaweedFS's `weed mini` from the binary weed, its data under dir,
// if weed names an executable file; else (weed "", or not there) gofakes3
// in this process. A weed that does not start is logged, and gofakes3
// runs instead, the report saying why. serverCPUs (--store-server-cpus)
// says which CPUs weed runs on (planCPUs).
func startS3Server(ctx context.Context, log *slog.Logger, bucket, weed, dir, serverCPUs string) (*s3Server, error) {
	for _, kv := range s3Env {
		k, v, _ := strings.Cut(kv, "=")
		if err := os.Setenv(k, v); err != nil {
			return nil, err
		}
	}
	why := ""
	if weed != "" {
		if fi, err := os.Stat(weed); err != nil || !fi.Mode().IsRegular() || fi.Mode()&0o111 == 0 {
			log.Info("store suite: no SeaweedFS binary, running gofakes3", "weed", weed)
		} else {
			cpus, err := planCPUs(serverCPUs, true)
			if err != nil {
				return nil, err
			}
			srv, err := startWeed(ctx, log, weed, bucket, dir, cpus)
			if err == nil {
				return srv, nil
			}
			log.Error("store suite: SeaweedFS did not start, running gofakes3", "weed", weed, "err", err)
			why = fmt.Sprintf(" (%s did not start: %s)", weed, cell(err.Error()))
		}
	}
	if _, err := planCPUs(serverCPUs, false); err != nil {
		return nil, err
	}
	srv, err := startGofakes3(bucket)
	if srv != nil {
		srv.desc += why
	}
	return srv, err
}

// startGofakes3 starts gofakes3 with its in-memory backend on a loopback
// listener.
func startGofakes3(bucket string) (*s3Server, error) {
	backend := s3mem.New()
	if err := backend.CreateBucket(bucket); err != nil {
		return nil, fmt.Errorf("s3 server: create bucket %s: %w", bucket, err)
	}
	faker := gofakes3.New(backend, gofakes3.WithLogger(gofakes3.DiscardLog()))
	hs := httptest.NewServer(faker.Server())
	return &s3Server{
		url:  fmt.Sprintf("s3://%s?endpoint=%s&region=us-east-1", bucket, hs.URL),
		name: serverGofakes3,
		desc: "gofakes3 " + gofakes3Version + " (in-memory backend), in the bench's process over HTTP on 127.0.0.1",
		stop: func() error { hs.Close(); return nil },
	}, nil
}

// weedStartTimeout bounds how long `weed mini` may take to answer S3
// requests (about 4.5s here: its filer takes 3.2s).
const weedStartTimeout = 60 * time.Second

// startWeed starts `weed mini` with bucket, its data in a new directory
// under dir and every port it listens on a free one of 127.0.0.1 (one it
// picked by itself could be another server's), and returns once its S3
// port answers a listing of the bucket. Its output goes to a log file
// beside its data; stop ends its process group (SIGTERM, then SIGKILL
// after 15s) and removes both. With cpus.Server, weed runs on those CPUs.
func startWeed(ctx context.Context, log *slog.Logger, weed, bucket, dir string, cpus cpuSplit) (*s3Server, error) {
	version, err := exec.CommandContext(ctx, weed, "version").Output()
	if err != nil {
		return nil, fmt.Errorf("%s version: %w", weed, err)
	}
	wdir, err := os.MkdirTemp(dir, "seaweedfs-")
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(10)
	if err != nil {
		os.RemoveAll(wdir)
		return nil, err
	}
	logPath := filepath.Join(wdir, "weed.log")
	logf, err := os.Create(logPath)
	if err != nil {
		os.RemoveAll(wdir)
		return nil, err
	}
	data := filepath.Join(wdir, "data")
	if err := os.Mkdir(data, 0o755); err != nil {
		logf.Close()
		os.RemoveAll(wdir)
		return nil, err
	}
	cmd := exec.Command(weed, "mini", "-dir="+data, "-bucket="+bucket, "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
		fmt.Sprintf("-s3.port=%d", ports[0]), fmt.Sprintf("-s3.port.grpc=%d", ports[1]),
		fmt.Sprintf("-master.port=%d", ports[2]), fmt.Sprintf("-master.port.grpc=%d", ports[3]),
		fmt.Sprintf("-volume.port=%d", ports[4]), fmt.Sprintf("-volume.port.grpc=%d", ports[5]),
		fmt.Sprintf("-filer.port=%d", ports[6]), fmt.Sprintf("-filer.port.grpc=%d", ports[7]),
		fmt.Sprintf("-admin.port=%d", ports[8]), fmt.Sprintf("-admin.port.grpc=%d", ports[9]), "-admin.port.legacy=0",
		"-webdav=false", "-admin.ui=false", "-s3.port.iceberg=0", "-s3.port.lance=0", "-master.telemetry=false")
	cmd.Env = os.Environ() // with s3Env: weed mini makes them its admin identity
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := startOn(cmd, cpus.Server); err != nil {
		logf.Close()
		os.RemoveAll(wdir)
		return nil, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	pid := cmd.Process.Pid
	stop := func() error {
		syscall.Kill(-pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			syscall.Kill(-pid, syscall.SIGKILL)
			<-exited
		}
		logf.Close()
		return os.RemoveAll(wdir)
	}
	srv := &s3Server{
		url:  fmt.Sprintf("s3://%s?endpoint=http://127.0.0.1:%d&region=us-east-1", bucket, ports[0]),
		name: serverSeaweedFS,
		desc: fmt.Sprintf("SeaweedFS (`weed %s`), `weed mini` in a child process with its data on this machine's disk, over HTTP on 127.0.0.1",
			strings.Join(strings.Fields(strings.SplitN(string(version), "\n", 2)[0]), " ")),
		cpus: cpus,
		pid:  pid,
		stop: stop,
	}
	start := time.Now()
	for {
		lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := listBucket(lctx, srv.url)
		cancel()
		if err == nil {
			log.Info("store suite: SeaweedFS started", "weed", weed, "s3_port", ports[0], "seconds", time.Since(start).Seconds())
			return srv, nil
		}
		select {
		case werr := <-exited:
			exited <- werr // for stop
			stop()
			return nil, fmt.Errorf("weed mini exited (%v) before answering on its S3 port: %s", werr, tail(logPath, 400))
		case <-ctx.Done():
			stop()
			return nil, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
		if time.Since(start) > weedStartTimeout {
			stop()
			return nil, fmt.Errorf("weed mini did not answer on its S3 port within %s (last: %v): %s", weedStartTimeout, err, tail(logPath, 400))
		}
	}
}

// listBucket lists the store at url: an S3 server that answers it is up.
func listBucket(ctx context.Context, url string) error {
	st, err := store.Open(ctx, url)
	if err != nil {
		return err
	}
	defer st.Close()
	_, err = st.List(ctx, "")
	return err
}

// freePorts returns n distinct ports of 127.0.0.1 that are free now.
func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// tail is the last n bytes of the file at path, for an error.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return strings.TrimSpace(string(b))
}

func (s *s3Server) Close() error { return s.stop() }

// runStoreSuite runs the store suite, against SeaweedFS from the binary
// weed if it is there, else gofakes3 (startS3Server). When the server
// runs on CPUs of its own, the bench runs on the others until the suite
// ends, its local runs as much as its cold and warm ones.
func runStoreSuite(ctx context.Context, log *slog.Logger, sz sizes, dir, weed, serverCPUs string) (*storeSuite, error) {
	srv, err := startS3Server(ctx, log, "strata-bench", weed, dir, serverCPUs)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err := srv.Close(); err != nil {
			log.Warn("stop the S3 server", "server", srv.name, "err", err)
		}
	}()
	if len(srv.cpus.Job) > 0 {
		restore, err := bindProcess(srv.cpus.Job)
		if err != nil {
			return nil, err
		}
		defer func() {
			if err := restore(); err != nil {
				log.Warn("unbind the bench from the job's CPUs", "err", err)
			}
		}()
		log.Info("store suite: CPUs of its own", "server", formatCPUs(srv.cpus.Server), "job", formatCPUs(srv.cpus.Job))
	}
	st, err := store.Open(ctx, srv.url)
	if err != nil {
		return nil, fmt.Errorf("open the store: %w", err)
	}
	defer st.Close()
	log.Info("store suite", "server", srv.name, "url", srv.url)
	suite := &storeSuite{ServerName: srv.name, Server: srv.desc, CPUs: srv.cpus, Repeats: sz.StoreRepeats, WindowRepeats: sz.storeWindowRuns()}
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

// storeRun is one run of a case over its inputs, read through depot d
// (nil: from their directories); it returns the fetched blocks and bytes
// and the peak of the job's budget.
type storeRun func(ctx context.Context, srcs []columnar.Source, d *depot.Depot) (blocks, bytes, peak int64, err error)

// measureReads runs a case repeats times each way, local then cold then
// warm, keeping each way's fastest run. A cold run reads through a new,
// empty depot, which the warm run after it reads through again. With
// prefetch the depot fetches every column file in the background, as the
// merger asks it to (a window run asks for its query's columns itself).
func measureReads(ctx context.Context, log *slog.Logger, sz sizes, repeats int, st store.Store, tmp, name string, ins []storeInput, prefetch bool, grant int64, run storeRun) []storeRead {
	// The collector as the worker running run sets it, and its collection
	// after each job, timed with the run.
	collector, restoreCollector := heaplimit.Apply(grant)
	defer restoreCollector()
	inner := run
	run = func(ctx context.Context, srcs []columnar.Source, d *depot.Depot) (int64, int64, int64, error) {
		defer collector.Collect()
		return inner(ctx, srcs, d)
	}
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
	for range repeats {
		if ctx.Err() != nil {
			break
		}
		start := time.Now()
		var b, n, peak int64
		err := profiled(sz.ProfileDir, "store-"+name+"-"+readLocal, func() (err error) {
			b, n, peak, err = run(ctx, local, nil)
			return err
		})
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
			err := profiled(sz.ProfileDir, "store-"+name+"-"+storeReads[i], func() error {
				srcs, release, err := acquireInputs(ctx, d, ins, prefetch)
				if err == nil {
					b, n, peak, err = run(ctx, srcs, d)
					release()
				}
				return err
			})
			record(i, start, b, n, peak, err)
		}
		d.Close()
		if err := os.RemoveAll(ddir); err != nil {
			log.Warn("remove depot", "dir", ddir, "err", err)
		}
	}
	return reads
}

// acquireInputs returns the depot's sources of the inputs (acquired
// together, as the merger service acquires its inputs) and what releases
// them; with prefetch the depot fetches each one's files in the
// background.
func acquireInputs(ctx context.Context, d *depot.Depot, ins []storeInput, prefetch bool) ([]columnar.Source, func(), error) {
	ctx, cancel := context.WithCancel(ctx)
	refs := make([]depot.Ref, len(ins))
	for i, in := range ins {
		refs[i] = depot.Ref{Table: in.table, Projection: in.projection, ID: in.id}
	}
	srcs, release, err := d.AcquireAll(ctx, refs)
	if err != nil {
		cancel()
		return nil, nil, fmt.Errorf("acquire inputs: %w", err)
	}
	if prefetch {
		for _, src := range srcs {
			d.Prefetch(ctx, src)
		}
	}
	return srcs, func() { cancel(); release() }, nil
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
	c.Reads = measureReads(ctx, log, sz, sz.StoreRepeats, st, tmp, fmt.Sprintf("mergeout-w%d", width), ins, true, sz.StoreGrant, func(ctx context.Context, srcs []columnar.Source, _ *depot.Depot) (int64, int64, int64, error) {
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

// runStoreWindows measures storeQueries over the window suite's table.
// Through a depot, a run prefetches the columns its query reads once it is
// compiled (windower.Options.Prefetch), as the windower service does; no
// other column is fetched.
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
		cases[i].Reads = measureReads(ctx, log, sz, sz.storeWindowRuns(), st, tmp, "window-"+q.Name, ins, false, strataWindowGrant, func(ctx context.Context, srcs []columnar.Source, d *depot.Depot) (int64, int64, int64, error) {
			opts := windower.Options{Grant: strataWindowGrant, TempDir: tmp, Threads: runtime.GOMAXPROCS(0)}
			if d != nil {
				prefetch, stop := context.WithCancel(ctx)
				defer stop()
				opts.Prefetch = func(src columnar.Source, columns []string) { d.PrefetchColumns(prefetch, src, columns) }
			}
			res, err := windower.RunSources(ctx, wq, srcs, opts)
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
