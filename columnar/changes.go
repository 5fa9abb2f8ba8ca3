package columnar

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// Keyed tables: the rows of a table with a primary key change by key, and
// every version of a row carries what is needed to tell which one is
// current (see the package documentation, # Format, Change columns).
//
// A keyed table's containers end with two change columns:
//
//   - VersionColumn, int64 not null: the version of the row, the UPDATES
//     stream sequence of the change event that made it; 0 for rows a load
//     wrote, and for rows a full mergeout froze (the versions at or below
//     its change floor, which every later change is above; the scheduler
//     refuses to make live a change at or below the floor a table was
//     frozen through, as it would beat a frozen row).
//   - DeletedColumn, bool not null: the row is a delete marker. A marker
//     has its key columns set and every other column NULL.
//
// For each key the row of the highest version is the current one; a key
// whose current row is a marker has no row. Rows of the same key and
// version are the same change (one event applied twice, as after a crash
// of the service that applies them) and count once. Versions come from
// the events, not from the order their containers were written in, so a
// change applied late (an event redelivered after later ones) never
// overwrites a newer one, and a container holds at most one row per key.
const (
	VersionColumn = "_strata_version"
	DeletedColumn = "_strata_deleted"
)

// IsChangeColumn reports whether name is one of the change columns (or
// any name of their reserved prefix), which queries do not see.
func IsChangeColumn(name string) bool { return strings.HasPrefix(name, "_strata_") }

// ChangeFields are the two change columns a keyed table's schema ends with.
func ChangeFields() []arrow.Field {
	return []arrow.Field{
		{Name: VersionColumn, Type: arrow.PrimitiveTypes.Int64},
		{Name: DeletedColumn, Type: arrow.FixedWidthTypes.Boolean},
	}
}

// checkPrimaryKey checks a manifest's primary key against its schema: the
// key's columns exist, once each, are not change columns, and the schema
// ends with the change columns.
func checkPrimaryKey(schema *arrow.Schema, pk []string) error {
	n := schema.NumFields()
	for i, f := range schema.Fields() {
		if IsChangeColumn(f.Name) && (len(pk) == 0 || i < n-2) {
			return fmt.Errorf("%w: column %q uses the reserved prefix _strata_", ErrSchemaMismatch, f.Name)
		}
	}
	if len(pk) == 0 {
		return nil
	}
	if n < 3 {
		return fmt.Errorf("%w: a keyed table needs a column besides the change columns", ErrSchemaMismatch)
	}
	v, d := schema.Field(n-2), schema.Field(n-1)
	if v.Name != VersionColumn || v.Type.ID() != arrow.INT64 || v.Nullable {
		return fmt.Errorf("%w: column %d is %s %s, want %s int64 not null", ErrSchemaMismatch, n-2, v.Name, v.Type, VersionColumn)
	}
	if d.Name != DeletedColumn || d.Type.ID() != arrow.BOOL || d.Nullable {
		return fmt.Errorf("%w: column %d is %s %s, want %s bool not null", ErrSchemaMismatch, n-1, d.Name, d.Type, DeletedColumn)
	}
	for i, name := range pk {
		if IsChangeColumn(name) {
			return fmt.Errorf("%w: key column %q is a change column", ErrSchemaMismatch, name)
		}
		if slices.Index(pk[:i], name) >= 0 {
			return fmt.Errorf("%w: key column %q named twice", ErrSchemaMismatch, name)
		}
		if len(schema.FieldIndices(name)) != 1 {
			return fmt.Errorf("%w: key column %q is not in the schema", ErrSchemaMismatch, name)
		}
	}
	return nil
}

// PrimaryKeyIndices returns the schema positions of a keyed container's
// key columns, its version column and its deleted column; ok is false for
// a container without a primary key.
func (c *Container) PrimaryKeyIndices() (key []int, version, deleted int, ok bool) {
	if len(c.m.PrimaryKey) == 0 {
		return nil, -1, -1, false
	}
	for _, name := range c.m.PrimaryKey {
		key = append(key, c.schema.FieldIndices(name)[0])
	}
	n := c.schema.NumFields()
	return key, n - 2, n - 1, true
}

