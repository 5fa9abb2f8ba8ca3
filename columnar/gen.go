package columnar

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// GenOptions configures Generate.
type GenOptions struct {
	Table, Projection string
	Columns           int // total columns, key columns included; default 8
	KeyColumns        int // leading sort-key columns; default 1
	Containers        int // default 4
	// FirstID is the number of the first container: the containers are
	// named c<FirstID>, c<FirstID+1>, ... (four digits at least), so a
	// load into a projection that already holds containers can take the
	// next free numbers. The rows do not depend on it.
	FirstID          int
	RowsPerContainer int // default 10000
	Seed             int64
	BlockRows        int         // default DefaultBlockRows
	Compression      Compression // default LZ4
	NullFraction     float64     // share of NULLs in non-key columns; default 0.05, <0 for none
	Allocator        memory.Allocator
	Stats            *IOStats
	// Context, if set, stops Generate between containers once done; it
	// returns the context's error with the containers already written.
	Context context.Context
	// Progress, if set, is called after each container is committed with
	// the containers and rows written so far.
	Progress func(containers int, rows int64)
	// Sync makes the containers durable (fsync). Generated data can be
	// generated again, so by default it is not synced.
	Sync bool
	// Keyed makes a keyed table keyed on k0 (changes.go): k0 is unique
	// over all the containers of the load (container c of K holds values
	// j*K+c, n distinct j drawn from [0, 2n) for n rows, so every
	// container still spans the whole key range), not null, and the
	// schema ends with the change columns, every row version 0 and not
	// deleted (GenKeyedSchema).
	Keyed bool
}

// ContainerID returns the conventional ID of container number n: c0000,
// c0001, ..., c9999, c10000, ...
func ContainerID(n int) string { return fmt.Sprintf("c%04d", n) }

func (o *GenOptions) defaults() {
	if o.Table == "" {
		o.Table = "t"
	}
	if o.Projection == "" {
		o.Projection = "p"
	}
	if o.Columns <= 0 {
		o.Columns = 8
	}
	if o.KeyColumns <= 0 {
		o.KeyColumns = 1
	}
	if o.Containers <= 0 {
		o.Containers = 4
	}
	if o.RowsPerContainer <= 0 {
		o.RowsPerContainer = 10000
	}
	if o.BlockRows <= 0 {
		o.BlockRows = DefaultBlockRows
	}
	if o.NullFraction == 0 {
		o.NullFraction = 0.05
	}
	if o.NullFraction < 0 {
		o.NullFraction = 0
	}
	if o.Allocator == nil {
		o.Allocator = memory.DefaultAllocator
	}
}

// genTypes is the cycle of column types Generate uses after the key columns.
var genTypes = []arrow.DataType{
	arrow.PrimitiveTypes.Int64, arrow.BinaryTypes.String, arrow.PrimitiveTypes.Float64,
	arrow.FixedWidthTypes.Timestamp_us, arrow.PrimitiveTypes.Int32, arrow.FixedWidthTypes.Boolean,
	arrow.PrimitiveTypes.Int8, arrow.PrimitiveTypes.Int16, arrow.PrimitiveTypes.Uint8,
	arrow.PrimitiveTypes.Uint16, arrow.PrimitiveTypes.Uint32, arrow.PrimitiveTypes.Uint64,
	arrow.PrimitiveTypes.Float32, arrow.FixedWidthTypes.Date32, arrow.BinaryTypes.Binary,
}

// GenSchema returns the schema and sort key Generate writes: key columns
// k0..k{keys-1} (int64, utf8, float64, timestamp, ... in that order, ASC
// NULLS LAST), then columns c<i>_<type> cycling through every supported
// type. All columns are nullable.
func GenSchema(columns, keys int) (*arrow.Schema, SortKey) {
	keys = min(keys, columns)
	fields := make([]arrow.Field, columns)
	key := make(SortKey, keys)
	for i := range columns {
		t := genTypes[i%len(genTypes)]
		name := fmt.Sprintf("k%d", i)
		if i >= keys {
			tn, _ := TypeName(t)
			name = fmt.Sprintf("c%03d_%s", i, tn)
		} else {
			key[i] = SortColumn{Name: name}
		}
		fields[i] = arrow.Field{Name: name, Type: t, Nullable: true}
	}
	return arrow.NewSchema(fields, nil), key
}

