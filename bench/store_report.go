package main

import (
	"bytes"
	"fmt"
	"math"
	"strings"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// renderStoreTargets holds the store suite to the communal-storage issue's
// targets: the cold and warm reads against the local one, the bytes a cold
// mergeout fetched against the inputs' compressed bytes, and the peak of
// every run against its grant.
func (r *report) renderStoreTargets(b *bytes.Buffer) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	for _, t := range []struct {
		read  string
		limit float64
	}{{readCold, 1.3}, {readWarm, 1.05}} {
		worst, where, missing := 0.0, "", 0
		for _, c := range r.Store.Cases {
			local, _ := c.read(readLocal)
			rd, _ := c.read(t.read)
			rt := ratio(rd.Time, local.Time)
			if rt == 0 {
				missing++
				continue
			}
			if rt > worst {
				worst, where = rt, c.title()
			}
		}
		got := "not measured"
		if where != "" {
			got = fmt.Sprintf("largest %s (%s)", formatRatio(worst), where)
		}
		if missing > 0 {
			got += fmt.Sprintf("; %s without a figure", plural(missing, "case", "cases"))
		}
		p("| store: %s depot within %.4gx of local%s | %s | %s |\n", t.read, t.limit, r.Store.against(), got, met(where != "" && missing == 0 && worst <= t.limit))
	}
	// Only a mergeout reads every column; a window query fetches the ones
	// it needs.
	var fetched []string
	fetchedOK, merges := true, 0
	for _, c := range r.Store.Cases {
		if c.Kind != storeMergeout {
			continue
		}
		merges++
		rd, _ := c.read(readCold)
		if !rd.Time.ok() || c.CompressedBytes == 0 {
			fetched = append(fetched, c.Name+" not measured")
			fetchedOK = false
			continue
		}
		dev := float64(rd.BytesFetched)/float64(c.CompressedBytes) - 1
		fetched = append(fetched, fmt.Sprintf("%s: %s of %s (%+.1f%%)", c.Name, formatBytes(rd.BytesFetched), formatBytes(c.CompressedBytes), dev*100))
		fetchedOK = fetchedOK && math.Abs(dev) <= 0.05
	}
	if merges > 0 {
		p("| store: bytes fetched within 5%% of compressed bytes (cold mergeouts, which read every column) | %s | %s |\n", strings.Join(fetched, "; "), met(fetchedOK))
	}
	worst, where, runs := 0.0, "", 0
	for _, c := range r.Store.Cases {
		for _, rd := range c.Reads {
			if !rd.Time.ok() || c.Grant == 0 {
				continue
			}
			runs++
			if share := float64(rd.PeakBytes) / float64(c.Grant); share > worst {
				worst, where = share, fmt.Sprintf("%s, %s: %s of %s", c.title(), rd.Read, formatBytes(rd.PeakBytes), formatBytes(c.Grant))
			}
		}
	}
	if runs > 0 {
		p("| store: peak within the grant | largest %.0f%% of the grant (%s) | %s |\n", worst*100, where, met(worst <= 1))
	}
}

// against names the suite's S3 server for a target's row: " (SeaweedFS)",
// or nothing in results of runs before the server was recorded.
func (s *storeSuite) against() string {
	switch {
	case s.ServerName == "":
		return ""
	case len(s.CPUs.Server) > 0:
		return " (" + s.ServerName + " on " + cpusText(s.CPUs.Server) + ", the job on " + cpusText(s.CPUs.Job) + ")"
	}
	return " (" + s.ServerName + ")"
}

// runsText says how many runs each case had.
func (s *storeSuite) runsText() string {
	if s.WindowRepeats == 0 || s.WindowRepeats == s.Repeats {
		return runsText(s.Repeats)
	}
	return fmt.Sprintf("%s (%d for a window query)", runsText(s.Repeats), s.WindowRepeats)
}

// cpusText names CPUs in prose: "CPU 1", "CPUs 0,1".
func cpusText(cpus []int) string {
	if len(cpus) == 1 {
		return "CPU " + formatCPUs(cpus)
	}
	return "CPUs " + formatCPUs(cpus)
}

// title names a store case in prose.
func (c storeCase) title() string {
	if c.Kind == storeMergeout {
		return "mergeout of " + c.Name
	}
	return "`" + c.Name + "`"
}

