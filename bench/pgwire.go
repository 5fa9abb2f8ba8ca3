package main

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/jackc/pgx/v5"
	"github.com/strata-db/strata/columnar"
)

// The pgwire suite: the SQL front door's two figures of the issue that
// made it (the PostgreSQL wire protocol), on a deployment of strata's own
// binaries as processes (the scheduler with its embedded NATS, a windower
// and pgwire), against the bench's PostgreSQL 15 cluster holding the same
// rows:
//
//   - throughput: psycopg 3 (pgwire_stream.py, text results,
//     cursor.stream()) reading pgwireStreamQuery's rows from pgwire and
//     from PostgreSQL, in pairs, each result's count and checksum compared;
//   - latency: pgwireSmallQuery through pgx (simple protocol) against
//     pgwire, the window jobs' own time from `strata ops`, and the same
//     query through pgx to PostgreSQL over its unix socket.

const (
	pgwireStreamQuery = `SELECT k0, c001_utf8, row_number() OVER (ORDER BY k0) AS rn FROM big`
	pgwireSmallQuery  = `SELECT k0, c001_utf8, rank() OVER (PARTITION BY k0 % 4 ORDER BY k0) AS r FROM small WHERE k0 < 40`
	pgwireSmallRows   = 10_000
	pgwireContainers  = 10
)

// System names of the suite.
const (
	sysPgwire    = "strata through pgwire"
	sysPgwireJob = "strata's window job"
)

//go:embed pgwire_stream.py
var pgwireStreamScript []byte

// pgwireOptions are the suite's command-line settings.
type pgwireOptions struct {
	rows        int    // rows of table big
	bin         string // strata's binaries
	python      string // the interpreter psycopg is installed for
	repeats     int    // throughput pairs
	latencyRuns int    // small queries per system
	limit       time.Duration
}

func (po *pgwireOptions) register(fs *flag.FlagSet) {
	fs.Func("pgwire-rows", "rows of the pgwire suite's streamed table, a multiple of 10 (default 2000000; 200000 with --quick; the issue's figure is 10000000)", func(v string) error {
		n, err := strconv.Atoi(strings.ReplaceAll(v, "_", ""))
		if err != nil || n < 1000 || n%pgwireContainers != 0 {
			return fmt.Errorf("%q is not a row count of at least 1000 and a multiple of %d", v, pgwireContainers)
		}
		po.rows = n
		return nil
	})
	fs.StringVar(&po.bin, "pgwire-bin", filepath.Join("..", "bin"), "directory of strata's binaries the pgwire suite deploys (scheduler, windower, pgwire, strata; `make build`)")
	fs.StringVar(&po.python, "pgwire-python", "/usr/bin/python3", "Python with psycopg 3 (Debian's python3-psycopg) for the pgwire suite's throughput")
	fs.IntVar(&po.repeats, "pgwire-repeats", 0, "throughput runs per system of the pgwire suite, in pairs (default 3; 2 with --quick)")
	fs.IntVar(&po.latencyRuns, "pgwire-runs", 0, "small queries per system of the pgwire suite (default 100; 30 with --quick)")
	fs.DurationVar(&po.limit, "pgwire-limit", 30*time.Minute, "time limit of one throughput run of the pgwire suite")
}

// finish applies the mode's defaults once the flags are parsed.
func (po *pgwireOptions) finish(o *options) error {
	if po.rows == 0 {
		po.rows = 2_000_000
		if o.quick {
			po.rows = 200_000
		}
	}
	if po.repeats == 0 {
		po.repeats = 3
		if o.quick {
			po.repeats = 2
		}
	}
	if po.latencyRuns == 0 {
		po.latencyRuns = 100
		if o.quick {
			po.latencyRuns = 30
		}
	}
	if po.repeats < 1 || po.latencyRuns < 1 {
		return fmt.Errorf("--pgwire-repeats and --pgwire-runs must be at least 1")
	}
	return nil
}

