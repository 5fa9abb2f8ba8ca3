package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/strata-db/strata/internal/cputime"
	"github.com/strata-db/strata/internal/natsutil"
	"github.com/strata-db/strata/messages"
)

func init() {
	register(command{
		name:    "bench changes",
		summary: "measure change events against a running deployment: publish-to-visible latency at a rate, and changes/s made visible",
		run:     runBenchChanges,
	})
}

const benchChangesUsage = `usage: strata bench changes [--table pgbench_accounts] [--rate R] [--batch N] [--duration D | --events N] [--walwriter-metrics ADDR] [--json] [flags]

Publishes pgbench's account update (abalance += delta on a random account, as strata
updates does) as change events to a running deployment at --rate events/s (0: as fast
as JetStream acknowledges, up to --inflight awaiting acknowledgement) for --duration,
and measures each event's publish-to-visible latency: from its publish to the first poll
of the walwriter consumer's ack floor (every --poll) that has passed its stream sequence.
With --batch N over 1 the events go as change batches of up to N (at a --rate, of at most
10ms of events), one message each, and an event's latency runs from the time the first
event of its batch was due.
Prints the latency's p50/p90/p99/max, the publish rate achieved and the rate at which
changes became visible; with --walwriter-metrics (and --scheduler-metrics, whose process runs
an embedded NATS server), the CPU seconds those processes used meanwhile, read from their
/metrics (process_cpu_seconds_total).

The table is a keyed table shaped like pgbench_accounts (one integer key, an integer
abalance), by default pgbench_accounts; --load-accounts N loads it (strata load
--pgbench-accounts N) when it is not in the catalog. Its current rows are read once at
the start; each event carries the account's whole new row and its old one.`

func runBenchChanges(ctx context.Context, args []string) error {
	cmd := newCmdLine("bench changes", benchChangesUsage)
	fs := cmd.fs
	var af apiFlags
	af.register(fs)
	table := fs.String("table", "pgbench_accounts", "the keyed table the events update")
	projection := fs.String("projection", "", "the projection to read the current rows from (required when the table has several)")
	storeURL := fs.String("store", "", "read the table from this store (s3://BUCKET/PREFIX?endpoint=URL, file:///DIR) instead of the data directory")
	loadAccounts := fs.Int64("load-accounts", 0, "when the table is not in the catalog, load it first as pgbench_accounts of N rows (strata load --pgbench-accounts N)")
	rate := fs.Float64("rate", 10000, "events published per second (0: as fast as JetStream acknowledges)")
	duration := fs.Duration("duration", time.Minute, "how long to publish")
	events := fs.Int("events", 0, "publish this many events, then stop (instead of --duration)")
	keys := fs.Int64("keys", 0, "accounts to draw from: aid in 1..N (default: the table's rows)")
	distinct := fs.Bool("distinct", false, "draw each account at most once (a random permutation of 1..N): N events change N distinct rows")
	seed := fs.Int64("seed", 1, "random seed of the accounts and deltas")
	inflight := fs.Int("inflight", 4096, "publishes awaiting JetStream's acknowledgement at once")
	batch := fs.Int("batch", 1, "events per message (a change batch; at a --rate, at most 10ms of events); 1: one update event per message")
	poll := fs.Duration("poll", 10*time.Millisecond, "how often the walwriter consumer's ack floor is read")
	waitTimeout := fs.Duration("wait-timeout", 5*time.Minute, "after publishing, how long to wait for the last event to be visible")
	walwriterHTTP := fs.String("walwriter-metrics", "", "the walwriter's HTTP listener, host:port (or the URL of its /metrics): its CPU seconds and batches during the run")
	schedulerHTTP := fs.String("scheduler-metrics", "", "the scheduler's HTTP listener, host:port: its CPU seconds during the run (with an embedded NATS server, JetStream's too)")
	asJSON := fs.Bool("json", false, "print the result as one JSON object")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of this command's publishing to this file")
	if err := cmd.parse(args); err != nil {
		return err
	}
	switch {
	case *rate < 0 || math.IsNaN(*rate) || math.IsInf(*rate, 0):
		return cmd.usageError("--rate must be a number, 0 or more")
	case *events < 0 || *keys < 0 || *loadAccounts < 0:
		return cmd.usageError("--events, --keys and --load-accounts must not be negative")
	case *events == 0 && *duration <= 0:
		return cmd.usageError("want --duration or --events")
	case *events == 0 && *duration > maxBenchChangesSpan:
		return cmd.usageError(fmt.Sprintf("--duration at most %v", maxBenchChangesSpan))
	case *inflight <= 0 || *poll <= 0 || *waitTimeout <= 0:
		return cmd.usageError("--inflight, --poll and --wait-timeout must be positive")
	case *batch < 1 || *batch > messages.MaxBatchChanges:
		return cmd.usageError(fmt.Sprintf("--batch must be 1 to %d", messages.MaxBatchChanges))
	}
	if err := messages.ValidTable(*table); err != nil {
		return fmt.Errorf("%w: --table: %v", errUsage, err)
	}

	c, err := af.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := keyedProjection(ctx, c, *table, *projection); err != nil && *loadAccounts > 0 && strings.Contains(err.Error(), "is not in the catalog") {
		fmt.Fprintf(stderr, "%s is not in the catalog: loading it as pgbench_accounts of %d rows\n", *table, *loadAccounts)
		largs := append(connArgs(fs, *storeURL), "--pgbench-accounts", strconv.FormatInt(*loadAccounts, 10), "--table", *table)
		if err := runLoad(ctx, largs); err != nil {
			return fmt.Errorf("load %s: %w", *table, err)
		}
	}
	var (
		st   *accountState
		n    int64
		live int64
	)
	err = readAccounts(ctx, c, af.common.DataDir, *storeURL, *table, *projection, func(accounts *accountsTable) error {
		live = accounts.live
		if n = *keys; n == 0 {
			n = accounts.live
		}
		switch {
		case n == 0:
			return fmt.Errorf("%s has no rows: nothing to update", *table)
		case *distinct && *events == 0:
			return cmd.usageError("--distinct needs --events (at most the accounts drawn from)")
		case *distinct && int64(*events) > n:
			return cmd.usageError(fmt.Sprintf("--distinct: --events %d is more than the %d accounts", *events, n))
		}
		var err error
		st, err = readAccountState(ctx, accounts, n)
		return err
	})
	if err != nil {
		return err
	}

	js, err := jetstream.New(c.nc, jetstream.WithPublishAsyncMaxPending(*inflight+1))
	if err != nil {
		return err
	}
	r, err := benchChanges(ctx, js, st, benchChangesConfig{
		Rate: *rate, Duration: *duration, Events: *events, Keys: n, Distinct: *distinct, Seed: *seed,
		InFlight: *inflight, Batch: *batch, Poll: *poll, WaitTimeout: *waitTimeout,
		WalwriterMetrics: metricsURL(*walwriterHTTP), SchedulerMetrics: metricsURL(*schedulerHTTP),
		CPUProfile: *cpuProfile, MaxPayload: c.nc.MaxPayload(),
	})
	if err != nil {
		return err
	}
	r.Table, r.Rows = *table, live
	if *asJSON {
		b, err := json.Marshal(r)
		if err != nil {
			return err
		}
		fmt.Println(string(b))
		return nil
	}
	r.print(os.Stdout)
	return nil
}

