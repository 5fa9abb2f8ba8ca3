package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/strata-db/strata/internal/bytesize"
	"github.com/strata-db/strata/messages"
)

func init() {
	register(command{name: "ops", summary: "the operations table: mergeouts and window jobs, with plan, peak memory and grant", run: runOps})
	register(command{name: "pools", summary: "the resource pools: configuration, memory in use, and what to grow", run: runPools})
	register(command{name: "pools alter", summary: "change a resource pool's knobs (memorysize, plannedconcurrency, ...)", run: runPoolsAlter})
	register(command{name: "pools create", summary: "create a resource pool", run: runPoolsCreate})
	register(command{name: "acquisitions", summary: "the resource acquisitions table: each job's grant and peak", run: runAcquisitions})
}

func runOps(ctx context.Context, args []string) error {
	cmd := newAPICommand("ops", "usage: strata ops [--table T] [--limit N] [--applies] [--format table|json|csv] [flags]\n\n"+
		"The operations table: each mergeout and window job with its plan, worker, duration, peak memory,\n"+
		"grant and, for a failure, the reason. With --applies, the applies log instead: each batch of\n"+
		"changes a walwriter flushed and the scheduler made visible (or refused), with its table, rows,\n"+
		"versions, WAL position and time; kept apart from the jobs (the scheduler's --keep-applies).", formatUsage)
	tableName := cmd.fs.String("table", "", "only operations on this table")
	limit := cmd.fs.Int("limit", 50, "newest operations to show (0: all the scheduler keeps)")
	applies := cmd.fs.Bool("applies", false, "show the applies log (the walwriters' flushes) instead of the jobs")
	if err := cmd.parse(args); err != nil {
		return err
	}
	var rep messages.OperationsReply
	req := &messages.OperationsRequest{Table: *tableName, Limit: *limit, Applies: *applies}
	if err := cmd.ask(ctx, messages.SubjectAPIOperations, req, &rep, &rep.Error); err != nil {
		return err
	}
	if *applies {
		return appliesTable(rep.Applies).print(os.Stdout, cmd.format)
	}
	return opsTable(rep.Operations).print(os.Stdout, cmd.format)
}

// appliesTable is the applies log. Its JSON and CSV keys are those of
// messages.AppliedBatch, the time as RFC 3339.
func appliesTable(rows []messages.AppliedBatch) *table {
	t := newTable("at", "table", "projection", "rows", "bytes:bytes", "versions", "wal", "to", "container", "live", "refused")
	for _, r := range rows {
		versions := any(nil)
		if r.MaxVersion > 0 {
			versions = fmt.Sprintf("%d..%d", r.MinVersion, r.MaxVersion)
		}
		live := any(int64(r.Live))
		if r.Refused != "" {
			live = nil
		}
		t.add(timeCell(r.At), r.Table, r.Projection, r.Rows, sizeCell(r.Bytes), versions, r.WAL, int64(r.To), r.Container, live, textCell(r.Refused))
	}
	return t
}

// opsTable is the operations table. Its JSON and CSV keys are those of
// messages.Operation where it has the field, with the grant flattened
// (pool, grant_bytes, target_bytes) and the times as RFC 3339.
func opsTable(ops []messages.Operation) *table {
	t := newTable("start", "end", "status", "operation", "table", "projection", "inputs", "rows", "bytes:bytes",
		"plan", "worker", "deliveries", "duration:duration_seconds", "peak:peak_bytes", "spilled:spilled_bytes", "fetched:bytes_fetched", "pool",
		"grant:grant_bytes", "target:target_bytes", "memory_constrained", "job:job_id", "reason")
	for _, op := range ops {
		t.add(timeCell(op.Start), timeCell(op.End), op.Status, op.Operation, op.Table, op.Projection,
			int64(op.Inputs), op.Rows, sizeCell(op.Bytes), textCell(op.Plan), textCell(op.Worker), int64(op.Deliveries),
			durationCell(op.Start, op.End), sizeCell(op.PeakBytes), sizeCell(op.SpilledBytes), sizeCell(op.BytesFetched), textCell(op.Grant.Pool),
			sizeCell(op.Grant.Bytes), sizeCell(op.Grant.Target), op.MemoryConstrained, op.JobID, textCell(op.Reason))
	}
	return t
}

