// Package walbench measures the walwriter on pgbench-like update
// workloads: bytes logged per update against a full row image, durable
// updates per second with group commit, and the same with one fdatasync
// per record. The strata CLI's `bench wal` command and this package's Go
// benchmarks run it.
package walbench

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strata-db/strata/internal/cputime"
	"github.com/strata-db/strata/messages"
	"github.com/strata-db/strata/walwriter"
)

// Accounts is the benchmark table, shaped like pgbench's original
// accounts: id, four int columns, three text columns (30, 84 and 100
// characters), a 262-byte row image.
var Accounts = walwriter.Table{Name: "accounts", Columns: []messages.RowType{
	messages.RowInt64, messages.RowInt64, messages.RowInt64, messages.RowInt64, messages.RowInt64,
	messages.RowText, messages.RowText, messages.RowText,
}}

var textWidths = [3]int{30, 84, 100}

// Workloads are the names Run accepts, in the order the CLI runs them.
var Workloads = []string{"one_int", "one_text", "half", "all", "mix"}

// Config is one benchmark run.
type Config struct {
	Dir       string // an empty directory for the WAL; removed after the run when Cleanup is set
	Workload  string
	Updates   int // measured updates
	Keys      int // distinct rows, all loaded as full images before measuring
	Producers int // concurrent producer goroutines
	InFlight  int // updates each producer keeps in flight (like a NATS consumer's MaxAckPending)
	// SyncUpdates is how many updates the one-fsync-per-record run makes;
	// 0 skips that run.
	SyncUpdates int
	Options     walwriter.Options // Tables is set by Run
	Seed        uint64
}

// Result is what one run measured.
type Result struct {
	Workload                  string  `json:"workload"`
	Updates                   int     `json:"updates"`
	Producers                 int     `json:"producers"`
	Keys                      int     `json:"keys"`
	RowBytes                  int     `json:"row_bytes"`
	BytesPerUpdate            float64 `json:"bytes_per_update"`
	FullImageBytesPerUpdate   float64 `json:"full_image_bytes_per_update"`
	DeltaRatio                float64 `json:"delta_ratio"`
	Deltas                    uint64  `json:"deltas"`
	FullImages                uint64  `json:"full_images"`
	UpdatesPerS               float64 `json:"updates_per_s"`
	Fsyncs                    uint64  `json:"fsyncs"`
	RecordsPerFsync           float64 `json:"records_per_fsync"`
	FsyncPerRecordUpdatesPerS float64 `json:"fsync_per_record_updates_per_s"`
	GroupCommitSpeedup        float64 `json:"group_commit_speedup"`
	Seconds                   float64 `json:"seconds"`
	// CPUSeconds is the process's user+system CPU time during the measured
	// group-commit phase, producers included; on a shared machine
	// updates_per_s is bounded by the CPU the process gets.
	CPUSeconds          float64 `json:"cpu_s"`
	UpdatesPerCPUSecond float64 `json:"updates_per_cpu_s"`
}

func int64Value(v int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)^1<<63) }

// textPool is random lowercase text that new text values are cut from, so
// producing a value costs one copy rather than a random draw per byte.
var textPool = func() []byte {
	rng := rand.New(rand.NewPCG(5, 5))
	b := make([]byte, 1<<16)
	for i := range b {
		b[i] = byte('a' + rng.IntN(26))
	}
	return b
}()

func randomText(rng *rand.Rand, n int) []byte {
	off := rng.IntN(len(textPool) - n)
	return append([]byte(nil), textPool[off:off+n]...)
}

func initialRow(id int64, rng *rand.Rand) walwriter.Row {
	return walwriter.Row{
		int64Value(id), int64Value(id / 100000), int64Value(id % 10), int64Value(0), int64Value(1700000000),
		randomText(rng, textWidths[0]), randomText(rng, textWidths[1]), randomText(rng, textWidths[2]),
	}
}

