package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/internal/service"
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
}

func runLoad(ctx context.Context, args []string) error {
	var f loadFlags
	fs := newFlagSet("load")
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
	fs.StringVar(&f.csvPath, "csv", "", "import this CSV file (header row, types inferred, an empty field is NULL) instead of generating")
	fs.StringVar(&f.pqPath, "parquet", "", "import this Parquet file instead of generating")
	fs.StringVar(&f.sortKey, "sort-key", "", "sort key of an import: 'a, b DESC, c NULLS FIRST' (required with --csv/--parquet)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: strata load --table NAME [--columns N] [--containers K] [--rows R] [flags]\n"+
			"       strata load --table NAME --csv FILE|--parquet FILE --sort-key COLS [--rows R] [flags]\n\n"+
			"Writes K sorted containers of a generated table (every supported type, some NULLs, overlapping\n"+
			"sort-key ranges), or of an imported file cut into containers of R rows each sorted by the sort\n"+
			"key, under the data directory, and registers them with the scheduler, which starts the\n"+
			"mergeouts its strata call for.")
		fs.PrintDefaults()
	}
	if err := service.Parse(fs, args); err != nil {
		return err
	}
	if f.table == "" || fs.NArg() != 0 {
		fs.Usage()
		return fmt.Errorf("%w: want --table and no other arguments", errUsage)
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
	var c *apiClient
	if !f.noRegister {
		// Connect first: a scheduler that is not there should not cost a load.
		if c, err = f.dial(ctx); err != nil {
			return err
		}
		defer c.Close()
	}
	opts := columnar.GenOptions{Table: f.table, Projection: f.projection, Columns: f.columns, KeyColumns: f.keys,
		Containers: f.containers, RowsPerContainer: f.rows, Seed: f.seed, BlockRows: f.blockRows, Compression: comp}
	start := time.Now()
	var manifests []*columnar.Manifest
	if f.csvPath != "" || f.pqPath != "" {
		manifests, err = importLoad(ctx, dataDir, &f, comp)
	} else {
		manifests, err = generate(ctx, dataDir, opts)
	}
	if err != nil {
		return err
	}
	var rows, bytes int64
	refs := make([]messages.ContainerRef, len(manifests))
	for i, m := range manifests {
		refs[i] = messages.ContainerRef{Table: m.Table, Projection: m.Projection, ID: m.ID, Rows: m.Rows, Bytes: m.CompressedBytes()}
		rows += m.Rows
		bytes += refs[i].Bytes
	}
	elapsed := time.Since(start)
	fmt.Fprintf(os.Stderr, "wrote %d containers of %s.%s: %d rows, %d columns, %s on disk in %s (%.0f rows/s)\n",
		len(refs), f.table, f.projection, rows, len(manifests[0].Schema), fmtBytes(bytes), elapsed.Round(time.Millisecond), float64(rows)/elapsed.Seconds())
	if f.noRegister {
		return nil
	}
	var rep messages.RegisterReply
	err = c.call(ctx, messages.SubjectAPIRegister, &messages.RegisterRequest{Table: f.table, Projection: f.projection, Containers: refs}, &rep)
	if err == nil {
		err = rep.Error.Err()
	}
	if err != nil {
		// Refused (too many containers, say): the containers are not
		// cataloged, so remove them rather than leave orphans.
		for _, r := range refs {
			os.RemoveAll(columnar.ContainerDir(dataDir, r.Table, r.Projection, r.ID))
		}
		return fmt.Errorf("register with the scheduler (the %d containers written were removed): %w", len(refs), err)
	}
	fmt.Fprintf(os.Stderr, "registered: %s.%s has %d live containers\n", f.table, f.projection, rep.Live)
	return nil
}

// generate writes the generated containers (see addContainers).
func generate(ctx context.Context, dataDir string, opts columnar.GenOptions) ([]*columnar.Manifest, error) {
	ms, err := addContainers(ctx, dataDir, opts.Table, opts.Projection, opts.Containers, func(target string) ([]*columnar.Manifest, error) {
		return columnar.Generate(target, opts)
	})
	if err != nil {
		return nil, fmt.Errorf("generate %s.%s: %w", opts.Table, opts.Projection, err)
	}
	return ms, nil
}

