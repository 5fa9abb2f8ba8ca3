package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// report is everything one run measured; writeReport renders it as
// BENCHMARKS.md.
type report struct {
	Started, Finished time.Time
	Command           string
	Quick             bool
	Sizes             sizes
	Machine           machine
	Peers             []peerInfo
	Windows           *windowSuite
	Mergeout          *mergeSuite
	WAL               *walSuite
	Store             *storeSuite       // absent in results of runs before the store suite
	Spill             *spillSuite       `json:",omitempty"` // tables larger than the grant (spill.go)
	SpillLarge        *spillSuite       `json:"-"`          // the last --large run's, read from its own file
	Pgwire            *pgwireSuite      `json:",omitempty"` // the SQL front door (pgwire.go)
	Charts            map[string]string // chart file name -> path relative to the report
}

// failures counts result mismatches and strata's failed measurements (not
// skips, and not a peer running out of memory).
func (r *report) failures() int {
	n := 0
	if r.Mergeout != nil {
		for _, w := range r.Mergeout.Widthwise {
			if w.InputErr != "" || w.Floor.Err != "" {
				n++
			}
			for _, c := range w.Cases {
				if c.Strata.Err != "" {
					n++
				}
			}
		}
	}
	if r.WAL != nil {
		for _, c := range r.WAL.Cases {
			if c.Strata.Err != "" {
				n++
			}
		}
	}
	if r.Store != nil {
		for _, c := range r.Store.Cases {
			if c.Err != "" {
				n++
			}
			for _, rd := range c.Reads {
				if rd.Time.Err != "" {
					n++
				}
			}
		}
	}
	n += r.spillFailures()
	n += r.pgwireFailures()
	if r.Windows != nil {
		for _, q := range r.Windows.Results {
			for _, m := range q.Times {
				if m.Err != "" {
					n++
				}
			}
			for _, c := range q.Checks {
				if !c.OK {
					n++
				}
			}
		}
	}
	return n
}

// writeResults saves the raw figures, so the report can be re-rendered
// (--replot) and read by programs.
func writeResults(path string, r *report) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encode results: %w", err)
	}
	return writeFileAtomic(path, append(b, '\n'))
}

func readResults(path string) (*report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read results: %w", err)
	}
	var r report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("decode results %s: %w", path, err)
	}
	return &r, nil
}

func writeFileAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func writeReport(path string, r *report) error {
	var b bytes.Buffer
	r.render(&b)
	return writeFileAtomic(path, b.Bytes())
}

func (r *report) render(b *bytes.Buffer) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("# strata benchmarks\n\n")
	p("strata measured side by side with DuckDB and PostgreSQL on the same data on the same machine, ")
	p("with every window query's result checked across the systems. This file is generated: ")
	p("`make bench` (or `%s`) rewrites it and the charts in `bench/charts/`.\n\n", r.Command)
	mode := "full"
	if r.Quick {
		mode = "quick (`--quick`: smaller data, fewer repetitions)"
	}
	p("- Command: `%s` (mode: %s)\n", r.Command, mode)
	p("- Run: %s, %s\n", r.Started.Format("2006-01-02 15:04 UTC"), r.Finished.Sub(r.Started).Round(time.Second))
	p("- Machine: %s; %s; kernel %s; %s\n", r.Machine, r.Machine.OS, r.Machine.Kernel, r.Machine.Go)
	p("- Load average (1 min): %.1f at the start, %.1f at the end, on %d cores", r.Machine.LoadStart, r.Machine.LoadEnd, r.Machine.Cores)
	if max(r.Machine.LoadStart, r.Machine.LoadEnd) > float64(r.Machine.Cores) {
		p(": other work shared the CPUs during this run, so every system's times are slower and noisier than on an idle machine")
	}
	p("\n- Times are the fastest of the repeated runs (the minimum is the figure least disturbed by other work).\n\n")

	p("## Systems\n\n")
	p("| system | version | settings | status |\n| --- | --- | --- | --- |\n")
	for _, peer := range r.Peers {
		status := "measured"
		if peer.Skipped != "" {
			status = "skipped: " + cell(peer.Skipped)
		}
		p("| %s | %s | %s | %s |\n", peer.Name, orDash(peer.Version), cell(peer.Settings), status)
	}
	p("\n")

	r.renderTargets(b)
	if r.Windows != nil {
		r.renderWindows(b)
	}
	if r.Mergeout != nil {
		r.renderMergeout(b)
	}
	if r.WAL != nil {
		r.renderWAL(b)
	}
	if r.Store != nil {
		r.renderStore(b)
	}
	r.renderSpill(b)
	if r.Pgwire != nil {
		r.renderPgwire(b)
	}
}