// mutate returns the next version of row under workload. The row's
// values are not changed (the WAL may still hold them); the new values
// share one allocation, as the values decoded from one message would.
func mutate(workload string, row walwriter.Row, rng *rand.Rand) walwriter.Row {
	if workload == "mix" {
		switch r := rng.IntN(100); {
		case r < 50:
			workload = "one_int"
		case r < 75:
			workload = "one_text"
		case r < 90:
			workload = "half"
		default:
			workload = "all"
		}
	}
	next := make(walwriter.Row, len(row))
	copy(next, row)
	var size int // of the new values
	switch workload {
	case "one_int":
		size = 8
	case "one_text":
		size = textWidths[0]
	case "half":
		size = 16 + textWidths[0] + textWidths[1]
	case "all":
		size = 5*8 + textWidths[0] + textWidths[1] + textWidths[2]
	}
	buf := make([]byte, 0, size)
	value := func(col int, v []byte) {
		next[col] = v[len(v)-len(row[col]) : len(v) : len(v)]
	}
	addInt := func(col int) {
		v := int64(binary.BigEndian.Uint64(next[col])^1<<63) + rng.Int64N(10001) - 5000
		buf = binary.BigEndian.AppendUint64(buf, uint64(v)^1<<63)
		value(col, buf)
	}
	addText := func(col int) {
		n := len(row[col])
		off := rng.IntN(len(textPool) - n)
		buf = append(buf, textPool[off:off+n]...)
		value(col, buf)
	}
	switch workload {
	case "one_int":
		addInt(3)
	case "one_text":
		addText(5)
	case "half":
		addInt(2)
		addInt(3)
		addText(5)
		addText(6)
	case "all":
		for c := range 5 {
			buf = binary.BigEndian.AppendUint64(buf, rng.Uint64())
			value(c, buf)
		}
		for c := 5; c < 8; c++ {
			addText(c)
		}
	}
	return next
}

// keyOf is the 8-byte key of row id; producers make their keys once.
func keyOf(id int) []byte { return binary.BigEndian.AppendUint64(nil, uint64(id)) }

// Run loads the keys, measures the workload with group commit and, when
// asked, with one fdatasync per record.
func Run(ctx context.Context, cfg Config) (Result, error) {
	known := false
	for _, w := range Workloads {
		known = known || w == cfg.Workload
	}
	if !known {
		return Result{}, fmt.Errorf("walbench: unknown workload %q (want one of %v)", cfg.Workload, Workloads)
	}
	if cfg.Producers < 1 || cfg.InFlight < 1 || cfg.Keys < cfg.Producers || cfg.Updates < 1 {
		return Result{}, fmt.Errorf("walbench: need producers, in-flight and updates >= 1 and keys >= producers")
	}
	res := Result{Workload: cfg.Workload, Updates: cfg.Updates, Producers: cfg.Producers, Keys: cfg.Keys}
	opts := cfg.Options
	opts.Tables = []walwriter.Table{Accounts}

	w, err := walwriter.Open(cfg.Dir+"/group", opts)
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(cfg.Dir + "/group")
	st := newState(cfg)
	res.RowBytes = st.rowBytes()
	// Load every key as a full image, as pgbench's init does.
	if _, err := st.drive(ctx, w, cfg.Keys, true); err != nil {
		w.Close()
		return res, err
	}
	before := w.Stats()
	cpu0 := cputime.Process()
	elapsed, err := st.drive(ctx, w, cfg.Updates, false)
	cpu := cputime.Process() - cpu0
	after := w.Stats()
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return res, err
	}
	n := float64(cfg.Updates)
	res.Seconds = elapsed.Seconds()
	res.BytesPerUpdate = float64(after.Bytes-before.Bytes) / n
	res.FullImageBytesPerUpdate = float64(after.FullImageBytes-before.FullImageBytes) / n
	res.DeltaRatio = res.BytesPerUpdate / res.FullImageBytesPerUpdate
	res.Deltas = after.Deltas - before.Deltas
	res.FullImages = after.FullImages - before.FullImages
	res.Fsyncs = after.Fsyncs - before.Fsyncs
	res.RecordsPerFsync = n / float64(max(res.Fsyncs, 1))
	res.UpdatesPerS = n / elapsed.Seconds()
	if cpu > 0 {
		res.CPUSeconds = cpu.Seconds()
		res.UpdatesPerCPUSecond = n / cpu.Seconds()
	}

	if cfg.SyncUpdates > 0 {
		opts.MaxBatchRecords = 1
		opts.BatchWindow = 0
		ws, err := walwriter.Open(cfg.Dir+"/single", opts)
		if err != nil {
			return res, err
		}
		defer os.RemoveAll(cfg.Dir + "/single")
		st := newState(cfg)
		elapsed, err := st.drive(ctx, ws, cfg.SyncUpdates, false)
		if cerr := ws.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return res, err
		}
		res.FsyncPerRecordUpdatesPerS = float64(cfg.SyncUpdates) / elapsed.Seconds()
		res.GroupCommitSpeedup = res.UpdatesPerS / res.FsyncPerRecordUpdatesPerS
	}
	return res, nil
}