// GenKeyedSchema is GenSchema for a keyed table (GenOptions.Keyed): k0 not
// null, then the change columns; the primary key is k0.
func GenKeyedSchema(columns, keys int) (*arrow.Schema, SortKey, []string) {
	schema, key := GenSchema(columns, keys)
	fields := schema.Fields()
	fields[0].Nullable = false
	return arrow.NewSchema(append(fields, ChangeFields()...), nil), key, []string{fields[0].Name}
}

// Generate writes opts.Containers containers c0000, c0001, ... (from
// c<FirstID>) under
// dataDir/<table>/<projection>/, each sorted on the key columns, with key
// ranges that overlap fully (every container draws its first key column
// from the same range), as in Vertica's mergeout experiments. Output is a
// function of the options alone: the same seed gives the same rows.
func Generate(dataDir string, opts GenOptions) ([]*Manifest, error) {
	opts.defaults()
	if opts.FirstID < 0 {
		return nil, fmt.Errorf("generate: first container number %d is negative", opts.FirstID)
	}
	schema, key := GenSchema(opts.Columns, opts.KeyColumns)
	var pk []string
	if opts.Keyed {
		schema, key, pk = GenKeyedSchema(opts.Columns, opts.KeyColumns)
	}
	out := make([]*Manifest, 0, opts.Containers)
	var rows int64
	for c := range opts.Containers {
		if opts.Context != nil {
			if err := opts.Context.Err(); err != nil {
				return out, fmt.Errorf("generate: %w", err)
			}
		}
		id := ContainerID(opts.FirstID + c)
		m, err := generateContainer(ContainerDir(dataDir, opts.Table, opts.Projection, id), id, schema, key, pk, c, &opts)
		if err != nil {
			return out, fmt.Errorf("generate container %s: %w", id, err)
		}
		out = append(out, m)
		rows += m.Rows
		if opts.Progress != nil {
			opts.Progress(len(out), rows)
		}
	}
	return out, nil
}

func generateContainer(dir, id string, schema *arrow.Schema, key SortKey, pk []string, c int, o *GenOptions) (*Manifest, error) {
	w, err := Create(dir, WriterOptions{
		Table: o.Table, Projection: o.Projection, ID: id, Schema: schema, SortKey: key, PrimaryKey: pk,
		BlockRows: o.BlockRows, Compression: o.Compression, Allocator: o.Allocator, Stats: o.Stats,
		Epochs: [2]uint64{uint64(c), uint64(c)}, NoSync: !o.Sync,
	})
	if err != nil {
		return nil, err
	}
	defer w.Abort()
	n := o.RowsPerContainer
	keyRange := int64(2 * n * o.Containers)

	// Key columns: generate whole, sort by normalized key, write in order.
	keys := make([]arrow.Array, len(key))
	defer func() {
		for _, a := range keys {
			if a != nil {
				a.Release()
			}
		}
	}()
	for k := range key {
		rng := genRand(o.Seed, c, k)
		if k == 0 && o.Keyed {
			keys[k] = genUniqueKeys(o.Allocator, rng, n, c, o.Containers)
		} else {
			keys[k] = genKeyArray(o.Allocator, schema.Field(k).Type, rng, n, k, keyRange)
		}
	}
	enc, err := NewKeyEncoder(schema, key)
	if err != nil {
		return nil, err
	}
	var kb KeyBatch
	if err := enc.EncodeBatch(&kb, keys, 0, n); err != nil {
		return nil, err
	}
	perm := make([]int, n)
	for i := range perm {
		perm[i] = i
	}
	slices.SortStableFunc(perm, func(a, b int) int { return bytes.Compare(kb.Key(a), kb.Key(b)) })
	kb = KeyBatch{}
	for k := range key {
		for start := 0; start < n; start += o.BlockRows {
			blk, err := Take(o.Allocator, keys[k], perm[start:min(n, start+o.BlockRows)])
			if err != nil {
				return nil, err
			}
			err = w.WriteColumn(k, blk)
			blk.Release()
			if err != nil {
				return nil, err
			}
		}
		if err := w.FinishColumn(k); err != nil {
			return nil, err
		}
	}
	// Other columns: block by block, so memory stays one block.
	for col := len(key); col < o.Columns; col++ {
		rng := genRand(o.Seed, c, col)
		for start := 0; start < n; start += o.BlockRows {
			blk := genArray(o.Allocator, schema.Field(col).Type, rng, min(o.BlockRows, n-start), o.NullFraction)
			err := w.WriteColumn(col, blk)
			blk.Release()
			if err != nil {
				return nil, err
			}
		}
		if err := w.FinishColumn(col); err != nil {
			return nil, err
		}
	}
	if o.Keyed {
		if err := writeLoadedChanges(w, o.Columns, n, o.BlockRows, o.Allocator); err != nil {
			return nil, err
		}
	}
	return w.Commit()
}

