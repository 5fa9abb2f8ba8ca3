package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/nats-io/nats.go"

	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/internal/natsutil"
	"github.com/strata-db/strata/internal/natsutil/natstest"
	"github.com/strata-db/strata/messages"
)

// fakeCatalog answers catalog requests with projections, as the scheduler
// would, and returns the NATS URL.
func fakeCatalog(t *testing.T, projections ...messages.ProjectionCatalog) string {
	t.Helper()
	srv, nc, _ := natstest.Start(t, natsutil.DefaultTopology())
	sub, err := nc.Subscribe(messages.SubjectAPICatalog, func(m *nats.Msg) {
		req := new(messages.CatalogRequest)
		if err := messages.Unmarshal(m.Data, req); err != nil {
			t.Error(err)
			return
		}
		rep := &messages.CatalogReply{}
		for _, pc := range projections {
			if (req.Table == "" || req.Table == pc.Table) && (req.Projection == "" || req.Projection == pc.Projection) {
				rep.Projections = append(rep.Projections, pc)
			}
		}
		data, _ := messages.Marshal(rep)
		_ = m.Respond(data)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sub.Unsubscribe() })
	return srv.ClientURL()
}

func liveRefs(ms []*columnar.Manifest) []messages.ContainerRef {
	var refs []messages.ContainerRef
	for _, m := range ms {
		refs = append(refs, messages.ContainerRef{Table: m.Table, Projection: m.Projection, ID: m.ID, Rows: m.Rows})
	}
	return refs
}

func TestExportTable(t *testing.T) {
	data := t.TempDir()
	ms, err := columnar.Generate(data, columnar.GenOptions{Table: "t", Projection: "p", Columns: 16, Containers: 3, RowsPerContainer: 2000, BlockRows: 500})
	if err != nil {
		t.Fatal(err)
	}
	schema, err := ms[0].ArrowSchema()
	if err != nil {
		t.Fatal(err)
	}
	url := fakeCatalog(t, messages.ProjectionCatalog{Table: "t", Projection: "p", Live: liveRefs(ms)})
	out := t.TempDir()
	conn := []string{"--nats", url, "--data", data}

	pq := filepath.Join(out, "t.parquet")
	if code, _, errText := run(t, append([]string{"export", "t", "--out", pq}, conn...)...); code != 0 {
		t.Fatalf("export parquet: exit %d: %s", code, errText)
	}
	pf, err := file.OpenParquetFile(pq, false)
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	got, err := fr.Schema()
	if err != nil {
		t.Fatal(err)
	}
	if pf.NumRows() != 6000 || got.NumFields() != schema.NumFields() {
		t.Fatalf("parquet: %d rows, %d columns; want 6000, %d", pf.NumRows(), got.NumFields(), schema.NumFields())
	}
	for i, f := range schema.Fields() {
		if g := got.Field(i); g.Name != f.Name || !arrow.TypeEqual(g.Type, f.Type) {
			t.Errorf("parquet column %d: %s %s, want %s %s", i, g.Name, g.Type, f.Name, f.Type)
		}
	}

	arrowPath := filepath.Join(out, "t.arrow")
	if code, _, errText := run(t, append([]string{"export", "t", "--out", arrowPath, "--columns", "k0,c002_float64"}, conn...)...); code != 0 {
		t.Fatalf("export arrow: exit %d: %s", code, errText)
	}
	if rows, names := readArrowFile(t, arrowPath); rows != 6000 || strings.Join(names, ",") != "k0,c002_float64" {
		t.Fatalf("arrow: %d rows of %q", rows, names)
	}

	jl := filepath.Join(out, "t.jsonl")
	if code, _, errText := run(t, append([]string{"export", "t", "--out", jl, "--columns", "k0"}, conn...)...); code != 0 {
		t.Fatalf("export jsonl: exit %d: %s", code, errText)
	}
	f, err := os.Open(jl)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	for sc := bufio.NewScanner(f); sc.Scan(); n++ {
		var row map[string]any
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			t.Fatalf("line %d: %v", n+1, err)
		}
		if _, ok := row["k0"].(float64); !ok && row["k0"] != nil {
			t.Fatalf("line %d: k0 = %#v, want a number", n+1, row["k0"])
		}
	}
	if n != 6000 {
		t.Fatalf("jsonl holds %d lines, want 6000", n)
	}

	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no --out", []string{"export", "t"}, 2, "want --out"},
		{"bad extension", []string{"export", "t", "--out", filepath.Join(out, "t.xlsx")}, 2, "unknown export format"},
		{"compression of csv", []string{"export", "t", "--out", filepath.Join(out, "t.csv"), "--compression", "zstd"}, 2, "--compression"},
		{"bad arrow codec", []string{"export", "t", "--out", arrowPath, "--compression", "snappy"}, 2, "unknown arrow compression"},
		{"too little memory", []string{"export", "t", "--out", pq, "--memory", "4KiB"}, 2, "raise --memory"},
		{"unknown column", []string{"export", "t", "--out", filepath.Join(out, "x.csv"), "--columns", "nope"}, 1, `no column "nope"`},
		{"unknown table", []string{"export", "nope", "--out", pq}, 1, "not in the catalog"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errText := run(t, append(tc.args, conn...)...)
			if code != tc.code || !strings.Contains(errText, tc.want) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", code, errText, tc.code, tc.want)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(out, "x.csv.tmp")); !os.IsNotExist(err) {
		t.Errorf("a failed export left its temporary file: %v", err)
	}
}

