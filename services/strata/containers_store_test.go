package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/columnar/store"
	"github.com/strata-db/strata/columnar/store/s3test"
)

// TestContainersStore lists a bucket holding two committed containers of
// two projections, an upload without a commit (an orphan, or one in
// flight), a losing attempt beside a committed one, and the walwriter's
// archive, which is no container.
func TestContainersStore(t *testing.T) {
	ctx := context.Background()
	srv := s3test.Start(t, "strata")
	st := srv.Store(t)
	data := t.TempDir()
	schema := arrow.NewSchema([]arrow.Field{{Name: "k", Type: arrow.PrimitiveTypes.Int64}}, nil)
	write := func(table, projection, id string, rows int) string {
		dir := columnar.ContainerDir(data, table, projection, id)
		w, err := columnar.Create(dir, columnar.WriterOptions{Table: table, Projection: projection, ID: id, Schema: schema, SortKey: columnar.SortKey{{Name: "k"}}, NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		for i := range rows {
			b.Field(0).(*array.Int64Builder).Append(int64(i))
		}
		rec := b.NewRecordBatch()
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
		b.Release()
		if _, err := w.Commit(); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	upload := func(table, projection, id string, rows int) {
		if _, err := store.Upload(ctx, st, write(table, projection, id, rows), table, projection, id); err != nil {
			t.Fatal(err)
		}
	}
	put := func(key, body string) {
		path := filepath.Join(t.TempDir(), "obj")
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := st.Put(ctx, key, path, store.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	upload("t", "p", "c0000", 10)
	upload("t", "q", "c0000", 7)
	upload("u", "p", "c0001", 3)
	// c0002: an upload that never committed.
	put("t/p/c0002/a0123456789abcdef/col-0000.arrow", "half a column")
	// c0000 of t/p: a second attempt, which lost.
	put("t/p/c0000/affffffffffffffff/col-0000.arrow", "the loser's column")
	put("t/p/c0000/affffffffffffffff/manifest.json", "{}")
	// Not containers.
	put("wal/h1/0000000000000001.seg", "a segment")

	type row struct {
		Table, Projection, Container, State string
		Attempt                             *string
		Rows                                *int64
		Objects, Bytes                      int64
		Modified                            string
	}
	list := func(args ...string) ([]row, string) {
		t.Helper()
		code, out, errText := run(t, append([]string{"containers", "--store", srv.URL, "--format", "json"}, args...)...)
		if code != 0 {
			t.Fatalf("strata containers --store %v: exit %d: %s", args, code, errText)
		}
		var rows []row
		if err := json.Unmarshal([]byte(out), &rows); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		return rows, errText
	}
	rows, errText := list()
	type key struct{ table, projection, container, state string }
	got := map[key][]row{}
	for _, r := range rows {
		k := key{r.Table, r.Projection, r.Container, r.State}
		got[k] = append(got[k], r)
		if r.Objects == 0 || r.Bytes == 0 || r.Modified == "" || r.Attempt == nil {
			t.Errorf("%+v: want an attempt, objects, bytes and a time", r)
		}
	}
	if len(rows) != 5 {
		t.Errorf("%d rows, want 5 (4 committed and uncommitted attempts of 4 containers, and the loser)", len(rows))
	}
	for k, wantRows := range map[key]int64{
		{"t", "p", "c0000", "committed"}: 10,
		{"t", "q", "c0000", "committed"}: 7,
		{"u", "p", "c0001", "committed"}: 3,
	} {
		rs := got[k]
		if len(rs) != 1 || rs[0].Rows == nil || *rs[0].Rows != wantRows {
			t.Errorf("%v: %+v, want one row with %d rows", k, rs, wantRows)
			continue
		}
		// The pack and the commit.
		if rs[0].Objects != 2 {
			t.Errorf("%v: %d objects, want the pack and the commit", k, rs[0].Objects)
		}
	}
	for _, k := range []key{{"t", "p", "c0000", "uncommitted"}, {"t", "p", "c0002", "uncommitted"}} {
		rs := got[k]
		if len(rs) != 1 || rs[0].Rows != nil {
			t.Errorf("%v: %+v, want one row, rows unknown", k, rs)
		}
	}
	if rs := got[key{"t", "p", "c0002", "uncommitted"}]; len(rs) == 1 && (*rs[0].Attempt != "a0123456789abcdef" || rs[0].Objects != 1 || rs[0].Bytes != int64(len("half a column"))) {
		t.Errorf("the orphan: %+v", rs[0])
	}
	if !strings.Contains(errText, "also holds 1 objects") {
		t.Errorf("stderr %q does not count the object outside containers", errText)
	}

	rows, _ = list("--table", "t", "--projection", "p")
	for _, r := range rows {
		if r.Table != "t" || r.Projection != "p" {
			t.Errorf("--table t --projection p lists %+v", r)
		}
	}
	if len(rows) != 3 {
		t.Errorf("--table t --projection p: %d rows, want 3", len(rows))
	}
	if rows, _ := list("--projection", "q"); len(rows) != 1 || rows[0].Table != "t" {
		t.Errorf("--projection q: %+v", rows)
	}

	// The table people read.
	code, out, _ := run(t, "containers", "--store", srv.URL, "--table", "t")
	t.Logf("strata containers --store URL --table t:\n%s", out)
	if code != 0 || !strings.Contains(out, "uncommitted") || !strings.Contains(out, "a0123456789abcdef") {
		t.Errorf("exit %d:\n%s", code, out)
	}
	if code, _, _ := run(t, "containers", "--store", srv.URL, "--table", "../x"); code != 2 {
		t.Errorf("--table ../x: exit %d, want 2", code)
	}
}
