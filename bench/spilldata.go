package main

import (
	"context"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"os"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/jackc/pgx/v5"
	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/windower/windowbench"
)

// spillTable is table w of the window suite (windowbench.Table: same
// columns, same shapes) at a size that does not fit in memory, generated
// a block of spillGenBlock rows at a time in id order, so that a hundred
// million rows cost no more memory than one block. Where
// windowbench.Generate draws the permutations a, x and t with
// rand.Perm (n ints in memory), row i here gets perm(i) from a keyed
// Feistel network over [0, n) (cycle walking), and g from a hash of i;
// s and k come from columnar.GenLabels and GenCodes, seeded per block.
// Every system loads exactly these rows.
type spillTable struct {
	N      int
	Groups int
	Seed   uint64
}

// spillGenBlock is the rows generated at once; block b always holds rows
// [b*spillGenBlock, (b+1)*spillGenBlock), whoever asks for it.
const spillGenBlock = 65536

// spillGenVersion changes whenever the generator's output changes, so a
// cached table made by an older generator is made again.
const spillGenVersion = 1

// spillBlock is the rows of one generated block, column by column.
type spillBlock struct {
	Lo             int
	ID, A, C, G, X []int64
	T              []int64
	S              []string
	SNull          []bool
	K              []string
}

func (t spillTable) blocks() int { return (t.N + spillGenBlock - 1) / spillGenBlock }

// block generates block b.
func (t spillTable) block(b int) *spillBlock {
	lo := b * spillGenBlock
	n := min(spillGenBlock, t.N-lo)
	base := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	pa, px, pt := newFeistel(t.N, t.Seed^0xa), newFeistel(t.N, t.Seed^0xb), newFeistel(t.N, t.Seed^0xc)
	blk := &spillBlock{Lo: lo,
		ID: make([]int64, n), A: make([]int64, n), C: make([]int64, n),
		G: make([]int64, n), X: make([]int64, n), T: make([]int64, n)}
	for j := range n {
		i := uint64(lo + j)
		blk.ID[j] = int64(i)
		blk.A[j] = int64(pa.perm(i))
		blk.G[j] = int64(splitmix(i^t.Seed) % uint64(t.Groups))
		blk.X[j] = int64(px.perm(i))
		blk.T[j] = base + int64(pt.perm(i))*1_000_000
	}
	seed := t.Seed + uint64(b)*0x9e3779b97f4a7c15
	blk.S, blk.SNull = columnar.GenLabels(n, rand.New(rand.NewPCG(seed^0x5851f42d4c957f2d, seed)))
	blk.K = columnar.GenCodes(n, rand.New(rand.NewPCG(seed^0x14057b7ef767814f, seed)))
	return blk
}

// record is the block as an Arrow record of windowbench.Schema.
func (blk *spillBlock) record(mem memory.Allocator) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, windowbench.Schema())
	defer b.Release()
	for c, col := range [][]int64{blk.ID, blk.A, blk.C, blk.G, blk.X} {
		b.Field(c).(*array.Int64Builder).AppendValues(col, nil)
	}
	tb := b.Field(5).(*array.TimestampBuilder)
	for _, v := range blk.T {
		tb.Append(arrow.Timestamp(v))
	}
	valid := make([]bool, len(blk.SNull))
	for i, null := range blk.SNull {
		valid[i] = !null
	}
	b.Field(6).(*array.StringBuilder).AppendValues(blk.S, valid)
	b.Field(7).(*array.StringBuilder).AppendValues(blk.K, nil)
	return b.NewRecordBatch()
}

// feistel is a keyed permutation of [0, n): a balanced Feistel network
// over the smallest even power of two at least n, walked until it lands
// below n.
type feistel struct {
	n        uint64
	halfBits uint
	mask     uint64
	keys     [4]uint64
}

func newFeistel(n int, seed uint64) feistel {
	k := uint(bits.Len64(uint64(max(n-1, 1))))
	k += k & 1
	f := feistel{n: uint64(n), halfBits: k / 2, mask: 1<<(k/2) - 1}
	for r := range f.keys {
		f.keys[r] = splitmix(seed + uint64(r)*0x632be59bd9b4e019)
	}
	return f
}