// renderTargets compares the figures with the ones the issues set.
func (r *report) renderTargets(b *bytes.Buffer) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("## Against the targets\n\n")
	p("| target | measured | met |\n| --- | --- | --- |\n")
	if w := r.Windows; w != nil {
		minD, minP := math.Inf(1), math.Inf(1)
		var worstD, worstP string
		missing := 0
		for _, q := range w.Results {
			d := ratio(q.Times[sysDuck1], q.Times[sysStrata])
			pg := ratio(q.Times[sysPostgres], q.Times[sysStrata])
			if d == 0 || pg == 0 {
				missing++
			}
			if d > 0 && d < minD {
				minD, worstD = d, q.Query.Name
			}
			if pg > 0 && pg < minP {
				minP, worstP = pg, q.Query.Name
			}
		}
		p("| windows: every query >= 3x faster than DuckDB with one thread | %s | %s |\n", worstRatio(minD, worstD, missing), met(minD >= 3 && missing == 0))
		if slices.Contains(w.Systems, sysStrataCold) {
			// The same target for the runs that read and decode every
			// block (no block cache), beside the runs through the cache.
			minC, worstC, missingC := math.Inf(1), "", 0
			for _, q := range w.Results {
				if d := ratio(q.Times[sysDuck1], q.Times[sysStrataCold]); d == 0 {
					missingC++
				} else if d < minC {
					minC, worstC = d, q.Query.Name
				}
			}
			p("| windows: every query >= 3x faster than DuckDB with one thread, strata without a block cache | %s | %s |\n",
				worstRatio(minC, worstC, missingC), met(minC >= 3 && missingC == 0))
		}
		p("| windows: every query >= 10x faster than PostgreSQL 15 | %s | %s |\n", worstRatio(minP, worstP, missing), met(minP >= 10 && missing == 0))
		if slices.Contains(w.Systems, sysStrataAll) {
			minA, worstA, missingA := math.Inf(1), "", 0
			for _, q := range w.Results {
				d := ratio(q.Times[sysDuckAll], q.Times[sysStrataAll])
				if d == 0 {
					missingA++
				} else if d < minA {
					minA, worstA = d, q.Query.Name
				}
			}
			p("| windows: every query >= 3x faster than DuckDB with all cores, strata on all cores | %s | %s |\n",
				worstRatio(minA, worstA, missingA), met(minA >= 3 && missingA == 0))
		}
		bad, checked, uncompared := 0, 0, 0
		for _, q := range w.Results {
			for _, c := range q.Checks {
				checked++
				if !c.OK {
					bad++
				}
			}
			if !comparedWithPeers(q.Checks) {
				uncompared++
			}
		}
		detail := fmt.Sprintf("%d of %d comparisons identical", checked-bad, checked)
		verdict := met(bad == 0 && checked > 0)
		if uncompared > 0 {
			detail += fmt.Sprintf("; %s not compared with both DuckDB and PostgreSQL (a system skipped, failed or was stopped at the time limit)", plural(uncompared, "query", "queries"))
			if bad == 0 && checked > 0 {
				verdict = "partly"
			}
		}
		p("| windows: same results as DuckDB and PostgreSQL | %s | %s |\n", detail, verdict)
		byName := map[string]measure{}
		for _, q := range w.Results {
			byName[q.Query.Name] = q.Times[sysStrata]
		}
		// Per-partition overhead: the presorted Q0 (no sort) against one partition.
		if rt := ratio(byName["q0_presorted"], byName["q0_one_partition"]); rt > 0 {
			p("| windows (strata alone): Q0 presorted with %s partitions within 1.3x of Q0 with one | %s | %s |\n", formatCount(w.Rows), formatRatio(rt), met(rt <= 1.3))
		}
		if rt := ratio(byName["q0_presorted"], byName["q0_one_partition_distinct"]); rt > 0 {
			p("| windows (strata alone): Q0 within 1.3x of q0_one_partition_distinct (Q0 presorted, %s partitions; one partition beside the same column) | %s | %s |\n",
				formatCount(w.Rows), formatRatio(rt), met(rt <= 1.3))
		}
		// The same, against one partition over the same stored column: a,
		// stored sorted, decodes 2.7 times slower than in id order, which
		// the row above counts as per-partition cost.
		if rt := ratio(byName["q0_presorted"], byName["q0_one_partition_sorted"]); rt > 0 {
			p("| windows (strata alone): Q0 presorted within 1.3x of q0_one_partition_sorted (one partition over the same stored column) | %s | %s |\n",
				formatRatio(rt), met(rt <= 1.3))
		}
		r.renderScalingTarget(b)
		if rt := ratio(byName["min_rows10000"], byName["min_rows10"]); rt > 0 {
			p("| windows (strata alone): sliding min over 10000 rows within 1.5x of over 10 rows | %s | %s |\n", formatRatio(rt), met(rt <= 1.5))
		}
	}
	if m := r.Mergeout; m != nil {
		slower, total := 0, 0
		worst := math.Inf(1)
		var worstCase string
		var flat []string
		flatOK := true
		for _, w := range m.Widthwise {
			for _, c := range w.Cases {
				total++
				rt := ratio(c.Duck, c.Strata)
				if c.Duck.Err != "" && c.Strata.ok() {
					continue // DuckDB failed (out of memory): strata finished, so it is faster
				}
				if rt == 0 || rt <= 1 {
					slower++
				}
				if rt > 0 && rt < worst {
					worst, worstCase = rt, fmt.Sprintf("%d columns at %s", w.Width, formatBytes(c.Grant))
				}
			}
			lo, hi := w.caseAt(smallestGrant(m.Grants)), w.caseAt(largestGrant(m.Grants))
			rt := ratio(lo.Strata, hi.Strata)
			flat = append(flat, fmt.Sprintf("%d columns: %s", w.Width, formatRatio(rt)))
			if rt == 0 || rt > 1.25 {
				flatOK = false
			}
		}
		p("| mergeout: faster than DuckDB at the same memory limit, every grant and width | faster in %d of %d cases; DuckDB/strata %s | %s |\n",
			total-slower, total, worstRatio(worst, worstCase, 0), met(slower == 0 && total > 0))
		p("| mergeout: strata at %s within 1.25x of strata at %s | %s | %s |\n",
			formatBytes(smallestGrant(m.Grants)), formatBytes(largestGrant(m.Grants)), strings.Join(flat, "; "), met(flatOK && len(flat) > 0))
	}
	if wl := r.WAL; wl != nil {
		for _, c := range wl.Cases {
			switch {
			case c.Workload.Name == "int1" && c.Strata.ok():
				p("| WAL (strata alone): one int column at most 40 bytes per update | %.1f bytes | %s |\n", c.Strata.BytesPerUpdate, met(c.Strata.BytesPerUpdate <= 40))
			case c.Workload.Name == "all" && c.Strata.ok() && c.StrataFullImage.ok() && c.StrataFullImage.BytesPerUpdate > 0:
				over := c.Strata.BytesPerUpdate/c.StrataFullImage.BytesPerUpdate - 1
				p("| WAL (strata alone): every column changed at most 2%% above the full image | %.1f vs %.1f bytes (%+.1f%%) | %s |\n",
					c.Strata.BytesPerUpdate, c.StrataFullImage.BytesPerUpdate, over*100, met(over <= 0.02))
			}
		}
		for _, c := range wl.Cases {
			if c.Workload.Name != "int1" {
				continue
			}
			for _, cfg := range []string{pgPlain, pgHOT} {
				pg := c.PG[cfg]
				if !c.Strata.ok() || !pg.ok() {
					p("| WAL: one int column, at most half of %s | not measured | no |\n", cfg)
					continue
				}
				share := c.Strata.BytesPerUpdate / pg.BytesPerUpdate
				p("| WAL: one int column, at most half of %s | %.1f vs %.1f bytes (%.0f%%) | %s |\n",
					cfg, c.Strata.BytesPerUpdate, pg.BytesPerUpdate, share*100, met(share <= 0.5))
			}
		}
	}
	if r.Store != nil {
		r.renderStoreTargets(b)
	}
	r.renderSpillTargets(b)
	if r.Pgwire != nil {
		r.renderPgwireTargets(b)
	}
	p("\n")
}