// ResolveOptions configure Superseded.
type ResolveOptions struct {
	// KeepMarkers keeps the delete markers that are the current row of
	// their key, for a mergeout whose inputs are not every container of
	// the table (an older row of the key may be in another one). A reader
	// always drops them.
	KeepMarkers bool
	// DropMarkersThrough, with KeepMarkers, drops the current markers of
	// version at most this anyway: a mergeout of every container of the
	// table, through the version below which no change can still arrive.
	DropMarkersThrough int64
	// Budget, if set, is charged for the key table and the bitmaps while
	// they are held; Superseded fails with ErrBudgetExceeded when it has
	// no room.
	Budget *Budget
	// Cache, if set, keeps resolutions and the key index of the largest
	// container for the next call over the same containers
	// (resolvecache.go). Results are the same with or without it.
	Cache *ResolveCache
}

// Resolution is the result of Superseded: the rows of each container that
// are not current. Release returns its memory to the budget.
type Resolution struct {
	// Dropped[i] are the rows of container i to skip, nil when none.
	Dropped []*roaring.Bitmap
	// Live is the number of rows kept over all containers.
	Live   int64
	budget *Budget
	held   int64
}

// DroppedRows is how many rows Dropped holds over all containers.
func (r *Resolution) DroppedRows() int64 {
	var n int64
	for _, b := range r.Dropped {
		if b != nil {
			n += int64(b.GetCardinality())
		}
	}
	return n
}

// Release returns what the resolution holds to its budget.
func (r *Resolution) Release() {
	if r != nil && r.budget != nil && r.held > 0 {
		r.budget.Release(r.held)
		r.held = 0
	}
}

// keyEntry is the current row of a key among the containers read so far.
type keyEntry struct {
	version   int64
	container int32
	row       int32
	marker    bool
}

// Key table costs: what one key of the table takes besides its bytes
// (the map's slot, a string header and the entry); a row of an int64
// key's table (intRow) and its slot in a map.
const (
	entryBytes    = 64
	intRowBytes   = 32
	intEntryBytes = 48
	keyEntryBytes = 24
)

// Superseded resolves the versions of a keyed table's rows over cs: for
// each container, the rows that another row of the same key replaces (a
// higher version; on a tie, an earlier container in cs or an earlier row
// of the same container) and, unless opts keeps them, the delete markers
// that are their key's current row. Containers without a primary key give
// nil (nothing to resolve); a mix of keyed and unkeyed containers, or of
// different keys, is an ErrSchemaMismatch.
//
// It reads the key, version and deleted columns of every container once,
// less what a container's change statistics (Manifest.Changes) tell: the
// version column of a container whose rows have one version, the deleted
// column of one without markers. The key table holds a key of every
// container but the largest (which is read last and only probed), so its
// size follows the rows changed since the table's last full mergeout
// rather than the table; it is charged to opts.Budget, with the bitmaps.
// A table of one container (or whose other containers are empty) has
// nothing to resolve but its markers: only its version and deleted
// columns are read, and nothing when its statistics count no marker.
//
// With opts.Cache, a resolution of the same containers under the same
// options is a copy of the cached one, and the largest container of an
// int64 key whose key index the cache keeps is not read: the table's keys
// are looked up in the index (resolvecache.go).
func Superseded(ctx context.Context, cs []*Container, opts ResolveOptions) (*Resolution, error) {
	res := &Resolution{Dropped: make([]*roaring.Bitmap, len(cs)), budget: opts.Budget}
	if len(cs) == 0 || len(cs[0].m.PrimaryKey) == 0 {
		for i, c := range cs {
			if len(c.m.PrimaryKey) > 0 {
				return nil, fmt.Errorf("%w: container %s has primary key (%s), container %s has none",
					ErrSchemaMismatch, c.dir, strings.Join(c.m.PrimaryKey, ", "), cs[0].dir)
			}
			res.Live += cs[i].m.Rows
		}
		return res, nil
	}
	pk := cs[0].m.PrimaryKey
	for _, c := range cs[1:] {
		if !slices.Equal(c.m.PrimaryKey, pk) {
			return nil, fmt.Errorf("%w: container %s has primary key (%s), container %s (%s)",
				ErrSchemaMismatch, c.dir, strings.Join(c.m.PrimaryKey, ", "), cs[0].dir, strings.Join(pk, ", "))
		}
	}
	var key string
	if opts.Cache != nil {
		key = resolutionKey(cs, opts)
		if cached, err := cachedResolve(opts, key, res); cached || err != nil {
			return res, err
		}
	}
	r := newResolver(cs, opts, res)
	run := r.run
	if mergeable(cs, opts) {
		run = r.mergeRun
	}
	if err := run(ctx); err != nil {
		res.Release()
		return nil, err
	}
	if opts.Cache != nil {
		keep := &cachedResolution{dropped: make([]*roaring.Bitmap, len(cs)), live: res.Live}
		var size int64
		for i, b := range res.Dropped {
			if b != nil {
				keep.dropped[i] = b.Clone()
				size += int64(b.GetSizeInBytes())
			}
		}
		opts.Cache.put(&resolveEntry{key: key, bytes: size + int64(len(cs))*8, res: keep})
	}
	return res, nil
}

