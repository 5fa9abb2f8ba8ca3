package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/strata-db/strata/walwriter"
)

func TestWALVerifyAndDump(t *testing.T) {
	dir := t.TempDir()
	tbl := walwriter.Table{Name: "t", Columns: []walwriter.ColumnType{walwriter.Int64, walwriter.Text}}
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
