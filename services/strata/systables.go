package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/strata-db/strata/internal/bytesize"
	"github.com/strata-db/strata/internal/service"
	"github.com/strata-db/strata/messages"
)

func init() {
	register(command{name: "ops", summary: "the operations table: mergeouts and window jobs, with plan, peak memory and grant", run: runOps})
	register(command{name: "pools", summary: "the resource pools: configuration, memory in use, and what to grow", run: runPools})
	register(command{name: "pools alter", summary: "change a resource pool's knobs (memorysize, plannedconcurrency, ...)", run: runPoolsAlter})
	register(command{name: "pools create", summary: "create a resource pool", run: runPoolsCreate})
	register(command{name: "acquisitions", summary: "the resource acquisitions table: each job's grant and peak", run: runAcquisitions})
}

// apiClient is the connection of a command that talks to the scheduler.
type apiClient struct {
	nc      *nats.Conn
	timeout time.Duration
}

// apiFlags are the flags of the commands that talk to the scheduler.
type apiFlags struct {
	natsFlags
	timeout time.Duration
}

func (f *apiFlags) register(fs *flag.FlagSet) {
	f.natsFlags.register(fs)
	fs.DurationVar(&f.timeout, "request-timeout", 30*time.Second, "how long to wait for the scheduler's reply")
}

func (f *apiFlags) dial(ctx context.Context) (*apiClient, error) {
	nc, _, err := f.connect(ctx)
	if err != nil {
		return nil, fmt.Errorf("connect to NATS at %s: %w", f.common.NATS, err)
	}
	return &apiClient{nc: nc, timeout: f.timeout}, nil
}

func (c *apiClient) Close() { c.nc.Close() }

// call sends req on subject and decodes the reply into rep.
func (c *apiClient) call(ctx context.Context, subject string, req, rep messages.Message) error {
	data, err := messages.Marshal(req)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	msg, err := c.nc.RequestWithContext(ctx, subject, data)
	if errors.Is(err, nats.ErrNoResponders) {
		return fmt.Errorf("no scheduler answers on %s: is the scheduler running and connected to %s?", subject, c.nc.ConnectedUrlRedacted())
	}
	if err != nil {
		return fmt.Errorf("request %s: %w", subject, err)
	}
	if err := messages.Unmarshal(msg.Data, rep); err != nil {
		return fmt.Errorf("reply to %s: %w", subject, err)
	}
	return nil
}

// table is a result printed as an aligned table, JSON or CSV.
type table struct {
	header []string
	rows   [][]string
	json   any // what --format json prints; the rows when nil
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

// print writes t to w in format: table, json or csv.
func (t *table) print(w io.Writer, format string) error {
	switch format {
	case "", "table":
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, strings.Join(t.header, "\t"))
		for _, r := range t.rows {
			fmt.Fprintln(tw, strings.Join(r, "\t"))
		}
		return tw.Flush()
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if t.json != nil {
			return enc.Encode(t.json)
		}
		objs := make([]map[string]string, len(t.rows))
		for i, r := range t.rows {
			objs[i] = map[string]string{}
			for j, h := range t.header {
				objs[i][h] = r[j]
			}
		}
		return enc.Encode(objs)
	case "csv":
		cw := csv.NewWriter(w)
		if err := cw.Write(t.header); err != nil {
			return err
		}
		if err := cw.WriteAll(t.rows); err != nil {
			return err
		}
		cw.Flush()
		return cw.Error()
	}
	return fmt.Errorf("%w: --format %q: want table, json or csv", errUsage, format)
}

func checkFormat(format string) error {
	switch format {
	case "table", "json", "csv":
		return nil
	}
	return fmt.Errorf("%w: --format %q: want table, json or csv", errUsage, format)
}

func fmtTime(ns int64) string {
	if ns == 0 {
		return "-"
	}
	return time.Unix(0, ns).UTC().Format("2006-01-02 15:04:05.000")
}