// cachedResolve fills res from the resolution the cache holds under key,
// if it holds one: copies of its bitmaps, charged to the budget.
func cachedResolve(opts ResolveOptions, key string, res *Resolution) (bool, error) {
	e := opts.Cache.get(key)
	if e == nil || e.res == nil {
		return false, nil
	}
	var held int64
	for i, b := range e.res.dropped {
		if b != nil {
			res.Dropped[i] = b.Clone()
			held += int64(b.GetSizeInBytes())
		}
	}
	res.Live = e.res.live
	if opts.Budget != nil && held > 0 {
		if err := opts.Budget.Reserve(held); err != nil {
			return true, fmt.Errorf("resolve changed rows: %w", err)
		}
		res.held = held
	}
	return true, nil
}

// index returns the key index of the largest container, i, that
// opts.Cache keeps, charged to the budget; nil when it keeps none or the
// budget has no room for it.
func (r *resolver) index(i int) *keyIndex {
	if r.opts.Cache == nil || r.ints == nil || r.cs[i].m.Rows < r.opts.Cache.minIndexRows {
		return nil
	}
	e := r.opts.Cache.get(indexKey(r.cs[i]))
	if e == nil || e.index == nil || r.charge(e.index.size()) != nil {
		return nil
	}
	r.opts.Cache.indexHits.Add(1)
	return e.index
}

// probeIndex resolves the largest container, i, against the key table
// through its key index x, without reading it: each key of the table is
// looked up in the index, then the largest's markers whose keys are not
// in the table are dropped as their key's only row.
func (r *resolver) probeIndex(i int, x *keyIndex) {
	t := r.ints
	probe := func(k int64, old keyEntry) (keyEntry, bool) {
		row, ok := x.lookup(k)
		if !ok {
			return old, false
		}
		e := keyEntry{version: x.version(row), container: int32(i), row: row, marker: x.marker(row)}
		return e, r.settle(e, old, true, true)
	}
	for j, old := range t.dense {
		if old.version >= 0 {
			if e, ok := probe(t.min+int64(j), old); ok {
				t.dense[j] = e
			}
		}
	}
	for k, old := range t.byKey {
		if e, ok := probe(k, old); ok {
			t.byKey[k] = e
		}
	}
	for _, m := range x.markers {
		if _, found := t.find(m.key); !found {
			r.dropIfMarker(keyEntry{version: x.version(m.row), container: int32(i), row: m.row, marker: true})
		}
	}
}

// startIndex starts gathering the key index of the largest container,
// i, as it is read, when opts.Cache would keep it and the budget has
// room for it: its keys and versions (16 bytes a row) and, while the
// index is built, a sorted copy (28 bytes a row at most).
func (r *resolver) startIndex(i int) {
	c := r.cs[i]
	if r.opts.Cache == nil || r.ints == nil || c.m.Rows < r.opts.Cache.minIndexRows || c.m.Rows*12 > r.opts.Cache.max {
		return
	}
	if r.charge(c.m.Rows*(16+28)) != nil {
		return
	}
	r.build = &indexBuilder{keys: make([]int64, 0, c.m.Rows)}
}

