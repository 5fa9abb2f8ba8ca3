package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/columnar/convert"
	"github.com/strata-db/strata/columnar/store"
	"github.com/strata-db/strata/messages"
)

// checkKeyedManifests checks each container is a keyed table's: the
// manifest's primary key is pk and the schema ends with the change
// columns; and that they hold rows rows in all.
func checkKeyedManifests(t *testing.T, ms []*columnar.Manifest, pk []string, rows int64) {
	t.Helper()
	var n int64
	for _, m := range ms {
		k := len(m.Schema)
		if !slices.Equal(m.PrimaryKey, pk) || m.Schema[k-2].Name != columnar.VersionColumn || m.Schema[k-1].Name != columnar.DeletedColumn {
			t.Fatalf("container %s: primary key %v, last columns %s, %s; want %v and the change columns", m.ID, m.PrimaryKey, m.Schema[k-2].Name, m.Schema[k-1].Name, pk)
		}
		n += m.Rows
	}
	if n != rows {
		t.Fatalf("%d rows in %d containers, want %d", n, len(ms), rows)
	}
}

func TestLoadCSVPrimaryKey(t *testing.T) {
	var b strings.Builder
	b.WriteString("id,name,amount\n")
	for i := range 300 {
		fmt.Fprintf(&b, "%d,n%d,%d.5\n", 300-i, i, i%7)
	}
	for _, tt := range []struct {
		name string
		args []string
		pk   []string
	}{
		{"int key", []string{"--sort-key", "id", "--primary-key", "id"}, []string{"id"}},
		{"text key, not the sort key", []string{"--sort-key", "amount", "--primary-key", "name"}, []string{"name"}},
		{"two columns", []string{"--sort-key", "amount, id", "--primary-key", "id,name"}, []string{"id", "name"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ms, err := loadCSV(t, b.String(), append(tt.args, "--rows", "100")...)
			if err != nil {
				t.Fatal(err)
			}
			if len(ms) != 3 {
				t.Fatalf("%d containers, want 3", len(ms))
			}
			checkKeyedManifests(t, ms, tt.pk, 300)
		})
	}
}

// TestLoadCSVKeyRefused: a duplicate key anywhere in the file, or a NULL
// in a key column, fails the load naming the lines, and every container
// it wrote is removed (loadCSV checks the projection is left empty).
func TestLoadCSVKeyRefused(t *testing.T) {
	var b strings.Builder
	b.WriteString("id,name\n")
	for i := range 250 {
		fmt.Fprintf(&b, "%d,n%d\n", i, i)
	}
	dup := b.String() + "7,again\n" + "9,again\n"
	for _, tt := range []struct {
		name, in string
		args     []string
		msg      string
	}{
		{"duplicate across containers", dup, []string{"--primary-key", "id"},
			"import csv t.csv: duplicate primary key (id)=(7): line 252 repeats line 9"},
		{"duplicate text key", dup, []string{"--primary-key", "name"},
			`import csv t.csv: duplicate primary key (name)=("again"): line 253 repeats line 252`},
		{"NULL key", b.String() + ",x\n", []string{"--primary-key", "id"},
			`t.csv:252: column "id": NULL in a primary key column`},
		{"no such column", dup, []string{"--primary-key", "nope"}, `primary key column "nope" is not in the input`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loadCSV(t, tt.in, append([]string{"--sort-key", "id", "--rows", "100"}, tt.args...)...)
			if err == nil || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("load: %v; want an error holding %q", err, tt.msg)
			}
		})
	}
}