// maxBenchChangesSpan bounds a run: publish times are kept as uint32
// microseconds from the start.
const maxBenchChangesSpan = time.Hour

// connArgs are the connection flags set on fs (and --store), as strata
// load takes them.
func connArgs(fs *flag.FlagSet, storeURL string) []string {
	conn := newFlagSet("conn")
	var af apiFlags
	af.register(conn)
	var out []string
	fs.Visit(func(f *flag.Flag) {
		if conn.Lookup(f.Name) != nil && f.Name != "request-timeout" && f.Name != "settle-timeout" {
			out = append(out, "--"+f.Name+"="+f.Value.String())
		}
	})
	if storeURL != "" {
		out = append(out, "--store="+storeURL)
	}
	return out
}

// metricsURL is the /metrics URL of a service's HTTP listener (host:port).
func metricsURL(addr string) string {
	if addr == "" {
		return ""
	}
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	if !strings.Contains(strings.TrimPrefix(strings.TrimPrefix(addr, "http://"), "https://"), "/") {
		addr += "/metrics"
	}
	return addr
}

// accountState is every account of 1..n that has a row: its balance and
// the encoding of the columns before and after abalance, so an event's
// rows are made without decoding. Compact: a million pgbench accounts
// take about 40MB.
type accountState struct {
	name     string
	types    []messages.RowType
	keyTypes []messages.RowType
	n        int64
	has      []bool
	null     []bool // abalance is NULL
	balance  []int64
	bits     int      // abalance's width
	prefix   []byte   // the columns before abalance, account after account
	poff     []uint32 // account i's prefix is prefix[poff[i]:poff[i+1]]
	suffixID []uint32 // account i's columns after abalance are suffixes[suffixID[i]]
	suffixes [][]byte
}

