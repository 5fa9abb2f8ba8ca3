package columnar

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
)

// ManifestName is the file name of a container's manifest.
const ManifestName = "manifest.json"

// ManifestVersion is the manifest format version this package writes and reads.
const ManifestVersion = 1

// DefaultBlockRows is the default number of rows per block.
//
// Blocks are the unit of decompression, so a reader holds at least one
// decoded block per open column. A mergeout of K containers gathers a column
// from all K at once: with 64Ki-row blocks, 32 inputs of a string column
// hold about 50MB, more than a 32MiB grant, and the merge must fall back to
// passes (measured at twice the time of an unconstrained merge on 100
// columns). At 8Ki rows the same gather holds about 6MB, a 32MiB merge runs
// as fast as an 8GiB one, and LZ4 still sees blocks of 32-64KiB for most
// types (ClickHouse's granules are 8192 rows for the same reasons). Writers
// may choose up to MaxBlockRows.
const DefaultBlockRows = 8192

// MaxBlockRows bounds BlockRows (a block's offsets must fit in int32).
const MaxBlockRows = 1 << 24

// Manifest describes a container; it is stored as manifest.json.
type Manifest struct {
	Version     int            `json:"version"`
	Table       string         `json:"table"`
	Projection  string         `json:"projection"`
	ID          string         `json:"id"`
	Schema      []ColumnSchema `json:"schema"`
	SortKey     SortKey        `json:"sort_key"`
	PrimaryKey  []string       `json:"primary_key,omitempty"` // a keyed table's key columns (changes.go)
	Changes     *ChangeStats   `json:"changes,omitempty"`     // a keyed container's change statistics; nil: unknown
	Rows        int64          `json:"rows"`
	BlockRows   int            `json:"block_rows"`
	Compression string         `json:"compression"`
	Blocks      []BlockMeta    `json:"blocks"`
	Files       []FileMeta     `json:"files"`
	Epochs      [2]uint64      `json:"epochs"`
	Created     time.Time      `json:"created"`
}

// ChangeStats summarize a keyed container's change columns (changes.go),
// so that resolving versions can skip reading what they already tell: the
// version column of a container whose rows all have one version, the
// deleted column of one without delete markers. The writer records them
// for every keyed container; a manifest written before them has none, and
// its change columns are read.
type ChangeStats struct {
	MinVersion int64 `json:"min_version"` // 0 when the container has no rows
	MaxVersion int64 `json:"max_version"`
	Markers    int64 `json:"markers"` // rows whose deleted column is set
}

// BlockMeta describes block i of every column file: all columns are cut at
// the same rows.
type BlockMeta struct {
	FirstRow int64  `json:"first_row"`
	Rows     int    `json:"rows"`
	MinKey   []byte `json:"min_key,omitempty"` // normalized key of the block's first row (base64)
	MaxKey   []byte `json:"max_key,omitempty"` // normalized key of the block's last row (base64)
}

// FileMeta describes one column file.
type FileMeta struct {
	Column    string      `json:"column"`
	Name      string      `json:"name"`
	Size      int64       `json:"size"`
	CRC       uint32      `json:"crc32c"`     // CRC-32C of the whole file
	HeaderLen int64       `json:"header_len"` // magic, padding and schema message before block 0
	HeaderCRC uint32      `json:"header_crc32c"`
	Blocks    []FileBlock `json:"blocks"`
}

// FileBlock locates one block (one Arrow IPC record batch message) in a file.
type FileBlock struct {
	Offset   int64  `json:"offset"`    // of the message's continuation marker
	Length   int64  `json:"length"`    // message bytes: prefix, metadata, body
	CRC      uint32 `json:"crc32c"`    // CRC-32C of those bytes
	RawBytes int64  `json:"raw_bytes"` // uncompressed Arrow buffer bytes
}

// ColumnFileName returns the file name of column i.
func ColumnFileName(i int) string { return fmt.Sprintf("col-%04d.arrow", i) }

// ContainerDir returns DATA/<table>/<projection>/<id>.
func ContainerDir(dataDir, table, projection, id string) string {
	return filepath.Join(dataDir, table, projection, id)
}

// ArrowSchema returns the manifest's schema as an Arrow schema.
func (m *Manifest) ArrowSchema() (*arrow.Schema, error) { return ArrowSchema(m.Schema) }

// RawBytes returns the uncompressed Arrow bytes of all blocks of all columns.
func (m *Manifest) RawBytes() int64 {
	var n int64
	for _, f := range m.Files {
		for _, b := range f.Blocks {
			n += b.RawBytes
		}
	}
	return n
}

// CompressedBytes returns the bytes of all column files: the container's
// size on disk, less its manifest.
func (m *Manifest) CompressedBytes() int64 {
	var n int64
	for _, f := range m.Files {
		n += f.Size
	}
	return n
}

// DecodeManifest parses and validates manifest.json bytes.
func DecodeManifest(data []byte) (*Manifest, error) {
	var m Manifest
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("decode manifest: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("decode manifest: trailing data after the JSON object")
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return &m, nil
}

// Encode returns the manifest as indented JSON.
func (m *Manifest) Encode() ([]byte, error) {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode manifest: %w", err)
	}
	return append(b, '\n'), nil
}

