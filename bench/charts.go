package main

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Chart file names, under the charts directory.
const (
	chartMergeout = "mergeout.png"
	chartWindows  = "windows.png"
	chartWAL      = "wal.png"
	chartScaling  = "windows_threads.png"
	chartStore    = "store.png"
)

// systemColors keeps each system one color in every chart.
var systemColors = map[string]color.Color{
	sysStrata:             color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	sysStrataAll:          color.RGBA{R: 0x17, G: 0xbe, B: 0xcf, A: 0xff},
	sysStrataCold:         color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff},
	sysDuck1:              color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
	sysDuckAll:            color.RGBA{R: 0xff, G: 0xbb, B: 0x78, A: 0xff},
	sysPostgres:           color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
	"strata, full images": color.RGBA{R: 0x9e, G: 0xc9, B: 0xe2, A: 0xff},
	pgPlain:               color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
	pgHOT:                 color.RGBA{R: 0x98, G: 0xdf, B: 0x8a, A: 0xff},
	pgFPI:                 color.RGBA{R: 0x55, G: 0x55, B: 0x55, A: 0xff},
}

// widthColors tells the widths apart in the mergeout chart.
var widthColors = []color.Color{
	color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff},
	color.RGBA{R: 0x8c, G: 0x56, B: 0x4b, A: 0xff},
}

// drawCharts writes the PNG charts the report has data for and returns
// their paths.
func drawCharts(rep *report, dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var out []string
	draws := []struct {
		name string
		have bool
		draw func(string) error
	}{
		{chartWindows, rep.Windows != nil, func(p string) error { return drawWindowChart(rep.Windows, p) }},
		{chartMergeout, rep.Mergeout != nil, func(p string) error { return drawMergeoutChart(rep.Mergeout, p) }},
		{chartWAL, rep.WAL != nil, func(p string) error { return drawWALChart(rep.WAL, p) }},
		{chartScaling, rep.Windows != nil && len(rep.Windows.StrataThreads) > 1, func(p string) error { return drawScalingChart(rep.Windows, p) }},
		{chartStore, rep.Store != nil && len(rep.Store.Cases) > 0, func(p string) error { return drawStoreChart(rep.Store, p) }},
		{chartRows, len(rep.spillRuns()) > 0, func(p string) error { return drawRowsChart(rep, p) }},
	}
	for _, d := range draws {
		path := filepath.Join(dir, d.name)
		if !d.have {
			// A chart of a suite not run this time would show stale figures.
			os.Remove(path)
			continue
		}
		if err := d.draw(path); err != nil {
			return nil, fmt.Errorf("%s: %w", d.name, err)
		}
		out = append(out, path)
	}
	return out, nil
}

func newPlot(title, xLabel, yLabel string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font.Size = vg.Points(14)
	p.X.Label.Text = xLabel
	p.Y.Label.Text = yLabel
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	return p
}