func readArrowFile(t *testing.T, path string) (int64, []string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := ipc.NewFileReader(f)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var rows int64
	for i := range r.NumRecords() {
		rec, err := r.RecordBatchAt(i)
		if err != nil {
			t.Fatal(err)
		}
		rows += rec.NumRows()
	}
	var names []string
	for _, f := range r.Schema().Fields() {
		names = append(names, f.Name)
	}
	return rows, names
}

// TestExportNullsAndEmpty: NULL is the empty CSV field (or --null-string),
// a 0-row table still gets its header, and a table of several
// projections needs --projection.
func TestExportNullsAndEmpty(t *testing.T) {
	data := t.TempDir()
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "order id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "amount", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	}, nil)
	write := func(projection string, rows int) messages.ContainerRef {
		w, err := columnar.Create(columnar.ContainerDir(data, "t", projection, "c0000"), columnar.WriterOptions{Schema: schema, SortKey: columnar.SortKey{{Name: "order id"}}, NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		if rows > 0 {
			b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
			for i := range rows {
				b.Field(0).(*array.Int64Builder).Append(int64(i))
				if i%2 == 0 {
					b.Field(1).AppendNull()
				} else {
					b.Field(1).(*array.Float64Builder).Append(float64(i) / 2)
				}
			}
			rec := b.NewRecordBatch()
			if err := w.Write(rec); err != nil {
				t.Fatal(err)
			}
			rec.Release()
			b.Release()
		}
		if _, err := w.Commit(); err != nil {
			t.Fatal(err)
		}
		return messages.ContainerRef{Table: "t", Projection: projection, ID: "c0000"}
	}
	url := fakeCatalog(t,
		messages.ProjectionCatalog{Table: "t", Projection: "p", Live: []messages.ContainerRef{write("p", 3)}},
		messages.ProjectionCatalog{Table: "t", Projection: "empty", Live: []messages.ContainerRef{write("empty", 0)}},
		messages.ProjectionCatalog{Table: "t", Projection: "none"})
	conn := []string{"--nats", url, "--data", data}
	csvPath := filepath.Join(t.TempDir(), "t.csv")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--projection", "p"}, "order id,amount\n0,\n1,0.5\n2,\n"},
		{[]string{"--projection", "p", "--null-string", `\N`}, "order id,amount\n0,\\N\n1,0.5\n2,\\N\n"},
		{[]string{"--projection", "empty"}, "order id,amount\n"},
	} {
		code, _, errText := run(t, append(append([]string{"export", "t", "--out", csvPath}, tc.args...), conn...)...)
		if code != 0 {
			t.Fatalf("export %q: exit %d: %s", tc.args, code, errText)
		}
		if got, _ := os.ReadFile(csvPath); string(got) != tc.want {
			t.Errorf("export %q = %q, want %q", tc.args, got, tc.want)
		}
	}
	pq := filepath.Join(t.TempDir(), "e.parquet")
	if code, _, errText := run(t, append([]string{"export", "t", "--projection", "empty", "--out", pq}, conn...)...); code != 0 {
		t.Fatalf("export of a 0-row table to parquet: exit %d: %s", code, errText)
	}
	if b, _ := os.ReadFile(pq); !bytes.HasPrefix(b, []byte("PAR1")) {
		t.Errorf("0-row parquet file starts %q", b[:min(len(b), 4)])
	}
	if code, _, errText := run(t, append([]string{"export", "t", "--out", csvPath}, conn...)...); code != 2 || !strings.Contains(errText, "--projection") {
		t.Errorf("export of a table of 3 projections without --projection: exit %d, %q", code, errText)
	}
	if code, _, errText := run(t, append([]string{"export", "t", "--projection", "none", "--out", csvPath}, conn...)...); code != 1 || !strings.Contains(errText, "no live containers") {
		t.Errorf("export of a projection without containers: exit %d, %q", code, errText)
	}
}
