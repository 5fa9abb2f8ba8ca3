package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-db/strata/columnar/store"
	"github.com/strata-db/strata/columnar/store/s3test"
	"github.com/strata-db/strata/messages"
	"github.com/strata-db/strata/walwriter"
	"github.com/strata-db/strata/walwriter/walarchive"
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

// strata wal restore makes a WAL directory of a walwriter's archive in a
// bucket, and refuses a directory that holds a WAL.
func TestWALRestore(t *testing.T) {
	ctx := context.Background()
	srv := s3test.Start(t, "strata")
	st, err := store.Open(ctx, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	dir := t.TempDir()
	tbl := walwriter.Table{Name: "t", Columns: []messages.RowType{messages.RowInt64, messages.RowText}}
	opts := walwriter.Options{Tables: []walwriter.Table{tbl}, SegmentSize: 128 << 10}
	w, err := walwriter.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 500 {
		v := binary.BigEndian.AppendUint64(nil, uint64(i)^1<<63)
		text := []byte(strings.Repeat(fmt.Sprint(i, "-"), 60))
		if _, err := w.Append(ctx, walwriter.Update{EventID: fmt.Sprint("e-", i), Table: "t", Key: []byte{byte(i % 7)}, Row: walwriter.Row{v, text}}); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	if w, err = walwriter.Open(dir, opts); err != nil { // seals the last segment
		t.Fatal(err)
	}
	a, err := walarchive.Start(w, st, walarchive.Options{Prefix: "wal/db1/"})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	a.Close()
	w.Close()

	dst := filepath.Join(t.TempDir(), "restored")
	code, out, errText := run(t, "wal", "restore", "--from", srv.URL, "--prefix", "wal/db1", dst)
	if code != 0 || !strings.Contains(out, "restored ") || !strings.Contains(out, "LSNs 1..500") || !strings.HasSuffix(out, "ok\n") {
		t.Fatalf("wal restore: exit %d, stdout:\n%s\nstderr:\n%s", code, out, errText)
	}
	if code, out, _ := run(t, "wal", "verify", dst); code != 0 || !strings.Contains(out, "records 500") {
		t.Fatalf("wal verify of the restored WAL: exit %d:\n%s", code, out)
	}
	code, _, errText = run(t, "wal", "restore", "--from", srv.URL, "--prefix", "wal/db1/", "--at", "12345", t.TempDir())
	if code != 1 || !strings.Contains(errText, "no checkpoint at LSN 12345") {
		t.Fatalf("wal restore --at a checkpoint the archive lacks: exit %d, stderr:\n%s", code, errText)
	}
	code, _, errText = run(t, "wal", "restore", "--from", srv.URL, "--prefix", "wal/db1/", dst)
	if code != 1 || !strings.Contains(errText, "holds a WAL") {
		t.Fatalf("wal restore into a WAL directory: exit %d, stderr:\n%s", code, errText)
	}
	code, _, errText = run(t, "wal", "restore", "--from", srv.URL, t.TempDir())
	if code != 1 || !strings.Contains(errText, "wal/db1/") {
		t.Fatalf("wal restore from the bucket's root: exit %d, stderr:\n%s", code, errText)
	}
	if code, _, errText := run(t, "wal", "restore", t.TempDir()); code != 2 || !strings.Contains(errText, "--from") {
		t.Fatalf("wal restore without --from: exit %d, stderr:\n%s", code, errText)
	}
	code, out, _ = run(t, "wal", "--help")
	if code != 0 || !strings.Contains(out, "wal restore") || !strings.Contains(out, "--archive-prefix") {
		t.Fatalf("wal --help: exit %d:\n%s", code, out)
	}
	if code, _, errText := run(t, "wal", "nonsense"); code != 2 || !strings.Contains(errText, "unknown command") {
		t.Fatalf("wal nonsense: exit %d, stderr:\n%s", code, errText)
	}
}
