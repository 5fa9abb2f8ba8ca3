package integration

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/messages"
	"github.com/strata-db/strata/windower"
	"github.com/strata-db/strata/windower/sqlparse"
)

// windowSQL is deterministic whatever the order of rows with equal keys:
// rank, and aggregates over whole partitions of an integer column.
const windowSQL = `SELECT k0, c004_int32,
	rank() OVER (PARTITION BY c004_int32 % 4 ORDER BY k0) AS r,
	count(*) OVER (PARTITION BY c004_int32 % 4) AS n,
	sum(c004_int32) OVER (PARTITION BY c004_int32 % 4) AS s
	FROM t`

// referenceWindow evaluates windowSQL over rows read from the containers,
// with plain Go, and returns the result rows as sorted strings.
func referenceWindow(t *testing.T, dirs []string) []string {
	t.Helper()
	type row struct {
		k0   int64
		v    *int64
		part string
	}
	parts := map[string][]*row{}
	var all []*row
	for _, d := range dirs {
		for _, line := range readRows(t, d).rows {
			f := strings.Split(line, "|")
			k0, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil {
				t.Fatalf("k0 %q: %v", f[0], err)
			}
			r := &row{k0: k0, part: "NULL"}
			if f[4] != "NULL" {
				v, err := strconv.ParseInt(f[4], 10, 64)
				if err != nil {
					t.Fatalf("c004_int32 %q: %v", f[4], err)
				}
				r.v = &v
				r.part = strconv.FormatInt(v%4, 10) // Go's % truncates like SQL's
			}
			parts[r.part] = append(parts[r.part], r)
			all = append(all, r)
		}
	}
	var out []string
	for _, p := range parts {
		var sum int64
		sumNull := true
		for _, r := range p {
			if r.v != nil {
				sum += *r.v
				sumNull = false
			}
		}
		s := "NULL"
		if !sumNull {
			s = strconv.FormatInt(sum, 10)
		}
		for _, r := range p {
			rank := 1
			for _, o := range p {
				if o.k0 < r.k0 {
					rank++
				}
			}
			v := "NULL"
			if r.v != nil {
				v = strconv.FormatInt(*r.v, 10)
			}
			out = append(out, fmt.Sprintf("%d|%s|%d|%d|%s", r.k0, v, rank, len(p), s))
		}
	}
	slices.Sort(out)
	return out
}

// TestWindowJobEqualsReference: a windower process evaluates a window job
// over generated containers; its result container holds exactly the rows a
// plain-Go evaluation of the same query gives.
func TestWindowJobEqualsReference(t *testing.T) {
	d := newDeployment(t)
	// Many blocks per container: a test on one block proves little.
	ms := generate(t, d.dataDir, columnar.GenOptions{Table: "t", Projection: "p", Columns: 6, Containers: 3, RowsPerContainer: 700, BlockRows: 97, Seed: 5})
	q, err := sqlparse.Parse(windowSQL)
	if err != nil {
		t.Fatal(err)
	}
	want := referenceWindow(t, inputDirs(d.dataDir, ms))
	ev := d.watchEvents()
	d.start("windower", "windower-1", "--memory", "128MiB")
	for _, grant := range []int64{64 << 20, windower.MinGrant} { // a large grant and the smallest
		id := fmt.Sprintf("win-%d", grant>>20)
		job := &messages.WindowJob{JobID: id, Query: *q, ResultTable: "t_window", Output: id, Grant: messages.Grant{Pool: "general", Bytes: grant}}
		for _, m := range ms {
			job.Inputs = append(job.Inputs, messages.ContainerRef{Table: m.Table, Projection: m.Projection, ID: m.ID})
		}
		d.publish(messages.SubjectJobWindow, id, job)
		done := ev.waitDone(t, 60*time.Second, id)[id]
		if done.Output == nil {
			t.Fatalf("%s: done without output", id)
		}
		got := readRows(t, columnar.ContainerDir(d.dataDir, done.Output.Table, done.Output.Projection, done.Output.ID)).rows
		slices.Sort(got)
		compareRows(t, id+" result", got, want)
		t.Logf("%s: %d rows, plan %s, peak %d, spilled %d", id, len(got), done.Plan, done.PeakBytes, done.SpilledBytes)
	}
}

// TestWindowStringsAcrossBlocks is the reproduction of wrong strings: a
// utf8 column of a container of many blocks, selected through a window
// query by a windower process, came back with other blocks' values.
func TestWindowStringsAcrossBlocks(t *testing.T) {
	d := newDeployment(t)
	ms := generate(t, d.dataDir, columnar.GenOptions{Table: "u8", Projection: "p", Columns: 2, Containers: 1, RowsPerContainer: 20000, BlockRows: 2000, Seed: 1})
	q, err := sqlparse.Parse("SELECT k0, c001_utf8, count(*) OVER (PARTITION BY k0 % 7) AS n FROM u8")
	if err != nil {
		t.Fatal(err)
	}
	want := readRows(t, inputDirs(d.dataDir, ms)[0]).rows // k0|c001_utf8
	slices.Sort(want)
	ev := d.watchEvents()
	d.start("windower", "windower-1", "--memory", "128MiB")
	for _, grant := range []int64{64 << 20, windower.MinGrant} {
		id := fmt.Sprintf("u8-%d", grant>>20)
		job := &messages.WindowJob{JobID: id, Query: *q, ResultTable: "u8_window", Output: id, Grant: messages.Grant{Pool: "general", Bytes: grant},
			Inputs: []messages.ContainerRef{{Table: "u8", Projection: "p", ID: ms[0].ID}}}
		d.publish(messages.SubjectJobWindow, id, job)
		done := ev.waitDone(t, 60*time.Second, id)[id]
		if done.Output == nil {
			t.Fatalf("%s: done without output", id)
		}
		var got []string
		for _, line := range readRows(t, columnar.ContainerDir(d.dataDir, done.Output.Table, done.Output.Projection, done.Output.ID)).rows {
			got = append(got, line[:strings.LastIndexByte(line, '|')]) // less n
		}
		slices.Sort(got)
		compareRows(t, id+" result", got, want)
	}
}
