package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
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
	cmd := newAPICommand("window", "usage: strata window 'SELECT ... OVER (...) FROM table ...' [--rows N] [--format table|json|csv] [--out FILE] [flags]\n\n"+
		"Parses the query, has the scheduler grant it memory and hand it to a windower, waits,\n"+
		"and prints the first rows of the result container (or writes it all with --out).\n"+
		"If no windower has taken the job after --accept-timeout, says why it may be waiting.",
		"how printed rows look: table, json (JSON lines: one object per row, typed values) or csv")
	fs := cmd.fs
	pool := fs.String("pool", "", "resource pool to run in (default general)")
	rows := fs.Int("rows", 20, "result rows to print")
	var ef exportFlags
	ef.register(cmd.cmdLine, "write the whole result to FILE: .csv, .parquet, .arrow or .jsonl")
	pqComp := fs.String("parquet-compression", "", "the same as --compression, for a .parquet --out (kept for old scripts)")
	explain := fs.Bool("explain", false, "print the parsed query and exit")
	storeURL := fs.String("store", "", "read the result from this store (s3://BUCKET/PREFIX?endpoint=URL, file:///DIR) instead of the data directory")
	var wf waitFlags
	wf.register(fs)
	sql, err := cmd.parseArg(args, "want the query text")
	if err != nil {
		return err
	}
	var exportTo convert.Format
	var exportOpts convert.ExportOptions
	if ef.out != "" {
		if *pqComp != "" && ef.compression == "" {
			ef.compression = *pqComp
		}
		if exportTo, exportOpts, err = ef.options(); err != nil {
			return err
		}
	}
	query, err := sqlparse.Parse(sql)
	if err != nil {
		return queryError(sql, err)
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
		if ctx.Err() != nil {
			// Interrupted (Ctrl-C): nobody will read the result.
			cancelAbandoned(c, rep.Job.JobID, "strata window interrupted")
		}
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
		n, err := exportFile([]string{dir}, ef.out, exportTo, exportOpts)
		if err != nil {
			return err
		}
		fmt.Fprintf(stderr, "wrote %d rows to %s\n", n, ef.out)
		return nil
	}
	return printRows(dir, *rows, cmd.format, ef.nullString)
}

// queryError is the error of a query that does not parse: a failed
// command (exit 1), not a bad command line; it says what is wrong and,
// when the parser knows where, shows the line with a caret under the spot.
func queryError(sql string, err error) error {
	var pe *sqlparse.Error
	if !errors.As(err, &pe) || pe.Line == 0 {
		return fmt.Errorf("query: %w", err)
	}
	lines := strings.Split(sql, "\n")
	if pe.Line > len(lines) {
		return fmt.Errorf("query: %w", err)
	}
	line := strings.ReplaceAll(lines[pe.Line-1], "\t", " ")
	col := min(max(pe.Column, 1), len(line)+1)
	return fmt.Errorf("query: %w\n    %s\n    %s^", err, line, strings.Repeat(" ", col-1))
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

// printRows prints the first n rows of the container at dir: as a table
// (NULL written NULL), as CSV (a header even without rows, NULL as
// nullString) or as JSON lines (one object per row, typed values, keys in
// column order: convert.AppendJSONRow).
func printRows(dir string, n int, format, nullString string) error {
	m, err := columnar.ReadManifest(dir)
	if err != nil {
		return fmt.Errorf("open result: %w", err)
	}
	schema, err := m.ArrowSchema()
	if err != nil {
		return fmt.Errorf("open result: %w", err)
	}
	out := bufio.NewWriter(os.Stdout)
	if format == "json" {
		keys := convert.JSONKeys(schema)
		var buf []byte
		printed := 0
		err := forEachBatch(dir, func(_ *arrow.Schema, rec arrow.RecordBatch) (bool, error) {
			for r := 0; r < int(rec.NumRows()) && printed < n; r++ {
				buf = append(convert.AppendJSONRow(buf[:0], keys, rec, r), '\n')
				if _, err := out.Write(buf); err != nil {
					return false, err
				}
				printed++
			}
			return printed < n, nil
		})
		if err != nil {
			return err
		}
		return out.Flush()
	}
	t := &table{humanNull: "NULL", csvNull: nullString}
	for _, f := range schema.Fields() {
		t.cols = append(t.cols, column{name: f.Name})
	}
	err = forEachBatch(dir, func(_ *arrow.Schema, rec arrow.RecordBatch) (bool, error) {
		for r := 0; r < int(rec.NumRows()) && len(t.rows) < n; r++ {
			row := make([]any, rec.NumCols())
			for c := range row {
				col := rec.Column(c)
				if !col.IsNull(r) {
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
	if err := t.print(out, format); err != nil {
		return err
	}
	if len(t.rows) == 0 && format == "table" {
		fmt.Fprintln(stderr, "(no rows)")
	}
	return out.Flush()
}
