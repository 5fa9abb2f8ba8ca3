package columnar

import (
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

func TestRoundTripAllTypes(t *testing.T) {
	schema := allTypesSchema()
	for _, tc := range []struct {
		name      string
		rows      int
		blockRows int
		chunk     int // rows per Write / WriteColumn call
		byColumn  bool
		comp      Compression
	}{
		{"lz4 rows", 1000, 128, 100, false, CompressionLZ4},
		{"zstd rows", 1000, 128, 333, false, CompressionZstd},
		{"none rows", 1000, 128, 1000, false, CompressionNone},
		{"lz4 columns", 1000, 128, 77, true, CompressionLZ4},
		{"exact blocks", 512, 128, 128, true, CompressionLZ4},
		{"chunks larger than blocks", 1000, 100, 450, true, CompressionLZ4},
		{"one row", 1, 128, 1, false, CompressionLZ4},
		{"empty", 0, 128, 1, false, CompressionLZ4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			rng := rand.New(rand.NewPCG(1, 2))
			want := randomRecord(mem, schema, rng, tc.rows)
			defer want.Release()
			dir := filepath.Join(t.TempDir(), "t", "p", "c1")
			stats := &IOStats{}
			w, err := Create(dir, WriterOptions{Table: "t", Projection: "p", ID: "c1", Schema: schema,
				BlockRows: tc.blockRows, Compression: tc.comp, Allocator: mem, Stats: stats, Epochs: [2]uint64{3, 7}})
			if err != nil {
				t.Fatal(err)
			}
			if tc.byColumn {
				for col := range schema.NumFields() {
					for s := 0; s < tc.rows; s += tc.chunk {
						a := array.NewSlice(want.Column(col), int64(s), int64(min(tc.rows, s+tc.chunk)))
						if err := w.WriteColumn(col, a); err != nil {
							t.Fatal(err)
						}
						a.Release()
					}
					if err := w.FinishColumn(col); err != nil {
						t.Fatal(err)
					}
				}
			} else {
				for s := 0; s < tc.rows; s += tc.chunk {
					r := want.NewSlice(int64(s), int64(min(tc.rows, s+tc.chunk)))
					if err := w.Write(r); err != nil {
						t.Fatal(err)
					}
					r.Release()
				}
			}
			m, err := w.Commit()
			if err != nil {
				t.Fatal(err)
			}
			if m.Rows != int64(tc.rows) || m.Epochs != [2]uint64{3, 7} || m.Compression != tc.comp.String() {
				t.Fatalf("manifest rows=%d epochs=%v compression=%s", m.Rows, m.Epochs, m.Compression)
			}
			wantBlocks := (tc.rows + tc.blockRows - 1) / tc.blockRows
			if len(m.Blocks) != wantBlocks {
				t.Fatalf("%d blocks, want %d", len(m.Blocks), wantBlocks)
			}
			if got := stats.BlocksWritten.Load(); got != int64(wantBlocks*schema.NumFields()) {
				t.Fatalf("BlocksWritten=%d", got)
			}
			assertNoTemp(t, filepath.Dir(dir))

			c, err := Open(dir, OpenOptions{Allocator: mem, Stats: stats})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if !c.Schema().Equal(schema) {
				t.Fatalf("schema %v, want %v", c.Schema(), schema)
			}
			for col := range schema.NumFields() {
				got := readColumn(t, c, col)
				if !array.Equal(got, want.Column(col)) {
					t.Errorf("column %s differs after round trip", schema.Field(col).Name)
				}
				got.Release()
			}
			if got := stats.FilesOpened.Load(); got != int64(schema.NumFields()) {
				t.Errorf("FilesOpened=%d, want %d", got, schema.NumFields())
			}
			if got := stats.BlocksDecompressed.Load(); got != int64(wantBlocks*schema.NumFields()) {
				t.Errorf("BlocksDecompressed=%d", got)
			}
			if err := Verify(dir); err != nil {
				t.Fatal(err)
			}
			// Every column file is a plain Arrow IPC file.
			for col, fm := range m.Files {
				f, err := os.Open(filepath.Join(dir, fm.Name))
				if err != nil {
					t.Fatal(err)
				}
				fr, err := ipc.NewFileReader(f, ipc.WithAllocator(mem))
				if err != nil {
					t.Fatalf("arrow reader on %s: %v", fm.Name, err)
				}
				if fr.NumRecords() != wantBlocks {
					t.Fatalf("%s has %d record batches, want %d", fm.Name, fr.NumRecords(), wantBlocks)
				}
				if wantBlocks > 0 {
					rec, err := fr.RecordBatchAt(0)
					if err != nil {
						t.Fatal(err)
					}
					exp := array.NewSlice(want.Column(col), 0, int64(m.Blocks[0].Rows))
					if !array.Equal(rec.Column(0), exp) {
						t.Errorf("%s block 0 differs when read by arrow's FileReader", fm.Name)
					}
					exp.Release()
					rec.Release()
				}
				fr.Close()
				f.Close()
			}
		})
	}
}

