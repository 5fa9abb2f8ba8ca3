package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/messages"
)

func init() {
	register(command{name: "load", summary: "generate a wide table as K containers and register them with the scheduler", run: runLoad})
}

// loadFlags are the flags of strata load.
type loadFlags struct {
	apiFlags
	table, projection string
	columns, keys     int
	containers, rows  int
	blockRows         int
	seed              int64
	compression       string
	noRegister        bool
	csvPath, pqPath   string
	sortKey           string
	nulls             []string // CSV spellings of NULL; nil: convert.DefaultNulls
	schema            string   // CSV schema, as convert.ParseSchema reads it
	delimiter         string
	noHeader          bool
	storeURL          string // --store: upload the containers there
	primaryKey        string // --primary-key: a keyed table's key columns
	pk                []string
	accounts          int64 // --pgbench-accounts: load pgbench_accounts of this many rows
	rowsSet           bool  // --rows was given
	firstID           int   // the lowest container number to use (the store's next free one, or the reservation's first)
	// number, if set, numbers an import's i-th container (from the
	// load's reservations).
	number func(i int) (int, error)
}

func runLoad(ctx context.Context, args []string) error {
	var f loadFlags
	cmd := newCmdLine("load", "usage: strata load --table NAME [--columns N] [--containers K] [--rows R] [--primary-key k0] [flags]\n"+
		"       strata load --table NAME --csv FILE|--parquet FILE --sort-key COLS [--primary-key COLS] [--rows R] [flags]\n"+
		"       strata load --table NAME --csv FILE --schema 'COL TYPE, ...' [--delimiter C] [--no-header] --sort-key COLS [flags]\n"+
		"       strata load --pgbench-accounts N [--table pgbench_accounts] [--rows R] [flags]\n\n"+
		"Writes K sorted containers of a generated table (every supported type, some NULLs, overlapping\n"+
		"sort-key ranges), or of an imported file cut into containers of R rows each sorted by the sort\n"+
		"key, under the data directory, and registers them with the scheduler, which starts the\n"+
		"mergeouts its strata call for.\n\n"+
		"With --primary-key the table is keyed: its rows then change by key with strata changes, and\n"+
		"a load makes only its first rows (the scheduler refuses a load into a keyed table that has\n"+
		"live containers). The containers get the change columns _strata_version (0) and\n"+
		"_strata_deleted (false); a NULL in a key column, or a key given twice anywhere in the load,\n"+
		"fails the load before anything is registered, naming the line (CSV) or row and the first\n"+
		"duplicate's key, and the containers written are removed. A generated table is keyed on k0,\n"+
		"which is then unique by construction (--primary-key k0). --pgbench-accounts N writes\n"+
		"pgbench's pgbench_accounts as pgbench -i does (aid 1..N, bid (aid-1)/100000+1, abalance 0,\n"+
		"filler 84 blanks), sorted and keyed on aid, in containers of R consecutive aids (default 1Mi),\n"+
		"for strata updates to change.")
	fs := cmd.fs
	f.apiFlags.register(fs)
	fs.StringVar(&f.table, "table", "", "table to load (required)")
	fs.StringVar(&f.projection, "projection", "p", "projection the containers belong to")
	fs.IntVar(&f.columns, "columns", 8, "columns of the generated table, sort-key columns included")
	fs.IntVar(&f.keys, "key-columns", 1, "leading sort-key columns")
	fs.IntVar(&f.containers, "containers", 4, "containers to write (K)")
	fs.IntVar(&f.rows, "rows", 10000, "rows per container")
	fs.IntVar(&f.blockRows, "block-rows", columnar.DefaultBlockRows, "rows per block")
	fs.Int64Var(&f.seed, "seed", 1, "generator seed: the same seed writes the same rows")
	fs.StringVar(&f.compression, "compression", "lz4", "block compression: lz4, zstd or none")
	fs.BoolVar(&f.noRegister, "no-register", false, "only write the containers; do not tell the scheduler")
	fs.StringVar(&f.csvPath, "csv", "", "import this CSV file (header row, types inferred from the first rows unless --schema) instead of generating")
	fs.StringVar(&f.schema, "schema", "", "column names and types of the --csv file: 'id int64, ts timestamp, \"unit price\" double, name varchar'\n"+
		"(types: int8..int64, uint8..uint64, float32/real, float64/double, bool, date, timestamp, timestamptz, utf8/varchar/text, binary);\n"+
		"with a header its names must be the header's")
	fs.StringVar(&f.delimiter, "delimiter", ",", "field delimiter of the --csv file: one character, \\t for a tab")
	fs.BoolVar(&f.noHeader, "no-header", false, "the --csv file has no header row: columns are named as --schema says, else column0, column1, ...")
	fs.Func("null", "a spelling of NULL in the --csv file; repeat for more (default: the empty field and NULL)", func(s string) error {
		f.nulls = append(f.nulls, s)
		return nil
	})
	fs.StringVar(&f.pqPath, "parquet", "", "import this Parquet file instead of generating")
	fs.StringVar(&f.sortKey, "sort-key", "", "sort key of an import: 'a, b DESC, c NULLS FIRST' (required with --csv/--parquet)")
	fs.StringVar(&f.storeURL, "store", "", "write the containers to this store (s3://BUCKET/PREFIX?endpoint=URL, file:///DIR) instead of the data directory")
	fs.StringVar(&f.primaryKey, "primary-key", "", "key the table on these columns: 'id' or 'a, b' (a generated table: k0); loads then make only its first rows")
	fs.Int64Var(&f.accounts, "pgbench-accounts", 0, "load pgbench's pgbench_accounts of N rows (aid 1..N), keyed and sorted on aid, instead of generating or importing")
	if err := cmd.parse(args); err != nil {
		return err
	}
	fs.Visit(func(fl *flag.Flag) { f.rowsSet = f.rowsSet || fl.Name == "rows" })
	if f.accounts != 0 && f.table == "" {
		f.table = "pgbench_accounts"
	}
	if f.table == "" {
		return cmd.usageError("want --table")
	}
	if err := f.checkKeyFlags(); err != nil {
		return err
	}
	comp, err := columnar.ParseCompression(f.compression)
	if err != nil {
		return fmt.Errorf("%w: --compression: %v", errUsage, err)
	}
	req := &messages.RegisterRequest{Table: f.table, Projection: f.projection,
		Containers: []messages.ContainerRef{{Table: f.table, Projection: f.projection, ID: "c0000"}}}
	if err := req.Validate(); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if f.containers <= 0 || f.rows <= 0 || f.columns <= 0 {
		return fmt.Errorf("%w: --containers, --rows and --columns must be positive", errUsage)
	}
	dataDir := f.common.DataDir
	var up *storeLoad
	if f.storeURL != "" {
		if up, err = openStoreLoad(ctx, &f); err != nil {
			return err
		}
		defer up.close()
		dataDir = up.staging
	}
	var c *apiClient
	if !f.noRegister {
		// Connect first: a scheduler that is not there should not cost a load.
		if c, err = f.dial(ctx); err != nil {
			return err
		}
		defer c.Close()
	}
	var res *reservations
	if c != nil {
		// The scheduler numbers the containers, so that no other load
		// (another host's) picks the same numbers, and keeps them from its
		// orphan sweep while this load writes them.
		next, err := nextContainerNumber(filepath.Join(dataDir, f.table, f.projection))
		if err != nil {
			return fmt.Errorf("load %s.%s: %w", f.table, f.projection, err)
		}
		res = newReservations(c, f.table, f.projection, max(next, f.firstID))
		defer res.close()
		switch {
		case f.csvPath != "" || f.pqPath != "":
			f.number = func(i int) (int, error) { return res.number(ctx, i) }
		case f.accounts != 0:
			if f.firstID, err = res.take(ctx, f.accountContainers()); err != nil {
				return err
			}
		default:
			if f.firstID, err = res.take(ctx, f.containers); err != nil {
				return err
			}
		}
	}
	opts := columnar.GenOptions{Table: f.table, Projection: f.projection, Columns: f.columns, KeyColumns: f.keys,
		Containers: f.containers, RowsPerContainer: f.rows, Seed: f.seed, BlockRows: f.blockRows, Compression: comp, FirstID: f.firstID,
		Keyed: len(f.pk) > 0}
	start := time.Now()
	var manifests []*columnar.Manifest
	switch {
	case f.accounts != 0:
		manifests, err = generateAccounts(ctx, dataDir, &f, comp)
	case f.csvPath != "" || f.pqPath != "":
		manifests, err = importLoad(ctx, dataDir, &f, comp)
	default:
		manifests, err = generate(ctx, dataDir, opts)
	}
	if err != nil {
		return err
	}
	if up != nil {
		if err := up.upload(ctx, manifests); err != nil {
			return err
		}
	}
	var rows, bytes int64
	refs := make([]messages.ContainerRef, len(manifests))
	for i, m := range manifests {
		refs[i] = messages.ContainerRef{Table: m.Table, Projection: m.Projection, ID: m.ID, Rows: m.Rows, Bytes: m.CompressedBytes()}
		rows += m.Rows
		bytes += refs[i].Bytes
	}
	elapsed := time.Since(start)
	where := "under " + filepath.Join(dataDir, f.table, f.projection)
	if up != nil {
		where = "to " + up.st.String() // the staging copies are gone
	}
	fmt.Fprintf(os.Stderr, "wrote %d containers of %s.%s: %d rows, %d columns, %s compressed, %s, in %s (%.0f rows/s)\n",
		len(refs), f.table, f.projection, rows, len(manifests[0].Schema), fmtBytes(bytes), where, elapsed.Round(time.Millisecond), float64(rows)/elapsed.Seconds())
	if f.noRegister {
		return nil
	}
	return registerLoad(ctx, c, &f, refs, res.ids(), func() {
		removeContainers(dataDir, manifests)
		if up != nil {
			up.remove(manifests)
		}
	}, where)
}