// args are the suite's flags that differ from the mode's defaults, for
// the command line in the report.
func (po *pgwireOptions) args(o options) string {
	var b strings.Builder
	def := pgwireOptions{}
	def.finish(&options{quick: o.quick})
	if po.rows != def.rows {
		fmt.Fprintf(&b, " --pgwire-rows %d", po.rows)
	}
	if po.repeats != def.repeats {
		fmt.Fprintf(&b, " --pgwire-repeats %d", po.repeats)
	}
	if po.latencyRuns != def.latencyRuns {
		fmt.Fprintf(&b, " --pgwire-runs %d", po.latencyRuns)
	}
	return b.String()
}

// pgwireSuite is what the suite measured.
type pgwireSuite struct {
	Rows, SmallRows int
	StreamQuery     string
	SmallQuery      string
	Client          string // psycopg and Python versions
	Deployment      string // what ran, for the report
	ValueBytes      int64  // bytes of the streamed result's values as text
	// Stream holds the throughput runs in the order they ran, pairs of
	// strata through pgwire and PostgreSQL (the order alternating).
	Stream []pgwireStream
	// Latency: the small query's times in milliseconds per system
	// (sysPgwire, sysPgwireJob, sysPostgres).
	Latency map[string]pgwireLatency
	Err     string `json:",omitempty"` // the deployment or the data failed
	Skipped string `json:",omitempty"` // PostgreSQL or strata's binaries are not there
}

// pgwireStream is one throughput run.
type pgwireStream struct {
	System    string
	Pair      int
	Seconds   float64 // the query sent to its last row read
	FirstRow  float64 // to its first row
	JobSecond float64 `json:",omitempty"` // strata: the window job's own time (strata ops)
	// ServerCPU is the CPU seconds of the server's processes during the
	// run: pgwire and the windower for strata, the connection's backend
	// for PostgreSQL; ClientCPU the Python process's.
	ServerCPU float64 `json:",omitempty"`
	ClientCPU float64 `json:",omitempty"`
	ClientSys float64 `json:",omitempty"` // of ClientCPU, in the kernel (the socket's reads)
	Sum       pgwireSum
	Load      float64 // 1-minute load average as the run started
	Err       string  `json:",omitempty"`
}

// pgwireSum is pgwire_stream.py's checksum of (k0, s, rn) rows, the same
// whatever the rows' order and whichever of tied rows gets which rn.
type pgwireSum struct {
	Rows   int64  `json:"rows"`
	SumK0  int64  `json:"sum_k0"`
	SumRN  int64  `json:"sum_rn"`
	Nulls  int64  `json:"nulls"`
	Chars  int64  `json:"chars"`
	Hash   uint64 `json:"hash"`
	Client string `json:"client,omitempty"`
}

func (s pgwireSum) equal(o pgwireSum) bool {
	s.Client, o.Client = "", ""
	return s == o
}

// pgwireLatency is one system's small queries.
type pgwireLatency struct {
	Runs              int
	P50, Min, P90     float64 // milliseconds
	Rows              int
	Load              float64
	Err               string `json:",omitempty"`
	Skipped           string `json:",omitempty"`
	LoadEnd           float64
	MillisecondsByRun []float64 `json:",omitempty"`
}

func (l pgwireLatency) ok() bool { return l.Err == "" && l.Skipped == "" && l.Runs > 0 }