func TestLoadParquetPrimaryKey(t *testing.T) {
	dir := t.TempDir()
	// A keyed generated table's k0 is unique, an unkeyed one's repeats.
	parquet := func(name string, keyed bool) string {
		ms, err := columnar.Generate(dir, columnar.GenOptions{Table: name, Projection: "p", Columns: 4, Containers: 1, RowsPerContainer: 3000, Keyed: keyed})
		if err != nil {
			t.Fatal(err)
		}
		pq := filepath.Join(dir, name+".parquet")
		if _, err := exportFile([]string{columnar.ContainerDir(dir, name, "p", ms[0].ID)}, pq, convert.Parquet,
			convert.ExportOptions{Columns: []string{"k0", "c001_utf8", "c002_float64", "c003_timestamp_us"}}); err != nil {
			t.Fatal(err)
		}
		return pq
	}
	data := filepath.Join(dir, "data")
	f := &loadFlags{table: "g", projection: "p", rows: 1000, blockRows: 256, pqPath: parquet("unique", true), sortKey: "c002_float64", pk: []string{"k0"}}
	out, err := importLoad(context.Background(), data, f, columnar.CompressionLZ4)
	if err != nil {
		t.Fatal(err)
	}
	checkKeyedManifests(t, out, []string{"k0"}, 3000)

	f = &loadFlags{table: "h", projection: "p", rows: 1000, blockRows: 256, pqPath: parquet("repeats", false), sortKey: "c002_float64", pk: []string{"k0"}}
	out, err = importLoad(context.Background(), data, f, columnar.CompressionLZ4)
	var de *convert.DuplicateKeyError
	if !errors.As(err, &de) || de.Line != 0 || de.Row <= de.First || !strings.Contains(err.Error(), fmt.Sprintf("row %d repeats row %d", de.Row, de.First)) {
		t.Fatalf("keyed on a column of repeated values: %d containers, %v", len(out), err)
	}
	if entries, _ := os.ReadDir(filepath.Join(data, "h", "p")); len(entries) != 0 {
		t.Fatalf("the refused load left %d entries", len(entries))
	}
}

func TestLoadGeneratedPrimaryKey(t *testing.T) {
	data := t.TempDir()
	if err := runLoad(context.Background(), []string{"--table", "g", "--columns", "5", "--containers", "3", "--rows", "400",
		"--primary-key", "k0", "--data", data, "--no-register"}); err != nil {
		t.Fatal(err)
	}
	var ms []*columnar.Manifest
	for i := range 3 {
		m, err := columnar.ReadManifest(columnar.ContainerDir(data, "g", "p", columnar.ContainerID(i)))
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
	}
	checkKeyedManifests(t, ms, []string{"k0"}, 1200)
	err := runLoad(context.Background(), []string{"--table", "g2", "--primary-key", "k1", "--data", data, "--no-register"})
	if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "a generated table is keyed on k0 alone") {
		t.Fatalf("generated keyed on k1: %v", err)
	}
}

