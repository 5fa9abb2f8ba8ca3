package main

import (
	"bytes"
	"fmt"
	"strings"
)

// reference is the checksum the suite's runs are held to: PostgreSQL's
// first, else strata's first.
func (s *pgwireSuite) reference() (pgwireSum, bool) {
	for _, sys := range []string{sysPostgres, sysPgwire} {
		for _, r := range s.Stream {
			if r.System == sys && r.Err == "" {
				return r.Sum, true
			}
		}
	}
	return pgwireSum{}, false
}

// sameRows reports whether run r read the rows PostgreSQL sent: the
// table's row count and the reference checksum.
func (s *pgwireSuite) sameRows(r pgwireStream) bool {
	ref, ok := s.reference()
	return ok && r.Err == "" && r.Sum.Rows == int64(s.Rows) && r.Sum.equal(ref)
}

// best is the fastest run of sys.
func (s *pgwireSuite) best(sys string) (pgwireStream, bool) {
	var b pgwireStream
	found := false
	for _, r := range s.Stream {
		if r.System == sys && r.Err == "" && (!found || r.Seconds < b.Seconds) {
			b, found = r, true
		}
	}
	return b, found
}

// pairRatios are PostgreSQL's seconds over strata's, pair by pair (above
// 1: strata faster).
func (s *pgwireSuite) pairRatios() []float64 {
	var out []float64
	for pair := 0; ; pair++ {
		var st, pg *pgwireStream
		seen := false
		for i := range s.Stream {
			r := &s.Stream[i]
			if r.Pair != pair {
				continue
			}
			seen = true
			if r.Err != "" {
				continue
			}
			if r.System == sysPgwire {
				st = r
			} else if r.System == sysPostgres {
				pg = r
			}
		}
		if !seen {
			return out
		}
		if st != nil && pg != nil && st.Seconds > 0 {
			out = append(out, pg.Seconds/st.Seconds)
		}
	}
}

func (s *pgwireSuite) rate(r pgwireStream) (rowsPerSec, mbPerSec float64) {
	if r.Seconds <= 0 {
		return 0, 0
	}
	return float64(r.Sum.Rows) / r.Seconds, float64(s.ValueBytes) / r.Seconds / 1e6
}

func (r *report) pgwireFailures() int {
	s := r.Pgwire
	if s == nil {
		return 0
	}
	n := 0
	if s.Err != "" {
		n++
	}
	for _, run := range s.Stream {
		if run.Err != "" || !s.sameRows(run) {
			n++
		}
	}
	for _, l := range s.Latency {
		if l.Err != "" {
			n++
		}
	}
	return n
}

func ratiosText(rs []float64) string {
	parts := make([]string, len(rs))
	for i, v := range rs {
		parts[i] = formatRatio(v)
	}
	return strings.Join(parts, ", ")
}

// renderPgwireTargets holds the suite to the goals.
func (r *report) renderPgwireTargets(b *bytes.Buffer) {
	s := r.Pgwire
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	if s.Skipped != "" {
		p("| pgwire: the SQL front door's figures | skipped: %s | - |\n", cell(s.Skipped))
		return
	}
	if s.Err != "" {
		p("| pgwire: the SQL front door's figures | not measured: %s | **no** |\n", cell(s.Err))
		return
	}
	st, okS := s.best(sysPgwire)
	pg, okP := s.best(sysPostgres)
	ratios := s.pairRatios()
	got, verdict := "not measured", met(false)
	if okS && okP {
		sr, smb := s.rate(st)
		pr, pmb := s.rate(pg)
		faster := 0
		for _, v := range ratios {
			if v > 1 {
				faster++
			}
		}
		got = fmt.Sprintf("best %s rows/s (%.1f MB/s) against %s rows/s (%.1f MB/s); PostgreSQL/strata by pair: %s",
			formatThousands(sr), smb, formatThousands(pr), pmb, ratiosText(ratios))
		switch {
		case faster == len(ratios) && faster > 0:
			verdict = met(true)
		case faster > 0:
			verdict = "partly"
		}
	}
	p("| pgwire: a %s-row result to psycopg 3 faster than PostgreSQL 15 | %s | %s |\n", formatCount(s.Rows), got, verdict)
	same, runs := 0, 0
	for _, run := range s.Stream {
		runs++
		if s.sameRows(run) {
			same++
		}
	}
	p("| pgwire: psycopg reads the same rows from strata as from PostgreSQL (count and checksum) | %d of %d runs | %s |\n", same, runs, met(same == runs && runs > 0))
	pw, job := s.Latency[sysPgwire], s.Latency[sysPgwireJob]
	got, ok := "not measured", false
	if pw.ok() && job.ok() && job.P50 > 0 {
		rt := pw.P50 / job.P50
		got = fmt.Sprintf("median %.1f ms through pgwire, %.1f ms the job: %s", pw.P50, job.P50, formatRatio(rt))
		ok = rt <= 1.2
	}
	p("| pgwire: a small window query within 1.2x of its window job's time | %s | %s |\n", got, met(ok))
}