func assertNoTemp(t *testing.T, parent string) {
	t.Helper()
	ents, err := os.ReadDir(parent)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Name()[0] == '.' {
			t.Errorf("temporary directory %s left behind", e.Name())
		}
	}
}

func TestBatchReaderAndSeek(t *testing.T) {
	dir := t.TempDir()
	ms, err := Generate(dir, GenOptions{Columns: 10, KeyColumns: 3, Containers: 1, RowsPerContainer: 1000, BlockRows: 300, Seed: 9})
	if err != nil {
		t.Fatal(err)
	}
	c, err := Open(ContainerDir(dir, "t", "p", ms[0].ID), OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	br, err := c.OpenKeyColumns()
	if err != nil {
		t.Fatal(err)
	}
	defer br.Close()
	if br.Schema().NumFields() != 3 || br.NumBlocks() != 4 {
		t.Fatalf("key reader: %d fields, %d blocks", br.Schema().NumFields(), br.NumBlocks())
	}
	enc, err := NewKeyEncoder(c.Schema(), c.SortKey())
	if err != nil {
		t.Fatal(err)
	}
	var prev []byte
	var rows int
	for b := 0; ; b++ {
		rec, err := br.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		var kb KeyBatch
		if err := enc.EncodeBatch(&kb, rec.Columns(), 0, int(rec.NumRows())); err != nil {
			t.Fatal(err)
		}
		bm := c.Manifest().Blocks[b]
		if string(kb.Key(0)) != string(bm.MinKey) || string(kb.Key(kb.Len()-1)) != string(bm.MaxKey) {
			t.Errorf("block %d min/max keys do not match the manifest", b)
		}
		for i := range kb.Len() {
			if prev != nil && string(prev) > string(kb.Key(i)) {
				t.Fatalf("block %d row %d out of key order", b, i)
			}
			prev = append(prev[:0], kb.Key(i)...)
		}
		rows += int(rec.NumRows())
		rec.Release()
	}
	if rows != 1000 {
		t.Fatalf("read %d rows", rows)
	}
	if err := br.Seek(3); err != nil {
		t.Fatal(err)
	}
	rec, err := br.Next()
	if err != nil || rec.NumRows() != 100 {
		t.Fatalf("after seek: %v, %v", rec, err)
	}
	rec.Release()
	if err := br.Seek(5); err == nil {
		t.Fatal("seek past the end succeeded")
	}

	// A column reader seeks too, and ReadBlock reads any block.
	cr, err := c.OpenColumn(5)
	if err != nil {
		t.Fatal(err)
	}
	defer cr.Close()
	if err := cr.Seek(2); err != nil {
		t.Fatal(err)
	}
	a, err := cr.Next()
	if err != nil {
		t.Fatal(err)
	}
	b2, err := cr.ReadBlock(2)
	if err != nil {
		t.Fatal(err)
	}
	if a.Len() != 300 || !array.ApproxEqual(a, b2, array.WithNaNsEqual(true)) {
		t.Fatalf("block 2 after seek: %d rows", a.Len())
	}
	a.Release()
	b2.Release()
	if err := cr.Seek(4); err != nil {
		t.Fatal(err)
	}
	if _, err := cr.Next(); err != io.EOF {
		t.Fatalf("Next at the end: %v", err)
	}
	if err := cr.Seek(-1); err == nil {
		t.Fatal("seek to -1 succeeded")
	}
	raw, comp := c.Manifest().MaxBlockBytes(5)
	if raw <= 0 || comp <= 0 || c.Manifest().RawBytes() < raw || c.Manifest().CompressedBytes() < comp {
		t.Fatalf("block sizes: raw %d compressed %d", raw, comp)
	}
}

func TestGenerateDeterministic(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	opts := GenOptions{Columns: 20, KeyColumns: 2, Containers: 2, RowsPerContainer: 500, BlockRows: 128, Seed: 42}
	ma, err := Generate(a, opts)
	if err != nil {
		t.Fatal(err)
	}
	mb, err := Generate(b, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range ma {
		for f := range ma[i].Files {
			if ma[i].Files[f].CRC != mb[i].Files[f].CRC {
				t.Fatalf("container %d file %d differs between runs", i, f)
			}
		}
	}
	opts.Seed = 43
	mc, err := Generate(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if mc[0].Files[0].CRC == ma[0].Files[0].CRC {
		t.Fatal("a different seed gave the same data")
	}
	// Key ranges overlap across containers.
	if string(ma[0].Blocks[0].MinKey) > string(ma[1].Blocks[len(ma[1].Blocks)-1].MaxKey) ||
		string(ma[1].Blocks[0].MinKey) > string(ma[0].Blocks[len(ma[0].Blocks)-1].MaxKey) {
		t.Fatal("containers' key ranges do not overlap")
	}
}

func TestWriterErrors(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "a", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "b", Type: arrow.BinaryTypes.String, Nullable: false},
	}, nil)
	mem := memory.DefaultAllocator
	ints := func(vals ...int64) arrow.Array {
		b := array.NewInt64Builder(mem)
		defer b.Release()
		b.AppendValues(vals, nil)
		return b.NewArray()
	}
	t.Run("unsupported type", func(t *testing.T) {
		s := arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64)}}, nil)
		_, err := Create(filepath.Join(t.TempDir(), "c"), WriterOptions{Schema: s})
		if !errors.Is(err, ErrUnsupportedType) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("name not UTF-8", func(t *testing.T) {
		s := arrow.NewSchema([]arrow.Field{{Name: "x\x8b", Type: arrow.PrimitiveTypes.Int64}}, nil)
		_, err := Create(filepath.Join(t.TempDir(), "c"), WriterOptions{Schema: s})
		if !errors.Is(err, ErrSchemaMismatch) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("bad sort key", func(t *testing.T) {
		_, err := Create(filepath.Join(t.TempDir(), "c"), WriterOptions{Schema: schema, SortKey: SortKey{{Name: "zz"}}})
		if !errors.Is(err, ErrSchemaMismatch) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("wrong type", func(t *testing.T) {
		w, err := Create(filepath.Join(t.TempDir(), "c"), WriterOptions{Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Abort()
		a := ints(1, 2)
		defer a.Release()
		if err := w.WriteColumn(1, a); !errors.Is(err, ErrSchemaMismatch) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("uneven columns", func(t *testing.T) {
		parent := t.TempDir()
		dir := filepath.Join(parent, "c")
		w, err := Create(dir, WriterOptions{Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		a := ints(1, 2, 3)
		defer a.Release()
		if err := w.WriteColumn(0, a); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Commit(); !errors.Is(err, ErrSchemaMismatch) {
			t.Fatalf("commit err = %v", err)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Fatal("failed commit left the container")
		}
		assertNoTemp(t, parent)
	})
	t.Run("abort", func(t *testing.T) {
		parent := t.TempDir()
		w, err := Create(filepath.Join(parent, "c"), WriterOptions{Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		a := ints(1, 2, 3)
		defer a.Release()
		if err := w.WriteColumn(0, a); err != nil {
			t.Fatal(err)
		}
		if err := w.Abort(); err != nil {
			t.Fatal(err)
		}
		if err := w.Abort(); err != nil {
			t.Fatal(err)
		}
		if err := w.WriteColumn(0, a); !errors.Is(err, ErrClosed) {
			t.Fatalf("write after abort: %v", err)
		}
		assertNoTemp(t, parent)
		if ents, _ := os.ReadDir(parent); len(ents) != 0 {
			t.Fatalf("abort left %d entries", len(ents))
		}
	})
	t.Run("exists", func(t *testing.T) {
		dir := t.TempDir()
		if _, err := Create(dir, WriterOptions{Schema: schema}); !errors.Is(err, ErrExists) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("open missing", func(t *testing.T) {
		if _, err := Open(filepath.Join(t.TempDir(), "nope"), OpenOptions{}); !errors.Is(err, ErrNotFound) {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestReaderMemoryFromAllocator(t *testing.T) {
	dir := t.TempDir()
	ms, err := Generate(dir, GenOptions{Columns: 6, Containers: 1, RowsPerContainer: 5000, BlockRows: 1024, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	budget := NewBudget(64<<20, memory.NewCheckedAllocator(memory.NewGoAllocator()))
	c, err := Open(ContainerDir(dir, "t", "p", ms[0].ID), OpenOptions{Allocator: budget})
	if err != nil {
		t.Fatal(err)
	}
	br, err := c.OpenColumns([]int{0, 1, 2, 3, 4, 5})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := br.Next()
	if err != nil {
		t.Fatal(err)
	}
	// The decoded batch's buffers are counted by the budget.
	if budget.InUse() < ms[0].Files[0].Blocks[0].RawBytes {
		t.Fatalf("budget sees %d bytes with a block of %d raw bytes held", budget.InUse(), ms[0].Files[0].Blocks[0].RawBytes)
	}
	rec.Release()
	br.Close()
	if budget.InUse() != 0 {
		t.Fatalf("%d bytes still counted after release", budget.InUse())
	}
	if budget.Peak() == 0 || budget.Exceeded() {
		t.Fatalf("peak %d exceeded %v", budget.Peak(), budget.Exceeded())
	}
}

func TestWriterRejectsUnsortedBlocks(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{{Name: "k", Type: arrow.PrimitiveTypes.Int64}}, nil)
	w, err := Create(filepath.Join(t.TempDir(), "c"), WriterOptions{Schema: schema, SortKey: SortKey{{Name: "k"}}, BlockRows: 2})
	if err != nil {
		t.Fatal(err)
	}
	b := array.NewInt64Builder(memory.DefaultAllocator)
	b.AppendValues([]int64{1, 5, 3, 4}, nil)
	a := b.NewArray()
	defer a.Release()
	if err := w.WriteColumn(0, a); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Commit(); !errors.Is(err, ErrNotSorted) {
		t.Fatalf("commit of unsorted blocks: %v", err)
	}
}

func TestVerifyFindsUnsortedRows(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{{Name: "k", Type: arrow.PrimitiveTypes.Int64}}, nil)
	dir := filepath.Join(t.TempDir(), "c")
	w, err := Create(dir, WriterOptions{Schema: schema, SortKey: SortKey{{Name: "k"}}, BlockRows: 4})
	if err != nil {
		t.Fatal(err)
	}
	b := array.NewInt64Builder(memory.DefaultAllocator)
	b.AppendValues([]int64{1, 9, 3, 10}, nil) // out of order inside one block
	a := b.NewArray()
	defer a.Release()
	if err := w.WriteColumn(0, a); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := Verify(dir); !errors.Is(err, ErrNotSorted) || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("verify: %v", err)
	}
}

// TestDecoderMatchesArrow decodes every block of every type and codec with
// the block decoder and with arrow's own IPC reader, and compares.
func TestDecoderMatchesArrow(t *testing.T) {
	fields := append(allTypesSchema().Fields(),
		arrow.Field{Name: "ts_zoned", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "Europe/Oslo"}, Nullable: true},
		arrow.Field{Name: "not_null", Type: arrow.PrimitiveTypes.Int32})
	schema := arrow.NewSchema(fields, nil)
	for _, comp := range []Compression{CompressionLZ4, CompressionZstd, CompressionNone} {
		dir := filepath.Join(t.TempDir(), "c")
		w, err := Create(dir, WriterOptions{Schema: schema, BlockRows: 1000, Compression: comp})
		if err != nil {
			t.Fatal(err)
		}
		rec := randomRecord(memory.DefaultAllocator, schema, rand.New(rand.NewPCG(4, 4)), 2500)
		last := schema.NumFields() - 1 // not_null: no NULLs, no validity buffer
		cols := rec.Columns()
		cols[last] = genArray(memory.DefaultAllocator, arrow.PrimitiveTypes.Int32, rand.New(rand.NewPCG(5, 5)), 2500, -1)
		defer cols[last].Release()
		random := rec
		rec = array.NewRecordBatch(schema, cols, 2500)
		random.Release()
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
		m, err := w.Commit()
		if err != nil {
			t.Fatal(err)
		}
		c, err := Open(dir, OpenOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for col, fm := range m.Files {
			f, err := os.Open(filepath.Join(dir, fm.Name))
			if err != nil {
				t.Fatal(err)
			}
			fr, err := ipc.NewFileReader(f)
			if err != nil {
				t.Fatal(err)
			}
			// The footer's schema, which the writer builds itself.
			if want := arrow.NewSchema([]arrow.Field{schema.Field(col)}, nil); !fr.Schema().Equal(want) {
				t.Errorf("%s %s: footer schema %s, want %s", comp, fm.Column, fr.Schema(), want)
			}
			if fr.NumRecords() != len(m.Blocks) {
				t.Errorf("%s %s: footer lists %d blocks, want %d", comp, fm.Column, fr.NumRecords(), len(m.Blocks))
			}
			r, err := c.OpenColumn(col)
			if err != nil {
				t.Fatal(err)
			}
			for b := range r.NumBlocks() {
				got, err := r.ReadBlock(b)
				if err != nil {
					t.Fatal(err)
				}
				want, err := fr.RecordBatchAt(b)
				if err != nil {
					t.Fatal(err)
				}
				if !array.Equal(got, want.Column(0)) {
					t.Errorf("%s %s block %d: decoder and arrow differ", comp, fm.Column, b)
				}
				got.Release()
				want.Release()
			}
			r.Close()
			fr.Close()
			f.Close()
		}
	}
}
