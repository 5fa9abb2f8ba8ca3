package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/pprof"
	"time"

	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/internal/bytesize"
)

// mergeOne is `go run . mergeone`: one case of the mergeout suite, for
// profiling and for timing one build against another from outside. With
// --gen it writes the inputs of a width once (the suite's table, no
// Parquet); otherwise it runs the strata merge (--mode merge) or the codec
// floor (--mode floor) once on inputs written before, prints the seconds
// and, for a merge, the merger's Stats as JSON.
func mergeOne(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("mergeone", flag.ContinueOnError)
	dir := fs.String("dir", "", "directory of the inputs (written by --gen)")
	gen := fs.Bool("gen", false, "write the inputs into --dir")
	width := fs.Int("width", 200, "columns (with --gen)")
	containers := fs.Int("containers", 32, "inputs (with --gen)")
	rows := fs.Int("rows", 8192, "rows per input (with --gen)")
	mode := fs.String("mode", "merge", "merge or floor")
	grant := fs.String("grant", "1GiB", "memory grant of the merge")
	profile := fs.String("cpuprofile", "", "write a CPU profile of the run to this file")
	verbose := fs.Bool("v", false, "the merger's plan and phases on stderr")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" {
		return fmt.Errorf("mergeone: --dir is required")
	}
	if *gen {
		t := mergeTable{width: *width, containers: *containers, rows: *rows, seed: uint64(*width)}
		var mw mergeWidth
		if _, _, err := makeMergeInputs(t, *dir, &mw, false); err != nil {
			return err
		}
		fmt.Printf("inputs: %d x %d rows, %d columns, raw %d bytes, on disk %d bytes\n", *containers, *rows, *width, mw.BytesIn, mw.DiskIn)
		return nil
	}
	g, err := bytesize.Parse(*grant)
	if err != nil {
		return err
	}
	inputs := make([]string, *containers)
	for i := range inputs {
		inputs[i] = columnar.ContainerDir(filepath.Join(*dir, "data"), mergeTableName, mergeProjection, mergeContainerID(i))
	}
	out := filepath.Join(*dir, "out")
	tmp := filepath.Join(*dir, "tmp")
	os.RemoveAll(out)
	defer os.RemoveAll(out)
	if *profile != "" {
		f, err := os.Create(*profile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	start := time.Now()
	switch *mode {
	case "floor":
		if _, err := codecFloor(ctx, inputs, out); err != nil {
			return err
		}
		fmt.Printf("floor %.3f s\n", time.Since(start).Seconds())
	case "merge":
		log := slog.New(slog.DiscardHandler)
		if *verbose {
			log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
		}
		st, err := strataMerge(ctx, log, inputs, out, tmp, g)
		if err != nil {
			return err
		}
		fmt.Printf("merge %.3f s\n", time.Since(start).Seconds())
		js, _ := json.Marshal(st)
		fmt.Println(string(js))
	default:
		return fmt.Errorf("mergeone: --mode %q: want merge or floor", *mode)
	}
	return nil
}