// keepIndex builds the key index gathered while the largest container,
// i, was read and gives it to the cache.
func (r *resolver) keepIndex(i int) {
	if r.build == nil {
		return
	}
	x := r.build.index()
	r.build = nil
	if x != nil {
		r.opts.Cache.put(&resolveEntry{key: indexKey(r.cs[i]), bytes: x.size(), index: x})
	}
}

type resolver struct {
	cs   []*Container
	opts ResolveOptions
	res  *Resolution
	// The key table: ints for a key of one int64 column (no encoding,
	// and a dense index when the keys allow), keys, by normalized key,
	// for any other.
	ints *intTable
	keys map[string]keyEntry
	enc  *KeyEncoder
	buf  []byte
	// build gathers the largest container's key index while it is read,
	// for opts.Cache.
	build *indexBuilder
}

func newResolver(cs []*Container, opts ResolveOptions, res *Resolution) *resolver {
	r := &resolver{cs: cs, opts: opts, res: res}
	key, _, _, _ := cs[0].PrimaryKeyIndices()
	if len(key) == 1 && cs[0].schema.Field(key[0]).Type.ID() == arrow.INT64 {
		r.ints = &intTable{min: math.MaxInt64, max: math.MinInt64}
	} else {
		r.keys = map[string]keyEntry{}
	}
	return r
}

// tableLen is how many rows the key table holds.
func (r *resolver) tableLen() int {
	if r.ints != nil {
		return len(r.ints.rows)
	}
	return len(r.keys)
}

func (r *resolver) charge(n int64) error {
	if r.opts.Budget == nil || n == 0 {
		return nil
	}
	if err := r.opts.Budget.Reserve(n); err != nil {
		return fmt.Errorf("resolve changed rows: %w", err)
	}
	r.res.held += n
	return nil
}

func (r *resolver) drop(c int, row int32) {
	b := r.res.Dropped[c]
	if b == nil {
		b = roaring.New()
		r.res.Dropped[c] = b
	}
	b.Add(uint32(row))
}

// wins reports whether a is the current row rather than b.
func wins(a, b keyEntry) bool {
	if a.version != b.version {
		return a.version > b.version
	}
	if a.container != b.container {
		return a.container < b.container
	}
	return a.row < b.row
}

func (r *resolver) run(ctx context.Context) error {
	largest := 0
	for i, c := range r.cs {
		if c.m.Rows > r.cs[largest].m.Rows {
			largest = i
		}
		if c.m.Rows > 1<<31-1 {
			return fmt.Errorf("resolve changed rows of container %s: %d rows, at most 2^31-1 are resolved", c.dir, c.m.Rows)
		}
	}
	if r.ints != nil {
		if err := r.startInts(largest); err != nil {
			return err
		}
	}
	for i := range r.cs {
		if i == largest {
			continue
		}
		if err := r.scan(ctx, i, false); err != nil {
			return err
		}
	}
	empty := r.tableLen() == 0
	var index *keyIndex
	if !empty {
		index = r.index(largest)
	}
	if r.ints != nil && !empty {
		// Probing the largest row by row, its rows count in choosing a
		// dense table; probing its index, only the table's keys are.
		probed := r.cs[largest].m.Rows
		if index != nil {
			probed = 0
		}
		if err := r.buildInts(probed); err != nil {
			return err
		}
	}
	var err error
	switch {
	case empty:
		// No key of another container to meet: only the largest's
		// markers can drop.
		err = r.scanMarkers(ctx, largest)
	case index != nil:
		r.probeIndex(largest, index)
	default:
		r.startIndex(largest)
		err = r.scan(ctx, largest, true)
	}
	if err != nil {
		return err
	}
	r.keepIndex(largest)
	// The winners that are markers: dropped unless kept for a partial
	// mergeout (in which case they are live rows of its output).
	if r.ints != nil {
		r.ints.current(r.dropIfMarker)
	}
	for _, e := range r.keys {
		r.dropIfMarker(e)
	}
	return r.finish()
}