func (r *report) renderStore(b *bytes.Buffer) {
	s := r.Store
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("## Containers in an object store\n\n")
	p("strata alone, with each case's input containers uploaded to an S3 server and read back three ways: ")
	p("**local** from the directories they were written to (in the page cache); **cold** from the store through an empty depot ")
	p("(`depot.Open` over `store.Open`, then `AcquireAll` of the inputs, 8 at a time), the first read fetching what it needs; ")
	p("**warm** through the depot the cold run filled, which fetches nothing. ")
	p("A mergeout (`merger.MergeSources`) asks the depot to `Prefetch` every column file of its inputs, so the fetches overlap the merge; ")
	p("a window query (`windower.RunSources`, on every core the job has) asks it to fetch the columns the query reads (`PrefetchColumns`, through `windower.Options.Prefetch` once the query is compiled, as the windower service does) and no others. ")
	p("Times run from acquiring the inputs to the last output row (a mergeout's output committed). %s each way, a fresh depot for each cold run. ", s.runsText())
	if len(s.CPUs.Server) > 0 {
		p("The S3 server is %s. It runs on %s and the bench on %s (GOMAXPROCS %d), local, cold and warm runs alike, ",
			s.Server, cpusText(s.CPUs.Server), cpusText(s.CPUs.Job), len(s.CPUs.Job))
		p("as if the server were on a host of its own: its request handling and copying do not take the job's cores, and no network latency is in the figures.\n\n")
	} else {
		p("The S3 server is %s: it shares the machine's %d cores with strata, ", s.Server, r.Machine.Cores)
		p("so its request handling and copying compete with the job it serves, and no network latency is in the figures.\n\n")
	}
	p("| case | inputs | compressed | grant | read | seconds | x local | fetched | fetched / compressed | blocks fetched | peak |\n")
	p("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	var problems []string
	for _, c := range s.Cases {
		inputs := fmt.Sprintf("%d x %s rows", c.Containers, formatCount(c.RowsPerContainer))
		if c.Err != "" {
			p("| %s | %s | | | | failed: %s | | | | | |\n", c.title(), inputs, cell(c.Err))
			problems = append(problems, fmt.Sprintf("- %s: %s", c.title(), cell(c.Err)))
			continue
		}
		local, _ := c.read(readLocal)
		for _, rd := range c.Reads {
			fetched, share, blocks, peak := "-", "-", "-", "-"
			if rd.Time.ok() {
				fetched = formatBytes(rd.BytesFetched)
				if c.CompressedBytes > 0 && rd.Read != readLocal {
					share = fmt.Sprintf("%.1f%%", 100*float64(rd.BytesFetched)/float64(c.CompressedBytes))
				}
				blocks = fmt.Sprintf("%d", rd.BlocksFetched)
				peak = formatBytes(rd.PeakBytes)
				if rd.PeakBytes > c.Grant {
					peak += " (over the grant)"
				}
			}
			if rd.Time.Err != "" {
				problems = append(problems, fmt.Sprintf("- %s, %s: %s", c.title(), rd.Read, cell(rd.Time.Err)))
			}
			xLocal := "-"
			if rd.Read != readLocal {
				xLocal = formatRatio(ratio(rd.Time, local.Time))
			}
			p("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", c.title(), inputs, formatBytes(c.CompressedBytes), formatBytes(c.Grant),
				rd.Read, formatSeconds(rd.Time), xLocal, fetched, share, blocks, peak)
		}
	}
	p("\n")
	if path, ok := r.Charts[chartStore]; ok {
		p("![seconds by how the inputs were read](%s)\n\n", path)
	}
	if len(problems) > 0 {
		p("Failures:\n\n%s\n\n", strings.Join(problems, "\n"))
	}
}

// drawStoreChart: grouped bars, one group per case, one bar per read.
func drawStoreChart(s *storeSuite, path string) error {
	p := newPlot("Containers in an object store: seconds by how the inputs were read (log scale, lower is better)", "", "seconds")
	series := map[string]plotter.Values{}
	names := make([]string, len(s.Cases))
	for i, c := range s.Cases {
		names[i] = c.Name
		if c.Kind == storeMergeout {
			names[i] = "mergeout, " + c.Name
		}
		for _, read := range storeReads {
			rd, _ := c.read(read)
			series[read] = append(series[read], rd.Time.Seconds) // 0 when failed
		}
	}
	labels := map[string]string{readLocal: "local directories", readCold: "store, cold depot", readWarm: "store, warm depot"}
	if err := addGroupedBars(p, storeReads, series, 18, labels, true); err != nil {
		return err
	}
	p.NominalX(names...)
	p.X.Min, p.X.Max = -0.5, float64(len(names))-0.5
	return p.Save(9*vg.Inch, 5*vg.Inch, path)
}
