package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/strata-db/strata/walwriter"
)

func init() {
	register(command{name: "wal dump", summary: "print the records of a WAL directory", run: runWALDump})
	register(command{name: "wal verify", summary: "check every record of a WAL directory", run: runWALVerify})
}

func runWALDump(ctx context.Context, args []string) error {
	fs := newFlagSet("wal dump")
	from := fs.Uint64("from", 0, "first LSN to print")
	limit := fs.Int("limit", 0, "print at most this many records (0: all)")
	asJSON := fs.Bool("json", false, "print one JSON object per record")
	fs.Usage = func() { fmt.Fprintln(fs.Output(), "usage: strata wal dump [flags] DIR"); fs.PrintDefaults() }
	if err := parseWithDir(fs, args); err != nil {
		return err
	}
	r, err := walwriter.NewReader(fs.Arg(0), walwriter.LSN(*from))
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

func parseWithDir(fs interface {
	Parse([]string) error
	NArg() int
}, args []string) error {
	// Accept the directory before the flags as well as after them.
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		args = append(args[1:len(args):len(args)], args[0])
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: want one WAL directory", errUsage)
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
	fs := newFlagSet("wal verify")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	fs.Usage = func() { fmt.Fprintln(fs.Output(), "usage: strata wal verify [flags] DIR"); fs.PrintDefaults() }
	if err := parseWithDir(fs, args); err != nil {
		return err
	}
	rep, verr := walwriter.Verify(fs.Arg(0))
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
			fmt.Printf("damaged tail kept from a recovery: %s\n", b)
		}
	}
	if verr != nil {
		return fmt.Errorf("verify %s: %w", fs.Arg(0), verr)
	}
	if !*asJSON {
		fmt.Println("ok")
	}
	return nil
}