// readAccountState reads the current rows of accounts 1..n.
func readAccountState(ctx context.Context, a *accountsTable, n int64) (*accountState, error) {
	types := a.t.Types()
	st := &accountState{
		name: a.t.Name, types: types, keyTypes: a.t.KeyTypes(), n: n,
		has: make([]bool, n), null: make([]bool, n), balance: make([]int64, n),
		suffixID: make([]uint32, n),
		bits:     a.t.Schema.Field(a.balance).Type.(interface{ BitWidth() int }).BitWidth(),
	}
	pre := make([][]byte, n)
	interned := map[string]uint32{}
	err := a.eachCurrent(ctx, func(aid int64, row []any) error {
		if aid < 1 || aid > n {
			return nil
		}
		i := aid - 1
		p, err := messages.EncodeRow(types[:a.balance], row[:a.balance])
		if err != nil {
			return fmt.Errorf("aid %d: %w", aid, err)
		}
		s, err := messages.EncodeRow(types[a.balance+1:], row[a.balance+1:])
		if err != nil {
			return fmt.Errorf("aid %d: %w", aid, err)
		}
		id, ok := interned[string(s)]
		if !ok {
			id = uint32(len(st.suffixes))
			interned[string(s)] = id
			st.suffixes = append(st.suffixes, s)
		}
		st.has[i], pre[i], st.suffixID[i] = true, p, id
		if b, ok := row[a.balance].(int64); ok {
			st.balance[i], st.null[i] = b, false
		} else {
			st.null[i] = true
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	st.poff = make([]uint32, n+1)
	for i, p := range pre {
		if len(st.prefix)+len(p) > math.MaxUint32 {
			return nil, fmt.Errorf("%s: the rows' key columns take more than 4GiB; draw from fewer accounts (--keys)", a.t.Name)
		}
		st.prefix = append(st.prefix, p...)
		st.poff[i+1] = uint32(len(st.prefix))
	}
	return st, nil
}

// row appends account i's row with balance b (NULL if null) to dst.
func (st *accountState) row(dst []byte, i int64, b int64, null bool) []byte {
	dst = append(dst, st.prefix[st.poff[i]:st.poff[i+1]]...)
	if null {
		dst = append(dst, 0)
	} else {
		dst = append(dst, 9)
		dst = binary.BigEndian.AppendUint64(dst, uint64(b)^1<<63)
	}
	return append(dst, st.suffixes[st.suffixID[i]]...)
}

// update is the event adding delta to account i's balance (which it
// then holds), or false if the account has no row.
func (st *accountState) update(id string, i, delta int64) (*messages.UpdateEvent, bool, error) {
	if !st.has[i] {
		return nil, false, nil
	}
	ev := &messages.UpdateEvent{EventID: id, Table: st.name, Columns: st.types, Op: messages.OpUpdate}
	b, null := st.balance[i], st.null[i]
	ev.OldRow = st.row(nil, i, b, null)
	if !null {
		nb := b + delta
		if (delta > 0) != (nb > b) || (st.bits < 64 && (nb < -(1<<(st.bits-1)) || nb >= 1<<(st.bits-1))) {
			nb = b - delta // keep within the column's range: a bench needs a change, not this one
		}
		st.balance[i] = nb
	}
	ev.NewRow = st.row(nil, i, st.balance[i], null)
	var err error
	ev.Key, err = messages.EncodeRow(st.keyTypes, []any{i + 1})
	return ev, true, err
}

type benchChangesConfig struct {
	Rate        float64
	Duration    time.Duration
	Events      int
	Keys        int64
	Distinct    bool
	Seed        int64
	InFlight    int
	Batch       int // events per message; at a Rate, at most 10ms of them
	Poll        time.Duration
	WaitTimeout time.Duration

	WalwriterMetrics, SchedulerMetrics string
	CPUProfile                         string
	MaxPayload                         int64
}

// benchChangesResult is what strata bench changes reports.
type benchChangesResult struct {
	Table       string  `json:"table"`
	Rows        int64   `json:"rows"`
	Keys        int64   `json:"keys"`
	TargetRate  float64 `json:"target_rate"` // 0: as fast as possible
	InFlight    int     `json:"inflight"`
	Batch       int     `json:"batch"` // events per message (the largest batch sent)
	Messages    int     `json:"messages"`
	PollMS      float64 `json:"poll_ms"`
	Published   int     `json:"published"`
	Skipped     int     `json:"skipped"` // accounts drawn without a row
	PublishS    float64 `json:"publish_s"`
	PublishRate float64 `json:"publish_rate"`
	FirstSeq    uint64  `json:"first_seq"`
	LastSeq     uint64  `json:"last_seq"`
	Foreign     int     `json:"foreign"` // sequences in the range that others published

	Visible    int     `json:"visible"`
	NotVisible int     `json:"not_visible"` // still not visible after --wait-timeout
	VisibleS   float64 `json:"visible_s"`   // from the first publish to the last event visible
	// VisibleRate is Visible / VisibleS: the changes/s made visible over
	// the run, the 1s flush at its end included.
	VisibleRate float64 `json:"visible_rate"`
	// SteadyVisibleRate is the rate at which the ack floor advanced from
	// the first poll past 1s after the start to the last poll before
	// publishing stopped: the sustained rate, without the start and the
	// final flush.
	SteadyVisibleRate float64 `json:"steady_visible_rate"`
	// MaxBacklog is the most messages (an event or a batch each)
	// published and not yet visible at a poll.
	MaxBacklog uint64 `json:"max_backlog"`

	Latency latencySummary `json:"latency_ms"`

	BenchCPUS          float64  `json:"bench_cpu_s"`
	WalwriterCPUS      *float64 `json:"walwriter_cpu_s,omitempty"`
	WalwriterBatches   *float64 `json:"walwriter_batches,omitempty"`
	WalwriterApplied   *float64 `json:"walwriter_changes_applied,omitempty"`
	WalwriterApplyMS   *float64 `json:"walwriter_apply_ms_mean,omitempty"` // mean time to write and commit a batch
	WalwriterMetricErr string   `json:"walwriter_metrics_error,omitempty"`
	SchedulerCPUS      *float64 `json:"scheduler_cpu_s,omitempty"`
	SchedulerMetricErr string   `json:"scheduler_metrics_error,omitempty"`
	WallS              float64  `json:"wall_s"` // the span the CPU figures cover
}

type latencySummary struct {
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	Max  float64 `json:"max"`
	Mean float64 `json:"mean"`
}

// floorObs is a poll's reading of the ack floor: at microseconds since
// the start, every event through stream sequence floor was visible.
type floorObs struct {
	at    uint32
	floor uint64
}

// pubTimes keeps each event's publish time, as microseconds since the
// start plus one (0: no event of this run), by its stream sequence's
// offset from the sequence before the first: 4 bytes an event, 24MB for
// 100k/s over a minute.
type pubTimes struct {
	base uint64 // the stream's last sequence before the run
	t    []uint32
	n    []uint32 // the events of each message (a batch holds several)
}

func (p *pubTimes) record(seq uint64, at uint32, events int) error {
	if seq <= p.base {
		return fmt.Errorf("stream sequence %d acknowledged, not after %d, the stream's last before the run", seq, p.base)
	}
	off := seq - p.base - 1
	if off >= uint64(len(p.t)) {
		if off >= 1<<32 {
			return fmt.Errorf("stream sequence %d is too far past %d", seq, p.base)
		}
		p.t = slices.Grow(p.t, int(off+1)-len(p.t))
		p.t = p.t[:off+1]
		p.n = slices.Grow(p.n, int(off+1)-len(p.n))
		p.n = p.n[:off+1]
	}
	p.t[off] = at + 1
	p.n[off] = uint32(events)
	return nil
}

// eventsThrough returns a function giving the events of this run in the
// messages through each stream sequence.
func (p *pubTimes) eventsThrough() func(seq uint64) uint64 {
	cum := make([]uint64, len(p.n)+1)
	for i, n := range p.n {
		cum[i+1] = cum[i] + uint64(n)
	}
	return func(seq uint64) uint64 {
		if seq <= p.base {
			return 0
		}
		return cum[min(seq-p.base, uint64(len(p.n)))]
	}
}

// changeLatencies computes each event's publish-to-visible latency in
// microseconds: from its message's publish to the first observation whose
// floor is at or past the message's sequence, once per event of the
// message. obs is in time order, floors not decreasing. It returns the
// latencies in sequence order and how many events no observation saw
// visible; p is spent.
func changeLatencies(p *pubTimes, obs []floorObs) (lat []uint32, notVisible int) {
	lat = make([]uint32, 0, len(p.t))
	j := 0
	for off, t := range p.t {
		if t == 0 {
			continue
		}
		events := int(p.n[off])
		seq := p.base + 1 + uint64(off)
		for j < len(obs) && obs[j].floor < seq {
			j++
		}
		if j == len(obs) {
			notVisible += events
			continue
		}
		d := int64(obs[j].at) - int64(t-1)
		if d < 0 {
			d = 0 // an observation taken as its publish was acknowledged
		}
		for range events {
			lat = append(lat, uint32(d))
		}
	}
	p.t, p.n = nil, nil
	return lat, notVisible
}

// summarizeLatencies sorts lat (microseconds) and returns its
// percentiles in milliseconds, by nearest rank.
func summarizeLatencies(lat []uint32) latencySummary {
	if len(lat) == 0 {
		return latencySummary{}
	}
	slices.Sort(lat)
	var sum float64
	for _, v := range lat {
		sum += float64(v)
	}
	ms := func(us uint32) float64 { return float64(us) / 1000 }
	return latencySummary{
		P50: ms(percentileRank(lat, 50)), P90: ms(percentileRank(lat, 90)), P99: ms(percentileRank(lat, 99)),
		Max: ms(lat[len(lat)-1]), Mean: sum / float64(len(lat)) / 1000,
	}
}

// percentileRank is the p-th percentile of sorted by nearest rank: the
// smallest value with at least p% of the values at or below it.
func percentileRank(sorted []uint32, p float64) uint32 {
	k := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(k, 1), len(sorted))-1]
}

// steadyRate is the rate at which the floor advanced, in events (events
// counts those through a sequence), between the first observation at or
// past from and the last at or before to (microseconds since the start),
// or 0 when they do not span a second.
func steadyRate(obs []floorObs, from, to uint32, events func(seq uint64) uint64) float64 {
	i := slices.IndexFunc(obs, func(o floorObs) bool { return o.at >= from })
	j := -1
	for k := len(obs) - 1; k >= 0; k-- {
		if obs[k].at <= to {
			j = k
			break
		}
	}
	if i < 0 || j <= i || obs[j].at-obs[i].at < 1e6 {
		return 0
	}
	return float64(events(obs[j].floor)-events(obs[i].floor)) / (float64(obs[j].at-obs[i].at) / 1e6)
}

type pendingChange struct {
	fut    jetstream.PubAckFuture
	at     uint32
	events int
}

func benchChanges(ctx context.Context, js jetstream.JetStream, st *accountState, cfg benchChangesConfig) (*benchChangesResult, error) {
	ictx, cancel := context.WithTimeout(ctx, 10*time.Second)
	stream, err := js.Stream(ictx, messages.StreamUpdates)
	if err == nil {
		if _, err = js.Consumer(ictx, messages.StreamUpdates, messages.ConsumerWalwriter); err != nil {
			err = fmt.Errorf("no consumer %s on stream %s (%w): the scheduler creates it; is this strata's NATS?", messages.ConsumerWalwriter, messages.StreamUpdates, err)
		}
	}
	cancel()
	if err != nil {
		return nil, err
	}
	pt := &pubTimes{base: stream.CachedInfo().State.LastSeq}
	res := &benchChangesResult{Keys: cfg.Keys, TargetRate: cfg.Rate, InFlight: cfg.InFlight, PollMS: float64(cfg.Poll) / 1e6}
	batchSize := max(1, cfg.Batch)
	if cfg.Rate > 0 {
		batchSize = min(batchSize, max(1, int(cfg.Rate/100))) // an event waits at most 10ms for its batch
	}
	res.Batch = batchSize

	ww0, wwErr := scrapeMetrics(ctx, cfg.WalwriterMetrics)
	sc0, scErr := scrapeMetrics(ctx, cfg.SchedulerMetrics)
	cpu0 := cputime.Process()

	start := time.Now()
	since := func() uint32 { return uint32(time.Since(start) / time.Microsecond) }

	// The poller: the ack floor every cfg.Poll, kept when it advanced.
	var (
		mu       sync.Mutex
		obs      []floorObs
		pollErr  error
		lastSent uint64 // the highest sequence acknowledged to the publisher
	)
	pollCtx, stopPoll := context.WithCancel(ctx)
	defer stopPoll()
	pollDone := make(chan struct{})
	go func() {
		defer close(pollDone)
		tk := time.NewTicker(cfg.Poll)
		defer tk.Stop()
		fails := 0
		for {
			rctx, cancel := context.WithTimeout(pollCtx, 5*time.Second)
			c, err := js.Consumer(rctx, messages.StreamUpdates, messages.ConsumerWalwriter)
			cancel()
			at := since()
			mu.Lock()
			switch {
			case err == nil:
				fails = 0
				f := c.CachedInfo().AckFloor.Stream
				if len(obs) == 0 || f > obs[len(obs)-1].floor {
					obs = append(obs, floorObs{at: at, floor: f})
				}
				if lastSent > f && lastSent-f > res.MaxBacklog {
					res.MaxBacklog = lastSent - f
				}
			case pollCtx.Err() != nil:
			default:
				if fails++; fails >= 100 {
					pollErr = fmt.Errorf("reading the ack floor of consumer %s: %w", messages.ConsumerWalwriter, err)
				}
			}
			mu.Unlock()
			select {
			case <-pollCtx.Done():
				return
			case <-tk.C:
			}
		}
	}()

	if cfg.CPUProfile != "" {
		f, err := os.Create(cfg.CPUProfile)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return nil, fmt.Errorf("start CPU profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}

	// The publisher.
	rng := rand.New(rand.NewPCG(uint64(cfg.Seed), 0xc4a9e5))
	var perm []int64
	if cfg.Distinct {
		perm = make([]int64, cfg.Keys)
		for i := range perm {
			perm[i] = int64(i)
		}
		rng.Shuffle(len(perm), func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
	}
	subject := messages.SubjectUpdates(st.name)
	prefix := fmt.Sprintf("bench-%s-%d-%s-", st.name, cfg.Seed, strconv.FormatInt(start.UnixNano(), 36))
	pending := make([]pendingChange, 0, cfg.InFlight)
	head := 0
	settle := func(pc pendingChange, block bool) (bool, error) {
		var failed error
		if block {
			select {
			case ack := <-pc.fut.Ok():
				return true, recordAck(pt, ack, pc.at, pc.events, &mu, &lastSent)
			case failed = <-pc.fut.Err():
			case <-time.After(time.Minute):
				failed = errors.New("not acknowledged after a minute")
			case <-ctx.Done():
				return false, ctx.Err()
			}
		} else {
			select {
			case ack := <-pc.fut.Ok():
				return true, recordAck(pt, ack, pc.at, pc.events, &mu, &lastSent)
			case failed = <-pc.fut.Err():
			default:
				return false, nil
			}
		}
		rctx, cancel := context.WithTimeout(ctx, retryFor)
		ack, err := natsutil.PublishRetry(rctx, js, pc.fut.Msg())
		cancel()
		if err != nil {
			return false, fmt.Errorf("publish %s: %v; again for %v: %w", pc.fut.Msg().Header.Get(messages.HeaderMsgID), failed, retryFor, err)
		}
		return true, recordAck(pt, ack, pc.at, pc.events, &mu, &lastSent)
	}
	published := 0
	// send publishes one message (an event, or a batch of events whose
	// first was due at at) once fewer than cfg.InFlight await their ack.
	send := func(id string, data []byte, at uint32, events int) error {
		if cfg.MaxPayload > 0 && int64(len(data)) > cfg.MaxPayload {
			return fmt.Errorf("message of %d bytes, more than the NATS server's limit of %d", len(data), cfg.MaxPayload)
		}
		for len(pending)-head >= cfg.InFlight {
			if _, err := settle(pending[head], true); err != nil {
				return err
			}
			pending[head] = pendingChange{}
			head++
		}
		msg := &nats.Msg{Subject: subject, Data: data, Header: nats.Header{}}
		msg.Header.Set(messages.HeaderMsgID, id)
		fut, err := js.PublishMsgAsync(msg)
		if err != nil {
			rctx, cancel := context.WithTimeout(ctx, retryFor)
			ack, err := natsutil.PublishRetry(rctx, js, msg)
			cancel()
			if err != nil {
				return fmt.Errorf("publish %s: %w", id, err)
			}
			if err := recordAck(pt, ack, at, events, &mu, &lastSent); err != nil {
				return err
			}
		} else {
			if head > 0 && head >= len(pending)/2 {
				pending = append(pending[:0], pending[head:]...)
				head = 0
			}
			pending = append(pending, pendingChange{fut: fut, at: at, events: events})
		}
		published += events
		res.Messages++
		for head < len(pending) {
			done, err := settle(pending[head], false)
			if err != nil {
				return err
			}
			if !done {
				break
			}
			pending[head] = pendingChange{}
			head++
		}
		return nil
	}
	batcher := messages.NewBatcher(batchSize, cfg.MaxPayload)
	var batchAt uint32 // when the first event of the batch being filled was due
	sendBatch := func(b *messages.ChangeBatch, at uint32) error {
		data, err := messages.Marshal(b)
		if err != nil {
			return err
		}
		return send(b.BatchID, data, at, len(b.Changes))
	}
	for i := 0; ; i++ {
		if cfg.Events > 0 && i >= cfg.Events {
			break
		}
		el := time.Since(start)
		if cfg.Events == 0 && el >= cfg.Duration {
			break
		}
		if el >= maxBenchChangesSpan {
			return nil, fmt.Errorf("still publishing after %v: publish times are kept as 32-bit microseconds", maxBenchChangesSpan)
		}
		if cfg.Rate > 0 {
			if due := time.Duration(float64(i) / cfg.Rate * float64(time.Second)); due > el {
				time.Sleep(due - el)
			}
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var k int64
		if perm != nil {
			k = perm[i]
		} else {
			k = rng.Int64N(cfg.Keys)
		}
		delta := rng.Int64N(10001) - 5000
		ev, ok, err := st.update(prefix+strconv.Itoa(i), k, delta)
		if err != nil {
			return nil, err
		}
		if !ok {
			res.Skipped++
			continue
		}
		if batchSize == 1 {
			data, err := messages.Marshal(ev)
			if err != nil {
				return nil, err
			}
			if err := send(ev.EventID, data, since(), 1); err != nil {
				return nil, err
			}
			continue
		}
		at := batchAt
		if batcher.Len() == 0 {
			at = since()
		}
		batchAt = at
		if full := batcher.Add(ev); full != nil { // full by bytes: ev starts the next
			if err := sendBatch(full, at); err != nil {
				return nil, err
			}
			batchAt = since()
		}
		if batcher.Len() >= batchSize {
			if err := sendBatch(batcher.Flush(), batchAt); err != nil {
				return nil, err
			}
		}
	}
	if batcher.Len() > 0 {
		if err := sendBatch(batcher.Flush(), batchAt); err != nil {
			return nil, err
		}
	}
	for ; head < len(pending); head++ {
		if _, err := settle(pending[head], true); err != nil {
			return nil, err
		}
	}
	pubEnd := since()
	res.Published = published
	res.PublishS = float64(pubEnd) / 1e6
	if res.PublishS > 0 {
		res.PublishRate = float64(published) / res.PublishS
	}
	mu.Lock()
	last := lastSent
	mu.Unlock()

	// Wait until the last event is visible.
	deadline := time.Now().Add(cfg.WaitTimeout)
	notice := time.Now().Add(visibleNotice)
	for {
		mu.Lock()
		seen := len(obs) > 0 && obs[len(obs)-1].floor >= last
		perr := pollErr
		mu.Unlock()
		if seen || last == 0 {
			break
		}
		if perr != nil {
			return nil, perr
		}
		if now := time.Now(); now.After(deadline) {
			fmt.Fprintf(stderr, "gave up after --wait-timeout %v: the last events are not visible yet\n", cfg.WaitTimeout)
			break
		} else if now.After(notice) {
			fmt.Fprintf(stderr, "waiting for the last of %d events (stream sequence %d) to be visible\n", published, last)
			notice = notice.Add(visibleNotice)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(cfg.Poll):
		}
	}
	stopPoll()
	<-pollDone
	wall := time.Since(start)
	cpu1 := cputime.Process()
	ww1, wwErr1 := scrapeMetrics(ctx, cfg.WalwriterMetrics)
	sc1, scErr1 := scrapeMetrics(ctx, cfg.SchedulerMetrics)
	res.WallS = wall.Seconds()
	res.BenchCPUS = (cpu1 - cpu0).Seconds()
	if err := errors.Join(wwErr, wwErr1); err != nil {
		res.WalwriterMetricErr = err.Error()
	} else if ww0 != nil {
		d := func(name string) *float64 {
			v := ww1[name] - ww0[name]
			return &v
		}
		res.WalwriterCPUS = d("process_cpu_seconds_total")
		res.WalwriterBatches = d("strata_change_batches_total")
		res.WalwriterApplied = d("strata_changes_applied_total")
		if n := ww1["strata_change_apply_duration_seconds_count"] - ww0["strata_change_apply_duration_seconds_count"]; n > 0 {
			v := (ww1["strata_change_apply_duration_seconds_sum"] - ww0["strata_change_apply_duration_seconds_sum"]) / n * 1000
			res.WalwriterApplyMS = &v
		}
	}
	if err := errors.Join(scErr, scErr1); err != nil {
		res.SchedulerMetricErr = err.Error()
	} else if sc0 != nil {
		v := sc1["process_cpu_seconds_total"] - sc0["process_cpu_seconds_total"]
		res.SchedulerCPUS = &v
	}

	if n := len(pt.t); n > 0 {
		res.FirstSeq, res.LastSeq = pt.base+1, pt.base+uint64(n)
		for _, t := range pt.t {
			if t == 0 {
				res.Foreign++
			}
		}
	}
	res.SteadyVisibleRate = steadyRate(obs, 1e6, pubEnd, pt.eventsThrough())
	var lastVisible uint32
	for _, o := range obs {
		if o.floor >= last {
			lastVisible = o.at
			break
		}
	}
	lat, notVisible := changeLatencies(pt, obs)
	res.Visible, res.NotVisible = len(lat), notVisible
	if notVisible == 0 && lastVisible > 0 {
		res.VisibleS = float64(lastVisible) / 1e6
		res.VisibleRate = float64(res.Visible) / res.VisibleS
	}
	res.Latency = summarizeLatencies(lat)
	return res, nil
}

func recordAck(pt *pubTimes, ack *jetstream.PubAck, at uint32, events int, mu *sync.Mutex, lastSent *uint64) error {
	if ack.Stream != messages.StreamUpdates {
		return fmt.Errorf("an event was stored in stream %s, not %s: the deployment's streams are not strata's", ack.Stream, messages.StreamUpdates)
	}
	if ack.Duplicate {
		return fmt.Errorf("an event's ID was already in the stream (sequence %d): event IDs of this run are unique", ack.Sequence)
	}
	if err := pt.record(ack.Sequence, at, events); err != nil {
		return err
	}
	mu.Lock()
	*lastSent = max(*lastSent, ack.Sequence)
	mu.Unlock()
	return nil
}

// scrapeMetrics reads a Prometheus text page and returns each metric
// name's value summed over its series ("" url: nil, nil).
func scrapeMetrics(ctx context.Context, url string) (map[string]float64, error) {
	if url == "" {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	return parseMetrics(resp.Body)
}

// parseMetrics sums the samples of each metric name of a Prometheus text
// exposition (labels dropped).
func parseMetrics(r io.Reader) (map[string]float64, error) {
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest := line, ""
		if i := strings.IndexAny(line, "{ "); i >= 0 {
			name, rest = line[:i], line[i:]
		}
		if strings.HasPrefix(rest, "{") {
			j := strings.LastIndex(rest, "}")
			if j < 0 {
				continue
			}
			rest = rest[j+1:]
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		out[name] += v
	}
	return out, sc.Err()
}

func (r *benchChangesResult) print(w io.Writer) {
	rate := "as fast as acknowledged"
	if r.TargetRate > 0 {
		rate = fmt.Sprintf("target %.0f/s", r.TargetRate)
	}
	fmt.Fprintf(w, "table %s (%d rows), accounts 1..%d, %s, %d in flight, ack floor polled every %.0fms\n",
		r.Table, r.Rows, r.Keys, rate, r.InFlight, r.PollMS)
	fmt.Fprintf(w, "published %d update events in %d messages (batches of up to %d) in %.2fs: %.0f events/s (stream sequences %d..%d", r.Published, r.Messages, r.Batch, r.PublishS, r.PublishRate, r.FirstSeq, r.LastSeq)
	if r.Foreign > 0 {
		fmt.Fprintf(w, ", %d of them others'", r.Foreign)
	}
	fmt.Fprintln(w, ")")
	if r.Skipped > 0 {
		fmt.Fprintf(w, "skipped %d accounts drawn without a row\n", r.Skipped)
	}
	fmt.Fprintf(w, "visible: %d events", r.Visible)
	if r.NotVisible > 0 {
		fmt.Fprintf(w, ", %d NOT visible by the end of the wait", r.NotVisible)
	} else {
		fmt.Fprintf(w, ", the last %.2fs after the start: %.0f changes/s", r.VisibleS, r.VisibleRate)
	}
	fmt.Fprintf(w, "; steady state (1s after the start to the end of publishing) %.0f changes/s; largest backlog %d messages\n", r.SteadyVisibleRate, r.MaxBacklog)
	l := r.Latency
	fmt.Fprintf(w, "publish-to-visible latency: p50 %.0fms, p90 %.0fms, p99 %.0fms, max %.0fms, mean %.0fms\n", l.P50, l.P90, l.P99, l.Max, l.Mean)
	fmt.Fprintf(w, "CPU over %.1fs: this command %.1fs", r.WallS, r.BenchCPUS)
	if r.WalwriterCPUS != nil {
		fmt.Fprintf(w, ", walwriter %.1fs (%.0f%% of a core; %.0f batches, %.0f keys applied", *r.WalwriterCPUS, 100**r.WalwriterCPUS/r.WallS, *r.WalwriterBatches, *r.WalwriterApplied)
		if r.WalwriterApplyMS != nil {
			fmt.Fprintf(w, ", %.0fms a batch", *r.WalwriterApplyMS)
		}
		fmt.Fprint(w, ")")
	} else if r.WalwriterMetricErr != "" {
		fmt.Fprintf(w, ", walwriter unknown (%s)", r.WalwriterMetricErr)
	}
	if r.SchedulerCPUS != nil {
		fmt.Fprintf(w, ", scheduler and its NATS server %.1fs", *r.SchedulerCPUS)
	} else if r.SchedulerMetricErr != "" {
		fmt.Fprintf(w, ", scheduler unknown (%s)", r.SchedulerMetricErr)
	}
	fmt.Fprintln(w)
}
