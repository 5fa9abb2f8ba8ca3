package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/columnar/convert"
)

// importLoad imports the --csv or --parquet file with columnar/convert: it
// cuts the file into containers of --rows rows, each sorted by --sort-key,
// named with the projection's next free IDs. On failure it removes what it
// wrote.
func importLoad(ctx context.Context, dataDir string, f *loadFlags, comp columnar.Compression) ([]*columnar.Manifest, error) {
	path, kind := f.csvPath, "csv"
	if f.pqPath != "" {
		if f.csvPath != "" {
			return nil, fmt.Errorf("%w: give --csv or --parquet, not both", errUsage)
		}
		path, kind = f.pqPath, "parquet"
	}
	if f.sortKey == "" {
		return nil, fmt.Errorf("%w: an import needs --sort-key", errUsage)
	}
	key, err := parseSortKey(f.sortKey)
	if err != nil {
		return nil, fmt.Errorf("%w: --sort-key: %v", errUsage, err)
	}
	file, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	defer file.Close()
	in := cancelableFile{ctx: ctx, f: file}
	o := convert.ImportOptions{
		Table: f.table, Projection: f.projection, IDPrefix: "c",
		SortKey: key, RowsPerContainer: f.rows, BlockRows: f.blockRows, Compression: comp,
		// An empty CSV field is NULL, in string columns too.
		StringsNull: true,
	}
	ms, err := addContainers(ctx, dataDir, f.table, f.projection, 0, func(target string) ([]*columnar.Manifest, error) {
		o.DataDir = target
		if kind == "parquet" {
			return convert.ImportParquet(in, o)
		}
		return convert.ImportCSV(in, o)
	})
	if err != nil {
		return nil, fmt.Errorf("import %s: %w", path, err)
	}
	if len(ms) == 0 {
		return nil, fmt.Errorf("import %s: the file holds no rows", path)
	}
	return ms, nil
}

// cancelableFile reads a file until ctx is done, so that an interrupted
// import stops at its next read. It has no Close: the parquet reader closes
// a source that has one, and the file is closed by whoever opened it.
type cancelableFile struct {
	ctx context.Context
	f   *os.File
}

func (c cancelableFile) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.f.Read(p)
}

func (c cancelableFile) ReadAt(p []byte, off int64) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.f.ReadAt(p, off)
}

func (c cancelableFile) Seek(offset int64, whence int) (int64, error) {
	return c.f.Seek(offset, whence)
}

// parseSortKey parses "a, b DESC, c NULLS FIRST" into a sort key. NULLS
// defaults as in SQL: LAST for ASC, FIRST for DESC.
func parseSortKey(s string) (columnar.SortKey, error) {
	var key columnar.SortKey
	for _, part := range strings.Split(s, ",") {
		words := strings.Fields(part)
		if len(words) == 0 {
			return nil, fmt.Errorf("sort key %q: empty column", s)
		}
		col := columnar.SortColumn{Name: words[0]}
		rest := strings.ToUpper(strings.Join(words[1:], " "))
		if d, ok := strings.CutPrefix(rest, "DESC"); ok {
			col.Desc, col.NullsFirst, rest = true, true, strings.TrimSpace(d)
		} else if a, ok := strings.CutPrefix(rest, "ASC"); ok {
			rest = strings.TrimSpace(a)
		}
		switch rest {
		case "":
		case "NULLS FIRST":
			col.NullsFirst = true
		case "NULLS LAST":
			col.NullsFirst = false
		default:
			return nil, fmt.Errorf("sort key %q: cannot read %q after column %s", s, rest, col.Name)
		}
		key = append(key, col)
	}
	return key, nil
}
