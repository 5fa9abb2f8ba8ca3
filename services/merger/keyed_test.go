package main

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/messages"
)

// writeKeyedContainer writes container id of table t, projection p: rows
// of (k, v, version, deleted), v NULL for markers.
func writeKeyedContainer(t *testing.T, data, id string, rows [][4]any) {
	t.Helper()
	schema := arrow.NewSchema(append([]arrow.Field{
		{Name: "k", Type: arrow.PrimitiveTypes.Int64},
		{Name: "v", Type: arrow.BinaryTypes.String, Nullable: true},
	}, columnar.ChangeFields()...), nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for _, r := range rows {
		b.Field(0).(*array.Int64Builder).Append(r[0].(int64))
		if r[1] == nil {
			b.Field(1).AppendNull()
		} else {
			b.Field(1).(*array.StringBuilder).Append(r[1].(string))
		}
		b.Field(2).(*array.Int64Builder).Append(r[2].(int64))
		b.Field(3).(*array.BooleanBuilder).Append(r[3].(bool))
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	w, err := columnar.Create(columnar.ContainerDir(data, "t", "p", id), columnar.WriterOptions{
		Table: "t", Projection: "p", ID: id, Schema: schema,
		SortKey: columnar.SortKey{{Name: "k"}}, PrimaryKey: []string{"k"}, BlockRows: 2,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Commit(); err != nil {
		t.Fatal(err)
	}
}

// TestMergeoutPassesMarkerFloor: the job's DropMarkersThrough reaches the
// merge. Loaded keys 1..4; changes delete key 2 (version 5) and update key
// 3 (version 6). Without a floor the marker stays (4 rows); with floor 5
// it goes (3 rows), and the superseded rows go either way.
func TestMergeoutPassesMarkerFloor(t *testing.T) {
	data := t.TempDir()
	writeKeyedContainer(t, data, "c0000", [][4]any{
		{int64(1), "a", int64(0), false}, {int64(2), "b", int64(0), false},
		{int64(3), "c", int64(0), false}, {int64(4), "d", int64(0), false},
	})
	writeKeyedContainer(t, data, "c0001", [][4]any{
		{int64(2), nil, int64(5), true}, {int64(3), "c2", int64(6), false},
	})
	m := &mergeout{dataDir: data, tempDir: t.TempDir(), staleAfter: time.Minute, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, tc := range []struct {
		output string
		floor  int64
		rows   int64
	}{
		{"m1", 0, 4},
		{"m2", 4, 4},
		{"m3", 5, 3},
	} {
		job := &messages.MergeoutJob{JobID: "j-" + tc.output, Table: "t", Projection: "p", Output: tc.output,
			Grant: messages.Grant{Bytes: 32 << 20}, DropMarkersThrough: tc.floor,
			Inputs: []messages.ContainerRef{{ID: "c0000"}, {ID: "c0001"}}}
		out, err := m.run(context.Background(), job, nil)
		if err != nil {
			t.Fatalf("floor %d: %v", tc.floor, err)
		}
		if out.RowsTotal != tc.rows || out.Output.Rows != tc.rows {
			t.Errorf("floor %d: %d rows (output %d), want %d", tc.floor, out.RowsTotal, out.Output.Rows, tc.rows)
		}
		man, err := columnar.ReadManifest(columnar.ContainerDir(data, "t", "p", tc.output))
		if err != nil {
			t.Fatal(err)
		}
		if len(man.PrimaryKey) != 1 || man.PrimaryKey[0] != "k" || man.Rows != tc.rows {
			t.Errorf("floor %d: output manifest primary key %v, rows %d", tc.floor, man.PrimaryKey, man.Rows)
		}
	}
}
