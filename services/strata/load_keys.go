package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/columnar/convert"
)

// accountsPerContainer is how many consecutive aids a container of
// --pgbench-accounts holds unless --rows says.
const accountsPerContainer = 1 << 20

// checkKeyFlags reads --primary-key into f.pk and checks it fits the
// load's source: any columns of an imported file (checked against the
// file's as it is read), k0 of a generated table (unique by
// construction), aid of pgbench_accounts.
func (f *loadFlags) checkKeyFlags() error {
	if f.primaryKey != "" {
		key, err := columnar.ParseSortKey(f.primaryKey)
		if err != nil {
			return fmt.Errorf("%w: --primary-key: %v", errUsage, err)
		}
		for _, c := range key {
			if c.Desc || c.NullsFirst {
				return fmt.Errorf("%w: --primary-key %q: a primary key names columns, without ASC, DESC or NULLS", errUsage, f.primaryKey)
			}
			if slices.Contains(f.pk, c.Name) {
				return fmt.Errorf("%w: --primary-key %q: column %q named twice", errUsage, f.primaryKey, c.Name)
			}
			f.pk = append(f.pk, c.Name)
		}
	}
	imported := f.csvPath != "" || f.pqPath != ""
	switch {
	case f.accounts < 0:
		return fmt.Errorf("%w: --pgbench-accounts %d: want a positive number of rows", errUsage, f.accounts)
	case f.accounts > 0 && imported:
		return fmt.Errorf("%w: --pgbench-accounts generates its rows; it does not take --csv or --parquet", errUsage)
	case f.accounts > 0 && f.pk != nil && !slices.Equal(f.pk, []string{"aid"}):
		return fmt.Errorf("%w: --primary-key %s: pgbench_accounts is keyed on aid", errUsage, f.primaryKey)
	case f.accounts > 0:
		f.pk = []string{"aid"}
	case !imported && f.pk != nil && !slices.Equal(f.pk, []string{"k0"}):
		return fmt.Errorf("%w: --primary-key %s: a generated table is keyed on k0 alone, whose values the generator makes unique over the load (--primary-key k0)", errUsage, f.primaryKey)
	}
	return nil
}

// accountContainers is how many containers --pgbench-accounts writes.
func (f *loadFlags) accountContainers() int {
	per := int64(f.accountRows())
	return int((f.accounts + per - 1) / per)
}

func (f *loadFlags) accountRows() int {
	if f.rowsSet {
		return f.rows
	}
	return accountsPerContainer
}

// generateAccounts writes pgbench_accounts (--pgbench-accounts) under the
// projection's next free IDs. If it fails, what it wrote is removed.
func generateAccounts(ctx context.Context, dataDir string, f *loadFlags, comp columnar.Compression) ([]*columnar.Manifest, error) {
	next, err := nextContainerNumber(filepath.Join(dataDir, f.table, f.projection))
	if err != nil {
		return nil, fmt.Errorf("generate %s.%s: %w", f.table, f.projection, err)
	}
	ms, err := columnar.GenerateAccounts(dataDir, columnar.AccountsOptions{
		Table: f.table, Projection: f.projection, Accounts: f.accounts, RowsPerContainer: f.accountRows(),
		FirstID: max(next, f.firstID), BlockRows: f.blockRows, Compression: comp, Context: ctx,
		Progress: newProgress(f.accountContainers()).show,
	})
	if err != nil {
		removeContainers(dataDir, ms)
		return nil, err
	}
	return ms, nil
}

// importKeyOptions sets an import's primary key and where its check keeps
// its runs of keys: beside the containers (the data directory, or the
// staging directory of --store), as large as the keys and removed as the
// import ends, rather than in a temporary directory that may be memory.
func importKeyOptions(o *convert.ImportOptions, dataDir string, f *loadFlags) error {
	if len(f.pk) == 0 {
		return nil
	}
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return fmt.Errorf("import: %w", err)
	}
	o.PrimaryKey, o.TempDir, o.KeyStats = f.pk, dataDir, new(convert.KeyCheckStats)
	return nil
}

// reportKeyCheck says what the primary key check did.
func reportKeyCheck(f *loadFlags, s *convert.KeyCheckStats) {
	if s == nil {
		return
	}
	fmt.Fprintf(os.Stderr, "primary key (%s): %d keys, no NULL, no duplicate (checked in %s: %d runs, %s of keys)\n",
		strings.Join(f.pk, ", "), s.Keys, s.Elapsed.Round(time.Millisecond), s.Runs, fmtBytes(s.RunBytes))
}