// TestLoadPgbenchAccounts: --pgbench-accounts N loads N rows keyed and
// sorted on aid, as pgbench -i makes them.
func TestLoadPgbenchAccounts(t *testing.T) {
	data := t.TempDir()
	if err := runLoad(context.Background(), []string{"--pgbench-accounts", "2500", "--rows", "1000", "--block-rows", "256",
		"--data", data, "--no-register"}); err != nil {
		t.Fatal(err)
	}
	var ms []*columnar.Manifest
	for i := range 3 {
		dir := columnar.ContainerDir(data, "pgbench_accounts", "p", columnar.ContainerID(i))
		m, err := columnar.ReadManifest(dir)
		if err != nil {
			t.Fatal(err)
		}
		if err := columnar.Verify(dir); err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
	}
	checkKeyedManifests(t, ms, []string{"aid"}, 2500)
	if got := columnTypes(ms[0]); got != "aid int64, bid int64, abalance int64, filler utf8, _strata_version int64, _strata_deleted bool" {
		t.Fatalf("columns %s", got)
	}
	// The last container ends at aid 2500.
	c, err := columnar.Open(columnar.ContainerDir(data, "pgbench_accounts", "p", ms[2].ID), columnar.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.OpenColumn(0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	blk, err := r.ReadBlock(r.NumBlocks() - 1)
	if err != nil {
		t.Fatal(err)
	}
	defer blk.Release()
	if aid := blk.(*array.Int64); aid.Value(aid.Len()-1) != 2500 {
		t.Fatalf("last aid %d, want 2500", aid.Value(aid.Len()-1))
	}
	for _, args := range [][]string{
		{"--pgbench-accounts", "10", "--primary-key", "bid"},
		{"--pgbench-accounts", "10", "--csv", "x.csv"},
		{"--pgbench-accounts", "-1"},
	} {
		if err := runLoad(context.Background(), append(args, "--data", data, "--no-register")); !errors.Is(err, errUsage) {
			t.Errorf("%v: %v, want a usage error", args, err)
		}
	}
}

// TestLoadStorePrimaryKey: a keyed load into a store uploads keyed
// containers; a refused one uploads nothing and leaves no staging copy.
func TestLoadStorePrimaryKey(t *testing.T) {
	dir := t.TempDir()
	bucket := filepath.Join(dir, "bucket")
	if err := os.MkdirAll(bucket, 0o755); err != nil {
		t.Fatal(err)
	}
	url := "file://" + bucket
	good := filepath.Join(dir, "good.csv")
	bad := filepath.Join(dir, "bad.csv")
	if err := os.WriteFile(good, []byte("id,v\n3,c\n1,a\n2,b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("id,v\n3,c\n1,a\n3,b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // the staging directory
	if err := runLoad(context.Background(), []string{"--table", "k", "--csv", good, "--sort-key", "v", "--primary-key", "id",
		"--store", url, "--data", filepath.Join(dir, "data"), "--no-register"}); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	m, err := store.Check(context.Background(), st, "k", "p", "c0000")
	if err != nil {
		t.Fatal(err)
	}
	checkKeyedManifests(t, []*columnar.Manifest{m}, []string{"id"}, 3)

	err = runLoad(context.Background(), []string{"--table", "k2", "--csv", bad, "--sort-key", "v", "--primary-key", "id",
		"--store", url, "--data", filepath.Join(dir, "data"), "--no-register"})
	if err == nil || !strings.Contains(err.Error(), "duplicate primary key (id)=(3): line 4 repeats line 2") {
		t.Fatalf("duplicate into a store: %v", err)
	}
	if objs, err := st.List(context.Background(), "k2/"); err != nil || len(objs) != 0 {
		t.Fatalf("the refused load put %d objects in the store (%v)", len(objs), err)
	}
	if entries, _ := os.ReadDir(tmp); len(entries) != 0 {
		t.Fatalf("staging left behind: %v", entries)
	}
}

// TestContainersShowsPrimaryKey: the containers table heads a keyed
// table's containers with its primary key, and carries it in a column of
// the CSV and JSON output.
func TestContainersShowsPrimaryKey(t *testing.T) {
	pcs := []messages.ProjectionCatalog{
		{Table: "a", Projection: "p", Live: []messages.ContainerRef{{Table: "a", Projection: "p", ID: "c0000", Rows: 10, Bytes: 100}}},
		{Table: "k", Projection: "p", PrimaryKey: []string{"aid", "bid"},
			Live: []messages.ContainerRef{{Table: "k", Projection: "p", ID: "c0000", Rows: 2500, Bytes: 4096}}},
	}
	var out bytes.Buffer
	if err := printContainers(&out, pcs, nil, "table"); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 || lines[0] != "k.p: primary key (aid, bid)" || !strings.Contains(lines[3], "2500") {
		t.Fatalf("table:\n%s", out.String())
	}
	out.Reset()
	if err := printContainers(&out, pcs, nil, "csv"); err != nil {
		t.Fatal(err)
	}
	want := "table,projection,container,state,rows,current,bytes,jobs,primary_key\na,p,c0000,live,10,,100,,\nk,p,c0000,live,2500,,4096,,\"aid,bid\"\n"
	if out.String() != want {
		t.Fatalf("csv:\n%s\nwant\n%s", out.String(), want)
	}
}