// Validate checks the manifest's internal consistency: version, schema,
// sort key, block layout, and every file's block offsets.
func (m *Manifest) Validate() error {
	if m.Version != ManifestVersion {
		return fmt.Errorf("manifest version %d, want %d", m.Version, ManifestVersion)
	}
	schema, err := ArrowSchema(m.Schema)
	if err != nil {
		return fmt.Errorf("manifest schema: %w", err)
	}
	if len(m.SortKey) > 0 {
		if _, err := m.SortKey.Indices(schema); err != nil {
			return fmt.Errorf("manifest sort key: %w", err)
		}
	}
	if err := checkPrimaryKey(schema, m.PrimaryKey); err != nil {
		return fmt.Errorf("manifest primary key: %w", err)
	}
	if c := m.Changes; c != nil {
		switch {
		case len(m.PrimaryKey) == 0:
			return fmt.Errorf("manifest changes: a container without a primary key has no change statistics")
		case c.MinVersion < 0 || c.MinVersion > c.MaxVersion:
			return fmt.Errorf("manifest changes: versions [%d, %d] are not an ascending range of non-negative versions", c.MinVersion, c.MaxVersion)
		case c.Markers < 0 || c.Markers > m.Rows:
			return fmt.Errorf("manifest changes: %d markers out of range [0, %d]", c.Markers, m.Rows)
		}
	}
	if _, err := ParseCompression(m.Compression); err != nil {
		return fmt.Errorf("manifest: %w", err)
	}
	if m.BlockRows <= 0 || m.BlockRows > MaxBlockRows {
		return fmt.Errorf("manifest block_rows %d out of range [1, %d]", m.BlockRows, MaxBlockRows)
	}
	if m.Rows < 0 {
		return fmt.Errorf("manifest rows %d is negative", m.Rows)
	}
	var row int64
	for i, b := range m.Blocks {
		if b.FirstRow != row {
			return fmt.Errorf("manifest block %d starts at row %d, want %d", i, b.FirstRow, row)
		}
		if b.Rows <= 0 || b.Rows > m.BlockRows {
			return fmt.Errorf("manifest block %d has %d rows, want 1..%d", i, b.Rows, m.BlockRows)
		}
		if i < len(m.Blocks)-1 && b.Rows != m.BlockRows {
			return fmt.Errorf("manifest block %d has %d rows; every block but the last has block_rows=%d", i, b.Rows, m.BlockRows)
		}
		row += int64(b.Rows)
	}
	if row != m.Rows {
		return fmt.Errorf("manifest blocks hold %d rows, manifest says %d", row, m.Rows)
	}
	if len(m.Files) != len(m.Schema) {
		return fmt.Errorf("manifest lists %d files for %d columns", len(m.Files), len(m.Schema))
	}
	for i, f := range m.Files {
		if f.Column != m.Schema[i].Name {
			return fmt.Errorf("manifest file %d is of column %q, want %q", i, f.Column, m.Schema[i].Name)
		}
		if f.Name != ColumnFileName(i) {
			return fmt.Errorf("manifest file %d is named %q, want %q", i, f.Name, ColumnFileName(i))
		}
		if len(f.Blocks) != len(m.Blocks) {
			return fmt.Errorf("manifest file %s has %d blocks, want %d", f.Name, len(f.Blocks), len(m.Blocks))
		}
		if f.HeaderLen < 8 || f.HeaderLen > f.Size {
			return fmt.Errorf("manifest file %s header length %d out of range", f.Name, f.HeaderLen)
		}
		pos := f.HeaderLen
		for j, b := range f.Blocks {
			if b.Offset != pos {
				return fmt.Errorf("manifest file %s block %d at offset %d, want %d", f.Name, j, b.Offset, pos)
			}
			if b.Length < 16 || b.Length > f.Size-b.Offset {
				return fmt.Errorf("manifest file %s block %d length %d out of range", f.Name, j, b.Length)
			}
			if b.RawBytes < 0 {
				return fmt.Errorf("manifest file %s block %d raw_bytes %d is negative", f.Name, j, b.RawBytes)
			}
			pos += b.Length
		}
	}
	return nil
}

// MaxBlockBytes returns the largest raw (decoded) and compressed sizes of
// any block of column col: what reading one block of it holds at most.
func (m *Manifest) MaxBlockBytes(col int) (raw, compressed int64) {
	for _, b := range m.Files[col].Blocks {
		raw = max(raw, b.RawBytes)
		compressed = max(compressed, b.Length)
	}
	return raw, compressed
}

// ReadBytes returns the most memory a ColumnReader holds for block b while
// its caller holds the block: the bytes read and the arrays decoded from
// them. A reader that reuses its buffers (ReuseBuffers) built with the
// strata_poison tag holds the last block's bytes too, poisoned until the
// next read, so that an array kept past it reads as garbage. Arrow rounds
// every buffer up to a multiple of 64 bytes: a block's array has at most
// three (validity, offsets, data), and the read one more.
func (b FileBlock) ReadBytes(reused bool) int64 {
	const rounding = 4 * 64
	n := b.Length + b.RawBytes + rounding
	if reused && poisonFreed {
		n += b.Length + 64
	}
	return n
}