func (r *report) renderWindows(b *bytes.Buffer) {
	w := r.Windows
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("## Window functions\n\n")
	p("Table `w` of %s rows: `id` (stored order), `a` (a permutation: %s distinct partitions), `c` (constant: one partition), ",
		formatCount(w.Rows), formatCount(w.Rows))
	p("`g` (%d groups), `x` (a permutation: unique order key), `t` (distinct timestamps, one second apart, in random order). ", w.Groups)
	p("`w_by_a` holds the same rows stored sorted on `a` (for strata: a projection sorted on `a`). ")
	p("Loading is not timed. DuckDB and PostgreSQL are timed running `SELECT count(*), max(col)... FROM (query) q` ")
	p("over every output column, so the windows are computed in full and no rows are shipped to the client; ")
	p("strata is timed from the query spec to the last result batch in memory, and the collection its worker makes after a job ")
	p("(the Go collector's cycle between jobs, after the worker has published the job's outcome; its share of each query is in strata's notes below the table). ")
	p("Results are then fetched in full from each system, sorted (no query has an ORDER BY) and compared row by row: ")
	runs := runsText(w.Repeats)
	if w.ShortRuns {
		runs += fmt.Sprintf(" (a query whose fastest run is under %s runs again, for every system alike, as many times as fit in %s, up to %d runs: a pause of a millisecond on the host is a third of such a run)",
			shortRun, shortRunTime, shortRunsMost)
	}
	p("integers exactly, fractions within a relative %.0e. %s; a query still running after %s is stopped and shown as a lower bound.\n\n",
		relTolerance, runs, w.Limit)
	for _, n := range w.Notes {
		if n != "" {
			p("%s\n\n", n)
		}
	}
	p("| query | ")
	for _, s := range w.Systems {
		p("%s s | ", s)
	}
	allCores := slices.Contains(w.Systems, sysStrataAll)
	p("DuckDB 1 thread / strata | ")
	if allCores {
		p("DuckDB all cores / strata all cores | ")
	}
	p("PostgreSQL / strata | results |\n|")
	for range len(w.Systems) + 4 + btoi(allCores) {
		p(" --- |")
	}
	p("\n")
	var notes []string
	for _, q := range w.Results {
		p("| `%s` | ", q.Query.Name)
		for _, s := range w.Systems {
			p("%s | ", formatSeconds(q.Times[s]))
		}
		if n := strataNote(q.Times[sysStrata]); n != "" {
			notes = append(notes, fmt.Sprintf("`%s`: %s", q.Query.Name, n))
		}
		p("%s | ", ratioText(q.Times[sysDuck1], q.Times[sysStrata]))
		if allCores {
			p("%s | ", ratioText(q.Times[sysDuckAll], q.Times[sysStrataAll]))
		}
		p("%s | %s |\n", ratioText(q.Times[sysPostgres], q.Times[sysStrata]), checksCell(q.Checks))
	}
	p("\n")
	if len(notes) > 0 {
		p("strata's runs: %s.\n\n", strings.Join(notes, "; "))
	}
	if path, ok := r.Charts[chartWindows]; ok {
		p("![window query seconds per system](%s)\n\n", path)
	}
	if path, ok := r.Charts[chartScaling]; ok {
		p("strata's seconds per query at each thread count it ran with (`--threads` adds counts):\n\n")
		p("![strata window query seconds by thread count](%s)\n\n", path)
	}
	p("<details><summary>The queries</summary>\n\n")
	for _, q := range w.Results {
		p("- `%s`: `%s`\n", q.Query.Name, q.Query.Text())
	}
	p("\n</details>\n\n")
	var problems []string
	for _, q := range w.Results {
		for _, s := range w.Systems {
			if m := q.Times[s]; m.Err != "" {
				problems = append(problems, fmt.Sprintf("- `%s` on %s failed: %s", q.Query.Name, s, cell(m.Err)))
			}
		}
		for _, c := range q.Checks {
			if !c.OK {
				problems = append(problems, fmt.Sprintf("- `%s`: %s vs %s: %s", q.Query.Name, c.A, c.B, cell(c.Detail)))
			}
		}
	}
	if len(problems) > 0 {
		p("Failures and mismatches:\n\n%s\n\n", strings.Join(problems, "\n"))
	}
	if skips := skipReasons(w); len(skips) > 0 {
		p("Skipped: %s\n\n", strings.Join(skips, "; "))
	}
}