// state holds each producer's rows; producer p owns keys p, p+P, p+2P, ...
// so no two producers update the same key and every update's base is known.
type state struct {
	cfg  Config
	rows [][]walwriter.Row // by producer, by key index within the producer
	keys [][][]byte        // like rows
	seq  []uint64          // next event sequence per producer
}

func newState(cfg Config) *state {
	s := &state{cfg: cfg, rows: make([][]walwriter.Row, cfg.Producers), keys: make([][][]byte, cfg.Producers), seq: make([]uint64, cfg.Producers)}
	rng := rand.New(rand.NewPCG(cfg.Seed, 99))
	for id := range cfg.Keys {
		p := id % cfg.Producers
		s.rows[p] = append(s.rows[p], initialRow(int64(id), rng))
		s.keys[p] = append(s.keys[p], keyOf(id))
	}
	return s
}

func (s *state) rowBytes() int {
	n := 0
	for _, v := range s.rows[0][0] {
		n += len(v) + 1
	}
	return n
}

// drive makes n updates (or, with load, one per key) from all producers,
// each keeping up to InFlight updates waiting for durability, and returns
// the time until the last one was durable.
func (s *state) drive(ctx context.Context, w *walwriter.WAL, n int, load bool) (time.Duration, error) {
	var wg sync.WaitGroup
	var firstErr atomic.Pointer[error]
	start := time.Now()
	for p := range s.cfg.Producers {
		count := n / s.cfg.Producers
		if p < n%s.cfg.Producers {
			count++
		}
		if load {
			count = len(s.rows[p])
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(s.cfg.Seed, uint64(p)+1))
			slots := make(chan struct{}, s.cfg.InFlight)
			var pending sync.WaitGroup
			done := func(_ walwriter.LSN, err error) {
				if err != nil {
					first := err // only a failure escapes to the heap
					firstErr.CompareAndSwap(nil, &first)
				}
				<-slots
				pending.Done()
			}
			rows := s.rows[p]
			prefix := fmt.Sprintf("bench-p%d-", p)
			var id []byte
			for i := range count {
				if ctx.Err() != nil || firstErr.Load() != nil {
					break
				}
				k := i
				if !load {
					k = rng.IntN(len(rows))
					rows[k] = mutate(s.cfg.Workload, rows[k], rng)
				}
				s.seq[p]++
				id = strconv.AppendUint(append(id[:0], prefix...), s.seq[p], 10)
				u := walwriter.Update{
					EventID: string(id),
					Table:   Accounts.Name,
					Key:     s.keys[p][k],
					Row:     rows[k],
				}
				slots <- struct{}{}
				pending.Add(1)
				if err := w.AppendAsync(u, done); err != nil {
					first := err // only a failure escapes to the heap
					firstErr.CompareAndSwap(nil, &first)
					<-slots
					pending.Done()
					break
				}
			}
			pending.Wait()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if e := firstErr.Load(); e != nil {
		return elapsed, *e
	}
	return elapsed, ctx.Err()
}
