package main

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// chartRows is the chart of seconds per query against rows.
const chartRows = "windows_rows.png"

// spillRuns are the spill suite's runs the report shows: this run's
// (make bench) and the last --large run's, by rows.
func (r *report) spillRuns() []*spillRun {
	var runs []*spillRun
	for _, s := range []*spillSuite{r.Spill, r.SpillLarge} {
		if s != nil {
			runs = append(runs, s.Runs...)
		}
	}
	slices.SortStableFunc(runs, func(a, b *spillRun) int { return a.Rows - b.Rows })
	return runs
}

// attachLarge reads the last --large run's figures into r.SpillLarge
// when path holds them.
func (r *report) attachLarge(path string) error {
	if path == "" {
		return nil
	}
	if _, err := os.Stat(path); err != nil {
		return nil
	}
	large, err := readResults(path)
	if err != nil {
		return err
	}
	r.SpillLarge = large.Spill
	return nil
}

// spillFailures counts strata's failed runs and the mismatches.
func (r *report) spillFailures() int {
	n := 0
	if r.Spill == nil {
		return 0
	}
	for _, run := range r.Spill.Runs {
		for _, q := range run.Results {
			for s, m := range q.Times {
				if m.Err != "" && strings.HasPrefix(s, sysStrata) {
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

// renderSpillTargets holds the spill runs to the figures.
func (r *report) renderSpillTargets(b *bytes.Buffer) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	for _, run := range r.spillRuns() {
		at := fmt.Sprintf("%s rows, %s grant", formatCount(run.Rows), formatBytes(run.Grant))
		worstPeak, where, used := 0.0, "", math.Inf(1)
		var usedWhere string
		for _, q := range run.Results {
			for _, s := range []string{sysStrata, sysStrataAll} {
				st, ok := q.Stats[s]
				if !ok || st.Grant == 0 {
					continue
				}
				share := float64(st.PeakBytes) / float64(st.Grant)
				if share > worstPeak {
					worstPeak, where = share, fmt.Sprintf("%s, %s", q.Query.Name, s)
				}
				if share < used {
					used, usedWhere = share, fmt.Sprintf("%s, %s", q.Query.Name, s)
				}
			}
		}
		if where != "" {
			p("| spill, %s: peak <= grant, and the grant used | largest %.0f%% (%s), smallest %.0f%% (%s) | %s |\n",
				at, worstPeak*100, where, used*100, usedWhere, met(worstPeak <= 1 && used >= 0.5))
		}
		for _, t := range []struct {
			peer, own string
			need      float64
		}{{sysDuck1, sysStrata, 3}, {sysDuckAll, sysStrataAll, 3}, {sysPostgres, sysStrata, 10}} {
			minR, worst, missing := math.Inf(1), "", 0
			var unfinished []string
			for _, q := range run.Results {
				peer, own := q.Times[t.peer], q.Times[t.own]
				if !peer.ok() && peer.Skipped == "" && own.ok() && !own.TimedOut {
					unfinished = append(unfinished, q.Query.Name) // the peer failed where strata finished
					continue
				}
				rt := ratio(peer, own)
				if rt == 0 {
					missing++
					continue
				}
				if rt < minR {
					minR, worst = rt, q.Query.Name
				}
			}
			got := worstRatio(minR, worst, missing)
			if len(unfinished) > 0 {
				got += "; " + t.peer + " did not finish " + strings.Join(unfinished, ", ")
			}
			p("| spill, %s: %s / %s >= %.0fx where it finishes | %s | %s |\n", at, t.peer, t.own, t.need, got, met(minR >= t.need && missing == 0))
		}
		for _, t := range []struct{ spill, fit string }{{sysStrata, sysStrataFit}, {sysStrataAll, sysStrataFitAll}} {
			worst, where, missing := 0.0, "", 0
			for _, q := range run.Results {
				rt := ratio(q.Times[t.spill], q.Times[t.fit])
				if rt == 0 {
					missing++
				} else if rt > worst {
					worst, where = rt, q.Query.Name
				}
			}
			got := "not measured"
			if where != "" {
				got = fmt.Sprintf("largest %s (%s)", formatRatio(worst), where)
			}
			p("| spill, %s: %s no slower than 1.5x %s (%s) | %s | %s |\n", at, t.spill, t.fit, formatBytes(run.FitGrant), got, met(where != "" && missing == 0 && worst <= 1.5))
		}
		if cores := run.StrataThreads[sysStrataAll]; cores >= 2 {
			worst, where := math.Inf(1), ""
			for _, q := range run.Results {
				if sp := ratio(q.Times[sysStrata], q.Times[sysStrataAll]); sp > 0 && sp < worst {
					worst, where = sp, q.Query.Name
				}
			}
			p("| spill, %s: %d threads >= 1.6x one on the spilling path | %s | %s |\n", at, cores, worstRatio(worst, where, 0), met(worst >= 1.6))
		}
	}
}

func (r *report) renderSpill(b *bytes.Buffer) {
	runs := r.spillRuns()
	if len(runs) == 0 {
		return
	}
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("## Tables larger than the grant\n\n")
	p("Table `w` (the window suite's columns and shapes: `a`, `x` and `t` permutations, `g` uniform over %d groups, ", runs[0].Groups)
	p("`s` labels with NULLs, `k` codes) at sizes far over a %s grant, generated a block at a time; `make bench` runs it at 10M rows, ", formatBytes(runs[0].Grant))
	p("`make bench-large` at 100M (its data kept in a cache directory and reused). ")
	p("strata runs `windower.Run` with `Grant` = the grant at one thread and on all cores, and again with a grant the query fits in (`strata in memory`); ")
	p("DuckDB reads the table from a database file with `memory_limit` = the grant and a temp directory; PostgreSQL with `work_mem` = the grant. ")
	p("Every system is timed computing the same count and checksum over the query's output (count(*), and for each output column count, sum, and sum of its product with the first column; ")
	p("strings through the first 28 bits of their md5), PostgreSQL and DuckDB in SQL, strata in Go over its result batches; ")
	p("the checksums are compared across systems, since fetching every row would take longer than the queries.\n\n")
	for _, run := range runs {
		p("### %s rows, %s grant\n\n", formatCount(run.Rows), formatBytes(run.Grant))
		p("Run %s on %s; load average %.1f at the start, %.1f at the end; %s for the run, %s of it generating and loading data. ",
			run.Started.Format("2006-01-02 15:04 UTC"), run.Machine, run.LoadStart, run.LoadEnd,
			(time.Duration(run.Seconds) * time.Second).Round(time.Second), (time.Duration(run.LoadSeconds) * time.Second).Round(time.Second))
		if run.Repeats > 1 {
			p("strata and DuckDB: the fastest of %d runs of each query; PostgreSQL: one run. ", run.Repeats)
		} else {
			p("One run per query and system. ")
		}
		p("A run still going after %s is stopped and shown as a lower bound. %s\n\n", run.Limit, strings.Join(run.Notes, " "))
		p("| query | ")
		for _, s := range run.Systems {
			p("%s s | ", s)
		}
		p("DuckDB 1 thread / strata | DuckDB all cores / strata all cores | PostgreSQL / strata | results |\n|")
		for range len(run.Systems) + 5 {
			p(" --- |")
		}
		p("\n")
		var problems []string
		for _, q := range run.Results {
			p("| `%s` | ", q.Query.Name)
			for _, s := range run.Systems {
				p("%s | ", formatSeconds(q.Times[s]))
				if m := q.Times[s]; m.Err != "" {
					problems = append(problems, fmt.Sprintf("- `%s` on %s failed: %s", q.Query.Name, s, cell(m.Err)))
				}
			}
			p("%s | %s | %s | %s |\n", ratioText(q.Times[sysDuck1], q.Times[sysStrata]), ratioText(q.Times[sysDuckAll], q.Times[sysStrataAll]),
				ratioText(q.Times[sysPostgres], q.Times[sysStrata]), spillChecksCell(q))
			for _, c := range q.Checks {
				if !c.OK {
					problems = append(problems, fmt.Sprintf("- `%s`: %s vs %s: %s", q.Query.Name, c.A, c.B, cell(c.Detail)))
				}
			}
		}
		p("\n")
		p("strata's memory and the cost of spilling:\n\n")
		p("| query | peak, spilled (1 thread) | peak, spilled (all cores) | peak in memory (1 thread) | spill / in memory (1 thread) | spill / in memory (all cores) | all cores / one thread (spilling) |\n")
		p("| --- | --- | --- | --- | --- | --- | --- |\n")
		for _, q := range run.Results {
			p("| `%s` | %s | %s | %s | %s | %s | %s |\n", q.Query.Name, spillStatsCell(q, sysStrata), spillStatsCell(q, sysStrataAll), spillStatsCell(q, sysStrataFit),
				ratioText(q.Times[sysStrata], q.Times[sysStrataFit]), ratioText(q.Times[sysStrataAll], q.Times[sysStrataFitAll]),
				formatRatio(ratio(q.Times[sysStrata], q.Times[sysStrataAll])))
		}
		p("\n")
		if len(problems) > 0 {
			p("Failures and mismatches:\n\n%s\n\n", strings.Join(problems, "\n"))
		}
		var skips []string
		seen := map[string]bool{}
		for _, q := range run.Results {
			for _, s := range run.Systems {
				if m := q.Times[s]; m.Skipped != "" && !seen[s] {
					seen[s] = true
					skips = append(skips, fmt.Sprintf("%s (%s)", s, cell(m.Skipped)))
				}
			}
		}
		if len(skips) > 0 {
			p("Skipped: %s\n\n", strings.Join(skips, "; "))
		}
	}
	if path, ok := r.Charts[chartRows]; ok {
		p("How cost grows with the rows, each query on log-log axes, ")
		if r.Windows != nil {
			p("with the window suite's %s rows (a %s grant holds them, so its strata figure is drawn on both strata lines) beside these runs; ",
				formatCount(r.Windows.Rows), formatBytes(strataWindowGrant))
		}
		p("a cross marks a run stopped at the time limit. The last tile is strata's peak at one thread against the grant:\n\n")
		p("![seconds per query against rows](%s)\n\n", path)
	}
}

func spillStatsCell(q spillResult, sys string) string {
	st, ok := q.Stats[sys]
	if !ok {
		return "-"
	}
	s := formatBytes(st.PeakBytes)
	if st.PeakBytes > st.Grant {
		s += " (over the grant)"
	}
	if st.SpilledBytes > 0 {
		s += ", " + formatBytes(st.SpilledBytes)
	} else {
		s += ", none"
	}
	return s
}

func spillChecksCell(q spillResult) string {
	c := checksCell(q.Checks)
	if len(q.Checks) > 0 && !strings.Contains(c, "mismatch") {
		for _, s := range q.Sums {
			return fmt.Sprintf("%s: %d rows, %s", c, s.Rows, s.Sum)
		}
	}
	return c
}

// rowsChartSystems are the lines of each query's tile.
var rowsChartSystems = []string{sysStrata, sysStrataAll, sysStrataFit, sysDuck1, sysDuckAll, sysPostgres}

// drawRowsChart: a tile per query, seconds against rows (log-log) for each
// system, and a tile of strata's peak against rows.
func drawRowsChart(r *report, path string) error {
	runs := r.spillRuns()
	type point struct {
		rows float64
		m    measure
	}
	byQuery := map[string]map[string][]point{}
	var names []string
	add := func(q, sys string, rows int, m measure) {
		if !m.ok() {
			return
		}
		if byQuery[q] == nil {
			byQuery[q] = map[string][]point{}
		}
		byQuery[q][sys] = append(byQuery[q][sys], point{float64(rows), m})
	}
	for _, sq := range spillQueries {
		names = append(names, sq.name)
	}
	if w := r.Windows; w != nil {
		for _, q := range w.Results {
			if !slices.Contains(names, q.Query.Name) {
				continue
			}
			for _, sys := range rowsChartSystems {
				src := sys
				if sys == sysStrataFit {
					src = sysStrata
				}
				add(q.Query.Name, sys, w.Rows, q.Times[src])
			}
		}
	}
	for _, run := range runs {
		for _, q := range run.Results {
			for _, sys := range rowsChartSystems {
				add(q.Query.Name, sys, run.Rows, q.Times[sys])
			}
		}
	}
	minX, maxX := math.Inf(1), 0.0
	for _, bySys := range byQuery {
		for _, pts := range bySys {
			for _, pt := range pts {
				minX, maxX = math.Min(minX, pt.rows), math.Max(maxX, pt.rows)
			}
		}
	}
	for _, run := range runs {
		minX, maxX = math.Min(minX, float64(run.Rows)), math.Max(maxX, float64(run.Rows))
	}
	if maxX == 0 {
		minX, maxX = 1e6, 1e7
	}
	var ticks rowTicks
	for _, bySys := range byQuery {
		for _, pts := range bySys {
			for _, pt := range pts {
				if !slices.Contains(ticks, pt.rows) {
					ticks = append(ticks, pt.rows)
				}
			}
		}
	}
	const cols = 4
	var plots []*plot.Plot
	for i, name := range names {
		p := plot.New()
		p.Title.Text = name
		p.X.Label.Text = "rows"
		p.Y.Label.Text = "seconds"
		p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
		p.X.Tick.Marker, p.Y.Tick.Marker = ticks, plot.LogTicks{Prec: -1}
		p.Add(plotter.NewGrid())
		for j, sys := range rowsChartSystems {
			pts := byQuery[name][sys]
			if len(pts) == 0 {
				continue
			}
			slices.SortFunc(pts, func(a, b point) int { return int(a.rows - b.rows) })
			var xy, stopped plotter.XYs
			for _, pt := range pts {
				xy = append(xy, plotter.XY{X: pt.rows, Y: pt.m.Seconds})
				if pt.m.TimedOut {
					stopped = append(stopped, plotter.XY{X: pt.rows, Y: pt.m.Seconds})
				}
			}
			line, points, err := plotter.NewLinePoints(xy)
			if err != nil {
				return err
			}
			c := seriesColor(sys, j)
			line.Color, points.Color = c, c
			line.Width = vg.Points(1.5)
			points.Shape = draw.CircleGlyph{}
			if sys == sysStrataFit {
				line.Color, points.Color = color.Gray{Y: 0x60}, color.Gray{Y: 0x60}
				line.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
			}
			p.Add(line, points)
			if i == 0 {
				p.Legend.Add(sys, line, points)
			}
			if len(stopped) > 0 {
				sc, err := plotter.NewScatter(stopped)
				if err != nil {
					return err
				}
				sc.Shape, sc.Color, sc.Radius = draw.CrossGlyph{}, color.Black, vg.Points(5)
				p.Add(sc)
			}
		}
		minY, maxY := math.Inf(1), 0.0
		for _, pts := range byQuery[name] {
			for _, pt := range pts {
				if pt.m.Seconds > 0 {
					minY, maxY = math.Min(minY, pt.m.Seconds), math.Max(maxY, pt.m.Seconds)
				}
			}
		}
		if maxY == 0 {
			minY, maxY = 0.1, 1
		}
		p.X.Min, p.X.Max = minX/1.5, maxX*1.5
		p.Y.Min, p.Y.Max = minY/2, maxY*4 // room for the legend
		p.Legend.Top, p.Legend.Left = true, true
		p.Legend.TextStyle.Font.Size = vg.Points(7)
		plots = append(plots, p)
	}
	peak := plot.New()
	peak.Title.Text = "strata's peak (one thread, spilling)"
	peak.X.Label.Text = "rows"
	peak.Y.Label.Text = "MiB"
	peak.X.Scale = plot.LogScale{}
	peak.X.Tick.Marker = ticks
	peak.Add(plotter.NewGrid())
	maxY := 0.0
	var grants plotter.XYs
	for i, name := range names {
		var xy plotter.XYs
		for _, run := range runs {
			for _, q := range run.Results {
				if st, ok := q.Stats[sysStrata]; ok && q.Query.Name == name {
					xy = append(xy, plotter.XY{X: float64(run.Rows), Y: float64(st.PeakBytes) / mib})
					maxY = math.Max(maxY, float64(st.PeakBytes)/mib)
				}
			}
		}
		if len(xy) == 0 {
			continue
		}
		line, points, err := plotter.NewLinePoints(xy)
		if err != nil {
			return err
		}
		c := queryColors[i%len(queryColors)]
		line.Color, points.Color = c, c
		peak.Add(line, points)
		peak.Legend.Add(name, line, points)
	}
	for _, run := range runs {
		grants = append(grants, plotter.XY{X: float64(run.Rows), Y: float64(run.Grant) / mib})
		maxY = math.Max(maxY, float64(run.Grant)/mib)
	}
	if len(grants) == 1 { // one run: the grant across the tile
		g := grants[0].Y
		grants = plotter.XYs{{X: minX / 1.5, Y: g}, {X: maxX * 1.5, Y: g}}
	}
	if len(grants) > 0 {
		gl, err := plotter.NewLine(grants)
		if err != nil {
			return err
		}
		gl.Color, gl.Dashes = color.Black, []vg.Length{vg.Points(2), vg.Points(2)}
		peak.Add(gl)
		peak.Legend.Add("grant", gl)
	}
	peak.X.Min, peak.X.Max = minX/1.5, maxX*1.5
	peak.Y.Min, peak.Y.Max = 0, math.Max(1, maxY*1.8)
	peak.Legend.Top, peak.Legend.Left = true, true
	peak.Legend.TextStyle.Font.Size = vg.Points(7)
	plots = append(plots, peak)

	rowsN := (len(plots) + cols - 1) / cols
	grid := make([][]*plot.Plot, rowsN)
	for i := range grid {
		grid[i] = make([]*plot.Plot, cols)
	}
	for i, p := range plots {
		grid[i/cols][i%cols] = p
	}
	width, height := 16*vg.Inch, vg.Length(rowsN)*4*vg.Inch
	img := vgimg.New(width, height)
	dc := draw.New(img)
	t := draw.Tiles{Rows: rowsN, Cols: cols, PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 4,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	canvases := plot.Align(grid, t, dc)
	for i := range grid {
		for j, p := range grid[i] {
			if p != nil {
				p.Draw(canvases[i][j])
			}
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// queryColors tell the queries apart in the peak tile.
var queryColors = []color.Color{
	color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
	color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff},
	color.RGBA{R: 0x8c, G: 0x56, B: 0x4b, A: 0xff},
	color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
}

// rowTicks labels a rows axis at the row counts measured.
type rowTicks []float64

func (t rowTicks) Ticks(lo, hi float64) []plot.Tick {
	var out []plot.Tick
	for _, v := range t {
		if v >= lo && v <= hi {
			out = append(out, plot.Tick{Value: v, Label: formatCount(int(v))})
		}
	}
	return out
}
