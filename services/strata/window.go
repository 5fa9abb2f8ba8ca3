package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/columnar/convert"
	"github.com/strata-db/strata/messages"
	"github.com/strata-db/strata/windower/sqlparse"
)

func init() {
	register(command{name: "window", summary: "run a window query through the scheduler; print the first rows or write --out", run: runWindow})
}

func runWindow(ctx context.Context, args []string) error {
	cmd := newAPICommand("window", "usage: strata window [flags] 'SELECT ... OVER (...) FROM table ...'\n\n"+
		"Parses the query, has the scheduler grant it memory and hand it to a windower, waits,\n"+
		"and prints the first rows of the result container (or writes it all with --out).\n"+
		"If no windower has taken the job after --accept-timeout, says why it may be waiting.",
		"how printed rows look: table, json or csv")
	fs := cmd.fs
	pool := fs.String("pool", "", "resource pool to run in (default general)")
	rows := fs.Int("rows", 20, "result rows to print")
	out := fs.String("out", "", "write the whole result to FILE: .csv, .parquet or .arrow")
	pqComp := fs.String("parquet-compression", "zstd", "compression of a .parquet --out: zstd, snappy or none")
	explain := fs.Bool("explain", false, "print the parsed query and exit")
	storeURL := fs.String("store", "", "read the result from this store (s3://BUCKET/PREFIX?endpoint=URL, file:///DIR) instead of the data directory")
	var wf waitFlags
	wf.register(fs)
	sql, err := cmd.parseArg(args, "want the query text")
	if err != nil {
		return err
	}
	exportTo, err := exportFormat(*out)
	if err != nil {
		return err
	}
	pqCodec, err := convert.ParseParquetCompression(*pqComp)
	if err != nil {
		return fmt.Errorf("%w: --parquet-compression: %v", errUsage, err)
	}
	query, err := sqlparse.Parse(sql)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if *explain {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(query)
	}
	var rep messages.WindowReply
	c, w, err := cmd.submit(ctx, messages.SubjectAPIWindow, &messages.WindowRequest{Query: *query, Pool: *pool, RequestID: newRequestID()}, &rep, &rep.Error)
	if err != nil {
		return err
	}
	defer c.Close()
	defer w.stop()
	state := fmt.Sprintf("granted %s from pool %s", fmtBytes(rep.Job.Grant.Bytes), rep.Job.Grant.Pool)
	if rep.Job.Queued {
		state = "queued for memory"
	}
	fmt.Fprintf(stderr, "window %s over %s (%d containers) -> %s, %s\n", rep.Job.JobID, query.Table, rep.Job.Inputs, rep.ResultTable, state)
	done, failed, err := w.wait(ctx, c, []string{rep.Job.JobID}, waitOptions{waitFlags: wf, consumer: messages.ConsumerWindower})
	if err != nil {
		return err
	}
	if failed > 0 {
		return fmt.Errorf("window job %s failed", rep.Job.JobID)
	}
	dataDir := cmd.common.DataDir
	if *storeURL != "" {
		staging, err := os.MkdirTemp("", "strata-result-")
		if err != nil {
			return fmt.Errorf("staging directory: %w", err)
		}
		defer os.RemoveAll(staging)
		dataDir = staging
	}
	dir, err := resultDir(ctx, c, dataDir, rep.ResultTable, done[rep.Job.JobID])
	if err != nil {
		return err
	}
	if *storeURL != "" {
		if err := fetchResult(ctx, *storeURL, dataDir, dir); err != nil {
			return err
		}
	}
	if exportTo != "" {
		n, err := exportContainer(dir, *out, exportTo, convert.ExportOptions{Null: "NULL", ParquetCompression: pqCodec})
		if err != nil {
			return err
		}
		fmt.Fprintf(stderr, "wrote %d rows to %s\n", n, *out)
		return nil
	}
	return printRows(dir, *rows, cmd.format)
}