func (r *report) renderMergeout(b *bytes.Buffer) {
	m := r.Mergeout
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("## Mergeout\n\n")
	p("%d input containers of %s rows each, sorted on a bigint key `k` drawn from one range (every input overlaps every other), ",
		m.Containers, formatCount(m.RowsPerContainer))
	p("then columns cycling through int64, float64, utf8 (8-24 chars), int32, timestamp, bool, date32 and float32, one value in ten NULL. ")
	p("strata merges the containers into one (`merger.Merge` with the grant). DuckDB, in a fresh in-memory database with all cores and ")
	p("`memory_limit` set to the grant, produces the same sorted output from the same rows exported as Parquet: ")
	p("`COPY (SELECT * FROM read_parquet([...]) ORDER BY k) TO 'out.parquet' (FORMAT parquet, COMPRESSION lz4_raw)`, then an fsync of that file, as strata's merge commits its output durably. ")
	p("The codec floor decompresses every input block and compresses the same rows into one container, with no merge, ")
	p("on as many goroutines as the merger gathers columns with. ")
	p("%s.\n\n", runsText(m.Repeats))
	p("| columns | input (raw / on disk) | grant | strata s | MB/s | peak | plan | files opened | blocks decoded / total | DuckDB s | DuckDB / strata | codec floor s | strata / floor |\n")
	p("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, w := range m.Widthwise {
		if w.InputErr != "" {
			p("| %d | failed: %s | | | | | | | | | | | |\n", w.Width, cell(w.InputErr))
			continue
		}
		for _, c := range w.Cases {
			mbps, peak, plan, files, blocks := "-", "-", "-", "-", "-"
			if c.Stats != nil && c.Strata.ok() {
				mbps = fmt.Sprintf("%.0f", float64(w.BytesIn)/1e6/c.Strata.Seconds)
				peak = formatBytes(c.Stats.PeakBytes)
				if c.Stats.PeakBytes > c.Grant {
					peak += " (over the grant)"
				}
				plan = c.Stats.Plan
				files = fmt.Sprintf("%d", c.Stats.FilesOpened)
				blocks = fmt.Sprintf("%d / %d", c.Stats.BlocksDecompressed, c.Stats.BlocksTotal)
			}
			p("| %d | %s / %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
				w.Width, formatBytes(w.BytesIn), formatBytes(w.DiskIn), formatBytes(c.Grant), formatSeconds(c.Strata), mbps, peak, plan,
				files, blocks, formatSeconds(c.Duck), formatRatio(ratio(c.Duck, c.Strata)), formatSeconds(w.Floor), formatRatio(ratio(c.Strata, w.Floor)))
		}
	}
	p("\n")
	if path, ok := r.Charts[chartMergeout]; ok {
		p("![mergeout seconds by memory grant](%s)\n\n", path)
	}
	var problems, oom []string
	for _, w := range m.Widthwise {
		for _, c := range w.Cases {
			if c.Strata.Err != "" {
				problems = append(problems, fmt.Sprintf("- strata, %d columns at %s: %s", w.Width, formatBytes(c.Grant), cell(c.Strata.Err)))
			}
			switch {
			case strings.Contains(c.Duck.Err, "Out of Memory"):
				oom = append(oom, fmt.Sprintf("%d columns at %s (%s)", w.Width, formatBytes(c.Grant), cell(strings.TrimPrefix(c.Duck.Err, "duckdb: "))))
			case c.Duck.Err != "":
				problems = append(problems, fmt.Sprintf("- DuckDB, %d columns at %s: %s", w.Width, formatBytes(c.Grant), cell(c.Duck.Err)))
			}
		}
		if w.Floor.Err != "" {
			problems = append(problems, fmt.Sprintf("- codec floor, %d columns: %s", w.Width, cell(w.Floor.Err)))
		}
	}
	if len(oom) > 0 {
		p("DuckDB could not sort the rows within its memory_limit (it spills to its temp_directory, but still ran out of memory) at: %s.\n\n",
			strings.Join(oom, "; "))
	}
	if len(problems) > 0 {
		p("Failures:\n\n%s\n\n", strings.Join(problems, "\n"))
	}
}