func runPgwireSuite(ctx context.Context, log *slog.Logger, o options, dir string, peers *peers) (*pgwireSuite, error) {
	po := o.pgwire
	s := &pgwireSuite{Rows: po.rows, SmallRows: pgwireSmallRows, StreamQuery: pgwireStreamQuery, SmallQuery: pgwireSmallQuery,
		Latency: map[string]pgwireLatency{}}
	if !peers.pgOK() {
		s.Skipped = "PostgreSQL is not running: " + peers.pgSkip
		return s, nil
	}
	if err := haveBinaries(po.bin); err != nil {
		s.Skipped = err.Error()
		log.Warn("pgwire suite skipped", "err", err)
		return s, nil
	}
	d, err := startDeployment(ctx, log, po.bin, filepath.Join(dir, "strata"))
	if err != nil {
		s.Err = err.Error()
		return s, nil
	}
	defer d.stop()
	s.Deployment = d.describe()
	if err := s.load(ctx, log, d, peers.pg); err != nil {
		s.Err = err.Error()
		d.logTail(log)
		return s, nil
	}
	script := filepath.Join(dir, "pgwire_stream.py")
	if err := os.WriteFile(script, pgwireStreamScript, 0o644); err != nil {
		return nil, err
	}
	clients := map[string]string{
		sysPgwire:   fmt.Sprintf("host=127.0.0.1 port=%d user=strata dbname=strata sslmode=disable password=%s", d.pgPort, d.password),
		sysPostgres: fmt.Sprintf("host=%s port=%d user=postgres dbname=postgres sslmode=disable", peers.pg.dir, pgPort),
	}
	for pair := range po.repeats {
		order := []string{sysPgwire, sysPostgres}
		if pair%2 == 1 {
			slices.Reverse(order)
		}
		for _, sys := range order {
			run := pgwireStream{System: sys, Pair: pair, Load: loadAverage()}
			started := time.Now()
			cpu0 := d.cpuSeconds()
			err := streamRun(ctx, po, script, clients[sys], sys == sysPostgres, &run)
			if err != nil {
				run.Err = err.Error()
			} else if s.Client == "" {
				s.Client = run.Sum.Client
			}
			if sys == sysPgwire && err == nil {
				run.ServerCPU = d.cpuSeconds() - cpu0
				if jobs, err := d.windowJobs(ctx, "big", started); err != nil {
					log.Warn("pgwire: the job's time", "err", err)
				} else if len(jobs) > 0 {
					run.JobSecond = jobs[len(jobs)-1]
				}
			}
			log.Info("pgwire stream", "system", sys, "pair", pair, "seconds", run.Seconds, "first_row", run.FirstRow,
				"job", run.JobSecond, "server_cpu", run.ServerCPU, "client_cpu", run.ClientCPU, "client_sys", run.ClientSys, "rows", run.Sum.Rows, "load", run.Load, "err", run.Err)
			s.Stream = append(s.Stream, run)
			if ctx.Err() != nil {
				return s, ctx.Err()
			}
		}
	}
	s.measureLatency(ctx, log, po.latencyRuns, d, peers.pg)
	return s, nil
}