func (f feistel) perm(i uint64) uint64 {
	for {
		l, r := i>>f.halfBits, i&f.mask
		for _, k := range f.keys {
			l, r = r, l^(splitmix(r^k)&f.mask)
		}
		i = l<<f.halfBits | r
		if i < f.n {
			return i
		}
	}
}

// splitmix is SplitMix64's finalizer: a well-mixed hash of x.
func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// writeSpillContainer writes the table in id order as one committed
// container at dir, sorted on id.
func writeSpillContainer(ctx context.Context, t spillTable, dir string) error {
	opts := columnar.WriterOptions{Table: "w", Projection: "by_id", ID: "c0001", Schema: windowbench.Schema(),
		SortKey: columnar.SortKey{{Name: "id"}}, NoSync: true}
	cw, err := columnar.Create(dir, opts)
	if err != nil {
		return err
	}
	for b := range t.blocks() {
		if err := ctx.Err(); err != nil {
			cw.Abort()
			return err
		}
		rec := t.block(b).record(memory.DefaultAllocator)
		for lo := int64(0); lo < rec.NumRows(); lo += columnar.DefaultBlockRows {
			part := rec.NewSlice(lo, min(lo+columnar.DefaultBlockRows, rec.NumRows()))
			err = cw.Write(part)
			part.Release()
			if err != nil {
				break
			}
		}
		rec.Release()
		if err != nil {
			cw.Abort()
			return fmt.Errorf("write %s: %w", dir, err)
		}
	}
	if _, err := cw.Commit(); err != nil {
		return fmt.Errorf("commit %s: %w", dir, err)
	}
	return nil
}

// writeSpillParquet writes the table in id order to a Parquet file.
func writeSpillParquet(ctx context.Context, t spillTable, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	props := parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Snappy))
	fw, err := pqarrow.NewFileWriter(windowbench.Schema(), f, props, pqarrow.DefaultWriterProps())
	if err != nil {
		f.Close()
		return err
	}
	for b := range t.blocks() {
		if err := ctx.Err(); err != nil {
			fw.Close()
			return err
		}
		rec := t.block(b).record(memory.DefaultAllocator)
		err = fw.Write(rec)
		rec.Release()
		if err != nil {
			fw.Close()
			return fmt.Errorf("write %s: %w", path, err)
		}
	}
	return fw.Close()
}

// spillCopySource feeds the table to PostgreSQL's COPY a block at a time.
type spillCopySource struct {
	ctx context.Context
	t   spillTable
	b   int // next block
	blk *spillBlock
	j   int // row within blk
	row []any
}

func (s *spillCopySource) Next() bool {
	if s.blk != nil && s.j+1 < len(s.blk.ID) {
		s.j++
		return true
	}
	if s.b >= s.t.blocks() || s.ctx.Err() != nil {
		return false
	}
	s.blk, s.j = s.t.block(s.b), 0
	s.b++
	return len(s.blk.ID) > 0
}

func (s *spillCopySource) Values() ([]any, error) {
	b, j := s.blk, s.j
	var str any
	if !b.SNull[j] {
		str = b.S[j]
	}
	s.row = append(s.row[:0], b.ID[j], b.A[j], b.C[j], b.G[j], b.X[j], time.UnixMicro(b.T[j]).UTC(), str, b.K[j])
	return s.row, nil
}

func (s *spillCopySource) Err() error { return s.ctx.Err() }

// copySpillToPostgres loads the table into an existing table with COPY.
func copySpillToPostgres(ctx context.Context, conn *pgx.Conn, t spillTable, table string) error {
	n, err := conn.CopyFrom(ctx, pgx.Identifier{table}, windowbench.Columns, &spillCopySource{ctx: ctx, t: t})
	if err != nil {
		return fmt.Errorf("copy into %s: %w", table, err)
	}
	if int(n) != t.N {
		return fmt.Errorf("copy into %s: %d rows copied, want %d", table, n, t.N)
	}
	return nil
}