// finish keeps the bitmaps (charged to the budget) and lets the key table
// go.
func (r *resolver) finish() error {
	var held int64
	for _, b := range r.res.Dropped {
		if b != nil {
			b.RunOptimize()
			held += int64(b.GetSizeInBytes())
		}
	}
	// The key table goes; the bitmaps stay with the resolution.
	if r.opts.Budget != nil {
		r.opts.Budget.Release(r.res.held)
		r.res.held = 0
	}
	r.ints, r.keys = nil, nil
	if err := r.charge(held); err != nil {
		return err
	}
	var total int64
	for _, c := range r.cs {
		total += c.m.Rows
	}
	r.res.Live = total - r.res.DroppedRows()
	return nil
}

func (r *resolver) dropMarker(version int64) bool {
	return !r.opts.KeepMarkers || version <= r.opts.DropMarkersThrough
}

// dropIfMarker drops e, the current row of its key, if it is a marker
// the options do not keep.
func (r *resolver) dropIfMarker(e keyEntry) {
	if e.marker && r.dropMarker(e.version) {
		r.drop(int(e.container), e.row)
	}
}

// settle resolves row e of a key against the key's entry in the table,
// old (if found): it drops whichever of the two loses and reports
// whether e is to be stored as the key's entry. Probing (the largest
// container, read last), a key not in the table has no other row: e is
// current, and dropped at once if it is a marker.
func (r *resolver) settle(e, old keyEntry, found, probeOnly bool) (store bool) {
	switch {
	case !found && probeOnly:
		r.dropIfMarker(e)
		return false
	case !found:
		return true
	case wins(e, old):
		r.drop(int(old.container), old.row)
		return true
	default:
		r.drop(int(e.container), e.row)
		return false
	}
}

// scan reads container i's key, version and deleted columns. Its keys go
// into the table unless probeOnly (the largest container, read last: a key
// of it not in the table can have no other row, so only its markers need
// remembering).
func (r *resolver) scan(ctx context.Context, i int, probeOnly bool) error {
	c := r.cs[i]
	if c.m.Rows == 0 {
		return nil
	}
	key, _, _, _ := c.PrimaryKeyIndices()
	if r.keys != nil && r.enc == nil {
		sk := make(SortKey, len(key))
		for j, k := range key {
			sk[j] = SortColumn{Name: c.schema.Field(k).Name}
		}
		enc, err := NewKeyEncoder(c.schema, sk)
		if err != nil {
			return fmt.Errorf("resolve changed rows of container %s: %w", c.dir, err)
		}
		r.enc = enc
	}
	return r.blocks(ctx, i, key, func(arrs []arrow.Array, cb *changeBlock, row int32) error {
		if r.ints != nil {
			ids, ok := arrs[0].(*array.Int64)
			if !ok || ids.NullN() > 0 {
				return fmt.Errorf("%w: container %s: key column %s is not int64 without NULLs", ErrCorrupt, c.dir, c.schema.Field(key[0]).Name)
			}
			if probeOnly && r.build != nil {
				r.build.add(ids.Int64Values(), cb)
			}
			return r.blockInts(i, probeOnly, ids.Int64Values(), cb, row)
		}
		return r.block(i, probeOnly, arrs, cb, row)
	})
}

// scanMarkers drops the markers of container i, which shares no key with
// another container: its version and deleted columns alone, and nothing
// when its statistics count no marker.
func (r *resolver) scanMarkers(ctx context.Context, i int) error {
	c := r.cs[i]
	if c.m.Rows == 0 || (c.m.Changes != nil && c.m.Changes.Markers == 0) {
		return nil
	}
	return r.blocks(ctx, i, nil, func(_ []arrow.Array, cb *changeBlock, row int32) error {
		for j := range cb.n {
			e := keyEntry{version: cb.version(j), container: int32(i), row: row + int32(j), marker: cb.marker(j)}
			if e.version < 0 {
				return r.negative(e)
			}
			r.dropIfMarker(e)
		}
		return nil
	})
}