// drawMergeoutChart: seconds against memory grant (log x), one line per
// width, strata solid and DuckDB dashed, like the Vertica experiment's chart.
func drawMergeoutChart(s *mergeSuite, path string) error {
	p := newPlot(fmt.Sprintf("Mergeout of %d sorted inputs of %s rows: seconds by memory grant (lower is better)", s.Containers, formatCount(s.RowsPerContainer)),
		"memory grant (log scale)", "seconds")
	p.X.Scale = plot.LogScale{}
	var ticks []plot.Tick
	for _, g := range s.Grants {
		ticks = append(ticks, plot.Tick{Value: float64(g) / mib, Label: formatBytes(g)})
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	maxY := 0.0
	var failedPts plotter.XYs // DuckDB runs that failed (out of memory): drawn as crosses on the axis
	for i, w := range s.Widthwise {
		c := widthColors[i%len(widthColors)]
		for _, mc := range w.Cases {
			if mc.Duck.Err != "" {
				failedPts = append(failedPts, plotter.XY{X: float64(mc.Grant) / mib, Y: 0})
			}
		}
		for _, sys := range []string{sysStrata, "DuckDB"} {
			var pts plotter.XYs
			for _, mc := range w.Cases {
				m := mc.Strata
				if sys != sysStrata {
					m = mc.Duck
				}
				if m.ok() {
					pts = append(pts, plotter.XY{X: float64(mc.Grant) / mib, Y: m.Seconds})
					maxY = math.Max(maxY, m.Seconds)
				}
			}
			if len(pts) == 0 {
				continue
			}
			line, points, err := plotter.NewLinePoints(pts)
			if err != nil {
				return err
			}
			line.Color, points.Color = c, c
			line.Width = vg.Points(2)
			points.Shape = draw.CircleGlyph{}
			if sys != sysStrata {
				line.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
				points.Shape = draw.TriangleGlyph{}
			}
			p.Add(line, points)
			p.Legend.Add(fmt.Sprintf("%s, %d columns", sys, w.Width), line, points)
		}
	}
	if len(failedPts) > 0 {
		sc, err := plotter.NewScatter(failedPts)
		if err != nil {
			return err
		}
		sc.Shape = draw.CrossGlyph{}
		sc.Radius = vg.Points(6)
		sc.Color = color.Black
		p.Add(sc)
		p.Legend.Add("DuckDB out of memory at this limit", sc)
	}
	p.Y.Min = 0
	p.Y.Max = maxY * 1.6
	if maxY == 0 {
		p.Y.Max = 1
	}
	return p.Save(8*vg.Inch, 5*vg.Inch, path)
}

// drawWindowChart: grouped bars, one group per query, one bar per system.
func drawWindowChart(s *windowSuite, path string) error {
	title := fmt.Sprintf("Window queries over %s rows: seconds per system (log scale, lower is better)", formatCount(s.Rows))
	for _, r := range s.Results {
		for _, m := range r.Times {
			if m.TimedOut {
				title = fmt.Sprintf("Window queries over %s rows: seconds (log scale; a bar at %.0f s was stopped there)", formatCount(s.Rows), m.Seconds)
			}
		}
	}
	p := newPlot(title, "", "seconds")
	names := make([]string, len(s.Results))
	for i, r := range s.Results {
		names[i] = r.Query.Name
	}
	series := make(map[string]plotter.Values, len(s.Systems))
	for _, r := range s.Results {
		for _, sys := range s.Systems {
			series[sys] = append(series[sys], r.Times[sys].Seconds) // 0 when skipped or failed
		}
	}
	width := 11 * vg.Inch
	if len(names)*len(s.Systems) > 50 {
		width = 14 * vg.Inch
	}
	if err := addGroupedBars(p, s.Systems, series, barPoints(width, len(names), len(s.Systems)), nil, true); err != nil {
		return err
	}
	p.NominalX(names...)
	p.X.Min, p.X.Max = -0.5, float64(len(names))-0.5 // whole groups, none clipped at the edges
	p.X.Tick.Label.Rotation = math.Pi / 6
	p.X.Tick.Label.XAlign = draw.XRight
	p.X.Tick.Label.YAlign = draw.YCenter
	p.Legend.Left = false
	return p.Save(width, 5.5*vg.Inch, path)
}

// barPoints is the width of each bar of groups groups of bars bars side by
// side in a chart width wide: 11 points, or narrower so that the groups
// stay apart (a fifth of each group's room is the gap between groups).
func barPoints(width vg.Length, groups, bars int) float64 {
	room := (width - 1.2*vg.Inch).Points() // less the axis and its labels
	if groups == 0 || bars == 0 {
		return 11
	}
	return math.Min(11, 0.8*room/float64(groups*bars))
}

// drawScalingChart: grouped bars, one group per query, one bar per thread
// count strata ran with.
func drawScalingChart(s *windowSuite, path string) error {
	type run struct {
		name    string
		threads int
	}
	var runs []run
	for name, t := range s.StrataThreads {
		if name != sysStrataCold { // the same thread count as sysStrata, without its cache
			runs = append(runs, run{name, t})
		}
	}
	slices.SortFunc(runs, func(a, b run) int { return a.threads - b.threads })
	systems := make([]string, len(runs))
	labels := map[string]string{}
	series := map[string]plotter.Values{}
	for i, r := range runs {
		systems[i] = r.name
		labels[r.name] = fmt.Sprintf("strata, %s", plural(r.threads, "thread", "threads"))
		for _, q := range s.Results {
			series[r.name] = append(series[r.name], q.Times[r.name].Seconds) // 0 when skipped or failed
		}
	}
	p := newPlot(fmt.Sprintf("strata's window queries over %s rows by thread count: seconds (log scale, lower is better)", formatCount(s.Rows)), "", "seconds")
	if err := addGroupedBars(p, systems, series, barPoints(11*vg.Inch, len(s.Results), len(systems)), labels, true); err != nil {
		return err
	}
	names := make([]string, len(s.Results))
	for i, r := range s.Results {
		names[i] = r.Query.Name
	}
	p.NominalX(names...)
	p.X.Min, p.X.Max = -0.5, float64(len(names))-0.5
	p.X.Tick.Label.Rotation = math.Pi / 6
	p.X.Tick.Label.XAlign = draw.XRight
	p.X.Tick.Label.YAlign = draw.YCenter
	p.Legend.Left = false
	return p.Save(11*vg.Inch, 5.5*vg.Inch, path)
}

// seriesColor is sys's color, or for a series without one (strata at a
// thread count other than one and all cores) one of widthColors.
func seriesColor(sys string, i int) color.Color {
	if c, ok := systemColors[sys]; ok {
		return c
	}
	return widthColors[i%len(widthColors)]
}

// drawWALChart: grouped bars, one group per workload, one bar per system.
func drawWALChart(s *walSuite, path string) error {
	p := newPlot(fmt.Sprintf("WAL bytes per UPDATE of a %d-byte row (lower is better)", s.StrataRowBytes), "", "bytes per update")
	systems := []string{sysStrata, "strata, full images", pgPlain, pgHOT, pgFPI}
	series := make(map[string]plotter.Values)
	var names []string
	for _, c := range s.Cases {
		names = append(names, c.Workload.Name)
		series[sysStrata] = append(series[sysStrata], c.Strata.BytesPerUpdate)
		series["strata, full images"] = append(series["strata, full images"], c.StrataFullImage.BytesPerUpdate)
		for _, cfg := range pgWALConfigs {
			series[cfg.name] = append(series[cfg.name], c.PG[cfg.name].BytesPerUpdate)
		}
	}
	labels := map[string]string{pgFPI: "PostgreSQL fillfactor 100, first touch after a checkpoint (full-page images)"}
	if err := addGroupedBars(p, systems, series, 14, labels, false); err != nil {
		return err
	}
	p.NominalX(names...)
	p.X.Min, p.X.Max = -0.5, float64(len(names))-0.5
	return p.Save(9*vg.Inch, 5*vg.Inch, path)
}

// addGroupedBars draws one bar per system in each group, side by side. With
// logY the value axis is logarithmic: bars then rise from a floor below the
// smallest value (a log axis has no zero), each stacked on an undrawn bar of
// the floor's height.
func addGroupedBars(p *plot.Plot, systems []string, series map[string]plotter.Values, barPoints float64, labels map[string]string, logY bool) error {
	w := vg.Points(barPoints)
	n := float64(len(systems))
	maxY, minY := 0.0, math.Inf(1)
	for _, vals := range series {
		for _, v := range vals {
			if v > 0 {
				maxY, minY = math.Max(maxY, v), math.Min(minY, v)
			}
		}
	}
	if maxY == 0 {
		maxY, minY = 1, 1
	}
	floor := 0.0
	if logY {
		floor = math.Pow(10, math.Floor(math.Log10(minY)))
	}
	for i, sys := range systems {
		vals := series[sys]
		if len(vals) == 0 {
			continue
		}
		heights := make(plotter.Values, len(vals))
		for j, v := range vals {
			heights[j] = math.Max(0, v-floor) // 0: no figure, no bar
		}
		bars, err := plotter.NewBarChart(heights, w)
		if err != nil {
			return err
		}
		bars.LineStyle.Width = 0
		bars.Color = seriesColor(sys, i)
		bars.Offset = vg.Length(float64(i)-(n-1)/2) * w
		if logY {
			base := make(plotter.Values, len(vals))
			for j := range base {
				base[j] = floor
			}
			under, err := plotter.NewBarChart(base, w)
			if err != nil {
				return err
			}
			under.Offset = bars.Offset
			bars.StackOn(under)
		}
		p.Add(bars)
		label := sys
		if l, ok := labels[sys]; ok {
			label = l
		}
		p.Legend.Add(label, bars)
	}
	if logY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
		p.Y.Min = floor
		p.Y.Max = maxY * 30 // room for the legend above the bars
	} else {
		p.Y.Min = 0
		p.Y.Max = maxY * 1.7 // room for the legend above the bars
	}
	return nil
}

// chartPathsRelativeTo rewrites chart paths relative to the report's directory.
func chartPathsRelativeTo(base string, paths []string) (map[string]string, error) {
	out := make(map[string]string, len(paths))
	for _, p := range paths {
		absP, err := filepath.Abs(p)
		if err != nil {
			return nil, err
		}
		absB, err := filepath.Abs(base)
		if err != nil {
			return nil, err
		}
		rel, err := filepath.Rel(absB, absP)
		if err != nil {
			return nil, err
		}
		out[filepath.Base(p)] = filepath.ToSlash(rel)
	}
	return out, nil
}
