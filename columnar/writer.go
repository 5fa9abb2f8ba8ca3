package columnar

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/strata-db/strata/internal/fsutil"
)

// WriterOptions configures Create.
type WriterOptions struct {
	Table, Projection, ID string
	Schema                *arrow.Schema
	SortKey               SortKey          // may be empty (an unsorted container)
	PrimaryKey            []string         // a keyed table's key columns (changes.go); the schema must end with the change columns
	BlockRows             int              // rows per block; default DefaultBlockRows
	Compression           Compression      // default CompressionLZ4
	Allocator             memory.Allocator // for every Arrow buffer the writer makes; default Go heap
	Epochs                [2]uint64        // epochs the container covers, recorded in the manifest
	Stats                 *IOStats         // optional counters
	Logger                *slog.Logger     // default: discard
	// NoSync skips every fsync. The commit is still atomic for readers
	// (rename), but a crash may lose or damage the container: for data
	// that can be made again, such as spill runs and generated test data.
	NoSync bool
}

// syncParallelism is how many files Commit fsyncs at once. Devices
// complete concurrent flushes together, so this is several times faster
// than syncing files one by one.
const syncParallelism = 16

// Writer writes one container. Rows go in either a record batch at a time
// (Write) or a column at a time (WriteColumn: all of column 0, then all of
// column 1, ..., or interleaved in any order). Rows must arrive in sort-key
// order; the writer does not sort, and Commit refuses blocks whose first and
// last keys are out of order (ErrNotSorted). WriteColumn and FinishColumn
// may be called concurrently for different columns (each column has its
// own file and state); everything else must not run concurrently.
type Writer struct {
	dir, tmp string
	opts     WriterOptions
	cols     []ColumnSchema
	enc      *KeyEncoder
	keyIdx   []int
	columns  []*columnWriter
	comp     *blockCompressor // shared by the column files
	done     bool
	// A keyed container's change statistics, gathered as its change
	// columns are written (each by WriteColumn of its own column, so
	// concurrent writes of different columns touch different fields).
	versions struct {
		min, max int64
		seen     bool
	}
	markers int64
	log     *slog.Logger
}