// registerLoad registers a load's containers and settles the outcome: it
// removes them (remove) only when the scheduler refused them. When the
// outcome is unknown (no answer within --settle-timeout, the command
// interrupted) they are kept, as the scheduler may have made them live;
// if it did not, its orphan sweep removes them.
func registerLoad(ctx context.Context, c *apiClient, f *loadFlags, refs []messages.ContainerRef, reserved []string, remove func(), where string) error {
	req := &messages.RegisterRequest{Table: f.table, Projection: f.projection, Containers: refs, RequestID: newRequestID(), Reservations: reserved}
	var rep messages.RegisterReply
	start := time.Now()
	err := c.call(ctx, messages.SubjectAPIRegister, req, &rep)
	if err == nil {
		err = rep.Error.Err()
	}
	switch {
	case err == nil:
		again := ""
		if rep.Repeat {
			again = " (answered when asked again: the first reply was lost)"
		}
		fmt.Fprintf(os.Stderr, "registered: %s.%s has %d live containers (checked and registered in %s)%s\n",
			f.table, f.projection, rep.Live, time.Since(start).Round(time.Millisecond), again)
		return nil
	case refusal(err) != nil, errors.Is(err, errNotReceived):
		remove()
		return fmt.Errorf("register with the scheduler: %w\nthe %d containers written %s were removed: the scheduler did not take them", err, len(refs), where)
	default:
		return fmt.Errorf("register with the scheduler: %w\nthe %d containers written %s were kept, as the scheduler may have registered them: "+
			"`strata containers --table %s` shows whether they are live; if they are not, the scheduler's orphan sweep removes them "+
			"(at its start, once older than its --orphan-grace)", err, len(refs), where, f.table)
	}
}