func fmtBytes(n int64) string {
	if n == 0 {
		return "-"
	}
	return bytesize.Format(n)
}

func fmtDuration(start, end int64) string {
	if start == 0 || end == 0 {
		return "-"
	}
	return time.Duration(end - start).Round(time.Millisecond).String()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func runOps(ctx context.Context, args []string) error {
	var f apiFlags
	fs := newFlagSet("ops")
	f.register(fs)
	format := fs.String("format", "table", "output format: table, json or csv")
	tableName := fs.String("table", "", "only operations on this table")
	limit := fs.Int("limit", 50, "newest operations to show (0: all the scheduler keeps)")
	if err := service.Parse(fs, args); err != nil {
		return err
	}
	if err := checkFormat(*format); err != nil {
		return err
	}
	c, err := f.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	var rep messages.OperationsReply
	if err := c.call(ctx, messages.SubjectAPIOperations, &messages.OperationsRequest{Table: *tableName, Limit: *limit}, &rep); err != nil {
		return err
	}
	if err := rep.Error.Err(); err != nil {
		return err
	}
	return opsTable(rep.Operations).print(os.Stdout, *format)
}

func opsTable(ops []messages.Operation) *table {
	t := &table{header: []string{"start", "end", "status", "operation", "table", "projection", "inputs", "rows", "bytes",
		"plan", "worker", "duration", "peak", "grant", "target", "memory_constrained", "job", "reason"}, json: ops}
	for _, op := range ops {
		constrained := "no"
		if op.MemoryConstrained {
			constrained = "YES"
		}
		t.add(fmtTime(op.Start), fmtTime(op.End), op.Status, op.Operation, op.Table, op.Projection,
			strconv.Itoa(op.Inputs), strconv.FormatInt(op.Rows, 10), fmtBytes(op.Bytes), orDash(op.Plan), orDash(op.Worker),
			fmtDuration(op.Start, op.End), fmtBytes(op.PeakBytes), fmtBytes(op.Grant.Bytes), fmtBytes(op.Grant.Target),
			constrained, op.JobID, orDash(op.Reason))
	}
	return t
}

func runAcquisitions(ctx context.Context, args []string) error {
	var f apiFlags
	fs := newFlagSet("acquisitions")
	f.register(fs)
	format := fs.String("format", "table", "output format: table, json or csv")
	pool := fs.String("pool", "", "only this pool")
	limit := fs.Int("limit", 50, "newest acquisitions to show (0: all the scheduler keeps)")
	if err := service.Parse(fs, args); err != nil {
		return err
	}
	if err := checkFormat(*format); err != nil {
		return err
	}
	c, err := f.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	var rep messages.AcquisitionsReply
	if err := c.call(ctx, messages.SubjectAPIAcquisitions, &messages.AcquisitionsRequest{Pool: *pool, Limit: *limit}, &rep); err != nil {
		return err
	}
	if err := rep.Error.Err(); err != nil {
		return err
	}
	t := &table{header: []string{"pool", "job", "status", "target", "grant", "borrowed", "peak", "queued", "acquired", "released", "waited", "reason"}, json: rep.Acquisitions}
	for _, a := range rep.Acquisitions {
		t.add(a.Pool, a.JobID, a.Status, fmtBytes(a.Target), fmtBytes(a.Grant), fmtBytes(a.Borrowed), fmtBytes(a.Peak),
			fmtTime(a.Queued), fmtTime(a.Acquired), fmtTime(a.Released), fmtDuration(a.Queued, a.Acquired), orDash(a.Reason))
	}
	return t.print(os.Stdout, *format)
}

func runPools(ctx context.Context, args []string) error {
	var f apiFlags
	fs := newFlagSet("pools")
	f.register(fs)
	format := fs.String("format", "table", "output format: table, json or csv")
	if err := service.Parse(fs, args); err != nil {
		return err
	}
	if err := checkFormat(*format); err != nil {
		return err
	}
	c, err := f.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	var rep messages.PoolsReply
	if err := c.call(ctx, messages.SubjectAPIPools, &messages.PoolsRequest{}, &rep); err != nil {
		return err
	}
	if err := rep.Error.Err(); err != nil {
		return err
	}
	return printPools(rep.Pools, *format)
}

func printPools(pools []messages.PoolStatus, format string) error {
	t := &table{header: []string{"pool", "memorysize", "maxmemorysize", "plannedconcurrency", "maxconcurrency", "queuetimeout",
		"priority", "target", "in_use", "borrowed", "running", "queued", "constrained_ops", "failed_ops", "largest_peak"}, json: pools}
	var advice []string
	for _, p := range pools {
		if p.Failed > 0 {
			advice = append(advice, fmt.Sprintf("%d operations in pool %s failed: `strata ops` gives the reasons.", p.Failed, p.Config.Name))
		}
		maxConc := "-"
		if p.Config.MaxConcurrency > 0 {
			maxConc = strconv.Itoa(p.Config.MaxConcurrency)
		}
		timeout := "none"
		if p.Config.QueueTimeout > 0 {
			timeout = time.Duration(p.Config.QueueTimeout).String()
		}
		t.add(p.Config.Name, bytesize.Format(p.Config.MemorySize), bytesize.Format(p.Config.MaxMemorySize),
			strconv.Itoa(p.Config.PlannedConcurrency), maxConc, timeout, strconv.Itoa(p.Config.Priority),
			bytesize.Format(p.Target), bytesize.Format(p.InUse), bytesize.Format(p.Borrowed),
			strconv.Itoa(p.Running), strconv.Itoa(p.Queued), strconv.Itoa(p.Constrained), strconv.Itoa(p.Failed), fmtBytes(p.LargestPeak))
		if p.Recommendation != "" {
			advice = append(advice, p.Recommendation)
		}
	}
	if err := t.print(os.Stdout, format); err != nil {
		return err
	}
	if format == "table" {
		if len(advice) == 0 {
			fmt.Println("\nno operation exceeded its pool's target: the pools are large enough for what ran.")
		}
		for _, a := range advice {
			fmt.Println("\n" + a)
		}
	}
	return nil
}

// poolKnobs are the flags of pools alter and pools create.
type poolKnobs struct {
	memorySize, maxMemorySize          string
	plannedConcurrency, maxConcurrency int
	queueTimeout                       time.Duration
	priority                           int
}

func (k *poolKnobs) register(fs *flag.FlagSet) {
	fs.StringVar(&k.memorySize, "memorysize", "", "memory the pool owns, e.g. 8GiB")
	fs.StringVar(&k.maxMemorySize, "maxmemorysize", "", "most the pool may use, borrowing above memorysize")
	fs.IntVar(&k.plannedConcurrency, "plannedconcurrency", 0, "jobs the memory is planned for: target grant = memorysize / plannedconcurrency")
	fs.IntVar(&k.maxConcurrency, "maxconcurrency", -1, "most jobs running at once (0: no limit but memory)")
	fs.DurationVar(&k.queueTimeout, "queuetimeout", -1, "how long a job may wait for memory before it fails (0: forever)")
	fs.IntVar(&k.priority, "priority", 0, "queue priority: higher is admitted first")
}

func runPoolsAlter(ctx context.Context, args []string) error {
	var f apiFlags
	var k poolKnobs
	fs := newFlagSet("pools alter")
	f.register(fs)
	k.register(fs)
	format := fs.String("format", "table", "output format: table, json or csv")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: strata pools alter NAME [--memorysize 8GiB] [--maxmemorysize ...] [--plannedconcurrency N] ...")
		fs.PrintDefaults()
	}
	name, rest := leadingArg(args)
	if err := service.Parse(fs, rest); err != nil {
		return err
	}
	if name == "" && fs.NArg() == 1 {
		name = fs.Arg(0)
	}
	if name == "" {
		fs.Usage()
		return fmt.Errorf("%w: want the pool NAME", errUsage)
	}
	if err := checkFormat(*format); err != nil {
		return err
	}
	req := &messages.AlterPoolRequest{Name: name}
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	var err error
	if set["memorysize"] {
		if req.MemorySize, err = parseSizePtr("memorysize", k.memorySize); err != nil {
			return err
		}
	}
	if set["maxmemorysize"] {
		if req.MaxMemorySize, err = parseSizePtr("maxmemorysize", k.maxMemorySize); err != nil {
			return err
		}
	}
	if set["plannedconcurrency"] {
		req.PlannedConcurrency = &k.plannedConcurrency
	}
	if set["maxconcurrency"] {
		req.MaxConcurrency = &k.maxConcurrency
	}
	if set["queuetimeout"] {
		ns := int64(k.queueTimeout)
		req.QueueTimeout = &ns
	}
	if set["priority"] {
		req.Priority = &k.priority
	}
	if err := req.Validate(); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	c, err := f.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	var rep messages.PoolsReply
	if err := c.call(ctx, messages.SubjectAPIPoolAlter, req, &rep); err != nil {
		return err
	}
	if err := rep.Error.Err(); err != nil {
		return err
	}
	return printPools(rep.Pools, *format)
}

