package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime/pprof"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/strata-db/strata/internal/bytesize"
	"github.com/strata-db/strata/walwriter"
	"github.com/strata-db/strata/walwriter/walbench"
)

func init() {
	register(command{
		name:    "bench wal",
		summary: "measure the WAL: bytes per update and durable updates/s on pgbench-like workloads",
		run:     runBenchWAL,
	})
}

func runBenchWAL(ctx context.Context, args []string) error {
	cmd := newCmdLine("bench wal", "usage: strata bench wal [flags]")
	fs := cmd.fs
	asJSON := fs.Bool("json", false, "print one JSON object per workload and line")
	dir := fs.String("dir", "", "directory for the WAL files (default: a temporary directory; its disk is what is measured)")
	workloads := fs.String("workloads", strings.Join(walbench.Workloads, ","), "comma-separated workloads: "+strings.Join(walbench.Workloads, ", "))
	updates := fs.Int("updates", 1000000, "measured updates per workload")
	keys := fs.Int("keys", 100000, "rows of the accounts table, loaded as full images before measuring")
	producers := fs.Int("producers", 64, "concurrent producers")
	inFlight := fs.Int("in-flight", 64, "updates each producer keeps waiting for durability")
	syncUpdates := fs.Int("sync-updates", 3000, "updates of the one-fsync-per-record comparison run (0: skip)")
	segment := fs.String("segment-size", "64MiB", "WAL segment size")
	window := fs.Duration("batch-window", 0, "how long a batch waits for more records (0: take what is queued)")
	ckptBytes := fs.String("checkpoint-bytes", "", "automatic checkpoint interval in record bytes (default: 4 segments)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run (loading, group commit and one-fsync-per-record runs) to this file")
	if err := cmd.parse(args); err != nil {
		return err
	}
	segSize, err := bytesize.Parse(*segment)
	if err != nil {
		return fmt.Errorf("%w: --segment-size: %v", errUsage, err)
	}
	var ckpt int64
	if *ckptBytes != "" {
		if ckpt, err = bytesize.Parse(*ckptBytes); err != nil {
			return fmt.Errorf("%w: --checkpoint-bytes: %v", errUsage, err)
		}
	}
	root := *dir
	if root == "" {
		if root, err = os.MkdirTemp("", "strata-bench-wal-"); err != nil {
			return err
		}
		defer os.RemoveAll(root)
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("start CPU profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	var tw *tabwriter.Writer
	if !*asJSON {
		tw = tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "workload\tupdates\trow B\tB/update\tfull image B/update\tratio\tupdates/s\tfsyncs\trecords/fsync\tfsync-per-record updates/s\tspeedup\tupdates/cpu-s\t")
	}
	for _, wl := range strings.Split(*workloads, ",") {
		res, err := walbench.Run(ctx, walbench.Config{
			Dir:         fmt.Sprintf("%s/%s-%d", root, wl, time.Now().UnixNano()),
			Workload:    strings.TrimSpace(wl),
			Updates:     *updates,
			Keys:        *keys,
			Producers:   *producers,
			InFlight:    *inFlight,
			SyncUpdates: *syncUpdates,
			Options:     walwriter.Options{SegmentSize: segSize, BatchWindow: *window, CheckpointBytes: ckpt},
			Seed:        1,
		})
		if err != nil {
			return fmt.Errorf("workload %s: %w", wl, err)
		}
		if *asJSON {
			b, err := json.Marshal(res)
			if err != nil {
				return err
			}
			fmt.Println(string(b))
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.1f\t%.1f\t%.3f\t%.0f\t%d\t%.0f\t%.0f\t%.1fx\t%.0f\t\n",
			res.Workload, res.Updates, res.RowBytes, res.BytesPerUpdate, res.FullImageBytesPerUpdate, res.DeltaRatio,
			res.UpdatesPerS, res.Fsyncs, res.RecordsPerFsync, res.FsyncPerRecordUpdatesPerS, res.GroupCommitSpeedup, res.UpdatesPerCPUSecond)
	}
	if tw != nil {
		return tw.Flush()
	}
	return nil
}
