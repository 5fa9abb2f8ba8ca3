package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/columnar/convert"
	"github.com/strata-db/strata/internal/bytesize"
	"github.com/strata-db/strata/messages"
)

func init() {
	register(command{name: "export", summary: "write a whole table (its live containers) to a .parquet, .csv, .arrow or .jsonl file", run: runExport})
}

// exportFlags are the flags of strata export that say what the file looks
// like; window --out takes them too.
type exportFlags struct {
	out         string
	compression string
	nullString  string
}

func (f *exportFlags) register(cmd *cmdLine, outHelp string) {
	cmd.fs.StringVar(&f.out, "out", "", outHelp)
	cmd.fs.StringVar(&f.compression, "compression", "", "compression of a .parquet file: zstd (default), snappy or none;\n"+
		"of an .arrow file: none (default: every Arrow reader reads it), lz4 or zstd")
	cmd.fs.StringVar(&f.nullString, "null-string", "", "how a .csv file writes NULL (default: the empty field, as DuckDB's COPY ... TO)")
}

// options returns the format of --out and the export options the flags
// describe; a .csv --out also gets ExportOptions.Null.
func (f *exportFlags) options() (convert.Format, convert.ExportOptions, error) {
	format, err := convert.FormatOf(f.out)
	if err != nil {
		return "", convert.ExportOptions{}, fmt.Errorf("%w: --out %v", errUsage, err)
	}
	opts := convert.ExportOptions{Null: f.nullString}
	switch format {
	case convert.Parquet:
		if f.compression != "" {
			if opts.ParquetCompression, err = convert.ParseParquetCompression(f.compression); err != nil {
				return "", opts, fmt.Errorf("%w: --compression: %v", errUsage, err)
			}
		}
	case convert.Arrow:
		if f.compression != "" {
			if opts.ArrowCompression, err = convert.ParseArrowCompression(f.compression); err != nil {
				return "", opts, fmt.Errorf("%w: --compression: %v", errUsage, err)
			}
		}
	default:
		if f.compression != "" {
			return "", opts, fmt.Errorf("%w: --compression is for .parquet and .arrow files, not %s", errUsage, format)
		}
	}
	return format, opts, nil
}

func runExport(ctx context.Context, args []string) error {
	cmd := newCmdLine("export", "usage: strata export TABLE --out FILE.{parquet,csv,arrow,jsonl} [--projection P] [--columns a,b] [flags]\n\n"+
		"Writes every row of TABLE's live containers, as the scheduler's catalog names them, to FILE,\n"+
		"one container after the other (each sorted by the projection's key; the table as a whole is\n"+
		"not merged) and one block at a time, within --memory. The file is written beside FILE and\n"+
		"renamed into place when complete. A mergeout that retires a container during the export\n"+
		"makes it fail (run it again).")
	var af apiFlags
	af.register(cmd.fs)
	var ef exportFlags
	ef.register(cmd, "the file to write: .parquet, .csv, .arrow (Arrow IPC file) or .jsonl (JSON lines) (required)")
	projection := cmd.fs.String("projection", "", "the projection to export (required when the table has several)")
	columns := cmd.fs.String("columns", "", "comma-separated columns to export, in this order (default: all)")
	memory := cmd.fs.String("memory", "256MiB", "memory the export may hold: one block of the exported columns must fit")
	tableName, err := cmd.parseArg(args, "want a TABLE")
	if err != nil {
		return err
	}
	if ef.out == "" {
		return cmd.usageError("want --out FILE")
	}
	format, opts, err := ef.options()
	if err != nil {
		return err
	}
	budget, err := bytesize.Parse(*memory)
	if err != nil || budget <= 0 {
		return fmt.Errorf("%w: --memory %q: want a positive size such as 256MiB", errUsage, *memory)
	}
	if *columns != "" {
		for _, c := range strings.Split(*columns, ",") {
			if c = strings.TrimSpace(c); c != "" {
				opts.Columns = append(opts.Columns, c)
			}
		}
	}
	c, err := af.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	var rep messages.CatalogReply
	if err := c.call(ctx, messages.SubjectAPICatalog, &messages.CatalogRequest{Table: tableName, Projection: *projection}, &rep); err != nil {
		return err
	}
	if err := rep.Error.Err(); err != nil {
		return err
	}
	pc, err := exportProjection(tableName, *projection, rep.Projections)
	if err != nil {
		return err
	}
	dirs, err := liveDirs(af.common.DataDir, pc)
	if err != nil {
		return err
	}
	if err := checkBlockMemory(dirs, opts.Columns, budget); err != nil {
		return err
	}
	b := columnar.NewBudget(budget, nil)
	opts.Allocator = b
	start := time.Now()
	rows, err := exportFile(dirs, ef.out, format, opts)
	if err != nil {
		if errors.Is(err, columnar.ErrNotFound) {
			return fmt.Errorf("%w (a mergeout retired a container of %s.%s during the export: run it again)", err, pc.Table, pc.Projection)
		}
		return err
	}
	fmt.Fprintf(stderr, "wrote %d rows of %s.%s (%d containers) to %s in %s, peak memory %s\n",
		rows, pc.Table, pc.Projection, len(dirs), ef.out, time.Since(start).Round(time.Millisecond), bytesize.Format(b.Peak()))
	if b.Exceeded() {
		fmt.Fprintf(stderr, "warning: the export held more than --memory %s (the format's writer buffers more than a block)\n", bytesize.Format(budget))
	}
	return nil
}