// genUniqueKeys makes k0 of container c of a keyed load of k containers:
// n values j*k+c for distinct j drawn from [0, 2n), unique over the load.
func genUniqueKeys(mem memory.Allocator, rng *rand.Rand, n, c, k int) arrow.Array {
	js := make([]int64, 2*n)
	for i := range js {
		js[i] = int64(i)
	}
	for i := range n { // a partial Fisher-Yates shuffle: js[:n] are distinct draws
		j := i + rng.IntN(len(js)-i)
		js[i], js[j] = js[j], js[i]
	}
	b := array.NewInt64Builder(mem)
	defer b.Release()
	b.Reserve(n)
	for _, j := range js[:n] {
		b.UnsafeAppend(j*int64(k) + int64(c))
	}
	return b.NewArray()
}

// writeLoadedChanges writes the change columns (at col and col+1) of n
// loaded rows: version 0, not deleted.
func writeLoadedChanges(w *Writer, col, n, blockRows int, mem memory.Allocator) error {
	vb := array.NewInt64Builder(mem)
	vb.AppendValues(make([]int64, min(n, blockRows)), nil)
	version := vb.NewArray()
	vb.Release()
	defer version.Release()
	db := array.NewBooleanBuilder(mem)
	db.AppendValues(make([]bool, min(n, blockRows)), nil)
	deleted := db.NewArray()
	db.Release()
	defer deleted.Release()
	for i, arr := range []arrow.Array{version, deleted} {
		for start := 0; start < n; start += blockRows {
			blk := array.NewSlice(arr, 0, int64(min(blockRows, n-start)))
			err := w.WriteColumn(col+i, blk)
			blk.Release()
			if err != nil {
				return err
			}
		}
		if err := w.FinishColumn(col + i); err != nil {
			return err
		}
	}
	return nil
}

// AccountsOptions configures GenerateAccounts.
type AccountsOptions struct {
	Table, Projection string // default pgbench_accounts, p
	Accounts          int64  // rows: aid 1..Accounts
	RowsPerContainer  int    // default 1Mi
	// FirstID numbers the first container, as GenOptions.FirstID.
	FirstID     int
	BlockRows   int         // default DefaultBlockRows
	Compression Compression // default LZ4
	Allocator   memory.Allocator
	Context     context.Context // stops Generate between blocks once done
	Progress    func(containers int, rows int64)
	Sync        bool // fsync, as GenOptions.Sync
}

// AccountsFiller is pgbench_accounts.filler: char(84), blank.
var AccountsFiller = string(bytes.Repeat([]byte{' '}, 84))

// AccountsSchema is pgbench's pgbench_accounts as a keyed table: aid
// int64 not null, bid int64, abalance int64, filler utf8 (pgbench's
// char(84)), then the change columns; sorted and keyed on aid.
func AccountsSchema() (*arrow.Schema, SortKey, []string) {
	fields := []arrow.Field{
		{Name: "aid", Type: arrow.PrimitiveTypes.Int64},
		{Name: "bid", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "abalance", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "filler", Type: arrow.BinaryTypes.String, Nullable: true},
	}
	return arrow.NewSchema(append(fields, ChangeFields()...), nil), SortKey{{Name: "aid"}}, []string{"aid"}
}

