package columnar

import (
	"fmt"
	"log/slog"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// OpenOptions configures Open.
type OpenOptions struct {
	Allocator memory.Allocator // for every buffer readers hold; default Go heap
	Stats     *IOStats         // optional counters
	Logger    *slog.Logger     // default: discard
}

// Container is an open, committed container. Opening reads and validates
// the manifest only; column files are opened by OpenColumn. A Container is
// safe for concurrent use; its readers are not.
type Container struct {
	src    Source
	dir    string // src.String(), for errors
	m      *Manifest
	schema *arrow.Schema
	keyIdx []int
	opts   OpenOptions
	decomp decompressors // the codecs' decompressors, shared by the container's readers
}

// Open reads and validates dir/manifest.json. A missing container gives an
// error wrapping ErrNotFound; a bad manifest a *CorruptError.
func Open(dir string, opts OpenOptions) (*Container, error) {
	return OpenSource(DirSource(dir), opts)
}

// OpenSource opens the container whose files src reads, as Open does a
// directory.
func OpenSource(src Source, opts OpenOptions) (*Container, error) {
	if opts.Allocator == nil {
		opts.Allocator = memory.DefaultAllocator
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	dir := src.String()
	m, err := ReadSourceManifest(src)
	if err != nil {
		return nil, err
	}
	schema, err := m.ArrowSchema()
	if err != nil {
		return nil, corruptf(dir, ManifestName, NoBlock, err, "bad schema")
	}
	c := &Container{src: src, dir: dir, m: m, schema: schema, opts: opts, decomp: makeDecompressors()}
	if len(m.SortKey) > 0 {
		if c.keyIdx, err = m.SortKey.Indices(schema); err != nil {
			return nil, corruptf(dir, ManifestName, NoBlock, err, "bad sort key")
		}
	}
	return c, nil
}

// ReadManifest reads and validates dir/manifest.json.
func ReadManifest(dir string) (*Manifest, error) { return ReadSourceManifest(DirSource(dir)) }

// Manifest returns the container's manifest. Callers must not modify it.
func (c *Container) Manifest() *Manifest { return c.m }

// Schema returns the container's schema.
func (c *Container) Schema() *arrow.Schema { return c.schema }

// SortKey returns the container's sort key (nil if unsorted).
func (c *Container) SortKey() SortKey { return c.m.SortKey }

// KeyColumns returns the schema indices of the sort-key columns, in key order.
func (c *Container) KeyColumns() []int { return c.keyIdx }

// Rows returns the number of rows.
func (c *Container) Rows() int64 { return c.m.Rows }

// NumBlocks returns the number of blocks of every column.
func (c *Container) NumBlocks() int { return len(c.m.Blocks) }

// Dir returns the container's directory, or for a container not in a
// directory the name of its Source.
func (c *Container) Dir() string { return c.dir }

// Source returns where the container's files are read from.
func (c *Container) Source() Source { return c.src }

// Close releases the container. Readers opened from it stay usable until
// closed themselves.
func (c *Container) Close() error { return nil }

// OpenColumn opens column col's file for streaming its blocks.
func (c *Container) OpenColumn(col int) (*ColumnReader, error) {
	if col < 0 || col >= len(c.m.Files) {
		return nil, fmt.Errorf("open column %d of container %s: out of range [0, %d)", col, c.dir, len(c.m.Files))
	}
	return openColumnReader(c, col)
}

// OpenKeyColumns streams record batches of the sort-key columns only, in
// key order. It fails if the container has no sort key.
func (c *Container) OpenKeyColumns() (*BatchReader, error) {
	if len(c.keyIdx) == 0 {
		return nil, fmt.Errorf("open key columns of container %s: container has no sort key", c.dir)
	}
	return c.OpenColumns(c.keyIdx)
}

// OpenColumns streams record batches of the chosen columns, block by block.
func (c *Container) OpenColumns(cols []int) (*BatchReader, error) {
	if len(cols) == 0 {
		return nil, fmt.Errorf("open columns of container %s: no columns chosen", c.dir)
	}
	br := &BatchReader{readers: make([]*ColumnReader, 0, len(cols)), nblocks: len(c.m.Blocks)}
	fields := make([]arrow.Field, len(cols))
	for i, col := range cols {
		r, err := c.OpenColumn(col)
		if err != nil {
			br.Close()
			return nil, err
		}
		br.readers = append(br.readers, r)
		fields[i] = c.schema.Field(col)
	}
	br.schema = arrow.NewSchema(fields, nil)
	return br, nil
}
