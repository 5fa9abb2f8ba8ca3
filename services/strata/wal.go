package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/strata-db/strata/columnar/store"
	"github.com/strata-db/strata/walwriter"
	"github.com/strata-db/strata/walwriter/walarchive"
)

func init() {
	register(command{name: "wal dump", summary: "print the records of a WAL directory", run: runWALDump})
	register(command{name: "wal verify", summary: "check every record of a WAL directory", run: runWALVerify})
	register(command{name: "wal repair", summary: "cut damaged WAL segments at the damage, keeping the rest as .broken files", run: runWALRepair})
	register(command{name: "wal restore", summary: "make a WAL directory of the walwriter's archive in a store (--from URL)", run: runWALRestore})
	registerGroup("wal", walGroupDoc)
}

const walGroupDoc = `
The walwriter's write-ahead log is a directory of segment files and a
CHECKPOINT file (see package walwriter). These commands read, check and
mend one; stop the walwriter before repair.

Archive: a walwriter started with --store URL copies each sealed segment
(one no longer written) and each new checkpoint to the store under
--archive-prefix (default wal/HOST/), in the background. The copy lags the
WAL by the segment being written plus the uploads queued; a store outage
delays it and never the WAL. A clean stop (SIGTERM) uploads the segment
being written too. The archive keeps the newest checkpoints
(--archive-retain-checkpoints, --archive-retain-age) and the segments a
restore from them needs. To recover a lost disk:

  strata wal restore --from URL --prefix wal/HOST/ DIR
  walwriter --wal DIR ...`

