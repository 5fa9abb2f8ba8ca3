package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"

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
		if f.schema != "" || (f.delimiter != "" && f.delimiter != ",") || f.noHeader {
			return nil, fmt.Errorf("%w: --schema, --delimiter and --no-header are for --csv (a Parquet file has its schema)", errUsage)
		}
		path, kind = f.pqPath, "parquet"
	}
	var (
		schema *arrow.Schema
		comma  rune
		err    error
	)
	if f.schema != "" {
		if schema, err = convert.ParseSchema(f.schema); err != nil {
			return nil, fmt.Errorf("%w: --schema: %v", errUsage, err)
		}
	}
	if f.delimiter != "" {
		if comma, err = parseDelimiter(f.delimiter); err != nil {
			return nil, fmt.Errorf("%w: --delimiter: %v", errUsage, err)
		}
	}
	if f.sortKey == "" {
		return nil, fmt.Errorf("%w: an import needs --sort-key", errUsage)
	}
	key, err := columnar.ParseSortKey(f.sortKey)
	if err != nil {
		return nil, fmt.Errorf("%w: --sort-key: %v", errUsage, err)
	}
	next, err := nextContainerNumber(filepath.Join(dataDir, f.table, f.projection))
	if err != nil {
		return nil, fmt.Errorf("import %s: %w", path, err)
	}
	file, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	defer file.Close()
	o := convert.ImportOptions{
		DataDir: dataDir, Table: f.table, Projection: f.projection, Name: path,
		IDPrefix: "c", FirstID: max(next, f.firstID), Number: f.number,
		SortKey: key, RowsPerContainer: f.rows, BlockRows: f.blockRows, Compression: comp,
		Context: ctx, Progress: newProgress(0).show,
		// The empty field and NULL are NULL, in string columns too.
		Nulls: f.nulls, StringsNull: true,
		Schema: schema, Comma: comma, NoHeader: f.noHeader,
	}
	if err := importKeyOptions(&o, dataDir, f); err != nil {
		return nil, err
	}
	var ms []*columnar.Manifest
	if kind == "parquet" {
		ms, err = convert.ImportParquet(file, o)
	} else {
		ms, err = convert.ImportCSV(file, o)
	}
	if err != nil {
		removeContainers(dataDir, ms)
		return nil, err
	}
	if len(ms) == 0 {
		return nil, fmt.Errorf("import %s: the file holds no rows", path)
	}
	reportKeyCheck(f, o.KeyStats)
	return ms, nil
}

// parseDelimiter reads --delimiter: one character, or \t for a tab.
func parseDelimiter(s string) (rune, error) {
	if s == `\t` {
		return '\t', nil
	}
	r, n := utf8.DecodeRuneInString(s)
	if n == 0 || n != len(s) || r == utf8.RuneError {
		return 0, fmt.Errorf("%q is not one character (write \\t for a tab)", s)
	}
	switch r {
	case '"', '\r', '\n':
		return 0, fmt.Errorf("%q cannot separate fields", s)
	}
	return r, nil
}