func (r *report) renderWAL(b *bytes.Buffer) {
	wl := r.WAL
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("## WAL volume per UPDATE\n\n")
	p("Table `u (id bigint primary key, i1..i4 bigint, s1 text (30 chars), s2 text, s3 text (90 chars))`: %d bytes a row in strata's row image, ",
		wl.StrataRowBytes)
	if wl.PGRowBytes > 0 {
		p("%.0f bytes a heap tuple in PostgreSQL. ", wl.PGRowBytes)
	}
	p("%s rows are loaded (not counted), then %s updates of uniformly random keys per workload, the same updates on both systems. ",
		formatCount(wl.Rows), formatCount(wl.Updates))
	p("strata: `walwriter` fed by %d concurrent producers (group commit), bytes of records written per update (the delta against the key's previous image, ", walProducers)
	p("or the full image when that is smaller), and what full-image logging would have written. ")
	p("PostgreSQL: `pg_wal_lsn_diff(pg_current_wal_lsn())` after minus before, divided by the updates, run in transactions of 1000; ")
	p("with `full_page_writes = off` after a checkpoint (the per-record cost, as in steady state), with fillfactor 100 and with fillfactor 50 ")
	p("(room for heap-only-tuple updates on the same page, which get PostgreSQL's prefix/suffix compression), ")
	p("and with `full_page_writes = on` right after a checkpoint (every first touch of a page logs the whole page).\n\n")
	p("| workload | strata B/update | strata, full images | ")
	for _, cfg := range pgWALConfigs {
		p("%s | ", cfg.name)
	}
	p("strata / %s | strata updates/s |\n|", pgPlain)
	for range 5 + len(pgWALConfigs) {
		p(" --- |")
	}
	p("\n")
	for _, c := range wl.Cases {
		p("| %s | %s | %s | ", c.Workload.Title, formatBytesPerUpdate(c.Strata), formatBytesPerUpdate(c.StrataFullImage))
		for _, cfg := range pgWALConfigs {
			f := c.PG[cfg.name]
			s := formatBytesPerUpdate(f)
			if f.ok() && f.Note != "" && cfg.name == pgHOT {
				s += fmt.Sprintf(" (%s)", f.Note[strings.LastIndex(f.Note, ",")+2:])
			}
			p("%s | ", s)
		}
		share := "-"
		if pg := c.PG[pgPlain]; pg.ok() && c.Strata.ok() && pg.BytesPerUpdate > 0 {
			share = fmt.Sprintf("%.0f%%", 100*c.Strata.BytesPerUpdate/pg.BytesPerUpdate)
		}
		rate := "-"
		if c.StrataRate > 0 {
			rate = formatCount(int(c.StrataRate))
		}
		p("%s | %s |\n", share, rate)
	}
	p("\n")
	if path, ok := r.Charts[chartWAL]; ok {
		p("![WAL bytes per update per system](%s)\n\n", path)
	}
	r.renderWALBreakdown(b)
}