func runWALRestore(ctx context.Context, args []string) error {
	cmd := newCmdLine("wal restore", "usage: strata wal restore --from URL [--prefix wal/HOST/] [--at LSN] DIR [flags]\n\n"+
		"Downloads the WAL archive a walwriter made (--store, --archive-prefix) into DIR, a new or empty\n"+
		"directory, and reads it end to end. Each file is written under a temporary name, synced and\n"+
		"renamed; the checkpoint last. A damaged object fails the restore and is named. By default it\n"+
		"restores the newest checkpoint and every segment; --at an older checkpoint the archive still\n"+
		"holds (the report lists them) restores the WAL as it was at that checkpoint.")
	fs := cmd.fs
	from := fs.String("from", "", "the store holding the archive: s3://BUCKET/PREFIX?endpoint=URL&region=REGION or file:///DIR (the walwriter's --store)")
	prefix := fs.String("prefix", "", "key prefix of the archive in the store, the walwriter's --archive-prefix (wal/HOST/ unless set); default: the store's root")
	at := fs.Uint64("at", 0, "restore the WAL as it was at the archived checkpoint with this LSN (default: the newest, and every segment after it)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	dir, err := cmd.parseArg(args, "want one WAL directory to restore into")
	if err != nil {
		return err
	}
	if *from == "" {
		return cmd.usageError("--from URL is required")
	}
	p := *prefix
	if p != "" && !strings.HasSuffix(p, "/") {
		p += "/"
	}
	st, err := store.Open(ctx, *from)
	if err != nil {
		return fmt.Errorf("--from: %w", err)
	}
	defer st.Close()
	rep, err := walarchive.Restore(ctx, st, p, dir, walarchive.RestoreOptions{At: walwriter.LSN(*at)})
	if err != nil {
		return err
	}
	if *asJSON {
		b, err := json.Marshal(rep)
		if err != nil {
			return err
		}
		fmt.Println(string(b))
		return nil
	}
	w := rep.WAL
	fmt.Printf("restored %d segments, %d bytes, into %s\n", rep.Segments, rep.Bytes, dir)
	fmt.Printf("records %d (full images %d, deltas %d), checkpoints %d, LSNs %d..%d, checkpoint file LSN %d\n",
		w.Records, w.FullImages, w.Deltas, w.Checkpoints, w.FirstLSN, w.LastLSN, w.CheckpointLSN)
	if len(rep.Checkpoints) > 0 {
		lsns := make([]string, len(rep.Checkpoints))
		for i, l := range rep.Checkpoints {
			lsns[i] = strconv.FormatUint(uint64(l), 10)
		}
		fmt.Printf("checkpoints in the archive (--at): %s\n", strings.Join(lsns, " "))
	}
	for _, g := range w.Gaps {
		fmt.Printf("gap: %s\n", g)
	}
	fmt.Println("ok")
	return nil
}

// errRepaired is returned when wal repair cut something: like fsck, the
// exit status is non-zero whenever records were lost (or would be, in a dry
// run), so a script cannot mistake a repair for a clean WAL.
var errRepaired = errors.New("records were lost")

func runWALRepair(ctx context.Context, args []string) error {
	cmd := newCmdLine("wal repair", "usage: strata wal repair DIR [flags]\n\n"+
		"Cuts each damaged segment at its first bad record and keeps the rest as <segment>.broken.\n"+
		"Stop the walwriter first. Exit status 0: nothing damaged; 1: something was cut (or would be).")
	fs := cmd.fs
	dryRun := fs.Bool("dry-run", false, "report what would be cut and change nothing")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	dir, err := cmd.parseArg(args, "want one WAL directory")
	if err != nil {
		return err
	}
	rep, err := walwriter.Repair(dir, *dryRun)
	if *asJSON {
		out := struct {
			walwriter.RepairReport
			DryRun bool   `json:"dry_run"`
			Error  string `json:"error,omitempty"`
		}{RepairReport: rep, DryRun: *dryRun}
		if err != nil {
			out.Error = err.Error()
		}
		b, jerr := json.Marshal(out)
		if jerr != nil {
			return jerr
		}
		fmt.Println(string(b))
	} else {
		verb := "cut"
		if *dryRun {
			verb = "would cut"
		}
		for _, c := range rep.Cuts {
			lost := "records lost: unknown (the last segment's damaged tail)"
			if c.LostKnown {
				lost = fmt.Sprintf("records lost: %d (LSNs %d..%d)", c.RecordsLost, c.FirstLostLSN, c.LastLostLSN)
			}
			kept := ""
			if c.Broken != "" {
				kept = ", kept in " + c.Broken
			}
			fmt.Printf("%s %s at offset %d: %d bytes%s; %s; damage: %s\n", verb, c.Segment, c.Offset, c.Bytes, kept, lost, c.Reason)
		}
		if err == nil && len(rep.Cuts) == 0 {
			fmt.Printf("segments %d: nothing damaged\n", rep.Segments)
		}
	}
	if err != nil {
		return fmt.Errorf("repair %s: %w", dir, err)
	}
	if len(rep.Cuts) > 0 {
		var lost uint64
		for _, c := range rep.Cuts {
			lost += c.RecordsLost
		}
		if *dryRun {
			return fmt.Errorf("%d damaged segments in %s, at least %d records would be lost (nothing changed): %w", len(rep.Cuts), dir, lost, errRepaired)
		}
		return fmt.Errorf("cut %d damaged segments in %s, at least %d records lost: %w", len(rep.Cuts), dir, lost, errRepaired)
	}
	return nil
}

func runWALDump(ctx context.Context, args []string) error {
	cmd := newCmdLine("wal dump", "usage: strata wal dump DIR [flags]")
	fs := cmd.fs
	from := fs.Uint64("from", 0, "first LSN to print")
	limit := fs.Int("limit", 0, "print at most this many records (0: all)")
	asJSON := fs.Bool("json", false, "print one JSON object per record")
	dir, err := cmd.parseArg(args, "want one WAL directory")
	if err != nil {
		return err
	}
	r, err := walwriter.NewReader(dir, walwriter.LSN(*from))
	if err != nil {
		return err
	}
	defer r.Close()
	for n := 0; *limit == 0 || n < *limit; n++ {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		rec, err := r.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if *asJSON {
			if err := dumpRecordJSON(rec); err != nil {
				return err
			}
			continue
		}
		fmt.Println(formatRecord(rec))
	}
	return nil
}

func formatRecord(rec walwriter.Record) string {
	var b strings.Builder
	fmt.Fprintf(&b, "lsn=%d %s %s@%d size=%d", rec.LSN, rec.Kind, rec.Segment, rec.Offset, rec.Size)
	if rec.Kind == walwriter.KindCheckpoint {
		return b.String()
	}
	fmt.Fprintf(&b, " event=%q table=%s key=%x row=(", rec.EventID, rec.Table, rec.Key)
	for i, v := range rec.Row {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(walwriter.FormatValue(rec.Columns[i], v))
	}
	b.WriteString(")")
	return b.String()
}

func dumpRecordJSON(rec walwriter.Record) error {
	type jsonRecord struct {
		LSN     uint64   `json:"lsn"`
		Kind    string   `json:"kind"`
		Segment string   `json:"segment"`
		Offset  int64    `json:"offset"`
		Size    int      `json:"size"`
		EventID string   `json:"event_id,omitempty"`
		Table   string   `json:"table,omitempty"`
		Key     string   `json:"key,omitempty"`
		Row     []string `json:"row,omitempty"`
	}
	out := jsonRecord{LSN: uint64(rec.LSN), Kind: rec.Kind.String(), Segment: rec.Segment, Offset: rec.Offset, Size: rec.Size,
		EventID: rec.EventID, Table: rec.Table, Key: hex.EncodeToString(rec.Key)}
	for i, v := range rec.Row {
		out.Row = append(out.Row, walwriter.FormatValue(rec.Columns[i], v))
	}
	b, err := json.Marshal(out)
	if err != nil {
		return err
	}
	_, err = fmt.Println(string(b))
	return err
}

func runWALVerify(ctx context.Context, args []string) error {
	cmd := newCmdLine("wal verify", "usage: strata wal verify DIR [flags]")
	asJSON := cmd.fs.Bool("json", false, "print the report as JSON")
	dir, err := cmd.parseArg(args, "want one WAL directory")
	if err != nil {
		return err
	}
	rep, verr := walwriter.Verify(dir)
	if *asJSON {
		out := struct {
			walwriter.VerifyReport
			Error string `json:"error,omitempty"`
		}{VerifyReport: rep}
		if verr != nil {
			out.Error = verr.Error()
		}
		b, err := json.Marshal(out)
		if err != nil {
			return err
		}
		fmt.Println(string(b))
	} else {
		fmt.Printf("segments %d, records %d (full images %d, deltas %d), checkpoints %d, %s record bytes\n",
			rep.Segments, rep.Records, rep.FullImages, rep.Deltas, rep.Checkpoints, strconv.FormatUint(rep.RecordBytes, 10))
		fmt.Printf("LSNs %d..%d, checkpoint file LSN %d\n", rep.FirstLSN, rep.LastLSN, rep.CheckpointLSN)
		for _, b := range rep.Broken {
			fmt.Printf("damaged bytes kept from a recovery or repair: %s\n", b)
		}
		for _, g := range rep.Gaps {
			fmt.Printf("gap: %s\n", g)
		}
	}
	if verr != nil {
		return fmt.Errorf("verify %s: %w", dir, verr)
	}
	if !*asJSON {
		fmt.Println("ok")
	}
	return nil
}