// addContainers runs write, which writes containers c0000, c0001, ... of
// table.projection under the data directory it is given, and leaves them
// under the projection's next free IDs in dataDir. On an empty projection
// write works in dataDir itself; when the projection already holds
// containers, write works in a staging directory and the containers are
// then moved into place under the next free IDs, so a second load adds to
// the first. Progress is shown while write runs; total is the number of
// containers expected, 0 if not known. If write fails, what it wrote is
// removed.
func addContainers(ctx context.Context, dataDir, table, projection string, total int, write func(target string) ([]*columnar.Manifest, error)) ([]*columnar.Manifest, error) {
	projDir := filepath.Join(dataDir, table, projection)
	next, err := nextContainerNumber(projDir)
	if err != nil {
		return nil, err
	}
	target := dataDir
	var staging string
	if next > 0 {
		if err := os.MkdirAll(dataDir, 0o755); err != nil {
			return nil, err
		}
		staging, err = os.MkdirTemp(dataDir, ".load-")
		if err != nil {
			return nil, fmt.Errorf("staging directory: %w", err)
		}
		defer os.RemoveAll(staging)
		target = staging
	}
	done := make(chan struct{})
	go showProgress(done, filepath.Join(target, table, projection), total)
	manifests, err := write(target)
	close(done)
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		if staging == "" {
			for _, m := range manifests {
				os.RemoveAll(columnar.ContainerDir(dataDir, m.Table, m.Projection, m.ID))
			}
		}
		return nil, err
	}
	if staging == "" {
		return manifests, nil
	}
	if err := os.MkdirAll(projDir, 0o755); err != nil {
		return nil, err
	}
	for i, m := range manifests {
		id := fmt.Sprintf("c%04d", next+i)
		if err := moveContainer(columnar.ContainerDir(staging, m.Table, m.Projection, m.ID), columnar.ContainerDir(dataDir, m.Table, m.Projection, id), m, id); err != nil {
			return nil, err
		}
	}
	return manifests, nil
}

// moveContainer renames a committed container into place under a new ID,
// rewriting the ID in its manifest first (atomically, by rename).
func moveContainer(from, to string, m *columnar.Manifest, id string) error {
	m.ID = id
	data, err := m.Encode()
	if err != nil {
		return err
	}
	tmp := filepath.Join(from, columnar.ManifestName+".tmp")
	if err := writeFileSync(tmp, data); err != nil {
		return fmt.Errorf("rewrite manifest of %s: %w", from, err)
	}
	if err := os.Rename(tmp, filepath.Join(from, columnar.ManifestName)); err != nil {
		return fmt.Errorf("rewrite manifest of %s: %w", from, err)
	}
	if _, err := os.Stat(to); err == nil {
		return fmt.Errorf("move container to %s: it exists", to)
	}
	if err := os.Rename(from, to); err != nil {
		return fmt.Errorf("move container into place: %w", err)
	}
	return nil
}

func writeFileSync(path string, data []byte) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// nextContainerNumber returns one past the highest cNNNN container in dir.
func nextContainerNumber(dir string) (int, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	next := 0
	for _, e := range entries {
		if n, ok := strings.CutPrefix(e.Name(), "c"); ok {
			if v, err := strconv.Atoi(n); err == nil && v+1 > next {
				next = v + 1
			}
		}
	}
	// Any other name (a merged container) still means the projection is in use.
	if next == 0 && len(entries) > 0 {
		next = 1
	}
	return next, nil
}

// showProgress prints how many containers, and rows, are committed in dir
// until done; total is the number expected, 0 if not known.
func showProgress(done <-chan struct{}, dir string, total int) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	seen := map[string]bool{}
	var rows int64
	for {
		select {
		case <-done:
			return
		case <-t.C:
			entries, _ := os.ReadDir(dir)
			grew := false
			for _, e := range entries {
				// A dot-prefixed directory is a container being written.
				if seen[e.Name()] || strings.HasPrefix(e.Name(), ".") {
					continue
				}
				if m, err := columnar.ReadManifest(filepath.Join(dir, e.Name())); err == nil {
					seen[e.Name()] = true
					rows += m.Rows
					grew = true
				}
			}
			switch {
			case !grew:
			case total > 0:
				fmt.Fprintf(os.Stderr, "  %d/%d containers written, %d rows\n", len(seen), total, rows)
			default:
				fmt.Fprintf(os.Stderr, "  %d containers written, %d rows\n", len(seen), rows)
			}
		}
	}
}