func runAcquisitions(ctx context.Context, args []string) error {
	cmd := newAPICommand("acquisitions", "usage: strata acquisitions [--pool P] [--limit N] [--format table|json|csv] [flags]\n\n"+
		"The resource acquisitions table: each job's target, grant, borrowed memory, peak and wait.", formatUsage)
	pool := cmd.fs.String("pool", "", "only this pool")
	limit := cmd.fs.Int("limit", 50, "newest acquisitions to show (0: all the scheduler keeps)")
	if err := cmd.parse(args); err != nil {
		return err
	}
	var rep messages.AcquisitionsReply
	if err := cmd.ask(ctx, messages.SubjectAPIAcquisitions, &messages.AcquisitionsRequest{Pool: *pool, Limit: *limit}, &rep, &rep.Error); err != nil {
		return err
	}
	t := newTable("pool", "job:job_id", "status", "target:target_bytes", "grant:grant_bytes", "borrowed:borrowed_bytes", "peak:peak_bytes",
		"queued", "acquired", "released", "waited:waited_seconds", "reason")
	for _, a := range rep.Acquisitions {
		t.add(a.Pool, a.JobID, a.Status, sizeCell(a.Target), sizeCell(a.Grant), sizeCell(a.Borrowed), sizeCell(a.Peak),
			timeCell(a.Queued), timeCell(a.Acquired), timeCell(a.Released), durationCell(a.Queued, a.Acquired), textCell(a.Reason))
	}
	return t.print(os.Stdout, cmd.format)
}

func runPools(ctx context.Context, args []string) error {
	cmd := newAPICommand("pools", "usage: strata pools [--format table|json|csv] [flags]\n\n"+
		"The resource pools: configuration, memory in use, and advice on which to grow.", formatUsage)
	if err := cmd.parse(args); err != nil {
		return err
	}
	var rep messages.PoolsReply
	if err := cmd.ask(ctx, messages.SubjectAPIPools, &messages.PoolsRequest{}, &rep, &rep.Error); err != nil {
		return err
	}
	return printPools(rep.Pools, cmd.format)
}

func printPools(pools []messages.PoolStatus, format string) error {
	t := newTable("pool", "memorysize", "maxmemorysize", "plannedconcurrency", "maxconcurrency", "queuetimeout:queuetimeout_seconds",
		"priority", "target", "in_use", "borrowed", "running", "queued", "constrained_ops", "failed_ops", "largest_peak", "recommendation")
	var advice []string
	for _, p := range pools {
		if p.Failed > 0 {
			advice = append(advice, fmt.Sprintf("%d operations in pool %s failed: `strata ops` gives the reasons.", p.Failed, p.Config.Name))
		}
		var maxConc, timeout any // nil: no limit
		if p.Config.MaxConcurrency > 0 {
			maxConc = int64(p.Config.MaxConcurrency)
		}
		if p.Config.QueueTimeout > 0 {
			timeout = time.Duration(p.Config.QueueTimeout)
		}
		t.add(p.Config.Name, size(p.Config.MemorySize), size(p.Config.MaxMemorySize),
			int64(p.Config.PlannedConcurrency), maxConc, timeout, int64(p.Config.Priority),
			size(p.Target), size(p.InUse), size(p.Borrowed),
			int64(p.Running), int64(p.Queued), int64(p.Constrained), int64(p.Failed), sizeCell(p.LargestPeak), textCell(p.Recommendation))
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
	var k poolKnobs
	cmd := newAPICommand("pools alter", "usage: strata pools alter NAME [--memorysize 8GiB] [--maxmemorysize ...] [--plannedconcurrency N] ...", formatUsage)
	k.register(cmd.fs)
	name, err := cmd.parseArg(args, "want the pool NAME")
	if err != nil {
		return err
	}
	req := &messages.AlterPoolRequest{Name: name}
	set := map[string]bool{}
	cmd.fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
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
	var rep messages.PoolsReply
	if err := cmd.ask(ctx, messages.SubjectAPIPoolAlter, req, &rep, &rep.Error); err != nil {
		return err
	}
	return printPools(rep.Pools, cmd.format)
}

func runPoolsCreate(ctx context.Context, args []string) error {
	var k poolKnobs
	cmd := newAPICommand("pools create", "usage: strata pools create NAME --memorysize 1GiB [--maxmemorysize ...] [--plannedconcurrency N] ...", formatUsage)
	k.register(cmd.fs)
	const want = "want the pool NAME and --memorysize"
	name, err := cmd.parseArg(args, want)
	if err != nil {
		return err
	}
	if k.memorySize == "" {
		return cmd.usageError(want)
	}
	cfg := messages.PoolConfig{Name: name, PlannedConcurrency: max(k.plannedConcurrency, 1), Priority: k.priority}
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
	var rep messages.PoolsReply
	if err := cmd.ask(ctx, messages.SubjectAPIPoolCreate, &messages.CreatePoolRequest{Pool: cfg, RequestID: newRequestID()}, &rep, &rep.Error); err != nil {
		return err
	}
	return printPools(rep.Pools, cmd.format)
}

func parseSizePtr(name, s string) (*int64, error) {
	n, err := bytesize.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("%w: --%s: %v", errUsage, name, err)
	}
	return &n, nil
}