// exportProjection picks the projection to export from the catalog's
// answer: the one asked for, or the table's only one.
func exportProjection(table, projection string, pcs []messages.ProjectionCatalog) (messages.ProjectionCatalog, error) {
	var found []messages.ProjectionCatalog
	var names []string
	for _, pc := range pcs {
		if pc.Table == table && (projection == "" || pc.Projection == projection) {
			found = append(found, pc)
			names = append(names, pc.Projection)
		}
	}
	switch {
	case len(found) == 1:
		return found[0], nil
	case len(found) > 1:
		return messages.ProjectionCatalog{}, fmt.Errorf("%w: table %s has projections %s: choose one with --projection", errUsage, table, strings.Join(names, ", "))
	case projection != "":
		return messages.ProjectionCatalog{}, fmt.Errorf("table %s has no projection %s in the catalog", table, projection)
	}
	return messages.ProjectionCatalog{}, fmt.Errorf("table %s is not in the catalog", table)
}

// liveDirs returns the directories of the projection's live containers,
// in the catalog's order.
func liveDirs(dataDir string, pc messages.ProjectionCatalog) ([]string, error) {
	if len(pc.Live) == 0 {
		return nil, fmt.Errorf("%s.%s has no live containers: nothing to export (a table's schema is its containers')", pc.Table, pc.Projection)
	}
	dirs := make([]string, 0, len(pc.Live))
	for _, ref := range pc.Live {
		for _, n := range []string{ref.Table, ref.Projection, ref.ID} {
			if err := messages.ValidName(n); err != nil {
				return nil, fmt.Errorf("catalog entry of %s.%s: %w", pc.Table, pc.Projection, err)
			}
		}
		dirs = append(dirs, columnar.ContainerDir(dataDir, ref.Table, ref.Projection, ref.ID))
	}
	return dirs, nil
}

// checkBlockMemory refuses an export whose largest block of the chosen
// columns (raw and compressed, as the reader holds both) does not fit in
// budget: the export holds one such block at a time.
func checkBlockMemory(dirs, columns []string, budget int64) error {
	var most int64
	var where string
	for _, dir := range dirs {
		m, err := columnar.ReadManifest(dir)
		if err != nil {
			return fmt.Errorf("export: %w", err)
		}
		want := map[string]bool{}
		for _, c := range columns {
			want[c] = true
		}
		var block int64
		for i, col := range m.Schema {
			if len(columns) > 0 && !want[col.Name] {
				continue
			}
			raw, comp := m.MaxBlockBytes(i)
			block += raw + comp
		}
		if block > most {
			most, where = block, m.ID
		}
	}
	if most > budget {
		return fmt.Errorf("%w: a block of container %s takes up to %s of memory, more than --memory %s: raise --memory or export fewer --columns",
			errUsage, where, bytesize.Format(most), bytesize.Format(budget))
	}
	return nil
}

// exportFile writes every row of the containers at dirs to path as format
// with columnar/convert and opts, through a temporary file beside it that
// is synced and renamed into place. It returns the rows written.
func exportFile(dirs []string, path string, format convert.Format, opts convert.ExportOptions) (rows int64, err error) {
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
	if rows, err = convert.Export(format, dirs, struct{ io.Writer }{f}, opts); err != nil {
		return 0, fmt.Errorf("export to %s: %w", path, err)
	}
	if err = f.Sync(); err != nil {
		return 0, err
	}
	if err = f.Close(); err != nil {
		return 0, err
	}
	return rows, os.Rename(tmp, path)
}