// generate writes the generated containers under the projection's next
// free IDs, showing progress. If it fails, what it wrote is removed.
func generate(ctx context.Context, dataDir string, opts columnar.GenOptions) ([]*columnar.Manifest, error) {
	next, err := nextContainerNumber(filepath.Join(dataDir, opts.Table, opts.Projection))
	if err != nil {
		return nil, fmt.Errorf("generate %s.%s: %w", opts.Table, opts.Projection, err)
	}
	opts.FirstID, opts.Context = max(next, opts.FirstID), ctx
	opts.Progress = newProgress(opts.Containers).show
	ms, err := columnar.Generate(dataDir, opts)
	if err != nil {
		removeContainers(dataDir, ms)
		return nil, fmt.Errorf("generate %s.%s: %w", opts.Table, opts.Projection, err)
	}
	return ms, nil
}

// removeContainers removes containers a failed load wrote.
func removeContainers(dataDir string, ms []*columnar.Manifest) {
	for _, m := range ms {
		os.RemoveAll(columnar.ContainerDir(dataDir, m.Table, m.Projection, m.ID))
	}
}

// nextContainerNumber returns one past the highest cNNNN container in dir,
// the projection's directory.
func nextContainerNumber(dir string) (int, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	next, others := 0, false
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") { // a container being written, or left by a crash
			continue
		}
		if n, ok := strings.CutPrefix(name, "c"); ok {
			if v, err := strconv.Atoi(n); err == nil && v >= 0 {
				next = max(next, v+1)
				continue
			}
		}
		others = true
	}
	// Any other name (a merged container) still means the projection is in use.
	if next == 0 && others {
		next = 1
	}
	return next, nil
}

// progress prints how many containers, and rows, a load has written, at
// most once a second.
type progress struct {
	total int // containers expected, 0 if not known
	last  time.Time
}

func newProgress(total int) *progress { return &progress{total: total, last: time.Now()} }

func (p *progress) show(containers int, rows int64) {
	if time.Since(p.last) < time.Second {
		return
	}
	p.last = time.Now()
	if p.total > 0 {
		fmt.Fprintf(os.Stderr, "  %d/%d containers written, %d rows\n", containers, p.total, rows)
	} else {
		fmt.Fprintf(os.Stderr, "  %d containers written, %d rows\n", containers, rows)
	}
}
