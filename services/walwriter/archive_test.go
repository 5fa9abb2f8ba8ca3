package main

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/strata-db/strata/columnar/store"
	"github.com/strata-db/strata/columnar/store/s3test"
	"github.com/strata-db/strata/internal/service"
	"github.com/strata-db/strata/internal/service/metricstest"
	"github.com/strata-db/strata/internal/storeflags"
	"github.com/strata-db/strata/messages"
	"github.com/strata-db/strata/walwriter"
	"github.com/strata-db/strata/walwriter/walarchive"
)

// With --store the walwriter archives sealed segments under wal/HOST/ and
// exports how far the archive is.
func TestArchiveFlagsAndMetrics(t *testing.T) {
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	tbl := walwriter.Table{Name: "t", Columns: []messages.RowType{messages.RowInt64, messages.RowText}}
	w, err := walwriter.Open(t.TempDir(), walwriter.Options{Tables: []walwriter.Table{tbl}, SegmentSize: 128 << 10, DisableDelta: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()

	arch, stop, err := startArchive(ctx, &storeflags.Flags{}, walarchive.Options{Logger: log}, w)
	if arch != nil || err != nil {
		t.Fatalf("without --store: archiver %v, %v", arch, err)
	}
	stop()

	srv := s3test.Start(t, "strata")
	arch, stop, err = startArchive(ctx, &storeflags.Flags{Store: srv.URL}, walarchive.Options{Logger: log}, w)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	for i := range 600 {
		row := walwriter.Row{binary.BigEndian.AppendUint64(nil, uint64(i)^1<<63), []byte(strings.Repeat(fmt.Sprint(i), 200))}
		if _, err := w.Append(ctx, walwriter.Update{EventID: fmt.Sprint("e-", i), Table: "t", Key: []byte(fmt.Sprint(i % 10)), Row: row}); err != nil {
			t.Fatal(err)
		}
	}
	if err := arch.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	segs, err := w.Segments()
	if err != nil {
		t.Fatal(err)
	}
	var sealed int
	var bytes int64
	for _, s := range segs {
		if s.Sealed {
			sealed++
			bytes += s.Size
		}
	}
	if sealed < 2 {
		t.Fatalf("%d sealed segments, want several", sealed)
	}

	reg := prometheus.NewRegistry()
	registerArchiveMetrics(reg, arch)
	fams := metricstest.Check(t, reg, "walwriter", map[string]dto.MetricType{
		"strata_wal_archived_segments_total":           dto.MetricType_COUNTER,
		"strata_wal_archived_bytes_total":              dto.MetricType_COUNTER,
		"strata_wal_archived_checkpoints_total":        dto.MetricType_COUNTER,
		"strata_wal_archive_failures_total":            dto.MetricType_COUNTER,
		"strata_wal_archive_lag_segments":              dto.MetricType_GAUGE,
		"strata_wal_archive_lag_bytes":                 dto.MetricType_GAUGE,
		"strata_wal_archive_stored_segments":           dto.MetricType_GAUGE,
		"strata_wal_archive_stored_bytes":              dto.MetricType_GAUGE,
		"strata_wal_archive_stored_checkpoints":        dto.MetricType_GAUGE,
		"strata_wal_archive_deleted_segments_total":    dto.MetricType_COUNTER,
		"strata_wal_archive_deleted_checkpoints_total": dto.MetricType_COUNTER,
	})
	if v := metricstest.Value(fams, "strata_wal_archived_segments_total"); v != float64(sealed) {
		t.Errorf("strata_wal_archived_segments_total = %v, want the %d sealed segments", v, sealed)
	}
	if v := metricstest.Value(fams, "strata_wal_archived_bytes_total"); v != float64(bytes) {
		t.Errorf("strata_wal_archived_bytes_total = %v, want %d", v, bytes)
	}
	if v := metricstest.Value(fams, "strata_wal_archive_lag_segments"); v != 0 {
		t.Errorf("strata_wal_archive_lag_segments = %v after a sync", v)
	}
	if v := metricstest.Value(fams, "strata_wal_archive_stored_segments"); v != float64(sealed) {
		t.Errorf("strata_wal_archive_stored_segments = %v, want %d", v, sealed)
	}
	if v := metricstest.Value(fams, "strata_wal_archive_stored_bytes"); v != float64(bytes) {
		t.Errorf("strata_wal_archive_stored_bytes = %v, want %d", v, bytes)
	}

	host, _ := os.Hostname()
	st, err := store.Open(ctx, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	objs, err := st.List(ctx, "wal/"+host+"/")
	if err != nil || len(objs) != sealed {
		t.Fatalf("under wal/%s/: %d objects, %v; want %d", host, len(objs), err, sealed)
	}
}

// A clean stop (SIGTERM) closes the WAL, sends the acks, then uploads the
// segment being written and the checkpoint: a restore from the bucket into
// an empty directory has every acknowledged record.
func TestCleanStopArchivesEveryAckedRecord(t *testing.T) {
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	tbl := walwriter.Table{Name: "t", Columns: []messages.RowType{messages.RowInt64, messages.RowText}}
	dir := t.TempDir()
	w, err := walwriter.Open(dir, walwriter.Options{Tables: []walwriter.Table{tbl}, SegmentSize: 128 << 10, DisableDelta: true})
	if err != nil {
		t.Fatal(err)
	}
	srv := s3test.Start(t, "strata")
	arch, stop, err := startArchive(ctx, &storeflags.Flags{Store: srv.URL}, walarchive.Options{Prefix: "wal/h1/", Logger: log}, w)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	acked := map[string]walwriter.LSN{}
	for i := range 700 {
		row := walwriter.Row{binary.BigEndian.AppendUint64(nil, uint64(i)^1<<63), []byte(strings.Repeat(fmt.Sprint(i), 40))}
		id := fmt.Sprint("e-", i)
		lsn, err := w.Append(ctx, walwriter.Update{EventID: id, Table: "t", Key: []byte(fmt.Sprint(i % 10)), Row: row})
		if err != nil {
			t.Fatal(err)
		}
		acked[id] = lsn
	}
	flushed := false
	if err := closeWAL(w, arch, func() error { flushed = true; return nil }, 10*time.Second, log); err != nil {
		t.Fatal(err)
	}
	if !flushed {
		t.Fatal("the acks were not flushed")
	}

	st, err := store.Open(ctx, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	dst := t.TempDir()
	rep, err := walarchive.Restore(ctx, st, "wal/h1/", dst, walarchive.RestoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.WAL.Records != uint64(len(acked)) {
		t.Errorf("restored %d records, want the %d acknowledged", rep.WAL.Records, len(acked))
	}
	r, err := walwriter.NewReader(dst, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for {
		rec, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if lsn, ok := acked[rec.EventID]; ok && lsn == rec.LSN {
			delete(acked, rec.EventID)
		}
	}
	if len(acked) != 0 {
		t.Fatalf("%d acknowledged records are not in the restored WAL", len(acked))
	}
}

// The retention flags default to a month and eight checkpoints, and take
// their environment variables as every flag does.
func TestArchiveFlags(t *testing.T) {
	parse := func(args ...string) walarchive.Options {
		t.Helper()
		var af archiveFlags
		fs := flag.NewFlagSet("walwriter", flag.ContinueOnError)
		af.register(fs)
		if err := service.Parse(fs, args); err != nil {
			t.Fatal(err)
		}
		return af.options(nil)
	}
	if o := parse(); o.RetainCheckpoints != 8 || o.RetainAge != 720*time.Hour || o.Prefix != "" {
		t.Fatalf("defaults: %+v", o)
	}
	if o := parse("--archive-retain-checkpoints", "0"); o.RetainCheckpoints != 0 {
		t.Fatalf("--archive-retain-checkpoints 0: %+v", o)
	}
	t.Setenv("STRATA_ARCHIVE_RETAIN_CHECKPOINTS", "3")
	t.Setenv("STRATA_ARCHIVE_RETAIN_AGE", "48h")
	t.Setenv("STRATA_ARCHIVE_PREFIX", "wal/x/")
	if o := parse(); o.RetainCheckpoints != 3 || o.RetainAge != 48*time.Hour || o.Prefix != "wal/x/" {
		t.Fatalf("from the environment: %+v", o)
	}
	if o := parse("--archive-retain-age", "1h"); o.RetainAge != time.Hour {
		t.Fatalf("a flag over the environment: %+v", o)
	}
}