func runPoolsCreate(ctx context.Context, args []string) error {
	var f apiFlags
	var k poolKnobs
	fs := newFlagSet("pools create")
	f.register(fs)
	k.register(fs)
	format := fs.String("format", "table", "output format: table, json or csv")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: strata pools create NAME --memorysize 1GiB [--maxmemorysize ...] [--plannedconcurrency N] ...")
		fs.PrintDefaults()
	}
	name, rest := leadingArg(args)
	if err := service.Parse(fs, rest); err != nil {
		return err
	}
	if name == "" && fs.NArg() == 1 {
		name = fs.Arg(0)
	}
	if name == "" || k.memorySize == "" {
		fs.Usage()
		return fmt.Errorf("%w: want the pool NAME and --memorysize", errUsage)
	}
	if err := checkFormat(*format); err != nil {
		return err
	}
	cfg := messages.PoolConfig{Name: name, PlannedConcurrency: max(k.plannedConcurrency, 1), Priority: k.priority}
	var err error
	if cfg.MemorySize, err = bytesize.Parse(k.memorySize); err != nil {
		return fmt.Errorf("%w: --memorysize: %v", errUsage, err)
	}
	cfg.MaxMemorySize = cfg.MemorySize
	if k.maxMemorySize != "" {
		if cfg.MaxMemorySize, err = bytesize.Parse(k.maxMemorySize); err != nil {
			return fmt.Errorf("%w: --maxmemorysize: %v", errUsage, err)
		}
	}
	cfg.MaxConcurrency = max(k.maxConcurrency, 0)
	cfg.QueueTimeout = int64(5 * time.Minute)
	if k.queueTimeout >= 0 {
		cfg.QueueTimeout = int64(k.queueTimeout)
	}
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	c, err := f.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	var rep messages.PoolsReply
	if err := c.call(ctx, messages.SubjectAPIPoolCreate, &messages.CreatePoolRequest{Pool: cfg}, &rep); err != nil {
		return err
	}
	if err := rep.Error.Err(); err != nil {
		return err
	}
	return printPools(rep.Pools, *format)
}

func parseSizePtr(name, s string) (*int64, error) {
	n, err := bytesize.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("%w: --%s: %v", errUsage, name, err)
	}
	return &n, nil
}

// leadingArg splits off a first argument that is not a flag, so commands
// read naturally: `strata pools alter tm --memorysize 8GiB`.
func leadingArg(args []string) (string, []string) {
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		return args[0], args[1:]
	}
	return "", args
}