// renderWALBreakdown shows where PostgreSQL's bytes go for the one-int
// update, from pg_waldump --stats over the measured range.
func (r *report) renderWALBreakdown(b *bytes.Buffer) {
	var c *walCase
	for i := range r.WAL.Cases {
		if r.WAL.Cases[i].Workload.Name == "int1" {
			c = &r.WAL.Cases[i]
		}
	}
	if c == nil {
		return
	}
	types := map[string]bool{}
	for _, cfg := range pgWALConfigs {
		for t := range c.PG[cfg.name].ByRecordType {
			types[t] = true
		}
	}
	if len(types) == 0 {
		return
	}
	names := make([]string, 0, len(types))
	for t := range types {
		names = append(names, t)
	}
	slices.Sort(names)
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("Where PostgreSQL's bytes go for the one-int-column update (`pg_waldump --stats=record` over the measured range, bytes per update; ")
	p("`Heap2/PRUNE` is the page pruning that sustained updates trigger, `Heap/LOCK` and `Btree/INSERT_LEAF` come with updates that leave the page; ")
	p("the sums are below the totals above by the 8-byte alignment of each record):\n\n")
	p("| record type |")
	for _, cfg := range pgWALConfigs {
		p(" %s |", cfg.name)
	}
	p("\n| --- |")
	for range pgWALConfigs {
		p(" --- |")
	}
	p("\n")
	for _, t := range names {
		p("| %s |", t)
		for _, cfg := range pgWALConfigs {
			if v, ok := c.PG[cfg.name].ByRecordType[t]; ok {
				p(" %.1f |", v)
			} else {
				p(" - |")
			}
		}
		p("\n")
	}
	p("\n")
}