func (r *report) renderPgwire(b *bytes.Buffer) {
	s := r.Pgwire
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("## The SQL front door (pgwire)\n\n")
	if s.Skipped != "" {
		p("Skipped: %s.\n\n", cell(s.Skipped))
		return
	}
	p("strata deployed as processes: %s; jobs get the `general` pool's grant. ", s.Deployment)
	p("Table `big` is `strata load --table big --columns 2 --containers %d --rows %d` (%s rows: `k0` bigint, `c001_utf8` text of 0 to 16 characters, some NULL), ",
		pgwireContainers, s.Rows/pgwireContainers, formatCount(s.Rows))
	p("`small` is `--containers 1 --rows %d`; PostgreSQL's tables hold the same rows, copied from strata's containers. ", s.SmallRows)
	p("The bench's PostgreSQL cluster answers on its unix socket, pgwire on TCP (127.0.0.1, no TLS, SCRAM-SHA-256).\n\n")
	if s.Err != "" {
		p("Not measured: %s\n\n", cell(s.Err))
		return
	}
	p("**Throughput.** psycopg 3 (%s, text results) runs `%s` with `cursor.stream()` (single-row mode) and reads every row, ", orDash(s.Client), s.StreamQuery)
	p("summing a checksum of them that is the same in any order (`bench/pgwire_stream.py`); ")
	p("seconds run from the query sent to the last row read, and for strata include its window job (`job`: the job's own time, `strata ops`). ")
	p("MB/s are of the values as text (%s, what the client is sent besides the protocol's 19 bytes a row). ", formatBytes(s.ValueBytes))
	p("The two systems run in turn, in pairs, the order alternating; the ratio is PostgreSQL's seconds over strata's within a pair. ")
	p("CPU seconds from /proc: `server CPU` is the windower's and pgwire's for strata, the connection's backend's for PostgreSQL; `client CPU` the Python process's (in brackets its kernel part: reading the socket, TCP for pgwire, a unix socket for PostgreSQL).\n\n")
	p("| pair | system | seconds | first row | job | rows/s | MB/s | server CPU | client CPU | load | rows |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	var problems []string
	for _, run := range s.Stream {
		if run.Err != "" {
			p("| %d | %s | failed | | | | | | | %.1f | |\n", run.Pair+1, run.System, run.Load)
			problems = append(problems, fmt.Sprintf("- pair %d, %s: %s", run.Pair+1, run.System, cell(run.Err)))
			continue
		}
		rows, mb := s.rate(run)
		job := "-"
		if run.JobSecond > 0 {
			job = fmt.Sprintf("%.2f", run.JobSecond)
		}
		check := "same"
		if !s.sameRows(run) {
			check = fmt.Sprintf("**differ** (%d rows)", run.Sum.Rows)
			problems = append(problems, fmt.Sprintf("- pair %d, %s: %+v, reference %+v", run.Pair+1, run.System, run.Sum, must(s.reference())))
		}
		p("| %d | %s | %.2f | %.3f | %s | %s | %.1f | %s | %s | %.1f | %s |\n", run.Pair+1, run.System, run.Seconds, run.FirstRow, job, formatThousands(rows), mb,
			cpuText(run.ServerCPU), clientCPUText(run), run.Load, check)
	}
	if rs := s.pairRatios(); len(rs) > 0 {
		p("\nPostgreSQL/strata by pair: %s.\n", ratiosText(rs))
	}
	p("\n**A small query's latency.** `%s` (%d rows of the %s-row table) on one pgx connection (simple protocol, every row read), ", s.SmallQuery, s.Latency[sysPgwire].Rows, formatCount(s.SmallRows))
	p("three untimed, then %d timed, through pgwire and then to PostgreSQL; `%s` is the window jobs those pgwire queries made, ", s.Latency[sysPgwire].Runs, sysPgwireJob)
	p("each from its publication to a windower to its end (`strata ops`' duration), which the query's time includes with pgwire's check of the query, the scheduler's admission, the result's read and the round trips.\n\n")
	p("| system | median ms | min ms | p90 ms | runs | / job's median | load |\n| --- | --- | --- | --- | --- | --- | --- |\n")
	job := s.Latency[sysPgwireJob]
	for _, sys := range []string{sysPgwire, sysPgwireJob, sysPostgres} {
		l, ok := s.Latency[sys]
		if !ok {
			continue
		}
		if !l.ok() {
			p("| %s | failed | | | | | %.1f |\n", sys, l.Load)
			problems = append(problems, fmt.Sprintf("- latency, %s: %s", sys, cell(l.Err+l.Skipped)))
			continue
		}
		x := "-"
		if job.ok() && job.P50 > 0 {
			x = formatRatio(l.P50 / job.P50)
		}
		p("| %s | %.1f | %.1f | %.1f | %d | %s | %.1f to %.1f |\n", sys, l.P50, l.Min, l.P90, l.Runs, x, l.Load, l.LoadEnd)
	}
	p("\n")
	if len(problems) > 0 {
		p("Failures:\n\n%s\n\n", strings.Join(problems, "\n"))
	}
}

func cpuText(s float64) string {
	if s <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", s)
}

func clientCPUText(r pgwireStream) string {
	if r.ClientCPU <= 0 {
		return "-"
	}
	if r.ClientSys <= 0 {
		return fmt.Sprintf("%.1f", r.ClientCPU)
	}
	return fmt.Sprintf("%.1f (%.1f)", r.ClientCPU, r.ClientSys)
}

func must[T any](v T, _ bool) T { return v }

// formatThousands writes a rate as 55,024.
func formatThousands(f float64) string {
	s := fmt.Sprintf("%.0f", f)
	var out []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 && s[i-1] != '-' {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	return string(out)
}