// Create starts a container that will appear, at Commit, as dir (for
// example ContainerDir(data, table, projection, id)). Until then it is
// written to a temporary directory beside dir, which Abort removes.
func Create(dir string, opts WriterOptions) (*Writer, error) {
	if opts.BlockRows == 0 {
		opts.BlockRows = DefaultBlockRows
	}
	if opts.BlockRows < 0 || opts.BlockRows > MaxBlockRows {
		return nil, fmt.Errorf("create container %s: block rows %d out of range [1, %d]", dir, opts.BlockRows, MaxBlockRows)
	}
	if opts.Allocator == nil {
		opts.Allocator = memory.DefaultAllocator
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	comp, err := newBlockCompressor(opts.Compression)
	if err != nil {
		return nil, fmt.Errorf("create container %s: %w", dir, err)
	}
	cols, err := SchemaColumns(opts.Schema)
	if err != nil {
		return nil, fmt.Errorf("create container %s: %w", dir, err)
	}
	// The files carry the canonical schema the manifest describes: no
	// field or schema metadata (a Parquet import brings field IDs).
	if opts.Schema, err = ArrowSchema(cols); err != nil {
		return nil, fmt.Errorf("create container %s: %w", dir, err)
	}
	w := &Writer{dir: filepath.Clean(dir), opts: opts, cols: cols, log: opts.Logger, comp: comp}
	keyPos := make([]int, len(cols))
	for i := range keyPos {
		keyPos[i] = -1
	}
	if len(opts.SortKey) > 0 {
		if w.enc, err = NewKeyEncoder(opts.Schema, opts.SortKey); err != nil {
			return nil, fmt.Errorf("create container %s: %w", dir, err)
		}
		w.keyIdx, _ = opts.SortKey.Indices(opts.Schema)
		for k, c := range w.keyIdx {
			keyPos[c] = k
		}
	}
	if _, err := os.Stat(w.dir); err == nil {
		return nil, fmt.Errorf("create container %s: %w", dir, ErrExists)
	}
	parent := filepath.Dir(w.dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, fmt.Errorf("create container %s: %w", dir, err)
	}
	w.tmp, err = os.MkdirTemp(parent, tempPrefix(w.dir))
	if err != nil {
		return nil, fmt.Errorf("create container %s: %w", dir, err)
	}
	w.columns = make([]*columnWriter, len(cols))
	for i, f := range opts.Schema.Fields() {
		w.columns[i] = &columnWriter{
			idx:    i,
			name:   ColumnFileName(i),
			path:   filepath.Join(w.tmp, ColumnFileName(i)),
			field:  f,
			schema: arrow.NewSchema([]arrow.Field{f}, nil),
			mem:    opts.Allocator,
			comp:   comp,
			stats:  opts.Stats,
			keyPos: keyPos[i],
		}
	}
	return w, nil
}

// Schema returns the container's schema.
func (w *Writer) Schema() *arrow.Schema { return w.opts.Schema }

// Write appends a record batch holding every column.
func (w *Writer) Write(rec arrow.RecordBatch) error {
	if w.done {
		return fmt.Errorf("write container %s: %w", w.dir, ErrClosed)
	}
	if int(rec.NumCols()) != len(w.columns) {
		return fmt.Errorf("write container %s: %w: record has %d columns, schema %d", w.dir, ErrSchemaMismatch, rec.NumCols(), len(w.columns))
	}
	for i := range w.columns {
		if err := w.WriteColumn(i, rec.Column(i)); err != nil {
			return err
		}
	}
	return nil
}

// WriteColumn appends arr to column col. Whole blocks of arr are written
// at once, with no copy. Rows that do not fill a block are kept as slices
// of arr (retained, so arr's memory stays allocated) until later calls
// complete the block, which is then concatenated into a buffer from the
// writer's allocator. Callers that care about memory should therefore pass
// arrays of BlockRows rows, as the block boundaries fall. The caller may
// Release arr when WriteColumn returns.
func (w *Writer) WriteColumn(col int, arr arrow.Array) error {
	if w.done {
		return fmt.Errorf("write container %s: %w", w.dir, ErrClosed)
	}
	if col < 0 || col >= len(w.columns) {
		return fmt.Errorf("write container %s: column %d out of range [0, %d)", w.dir, col, len(w.columns))
	}
	c := w.columns[col]
	if c.finished {
		return fmt.Errorf("write container %s column %q: %w: column already finished", w.dir, c.field.Name, ErrClosed)
	}
	if !arrow.TypeEqual(arr.DataType(), c.field.Type) {
		return fmt.Errorf("write container %s column %q: %w: array is %s, column is %s", w.dir, c.field.Name, ErrSchemaMismatch, arr.DataType(), c.field.Type)
	}
	if !c.field.Nullable && arr.NullN() > 0 {
		return fmt.Errorf("write container %s column %q: %w: %d NULLs in a NOT NULL column", w.dir, c.field.Name, ErrSchemaMismatch, arr.NullN())
	}
	if err := c.append(arr, w.opts.BlockRows, w.enc); err != nil {
		return fmt.Errorf("write container %s column %q: %w", w.dir, c.field.Name, err)
	}
	if len(w.opts.PrimaryKey) > 0 {
		w.changeStats(col, arr)
	}
	return nil
}

// changeStats gathers a keyed container's change statistics from arr,
// rows of column col, if col is a change column.
func (w *Writer) changeStats(col int, arr arrow.Array) {
	switch col {
	case len(w.columns) - 2:
		vers, ok := arr.(*array.Int64)
		if !ok || vers.Len() == 0 {
			return
		}
		v := &w.versions
		if !v.seen {
			v.min, v.max, v.seen = vers.Value(0), vers.Value(0), true
		}
		for _, x := range vers.Int64Values() {
			v.min, v.max = min(v.min, x), max(v.max, x)
		}
	case len(w.columns) - 1:
		if dels, ok := arr.(*array.Boolean); ok && dels.Len() > 0 {
			w.markers += int64(bitutil.CountSetBits(dels.Data().Buffers()[1].Bytes(), dels.Data().Offset(), dels.Len()))
		}
	}
}

// changeManifest is the change statistics of a keyed container of rows
// rows: nil for an unkeyed one, and for versions the manifest cannot
// hold (a negative version, which resolving reports as corrupt).
func (w *Writer) changeManifest(rows int64) *ChangeStats {
	if len(w.opts.PrimaryKey) == 0 || w.versions.min < 0 {
		return nil
	}
	if rows == 0 {
		return &ChangeStats{}
	}
	return &ChangeStats{MinVersion: w.versions.min, MaxVersion: w.versions.max, Markers: w.markers}
}

// FinishColumn writes column col's last block and closes its file. Writing
// a column at a time, finishing each column when done keeps one file open
// instead of one per column. Commit finishes every column not yet finished.
func (w *Writer) FinishColumn(col int) error {
	if w.done {
		return fmt.Errorf("write container %s: %w", w.dir, ErrClosed)
	}
	if col < 0 || col >= len(w.columns) {
		return fmt.Errorf("write container %s: column %d out of range [0, %d)", w.dir, col, len(w.columns))
	}
	c := w.columns[col]
	if err := c.finish(w.enc); err != nil {
		return fmt.Errorf("write container %s column %q: %w", w.dir, c.field.Name, err)
	}
	return nil
}

// Commit finishes every column, checks they all have the same rows, syncs
// the column files (in parallel), writes and syncs manifest.json, syncs the
// temporary directory, and renames it to the container's directory,
// syncing its parent. On error the container does
// not exist and the writer has been aborted.
func (w *Writer) Commit() (*Manifest, error) {
	if w.done {
		return nil, fmt.Errorf("commit container %s: %w", w.dir, ErrClosed)
	}
	m, err := w.commit()
	if err != nil {
		w.Abort()
		return nil, fmt.Errorf("commit container %s: %w", w.dir, err)
	}
	w.done = true
	w.comp.close()
	w.log.Debug("container committed", "dir", w.dir, "rows", m.Rows, "blocks", len(m.Blocks), "columns", len(m.Files))
	return m, nil
}

func (w *Writer) commit() (*Manifest, error) {
	for _, c := range w.columns {
		if err := c.finish(w.enc); err != nil {
			return nil, fmt.Errorf("column %q: %w", c.field.Name, err)
		}
	}
	first := w.columns[0]
	for _, c := range w.columns[1:] {
		if c.rows != first.rows {
			return nil, fmt.Errorf("%w: column %q has %d rows, column %q has %d", ErrSchemaMismatch, c.field.Name, c.rows, first.field.Name, first.rows)
		}
	}
	m := &Manifest{
		Version:     ManifestVersion,
		Table:       w.opts.Table,
		Projection:  w.opts.Projection,
		ID:          w.opts.ID,
		Schema:      w.cols,
		SortKey:     w.opts.SortKey,
		PrimaryKey:  w.opts.PrimaryKey,
		Changes:     w.changeManifest(first.rows),
		Rows:        first.rows,
		BlockRows:   w.opts.BlockRows,
		Compression: w.opts.Compression.String(),
		Blocks:      make([]BlockMeta, len(first.blockRows)),
		Files:       make([]FileMeta, len(w.columns)),
		Epochs:      w.opts.Epochs,
		Created:     time.Now().UTC(),
	}
	var row int64
	for b, n := range first.blockRows {
		bm := BlockMeta{FirstRow: row, Rows: n}
		for _, k := range w.keyIdx {
			bm.MinKey = append(bm.MinKey, w.columns[k].keyParts[b][0]...)
			bm.MaxKey = append(bm.MaxKey, w.columns[k].keyParts[b][1]...)
		}
		m.Blocks[b] = bm
		row += int64(n)
	}
	for i, c := range w.columns {
		m.Files[i] = c.meta
	}
	if err := checkBlockOrder(m); err != nil {
		return nil, err
	}
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("built an invalid manifest: %w", err)
	}
	data, err := m.Encode()
	if err != nil {
		return nil, err
	}
	sync := !w.opts.NoSync
	if sync {
		paths := make([]string, len(w.columns))
		for i, c := range w.columns {
			paths[i] = c.path
		}
		if err := syncFiles(paths); err != nil {
			return nil, err
		}
	}
	if err := writeFile(filepath.Join(w.tmp, ManifestName), data, sync); err != nil {
		return nil, err
	}
	if sync {
		if err := fsutil.SyncDir(w.tmp); err != nil {
			return nil, err
		}
	}
	if _, err := os.Stat(w.dir); err == nil {
		return nil, ErrExists
	}
	if err := os.Rename(w.tmp, w.dir); err != nil {
		return nil, fmt.Errorf("rename into place: %w", err)
	}
	if sync {
		if err := fsutil.SyncDir(filepath.Dir(w.dir)); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// syncFiles fsyncs files, syncParallelism at a time.
func syncFiles(paths []string) error {
	work := make(chan string)
	errs := make(chan error, len(paths))
	var wg sync.WaitGroup
	for range min(syncParallelism, len(paths)) {
		wg.Go(func() {
			for p := range work {
				errs <- syncFile(p)
			}
		})
	}
	for _, p := range paths {
		work <- p
	}
	close(work)
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return errors.Join(all...)
}

func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("sync %s: %w", filepath.Base(path), err)
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync %s: %w", filepath.Base(path), err)
	}
	return nil
}