// changeBlock is a block's change columns, as far as they were read: a
// column the container's change statistics make known is not.
type changeBlock struct {
	vers []int64        // nil: every row has version ver
	ver  int64          //
	dels *array.Boolean // nil: no row is a marker (unless marks)
	// marks is the deleted column copied out of its block (the merge
	// path holds a block past its record's release).
	marks []bool
	n     int // rows
}

func (b *changeBlock) version(j int) int64 {
	if b.vers == nil {
		return b.ver
	}
	return b.vers[j]
}

func (b *changeBlock) marker(j int) bool {
	if b.marks != nil {
		return b.marks[j]
	}
	return b.dels != nil && b.dels.Value(j)
}

// changeColumns are the change columns of container i that must be read:
// the version column unless its statistics give one version for every
// row (ver, constant), the deleted column unless they count no marker.
func (r *resolver) changeColumns(i int) (cols []int, ver int64, constant, markers bool) {
	c := r.cs[i]
	_, v, d, _ := c.PrimaryKeyIndices()
	st := c.m.Changes
	if st == nil || st.MinVersion != st.MaxVersion {
		cols = append(cols, v)
	} else {
		ver, constant = st.MinVersion, true
	}
	if st == nil || st.Markers > 0 {
		cols = append(cols, d)
		markers = true
	}
	return cols, ver, constant, markers
}

// blocks reads columns cols of container i and those of its change
// columns its statistics do not make known (changeColumns) a block at a
// time, and calls fn with each block's arrays of cols, its checked change
// columns and the container's row of its first row.
func (r *resolver) blocks(ctx context.Context, i int, cols []int, fn func(arrs []arrow.Array, cb *changeBlock, row int32) error) error {
	c := r.cs[i]
	change, ver, constant, markers := r.changeColumns(i)
	n := len(cols)
	read := append(slices.Clone(cols), change...)
	if len(read) == 0 {
		// Nothing to read: the statistics tell every row's version and
		// that none is a marker.
		for _, b := range c.m.Blocks {
			if err := fn(nil, &changeBlock{ver: ver, n: b.Rows}, int32(b.FirstRow)); err != nil {
				return err
			}
		}
		return nil
	}
	br, err := c.OpenColumns(read)
	if err != nil {
		return fmt.Errorf("resolve changed rows: %w", err)
	}
	defer br.Close()
	var row int32
	for b := 0; b < br.NumBlocks(); b++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		rec, err := br.ReadBlock(b)
		if err != nil {
			return fmt.Errorf("resolve changed rows: %w", err)
		}
		arrs := rec.Columns()
		cb := &changeBlock{ver: ver, n: int(rec.NumRows())}
		ok, k := true, n
		if !constant {
			vers, ok1 := arrs[k].(*array.Int64)
			ok = ok1 && vers.NullN() == 0
			if ok {
				cb.vers = vers.Int64Values()
			}
			k++
		}
		if ok && markers {
			dels, ok2 := arrs[k].(*array.Boolean)
			ok = ok2 && dels.NullN() == 0
			cb.dels = dels
		}
		if !ok {
			rec.Release()
			return fmt.Errorf("%w: container %s block %d: change columns are not int64 and bool without NULLs", ErrCorrupt, c.dir, b)
		}
		err = fn(arrs[:n], cb, row)
		row += int32(cb.n)
		rec.Release()
		if err != nil {
			return err
		}
	}
	return nil
}

func (r *resolver) negative(e keyEntry) error {
	return fmt.Errorf("%w: container %s row %d: version %d is negative", ErrCorrupt, r.cs[e.container].dir, e.row, e.version)
}

// block resolves a block's rows by their normalized keys.
func (r *resolver) block(i int, probeOnly bool, key []arrow.Array, cb *changeBlock, row int32) error {
	var added int64
	for j := range cb.n {
		e := keyEntry{version: cb.version(j), container: int32(i), row: row + int32(j), marker: cb.marker(j)}
		if e.version < 0 {
			return r.negative(e)
		}
		r.buf = r.enc.AppendRow(r.buf[:0], key, j)
		old, found := r.keys[string(r.buf)]
		if r.settle(e, old, found, probeOnly) {
			if !found {
				added += int64(len(r.buf)) + entryBytes
			}
			r.keys[string(r.buf)] = e
		}
	}
	return r.charge(added)
}