// scalingQueries are the queries the scaling target holds strata's
// all-cores runs to.
var scalingQueries = []string{"rownum_rank", "sum_rows10", "lag_lead"}

// renderScalingTarget: strata on all cores against strata on one thread.
func (r *report) renderScalingTarget(b *bytes.Buffer) {
	w := r.Windows
	cores := w.StrataThreads[sysStrataAll]
	if cores < 2 {
		return // not measured, or a one-core machine: nothing to scale to
	}
	need := 0.8 * float64(cores)
	var got []string
	ok := true
	for _, name := range scalingQueries {
		var q *windowResult
		for i := range w.Results {
			if w.Results[i].Query.Name == name {
				q = &w.Results[i]
			}
		}
		if q == nil {
			continue
		}
		sp := ratio(q.Times[sysStrata], q.Times[sysStrataAll])
		if sp == 0 {
			got = append(got, name+" not measured")
			ok = false
			continue
		}
		got = append(got, fmt.Sprintf("%s %s", name, formatRatio(sp)))
		ok = ok && sp >= need
	}
	if len(got) == 0 {
		return
	}
	fmt.Fprintf(b, "| windows (strata alone): all cores / one thread >= 0.8 x cores on %s | %s (need %s on %d cores) | %s |\n",
		strings.Join(scalingQueries, ", "), strings.Join(got, ", "), formatRatio(need), cores, met(ok))
}