// GenerateAccounts writes pgbench_accounts as pgbench -i fills it: aid 1
// to o.Accounts, bid (aid-1)/100000+1, abalance 0, filler 84 blanks, in
// containers of o.RowsPerContainer consecutive aids (so the containers'
// key ranges do not overlap), named from c<FirstID>. It returns the
// manifests of the containers written, also on error.
func GenerateAccounts(dataDir string, o AccountsOptions) ([]*Manifest, error) {
	if o.Table == "" {
		o.Table = "pgbench_accounts"
	}
	if o.Projection == "" {
		o.Projection = "p"
	}
	if o.RowsPerContainer <= 0 {
		o.RowsPerContainer = 1 << 20
	}
	if o.BlockRows <= 0 {
		o.BlockRows = DefaultBlockRows
	}
	if o.Allocator == nil {
		o.Allocator = memory.DefaultAllocator
	}
	if o.Context == nil {
		o.Context = context.Background()
	}
	if o.Accounts <= 0 || o.FirstID < 0 {
		return nil, fmt.Errorf("generate %s: %d accounts from container %d: want at least one account and a container number not negative", o.Table, o.Accounts, o.FirstID)
	}
	schema, key, pk := AccountsSchema()
	// The blocks of columns that do not depend on aid, made once.
	consts := make([]arrow.Array, 0, 4)
	defer func() {
		for _, a := range consts {
			a.Release()
		}
	}()
	n := int(min(int64(o.BlockRows), o.Accounts))
	for _, t := range []arrow.DataType{arrow.PrimitiveTypes.Int64, arrow.BinaryTypes.String, arrow.PrimitiveTypes.Int64, arrow.FixedWidthTypes.Boolean} {
		b := array.NewBuilder(o.Allocator, t)
		for range n {
			switch bb := b.(type) {
			case *array.Int64Builder:
				bb.Append(0)
			case *array.StringBuilder:
				bb.Append(AccountsFiller)
			case *array.BooleanBuilder:
				bb.Append(false)
			}
		}
		consts = append(consts, b.NewArray())
		b.Release()
	}
	var out []*Manifest
	var rows int64
	for first := int64(1); first <= o.Accounts; first += int64(o.RowsPerContainer) {
		id := ContainerID(o.FirstID + len(out))
		last := min(o.Accounts, first+int64(o.RowsPerContainer)-1)
		m, err := generateAccounts(ContainerDir(dataDir, o.Table, o.Projection, id), id, schema, key, pk, first, last, consts, &o)
		if err != nil {
			return out, fmt.Errorf("generate %s container %s: %w", o.Table, id, err)
		}
		out = append(out, m)
		rows += m.Rows
		if o.Progress != nil {
			o.Progress(len(out), rows)
		}
	}
	return out, nil
}

// generateAccounts writes the accounts first..last as one container, a
// block at a time.
func generateAccounts(dir, id string, schema *arrow.Schema, key SortKey, pk []string, first, last int64, consts []arrow.Array, o *AccountsOptions) (*Manifest, error) {
	w, err := Create(dir, WriterOptions{
		Table: o.Table, Projection: o.Projection, ID: id, Schema: schema, SortKey: key, PrimaryKey: pk,
		BlockRows: o.BlockRows, Compression: o.Compression, Allocator: o.Allocator, NoSync: !o.Sync,
	})
	if err != nil {
		return nil, err
	}
	defer w.Abort()
	ab := array.NewInt64Builder(o.Allocator)
	defer ab.Release()
	bb := array.NewInt64Builder(o.Allocator)
	defer bb.Release()
	for start := first; start <= last; start += int64(o.BlockRows) {
		if err := o.Context.Err(); err != nil {
			return nil, err
		}
		n := int(min(int64(o.BlockRows), last-start+1))
		ab.Reserve(n)
		bb.Reserve(n)
		for aid := start; aid < start+int64(n); aid++ {
			ab.UnsafeAppend(aid)
			bb.UnsafeAppend((aid-1)/100000 + 1)
		}
		// aid, bid, then abalance, filler, version, deleted (consts)
		cols := []arrow.Array{ab.NewArray(), bb.NewArray()}
		for _, c := range consts {
			cols = append(cols, array.NewSlice(c, 0, int64(n)))
		}
		rec := array.NewRecordBatch(schema, cols, int64(n))
		for _, c := range cols {
			c.Release()
		}
		err := w.Write(rec)
		rec.Release()
		if err != nil {
			return nil, err
		}
	}
	return w.Commit()
}

func genRand(seed int64, container, column int) *rand.Rand {
	return rand.New(rand.NewPCG(uint64(seed), uint64(container)<<32|uint64(column)))
}