// resultDir finds the result container: from the done event when it names
// a container of the result table the scheduler gave (anyone may publish
// events), or else from the catalog's entry of the result table.
func resultDir(ctx context.Context, c *apiClient, dataDir, resultTable string, ev *messages.JobEvent) (string, error) {
	if ev != nil && ev.Output != nil && ev.Output.Table == resultTable && ev.Output.Projection == messages.ResultProjection &&
		messages.ValidName(ev.Output.ID) == nil {
		return columnar.ContainerDir(dataDir, resultTable, messages.ResultProjection, ev.Output.ID), nil
	}
	var rep messages.CatalogReply
	if err := c.call(ctx, messages.SubjectAPICatalog, &messages.CatalogRequest{Table: resultTable}, &rep); err != nil {
		return "", err
	}
	for _, p := range rep.Projections {
		for _, l := range p.Live {
			return columnar.ContainerDir(dataDir, l.Table, l.Projection, l.ID), nil
		}
	}
	return "", fmt.Errorf("result table %s has no container in the catalog", resultTable)
}

func exportFormat(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	switch ext := strings.ToLower(filepath.Ext(path)); ext {
	case ".csv", ".parquet", ".arrow":
		return ext[1:], nil
	default:
		return "", fmt.Errorf("%w: --out %q: want a .csv, .parquet or .arrow file", errUsage, path)
	}
}

// forEachBatch streams every block of every column of the container at dir.
func forEachBatch(dir string, fn func(schema *arrow.Schema, rec arrow.RecordBatch) (more bool, err error)) error {
	ct, err := columnar.Open(dir, columnar.OpenOptions{})
	if err != nil {
		return fmt.Errorf("open result: %w", err)
	}
	defer ct.Close()
	cols := make([]int, ct.Schema().NumFields())
	for i := range cols {
		cols[i] = i
	}
	br, err := ct.OpenColumns(cols)
	if err != nil {
		return fmt.Errorf("read result %s: %w", dir, err)
	}
	defer br.Close()
	for {
		rec, err := br.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read result %s: %w", dir, err)
		}
		more, err := fn(ct.Schema(), rec)
		rec.Release()
		if err != nil || !more {
			return err
		}
	}
}

// printRows prints the first n rows of the container at dir.
func printRows(dir string, n int, format string) error {
	var t *table
	err := forEachBatch(dir, func(schema *arrow.Schema, rec arrow.RecordBatch) (bool, error) {
		if t == nil {
			t = &table{}
			for _, f := range schema.Fields() {
				t.header = append(t.header, f.Name)
			}
		}
		for r := 0; r < int(rec.NumRows()) && len(t.rows) < n; r++ {
			row := make([]string, rec.NumCols())
			for c := range row {
				col := rec.Column(c)
				if col.IsNull(r) {
					row[c] = "NULL"
				} else {
					row[c] = col.ValueStr(r)
				}
			}
			t.add(row...)
		}
		return len(t.rows) < n, nil
	})
	if err != nil {
		return err
	}
	if t == nil {
		fmt.Fprintln(stderr, "(no rows)")
		return nil
	}
	return t.print(os.Stdout, format)
}

// exportContainer writes every row of the container at dir to path as
// kind (csv, parquet or arrow) with columnar/convert and opts, through a
// temporary file that is synced and renamed into place. It returns the
// rows written.
func exportContainer(dir, path, kind string, opts convert.ExportOptions) (rows int64, err error) {
	var export func(dir string, w io.Writer, o convert.ExportOptions) error
	switch kind {
	case "csv":
		export = convert.ExportCSV
	case "parquet":
		export = convert.ExportParquet
	case "arrow":
		export = convert.ExportArrow
	default:
		return 0, fmt.Errorf("unknown export format %q", kind)
	}
	m, err := columnar.ReadManifest(dir)
	if err != nil {
		return 0, fmt.Errorf("export to %s: %w", path, err)
	}
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return 0, err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	// The Parquet writer closes a sink that is an io.Closer; the file is
	// synced and closed here, so hide its Close.
	if err = export(dir, struct{ io.Writer }{f}, opts); err != nil {
		return 0, fmt.Errorf("export to %s: %w", path, err)
	}
	if err = f.Sync(); err != nil {
		return 0, err
	}
	if err = f.Close(); err != nil {
		return 0, err
	}
	return m.Rows, os.Rename(tmp, path)
}