// comparedWithPeers reports whether a query's result was compared with
// both DuckDB's and PostgreSQL's.
func comparedWithPeers(checks []resultCheck) bool {
	var own, duck, pg bool
	for _, c := range checks {
		for _, s := range []string{c.A, c.B} {
			own = own || s == sysStrata || s == sysStrataAll
			duck = duck || s == sysDuckAll || s == sysDuck1
			pg = pg || s == sysPostgres
		}
	}
	return own && duck && pg
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

func runsText(n int) string {
	if n == 1 {
		return "One run per case"
	}
	return fmt.Sprintf("Best of %d runs", n)
}

func (w mergeWidth) caseAt(grant int64) mergeCase {
	for _, c := range w.Cases {
		if c.Grant == grant {
			return c
		}
	}
	return mergeCase{}
}

func smallestGrant(g []int64) int64 {
	if len(g) == 0 {
		return 0
	}
	m := g[0]
	for _, v := range g {
		m = min(m, v)
	}
	return m
}

func largestGrant(g []int64) int64 {
	m := int64(0)
	for _, v := range g {
		m = max(m, v)
	}
	return m
}

func skipReasons(w *windowSuite) []string {
	seen := map[string]bool{}
	var out []string
	for _, q := range w.Results {
		for _, s := range w.Systems {
			if m := q.Times[s]; m.Skipped != "" && !seen[s] {
				seen[s] = true
				out = append(out, fmt.Sprintf("%s (%s)", s, cell(m.Skipped)))
			}
		}
	}
	return out
}

func checksCell(checks []resultCheck) string {
	if len(checks) == 0 {
		return "not compared"
	}
	bad := 0
	for _, c := range checks {
		if !c.OK {
			bad++
		}
	}
	if bad == 0 {
		names := map[string]bool{}
		for _, c := range checks {
			names[c.A], names[c.B] = true, true
		}
		return fmt.Sprintf("same (%d systems)", len(names))
	}
	return fmt.Sprintf("**%d mismatch(es)**", bad)
}

// strataNote is what the window report says of a strata run: its note
// (peak, spill) and the collection after it, when it was timed with one.
func strataNote(m measure) string {
	parts := []string{}
	if m.Note != "" {
		parts = append(parts, m.Note)
	}
	if m.CollectSeconds > 0 {
		parts = append(parts, fmt.Sprintf("the collection after it %.1fms", m.CollectSeconds*1000))
	}
	return strings.Join(parts, ", ")
}

func formatSeconds(m measure) string {
	switch {
	case m.Skipped != "":
		return "skipped"
	case m.Err != "":
		if strings.Contains(m.Err, "Out of Memory") {
			return "out of memory"
		}
		return "failed"
	case m.TimedOut:
		return fmt.Sprintf("> %.0f (stopped)", m.Seconds)
	case m.Seconds < 0.01:
		return fmt.Sprintf("%.4f", m.Seconds)
	case m.Seconds < 1:
		return fmt.Sprintf("%.3f", m.Seconds)
	default:
		return fmt.Sprintf("%.2f", m.Seconds)
	}
}

func formatRatio(r float64) string {
	if r == 0 || math.IsInf(r, 0) || math.IsNaN(r) {
		return "-"
	}
	if r < 10 {
		return fmt.Sprintf("%.2fx", r)
	}
	return fmt.Sprintf("%.1fx", r)
}

func worstRatio(r float64, where string, missing int) string {
	s := "not measured"
	if !math.IsInf(r, 1) {
		s = fmt.Sprintf("smallest %s (%s)", formatRatio(r), where)
	}
	if missing > 0 {
		s += fmt.Sprintf("; %s without a figure", plural(missing, "query", "queries"))
	}
	return s
}

func formatBytesPerUpdate(f walFigure) string {
	switch {
	case f.Skipped != "":
		return "skipped"
	case f.Err != "":
		return "failed"
	}
	return fmt.Sprintf("%.1f", f.BytesPerUpdate)
}

func met(ok bool) string {
	if ok {
		return "yes"
	}
	return "**no**"
}

func formatBytes(n int64) string {
	switch {
	case n >= gib && n%gib == 0:
		return fmt.Sprintf("%dGiB", n/gib)
	case n >= gib:
		return fmt.Sprintf("%.1fGiB", float64(n)/gib)
	case n >= mib:
		return fmt.Sprintf("%.0fMiB", float64(n)/mib)
	case n >= kib:
		return fmt.Sprintf("%.0fKiB", float64(n)/kib)
	}
	return fmt.Sprintf("%dB", n)
}

func formatCount(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return fmt.Sprintf("%dM", n/1_000_000)
	case n >= 1_000 && n%1_000 == 0:
		return fmt.Sprintf("%dk", n/1_000)
	}
	return fmt.Sprintf("%d", n)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// cell makes text safe inside a markdown table cell.
func cell(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	s = strings.ReplaceAll(s, "|", "\\|")
	if len(s) > 300 {
		s = s[:297] + "..."
	}
	return s
}