// genKeyStrings are low-cardinality key strings, prefixes of each other
// included, so ties and prefix ordering are exercised.
var genKeyStrings = []string{"", "a", "ab", "abc", "abd", "b", "ba", "bab", "c", "ca\x00", "ca", "d", "zz", "zzz"}

// genKeyArray makes key column k: k0 spans keyRange (overlapping across
// containers, with some duplicates); later key columns have few distinct
// values and a few NULLs, so they break k0's ties.
func genKeyArray(mem memory.Allocator, t arrow.DataType, rng *rand.Rand, n, k int, keyRange int64) arrow.Array {
	if k == 0 {
		b := array.NewInt64Builder(mem)
		defer b.Release()
		b.Reserve(n)
		for range n {
			b.UnsafeAppend(rng.Int64N(keyRange))
		}
		return b.NewArray()
	}
	const nullFrac = 0.02
	b := array.NewBuilder(mem, t)
	defer b.Release()
	for range n {
		if rng.Float64() < nullFrac {
			b.AppendNull()
			continue
		}
		v := rng.IntN(8)
		switch bb := b.(type) {
		case *array.StringBuilder:
			bb.Append(genKeyStrings[rng.IntN(len(genKeyStrings))])
		case *array.BinaryBuilder:
			bb.Append([]byte(genKeyStrings[rng.IntN(len(genKeyStrings))]))
		case *array.Float64Builder:
			bb.Append([]float64{-1.5, -0.0, 0, 0.5, 2, math.Inf(1), math.Inf(-1), math.NaN()}[v])
		case *array.Float32Builder:
			bb.Append([]float32{-1.5, 0, 0.5, 2, 3, 4, 5, 6}[v])
		default:
			appendRandom(b, rng, int64(v)-3)
		}
	}
	return b.NewArray()
}

// genArray makes n random values of type t with nullFrac NULLs.
func genArray(mem memory.Allocator, t arrow.DataType, rng *rand.Rand, n int, nullFrac float64) arrow.Array {
	b := array.NewBuilder(mem, t)
	defer b.Release()
	b.Reserve(n)
	var scratch [24]byte
	for range n {
		if nullFrac > 0 && rng.Float64() < nullFrac {
			b.AppendNull()
			continue
		}
		switch bb := b.(type) {
		case *array.StringBuilder:
			l := rng.IntN(17)
			for i := range l {
				scratch[i] = 'a' + byte(rng.IntN(26))
			}
			bb.BinaryBuilder.Append(scratch[:l])
		case *array.BinaryBuilder:
			l := rng.IntN(17)
			for i := range l {
				scratch[i] = byte(rng.Uint32())
			}
			bb.Append(scratch[:l])
		case *array.Float64Builder:
			bb.UnsafeAppend(rng.NormFloat64() * 1000)
		case *array.Float32Builder:
			bb.UnsafeAppend(float32(rng.NormFloat64() * 1000))
		case *array.BooleanBuilder:
			bb.UnsafeAppend(rng.IntN(2) == 1)
		default:
			appendRandom(b, rng, rng.Int64())
		}
	}
	return b.NewArray()
}

// appendRandom appends v, truncated to the builder's integer type.
func appendRandom(b array.Builder, rng *rand.Rand, v int64) {
	switch bb := b.(type) {
	case *array.Int8Builder:
		bb.Append(int8(v))
	case *array.Int16Builder:
		bb.Append(int16(v))
	case *array.Int32Builder:
		bb.Append(int32(v))
	case *array.Int64Builder:
		bb.Append(v)
	case *array.Uint8Builder:
		bb.Append(uint8(v))
	case *array.Uint16Builder:
		bb.Append(uint16(v))
	case *array.Uint32Builder:
		bb.Append(uint32(v))
	case *array.Uint64Builder:
		bb.Append(uint64(v))
	case *array.Date32Builder:
		bb.Append(arrow.Date32(v % 100000))
	case *array.TimestampBuilder:
		bb.Append(arrow.Timestamp(v % (1 << 52)))
	case *array.BooleanBuilder:
		bb.Append(v&1 == 1)
	default:
		panic(fmt.Sprintf("columnar: generator has no values for %s", b.Type()))
	}
}
