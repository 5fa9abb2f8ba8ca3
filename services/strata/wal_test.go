package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/strata-db/strata/messages"
	"github.com/strata-db/strata/walwriter"
)

func TestWALVerifyAndDump(t *testing.T) {
	dir := t.TempDir()
	tbl := walwriter.Table{Name: "t", Columns: []messages.RowType{messages.RowInt64, messages.RowText}}
	w, err := walwriter.Open(dir, walwriter.Options{Tables: []walwriter.Table{tbl}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		v := binary.BigEndian.AppendUint64(nil, uint64(i)^1<<63)
		if _, err := w.Append(context.Background(), walwriter.Update{EventID: fmt.Sprint("e-", i), Table: "t", Key: []byte{byte(i % 3)}, Row: walwriter.Row{v, []byte("text")}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := runWALVerify(ctx, []string{dir}); err != nil {
		t.Fatalf("verify: %v", err)
	}
	if err := runWALDump(ctx, []string{dir, "--limit", "3", "--json"}); err != nil {
		t.Fatalf("dump: %v", err)
	}
	if err := runWALDump(ctx, []string{"--from", "5", dir}); err != nil {
		t.Fatalf("dump --from: %v", err)
	}
	// Damage a record: verify must fail and say where.
	seg := filepath.Join(dir, "00000000000000000001.wal")
	f, err := os.OpenFile(seg, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte{0xff, 0xff}, 60)
	f.Close()
	if err := runWALVerify(ctx, []string{dir}); err == nil {
		t.Fatal("verify of a damaged WAL succeeded")
	}
	if err := runWALVerify(ctx, nil); err == nil {
		t.Fatal("verify without a directory succeeded")
	}
}

// TestUpdateEventThroughWAL checks that rows in the messages package's
// canonical encoding go through the WAL unchanged and print as their values.
func TestUpdateEventThroughWAL(t *testing.T) {
	types := []messages.RowType{messages.RowInt64, messages.RowFloat64, messages.RowBool, messages.RowText, messages.RowBytes, messages.RowTimestamp, messages.RowDate}
	vals := []any{int64(-42), 2.5, true, "héllo", []byte{1, 2}, int64(86400_000_000), int32(1)}
	enc, err := messages.EncodeRow(types, vals)
	if err != nil {
		t.Fatal(err)
	}
	ev := &messages.UpdateEvent{EventID: "p-1", Table: "all_types", Columns: types, Key: []byte("k"), NewRow: enc}
	if err := ev.Validate(); err != nil {
		t.Fatal(err)
	}
	cols := types
	for _, rt := range cols {
		if !rt.Valid() {
			t.Fatalf("column type %q not valid", rt)
		}
	}
	row, err := messages.SplitRow(ev.Columns, ev.NewRow)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	w, err := walwriter.Open(dir, walwriter.Options{Tables: []walwriter.Table{{Name: ev.Table, Columns: cols}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Append(context.Background(), walwriter.Update{EventID: ev.EventID, Table: ev.Table, Key: ev.Key, Row: row}); err != nil {
		t.Fatal(err)
	}
	w.Close()
	r, err := walwriter.NewReader(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rec, err := r.Next()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"-42", "2.5", "true", `"héllo"`, "0x0102", "1970-01-02T00:00:00Z", "1970-01-02"}
	for i, v := range rec.Row {
		if got := walwriter.FormatValue(rec.Columns[i], v); got != want[i] {
			t.Errorf("column %d (%s): %s, want %s", i, types[i], got, want[i])
		}
	}
}

// TestWALRepair garbles a record in an older segment: verify fails, a dry
// run reports and changes nothing, repair cuts it and fails (records were
// lost), and after it verify passes and repair finds nothing.
func TestWALRepair(t *testing.T) {
	dir := t.TempDir()
	tbl := walwriter.Table{Name: "t", Columns: []messages.RowType{messages.RowInt64, messages.RowText}}
	w, err := walwriter.Open(dir, walwriter.Options{Tables: []walwriter.Table{tbl}, SegmentSize: 128 << 10, MaxRowBytes: 1024})
	if err != nil {
		t.Fatal(err)
	}
	text := make([]byte, 300)
	for i := range text {
		text[i] = byte('a' + i%26)
	}
	for i := range 1000 {
		v := binary.BigEndian.AppendUint64(nil, uint64(i)^1<<63)
		if _, err := w.Append(context.Background(), walwriter.Update{EventID: fmt.Sprint("e-", i), Table: "t", Key: []byte(fmt.Sprint(i)), Row: walwriter.Row{v, text}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := runWALRepair(ctx, []string{dir}); err != nil {
		t.Fatalf("repair of a clean WAL: %v", err)
	}
	seg := filepath.Join(dir, "00000000000000000001.wal")
	f, err := os.OpenFile(seg, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte{0xff, 0xff, 0xff}, 20000)
	f.Close()
	if err := runWALVerify(ctx, []string{dir}); err == nil {
		t.Fatal("verify of a damaged WAL succeeded")
	}
	before, _ := os.ReadFile(seg)
	if err := runWALRepair(ctx, []string{"--dry-run", dir}); !errors.Is(err, errRepaired) {
		t.Fatalf("dry run: %v, want it to report damage", err)
	}
	if after, _ := os.ReadFile(seg); len(after) != len(before) {
		t.Fatal("dry run changed the segment")
	}
	if err := runWALRepair(ctx, []string{dir}); !errors.Is(err, errRepaired) {
		t.Fatalf("repair: %v, want it to report lost records", err)
	}
	if _, err := os.Stat(seg + ".broken"); err != nil {
		t.Fatal(err)
	}
	if err := runWALVerify(ctx, []string{dir}); err != nil {
		t.Fatalf("verify after repair: %v", err)
	}
	if err := runWALRepair(ctx, []string{dir, "--json"}); err != nil {
		t.Fatalf("second repair: %v", err)
	}
}
