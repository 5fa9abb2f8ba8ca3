package integration

import (
	"context"
	"encoding/csv"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/strata-db/strata/messages"
)

// TestChangesCLI: strata changes sends a CSV of inserts, updates and
// deletes of a keyed table and returns once they are visible: a window
// query run right after it sees exactly the loaded rows with the file's
// changes replayed. The same file again stores nothing new; a file with
// an error publishes nothing and names the line and column.
func TestChangesCLI(t *testing.T) {
	for _, b := range []string{"scheduler", "windower", "walwriter", "strata"} {
		if !haveBinary(b) {
			t.Skipf("%s is not built", b)
		}
	}
	d := newDeployment(t)
	d.start("scheduler", "scheduler", "--nats", d.nats.ClientURL())
	d.start("windower", "windower-1", "--memory", "512MiB")
	d.start("walwriter", "walwriter-1", "--flush-interval", "200ms")

	m := loadKeyed(t, d, "chg", 60)
	// The file's columns in another order than the table's (id, g, v, s).
	var b strings.Builder
	b.WriteString("op,s,id,v,g\n")
	rng := rand.New(rand.NewPCG(11, 12))
	ops := []string{"update", "U", "u", "insert", "I", "Insert", "delete", "D", "d"}
	for line := 0; line < 300; line++ {
		id := 1 + rng.Int64N(90)
		op := ops[rng.IntN(len(ops))]
		if strings.EqualFold(op[:1], "d") {
			delete(m, id)
			fmt.Fprintf(&b, "%s,,%d,,\n", op, id)
			continue
		}
		var s any = fmt.Sprintf(`s %d, "quoted", line %d`, id, line)
		field := `"` + strings.ReplaceAll(s.(string), `"`, `""`) + `"`
		if rng.IntN(5) == 0 {
			s, field = nil, ""
		}
		g, v := rng.Int64N(5), float64(rng.IntN(4000))/8
		m[id] = []any{id, g, v, s}
		fmt.Fprintf(&b, "%s,%s,%d,%g,%d\n", op, field, id, v, g)
	}
	path := filepath.Join(t.TempDir(), "changes.csv")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, stderr, err := d.cliErr("changes", "--table", "chg", "--csv", path, "--wait-timeout", "60s")
	if err != nil {
		t.Fatalf("strata changes: %v\n%s", err, stderr)
	}
	t.Logf("300 changes sent and visible in %v: %s", time.Since(start).Round(time.Millisecond), strings.TrimSpace(stderr))
	if !strings.Contains(stderr, "published 300 changes") || !strings.Contains(stderr, "visible") {
		t.Errorf("strata changes says:\n%s", stderr)
	}
	compareRows(t, "after strata changes", queryChanged(t, d, "chg"), changedRows(m))
	last := updatesLastSeq(t, d)

	// The same file again: every event a duplicate, nothing new stored.
	_, stderr, err = d.cliErr("changes", "--table", "chg", "--csv", path, "--wait-timeout", "60s")
	if err != nil || !strings.Contains(stderr, "300 of them were already in the stream") {
		t.Errorf("the same file again: %v\n%s", err, stderr)
	}
	if got := updatesLastSeq(t, d); got != last {
		t.Errorf("the same file again: stream sequence %d, was %d", got, last)
	}

	// A file with an error in its last row publishes nothing.
	bad := filepath.Join(t.TempDir(), "bad.csv")
	if err := os.WriteFile(bad, []byte("op,s,id,v,g\nu,x,1,2.5,1\nd,,2,,\nu,y,3,2.5,one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, stderr, err = d.cliErr("changes", "--table", "chg", "--csv", bad)
	if err == nil || !strings.Contains(stderr, `bad.csv:4: column "g": cannot parse "one" as int64`) {
		t.Errorf("a bad file: %v\n%s", err, stderr)
	}
	if got := updatesLastSeq(t, d); got != last {
		t.Errorf("a bad file published: stream sequence %d, was %d", got, last)
	}
	compareRows(t, "after the refused files", queryChanged(t, d, "chg"), changedRows(m))
}

// changedRows prints the model's rows as queryChanged does.
func changedRows(m keyedModel) []string {
	var out []string
	for id, r := range m {
		s := "NULL"
		if r[3] != nil {
			s = r[3].(string)
		}
		out = append(out, fmt.Sprintf("%d|%d|%g|%s", id, r[1].(int64), r[2].(float64), s))
	}
	slices.Sort(out)
	return out
}

// queryChanged reads the keyed table through a window query (its values
// have no empty strings, so an empty CSV field is NULL).
func queryChanged(t *testing.T, d *deployment, table string) []string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "q.csv")
	d.cli("window", "--out", out, fmt.Sprintf("SELECT id, g, v, s, count(*) OVER () AS n FROM %s", table))
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, r := range recs[1:] {
		v, err := strconv.ParseFloat(r[2], 64)
		if err != nil {
			t.Fatalf("row %q: %v", r, err)
		}
		if r[3] == "" {
			r[3] = "NULL"
		}
		if r[4] != strconv.Itoa(len(recs)-1) {
			t.Errorf("row %q: count(*) OVER () %s, the result has %d rows", r, r[4], len(recs)-1)
		}
		rows = append(rows, fmt.Sprintf("%s|%s|%g|%s", r[0], r[1], v, r[3]))
	}
	slices.Sort(rows)
	return rows
}

// updatesLastSeq is the UPDATES stream's last sequence.
func updatesLastSeq(t *testing.T, d *deployment) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := d.js.Stream(ctx, messages.StreamUpdates)
	if err != nil {
		t.Fatal(err)
	}
	return s.CachedInfo().State.LastSeq
}
