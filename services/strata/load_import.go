package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

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
		IDPrefix: "c", FirstID: next,
		SortKey: key, RowsPerContainer: f.rows, BlockRows: f.blockRows, Compression: comp,
		Context: ctx, Progress: newProgress(0).show,
		// The empty field and NULL are NULL, in string columns too.
		Nulls: f.nulls, StringsNull: true,
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
	return ms, nil
}