// blockInts takes a block's rows by their one int64 key column: into
// the table's rows (buildInts resolves them once all are read), or,
// probing the largest container, against the table.
func (r *resolver) blockInts(i int, probeOnly bool, ids []int64, cb *changeBlock, row int32) error {
	t := r.ints
	for j := range cb.n {
		e := keyEntry{version: cb.version(j), container: int32(i), row: row + int32(j), marker: cb.marker(j)}
		if e.version < 0 {
			return r.negative(e)
		}
		if !probeOnly {
			t.add(ids[j], e)
			continue
		}
		old, found := t.find(ids[j])
		if r.settle(e, old, found, true) {
			t.set(ids[j], e)
		}
	}
	return nil
}

// startInts makes room for the rows of every container but the largest
// in the int64 key's table, which takes them all before resolving them.
func (r *resolver) startInts(largest int) error {
	var n int64
	for i, c := range r.cs {
		if i != largest {
			n += c.m.Rows
		}
	}
	if err := r.charge(n * intRowBytes); err != nil {
		return err
	}
	r.ints.rows = make([]intRow, 0, n)
	return nil
}

// buildInts indexes the rows read before the largest container by their
// int64 key, resolving the rows of the same key among them, and lets the
// rows go. The index is dense (an entry per key between the smallest and
// the largest) when there are no more such keys than four per row of the
// table and of the largest container, probed next, and the budget has
// room: probing it is an array read, in order when the largest container
// is in key order, where a map of a few hundred thousand keys costs a
// cache miss a probe.
func (r *resolver) buildInts(probed int64) error {
	t := r.ints
	span := uint64(t.max) - uint64(t.min) + 1
	if span <= 4*uint64(int64(len(t.rows))+probed) && span < 1<<31 && r.charge(int64(span)*keyEntryBytes) == nil {
		t.dense = make([]keyEntry, span)
		for i := range t.dense {
			t.dense[i].version = -1 // no row
		}
	} else {
		if err := r.charge(int64(len(t.rows)) * intEntryBytes); err != nil {
			return err
		}
		t.byKey = make(map[int64]keyEntry, len(t.rows)/2)
	}
	for _, row := range t.rows {
		old, found := t.find(row.key)
		if r.settle(row.e, old, found, false) {
			t.set(row.key, row.e)
		}
	}
	if r.opts.Budget != nil {
		held := int64(cap(t.rows)) * intRowBytes
		r.opts.Budget.Release(held)
		r.res.held -= held
	}
	t.rows = nil
	return nil
}

// intTable is the key table of a key of one int64 column: the rows of
// the containers read before the largest, then, once they are all read,
// each key's current row among them.
type intTable struct {
	rows     []intRow
	min, max int64
	dense    []keyEntry         // the entry of key min+i; version -1: none
	byKey    map[int64]keyEntry // when not dense
}

type intRow struct {
	key int64
	e   keyEntry
}

func (t *intTable) add(k int64, e keyEntry) {
	t.rows = append(t.rows, intRow{key: k, e: e})
	t.min, t.max = min(t.min, k), max(t.max, k)
}

// find returns key k's current row, if the table has the key.
func (t *intTable) find(k int64) (keyEntry, bool) {
	if t.dense == nil {
		e, ok := t.byKey[k]
		return e, ok
	}
	if k < t.min || k > t.max {
		return keyEntry{}, false
	}
	e := t.dense[uint64(k)-uint64(t.min)]
	return e, e.version >= 0
}

// set makes e key k's current row; k is in the table's range.
func (t *intTable) set(k int64, e keyEntry) {
	if t.dense != nil {
		t.dense[uint64(k)-uint64(t.min)] = e
	} else {
		t.byKey[k] = e
	}
}

// current calls fn with each key's current row.
func (t *intTable) current(fn func(keyEntry)) {
	for _, e := range t.dense {
		if e.version >= 0 {
			fn(e)
		}
	}
	for _, e := range t.byKey {
		fn(e)
	}
}

// ErrDuplicateKey marks rows of one load that share a primary key.
var ErrDuplicateKey = errors.New("columnar: duplicate primary key")