// load writes big and small with strata load, and the same rows, read
// from strata's containers, into PostgreSQL.
func (s *pgwireSuite) load(ctx context.Context, log *slog.Logger, d *deployment, pg *pgCluster) error {
	start := time.Now()
	if err := d.cli(ctx, "load", "--table", "big", "--columns", "2", "--containers", strconv.Itoa(pgwireContainers), "--rows", strconv.Itoa(s.Rows/pgwireContainers)); err != nil {
		return err
	}
	if err := d.cli(ctx, "load", "--table", "small", "--columns", "2", "--containers", "1", "--rows", strconv.Itoa(pgwireSmallRows)); err != nil {
		return err
	}
	log.Info("pgwire: strata loaded", "rows", s.Rows, "seconds", time.Since(start).Seconds())
	start = time.Now()
	conn, err := pg.connect(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	for _, t := range []string{"big", "small"} {
		if err := pgExecAll(ctx, conn, "DROP TABLE IF EXISTS "+t, "CREATE TABLE "+t+" (k0 bigint, c001_utf8 text)"); err != nil {
			return err
		}
		src, err := openStrataRows(filepath.Join(d.data, t))
		if err != nil {
			return err
		}
		n, err := conn.CopyFrom(ctx, pgx.Identifier{t}, []string{"k0", "c001_utf8"}, src)
		src.close()
		if err == nil {
			err = src.err
		}
		if err != nil {
			return fmt.Errorf("copy %s into PostgreSQL: %w", t, err)
		}
		want := s.Rows
		if t == "small" {
			want = pgwireSmallRows
		} else {
			s.ValueBytes = src.textBytes + digitsUpTo(int64(n))
		}
		if n != int64(want) {
			return fmt.Errorf("copied %d rows of %s into PostgreSQL, want %d", n, t, want)
		}
		if err := pgExecAll(ctx, conn, "VACUUM ANALYZE "+t); err != nil {
			return err
		}
	}
	log.Info("pgwire: PostgreSQL loaded", "seconds", time.Since(start).Seconds())
	return nil
}

// digitsUpTo is the bytes of 1..n in decimal: rn's text.
func digitsUpTo(n int64) int64 {
	total, width := int64(0), int64(1)
	for lo := int64(1); lo <= n; lo, width = lo*10, width+1 {
		hi := min(n, lo*10-1)
		total += (hi - lo + 1) * width
	}
	return total
}

// strataRows is a pgx.CopyFromSource over the (k0, c001_utf8) rows of a
// table's containers as strata load wrote them.
type strataRows struct {
	dirs      []string
	ct        *columnar.Container
	br        *columnar.BatchReader
	rec       arrow.RecordBatch
	row       int
	vals      []any
	err       error
	textBytes int64 // of k0 and c001_utf8 as text
}

func openStrataRows(tableDir string) (*strataRows, error) {
	dirs, err := filepath.Glob(filepath.Join(tableDir, "*", "*", "manifest.json"))
	if err != nil || len(dirs) == 0 {
		return nil, fmt.Errorf("no containers under %s (%v)", tableDir, err)
	}
	for i := range dirs {
		dirs[i] = filepath.Dir(dirs[i])
	}
	slices.Sort(dirs)
	return &strataRows{dirs: dirs, vals: make([]any, 2)}, nil
}

func (r *strataRows) Next() bool {
	for {
		if r.err != nil {
			return false
		}
		if r.rec != nil && r.row < int(r.rec.NumRows()) {
			k := r.rec.Column(0).(*array.Int64)
			r.vals[0] = k.Value(r.row)
			r.textBytes += int64(len(strconv.AppendInt(nil, k.Value(r.row), 10)))
			if c := r.rec.Column(1).(*array.String); c.IsNull(r.row) {
				r.vals[1] = nil
			} else {
				v := c.Value(r.row)
				r.vals[1] = v
				r.textBytes += int64(len(v))
			}
			r.row++
			return true
		}
		if r.rec != nil {
			r.rec.Release()
			r.rec = nil
		}
		if r.br != nil {
			rec, err := r.br.Next()
			if errors.Is(err, io.EOF) {
				r.br.Close()
				r.br = nil
				continue
			}
			if err != nil {
				r.err = err
				return false
			}
			if _, ok := rec.Column(0).(*array.Int64); !ok {
				r.err = fmt.Errorf("%s: k0 is %s, want int64", r.ct.Dir(), rec.Column(0).DataType())
				return false
			}
			if _, ok := rec.Column(1).(*array.String); !ok {
				r.err = fmt.Errorf("%s: c001_utf8 is %s, want utf8", r.ct.Dir(), rec.Column(1).DataType())
				return false
			}
			r.rec, r.row = rec, 0
			continue
		}
		if len(r.dirs) == 0 {
			return false
		}
		ct, err := columnar.Open(r.dirs[0], columnar.OpenOptions{})
		if err != nil {
			r.err = err
			return false
		}
		r.dirs = r.dirs[1:]
		r.ct = ct
		if r.br, err = ct.OpenColumns([]int{ct.Schema().FieldIndices("k0")[0], ct.Schema().FieldIndices("c001_utf8")[0]}); err != nil {
			r.err = err
			return false
		}
	}
}

func (r *strataRows) Values() ([]any, error) { return r.vals, nil }
func (r *strataRows) Err() error             { return r.err }

func (r *strataRows) close() {
	if r.rec != nil {
		r.rec.Release()
		r.rec = nil
	}
	if r.br != nil {
		r.br.Close()
		r.br = nil
	}
}

// streamRun runs pgwire_stream.py once against conninfo, filling run's
// figures (serverCPU: the script reads the backend's CPU time).
func streamRun(ctx context.Context, po pgwireOptions, script, conninfo string, serverCPU bool, run *pgwireStream) error {
	rctx, cancel := context.WithTimeout(ctx, po.limit)
	defer cancel()
	args := []string{script, conninfo, pgwireStreamQuery}
	if serverCPU {
		args = append(args, "--server-cpu")
	}
	cmd := exec.CommandContext(rctx, po.python, args...)
	cmd.Env = append(os.Environ(), "PYTHONHASHSEED=0")
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		if rctx.Err() != nil && ctx.Err() == nil {
			return fmt.Errorf("stopped after %s", po.limit)
		}
		return fmt.Errorf("%s: %w: %s", filepath.Base(script), err, strings.TrimSpace(lastLines(stderr.String(), 4)))
	}
	var res struct {
		pgwireSum
		Seconds   float64 `json:"seconds"`
		FirstRow  float64 `json:"first_row"`
		ServerCPU float64 `json:"server_cpu"`
		ClientCPU float64 `json:"client_cpu"`
		ClientSys float64 `json:"client_sys"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(out.Bytes()), &res); err != nil {
		return fmt.Errorf("%s printed %q: %w", filepath.Base(script), out.String(), err)
	}
	run.Sum, run.Seconds, run.FirstRow, run.ServerCPU, run.ClientCPU, run.ClientSys = res.pgwireSum, res.Seconds, res.FirstRow, res.ServerCPU, res.ClientCPU, res.ClientSys
	return nil
}

// measureLatency times the small query: through pgwire, the jobs those
// queries made, and PostgreSQL.
func (s *pgwireSuite) measureLatency(ctx context.Context, log *slog.Logger, runs int, d *deployment, pg *pgCluster) {
	conns := map[string]string{
		sysPgwire:   fmt.Sprintf("postgres://strata:%s@127.0.0.1:%d/strata?sslmode=disable", url.QueryEscape(d.password), d.pgPort),
		sysPostgres: pg.connString(),
	}
	for _, sys := range []string{sysPgwire, sysPostgres} {
		lat := pgwireLatency{Load: loadAverage()}
		started := time.Now()
		ms, rows, err := timeSmallQuery(ctx, conns[sys], runs)
		lat.LoadEnd = loadAverage()
		if err != nil {
			lat.Err = err.Error()
		} else {
			lat.setRuns(ms)
			lat.Rows = rows
		}
		s.Latency[sys] = lat
		log.Info("pgwire latency", "system", sys, "p50_ms", lat.P50, "min_ms", lat.Min, "err", lat.Err)
		if sys != sysPgwire || err != nil {
			continue
		}
		job := pgwireLatency{Load: lat.Load, LoadEnd: lat.LoadEnd, Rows: rows}
		if secs, err := d.windowJobs(ctx, "small", started); err != nil {
			job.Err = err.Error()
		} else if len(secs) < runs {
			job.Err = fmt.Sprintf("strata ops shows %d window jobs on small since the queries started, want %d", len(secs), runs)
		} else {
			secs = secs[len(secs)-runs:] // the untimed queries' jobs ended first
			ms := make([]float64, len(secs))
			for i, v := range secs {
				ms[i] = v * 1000
			}
			job.setRuns(ms)
		}
		s.Latency[sysPgwireJob] = job
		log.Info("pgwire latency", "system", sysPgwireJob, "p50_ms", job.P50, "err", job.Err)
	}
}

func (l *pgwireLatency) setRuns(ms []float64) {
	l.MillisecondsByRun = ms
	sorted := slices.Clone(ms)
	slices.Sort(sorted)
	l.Runs = len(ms)
	l.Min = sorted[0]
	l.P50 = sorted[len(sorted)/2]
	l.P90 = sorted[len(sorted)*9/10]
}

// timeSmallQuery runs the small query on one connection (pgx, the
// simple protocol, every row read): three untimed, then runs timed.
func timeSmallQuery(ctx context.Context, connString string, runs int) ([]float64, int, error) {
	conn, err := pgx.Connect(ctx, connString)
	if err != nil {
		return nil, 0, err
	}
	defer conn.Close(ctx)
	want := -1
	ms := make([]float64, 0, runs)
	for i := range runs + 3 {
		start := time.Now()
		rows, err := conn.Query(ctx, pgwireSmallQuery, pgx.QueryExecModeSimpleProtocol)
		if err != nil {
			return nil, 0, err
		}
		n := 0
		for rows.Next() {
			n++
		}
		if err := rows.Err(); err != nil {
			return nil, 0, err
		}
		elapsed := time.Since(start)
		if want < 0 {
			want = n
		}
		if n != want || n == 0 {
			return nil, 0, fmt.Errorf("%d rows, want %d", n, want)
		}
		if i >= 3 {
			ms = append(ms, float64(elapsed)/float64(time.Millisecond))
		}
	}
	return ms, want, nil
}

// deployment is strata's services as processes from --pgwire-bin: the
// scheduler with its embedded NATS server, one windower and one pgwire.
type deployment struct {
	log      *slog.Logger
	bin      string
	dir      string // data and logs
	data     string
	nats     string
	pgPort   int
	password string
	procs    []*service
	logs     []string
}

func startDeployment(ctx context.Context, log *slog.Logger, bin, dir string) (*deployment, error) {
	bin, err := filepath.Abs(bin)
	if err != nil {
		return nil, err
	}
	if err := haveBinaries(bin); err != nil {
		return nil, err
	}
	d := &deployment{log: log, bin: bin, dir: dir, data: filepath.Join(dir, "data")}
	if err := os.MkdirAll(d.data, 0o755); err != nil {
		return nil, err
	}
	natsAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	d.nats = "nats://" + natsAddr
	pgAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	_, port, _ := net.SplitHostPort(pgAddr)
	d.pgPort, _ = strconv.Atoi(port)
	ok := false
	defer func() {
		if !ok {
			d.logTail(log)
			d.stop()
		}
	}()
	if err := d.start(ctx, "scheduler", "--data", d.data, "--listen", natsAddr); err != nil {
		return nil, err
	}
	common := []string{"--nats", d.nats, "--data", d.data}
	if err := d.start(ctx, "windower", append(common, "--memory", "2GiB", "--worker", "windower-1")...); err != nil {
		return nil, err
	}
	if err := d.start(ctx, "pgwire", append(common, "--pg-listen", pgAddr)...); err != nil {
		return nil, err
	}
	pw, err := os.ReadFile(filepath.Join(d.data, "pg-auth", "strata.password"))
	if err != nil {
		return nil, fmt.Errorf("pgwire's password: %w", err)
	}
	d.password = strings.TrimSpace(string(pw))
	ok = true
	return d, nil
}

// cpuSeconds is the CPU time the windower and pgwire have used (utime
// and stime from /proc; 0 where it cannot be read).
func (d *deployment) cpuSeconds() float64 {
	total := 0.0
	for _, p := range d.procs {
		if p.name != "windower" && p.name != "pgwire" {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
		if err != nil {
			return 0
		}
		total += procCPU(string(b))
	}
	return total
}

// procCPU reads utime + stime from a /proc/PID/stat line, in seconds
// (clock ticks of 1/100 s, Linux's USER_HZ).
func procCPU(stat string) float64 {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(stat[i+1:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseFloat(f[11], 64)
	s, _ := strconv.ParseFloat(f[12], 64)
	return (u + s) / 100
}

// service is one of the deployment's processes.
type service struct {
	name   string
	cmd    *exec.Cmd
	exited chan struct{} // closed once it has been waited for
}

// haveBinaries says which of the deployment's binaries is not in bin.
func haveBinaries(bin string) error {
	for _, b := range []string{"scheduler", "windower", "pgwire", "strata"} {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			return fmt.Errorf("%s is not built in %s (make build)", b, bin)
		}
	}
	return nil
}

func (d *deployment) describe() string {
	return "`scheduler` (its embedded NATS), `windower --memory 2GiB`, `pgwire`, on 127.0.0.1, from " + d.bin
}

// start runs a service and waits for its /healthz.
func (d *deployment) start(ctx context.Context, name string, args ...string) error {
	httpAddr, err := freeAddr()
	if err != nil {
		return err
	}
	logPath := filepath.Join(d.dir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return err
	}
	cmd := exec.Command(filepath.Join(d.bin, name), append(args, "--http", httpAddr)...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // Ctrl-C reaches the bench, which stops them in order
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("start %s: %w", name, err)
	}
	f.Close()
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	d.procs = append(d.procs, &service{name: name, cmd: cmd, exited: exited})
	d.logs = append(d.logs, logPath)
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return fmt.Errorf("%s exited at start: %s", name, lastLines(readFile(logPath), 6))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if resp, err := http.Get("http://" + httpAddr + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
	}
	return fmt.Errorf("%s not healthy within 30s: %s", name, lastLines(readFile(logPath), 6))
}

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// stop ends the services, the last started first.
func (d *deployment) stop() {
	for i := len(d.procs) - 1; i >= 0; i-- {
		p := d.procs[i]
		p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(15 * time.Second):
			p.cmd.Process.Kill()
			<-p.exited
		}
	}
	d.procs = nil
}

func (d *deployment) logTail(log *slog.Logger) {
	for _, p := range d.logs {
		log.Warn("pgwire suite: service log", "path", p, "tail", lastLines(readFile(p), 10))
	}
}

// cli runs bin/strata against the deployment.
func (d *deployment) cli(ctx context.Context, args ...string) error {
	_, err := d.cliOutput(ctx, args...)
	return err
}

func (d *deployment) cliOutput(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(d.bin, "strata"), append(args, "--nats", d.nats, "--data", d.data)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("strata %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(lastLines(stderr.String(), 4)))
	}
	return out, nil
}

// windowJobs are the seconds of the window jobs on table that ended
// after since, oldest first, as strata ops shows them (its duration:
// published to the windower until the job ended).
func (d *deployment) windowJobs(ctx context.Context, table string, since time.Time) ([]float64, error) {
	out, err := d.cliOutput(ctx, "ops", "--table", table, "--limit", "0", "--format", "json")
	if err != nil {
		return nil, err
	}
	return parseWindowJobs(out, since)
}

// opsRow is what the suite reads of a row of strata ops --format json.
type opsRow struct {
	End       time.Time `json:"end"`
	Status    string    `json:"status"`
	Operation string    `json:"operation"`
	Duration  *float64  `json:"duration_seconds"`
}

func parseWindowJobs(out []byte, since time.Time) ([]float64, error) {
	var ops []opsRow
	if err := json.Unmarshal(out, &ops); err != nil {
		return nil, fmt.Errorf("strata ops --format json: %w", err)
	}
	slices.SortFunc(ops, func(a, b opsRow) int { return a.End.Compare(b.End) })
	var secs []float64
	for _, op := range ops {
		if op.Operation == "window" && op.Status == "done" && op.Duration != nil && op.End.After(since) {
			secs = append(secs, *op.Duration)
		}
	}
	return secs, nil
}

// freeAddr is a 127.0.0.1 address with a port free a moment ago.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}