// Abort discards the container: it closes and removes the temporary
// directory. It is safe to call after a failed Commit, and more than once;
// after a successful Commit it does nothing.
func (w *Writer) Abort() error {
	if w.done {
		return nil
	}
	w.done = true
	w.comp.close()
	for _, c := range w.columns {
		c.discard()
	}
	if err := os.RemoveAll(w.tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("abort container %s: %w", w.dir, err)
	}
	return nil
}

func writeFile(path string, data []byte, sync bool) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", filepath.Base(path), err)
	}
	if !sync {
		return f.Close()
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("sync %s: %w", filepath.Base(path), err)
	}
	return f.Close()
}

// checkBlockOrder checks, from the blocks' first and last keys, that the
// blocks of a sorted container are in key order: a cheap check that
// catches a writer fed unsorted input at block granularity. Verify checks
// every row.
func checkBlockOrder(m *Manifest) error {
	for i, b := range m.Blocks {
		if len(m.SortKey) == 0 {
			return nil
		}
		if bytes.Compare(b.MinKey, b.MaxKey) > 0 {
			return fmt.Errorf("%w: block %d's first row sorts after its last", ErrNotSorted, i)
		}
		if i > 0 && bytes.Compare(m.Blocks[i-1].MaxKey, b.MinKey) > 0 {
			return fmt.Errorf("%w: block %d's first row sorts before block %d's last", ErrNotSorted, i, i-1)
		}
	}
	return nil
}
