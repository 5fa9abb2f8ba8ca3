package windower

import (
	"context"
	"fmt"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/internal/hugepage"
)

// Keyed tables: a query sees only the current rows. The rows of the input
// containers that a newer version of their key supersedes, and the
// delete markers, are found once per run (columnar.Superseded) and
// dropped as each block is read, before WHERE or anything else sees
// them, on every path: the in-memory load, the chunks of sorted runs,
// and the sorted stream with its first passes and cursors. The change
// columns themselves are hidden from queries (schemaInfo.lookup).

// superseded is, by input container, the rows to drop; a nil entry (or
// a nil superseded) drops nothing, which costs nothing per row.
type superseded []*roaring.Bitmap

// of is container c's dropped rows, nil when none.
func (s superseded) of(c int) *roaring.Bitmap {
	if s == nil {
		return nil
	}
	return s[c]
}

// resolveCache keeps the resolutions of the process's recent queries over
// keyed tables, and the key indexes of their largest containers, so that
// queries over the same containers, or the same largest container and
// new changes, do not read them again (columnar.ResolveCache). It holds
// at most columnar.DefaultResolveCacheBytes, outside any grant.
var resolveCache = columnar.NewResolveCache(columnar.DefaultResolveCacheBytes)

// resolveChanges resolves the versions of keyed inputs: the rows each
// container drops, and how many. It returns a nil resolution for inputs
// without a primary key. The caller releases the resolution (its bitmaps
// are charged to the budget) when the run ends.
func resolveChanges(ctx context.Context, cs []*columnar.Container, budget *columnar.Budget) (*columnar.Resolution, superseded, error) {
	keyed := false
	for _, c := range cs {
		keyed = keyed || len(c.Manifest().PrimaryKey) > 0
	}
	if !keyed {
		return nil, nil, nil
	}
	res, err := columnar.Superseded(ctx, cs, columnar.ResolveOptions{Budget: budget, Cache: resolveCache})
	if err != nil {
		return nil, nil, fmt.Errorf("windower: resolve the changed rows of %d input containers: %w", len(cs), err)
	}
	for _, b := range res.Dropped {
		if b != nil {
			return res, superseded(res.Dropped), nil
		}
	}
	return res, nil, nil
}

// liveMask returns which of rows [first, first+n) of a container are
// kept when d are its dropped rows: nil when all are (no row of the
// range is in d), so a block without dropped rows costs one probe.
func liveMask(d *roaring.Bitmap, first int64, n int) []bool {
	if d == nil || n == 0 {
		return nil
	}
	it := d.Iterator()
	it.AdvanceIfNeeded(uint32(first))
	end := uint32(first) + uint32(n)
	if !it.HasNext() || it.PeekNext() >= end {
		return nil
	}
	keep := hugepage.Make[bool](n, n)
	for i := range keep {
		keep[i] = true
	}
	for it.HasNext() {
		r := it.Next()
		if r >= end {
			break
		}
		keep[r-uint32(first)] = false
	}
	return keep
}

// liveRows is how many of rows [first, first+n) of a container d keeps.
func liveRows(d *roaring.Bitmap, first int64, n int) int {
	if d == nil || n == 0 {
		return n
	}
	// Rank(x) counts the dropped rows up to x inclusive.
	dropped := d.Rank(uint32(first + int64(n) - 1))
	if first > 0 {
		dropped -= d.Rank(uint32(first - 1))
	}
	return n - int(dropped)
}

// rowFilter is what a path drops from the rows it reads from one
// container: the superseded rows (by their row in the container), then
// the rows WHERE drops. Superseded rows go first so that WHERE is never
// evaluated over them (an expression may fail on a row that is gone).
type rowFilter struct {
	where   []predicate
	dropped *roaring.Bitmap // nil: none
}

// active reports whether the filter drops anything, so that a reader
// without one keeps its rows' positions implicit.
func (f rowFilter) active() bool { return len(f.where) > 0 || f.dropped != nil }

// apply filters the rows of in from start on, which are the container's
// rows first, first+1, ...: it drops the superseded ones, then those
// WHERE drops. It returns which of those rows were kept, nil when all.
func (f rowFilter) apply(in *input, start int, first int64) ([]bool, error) {
	keep := liveMask(f.dropped, first, in.n-start)
	if keep != nil {
		in.compactTail(start, keep)
	}
	if len(f.where) == 0 {
		return keep, nil
	}
	pass, err := evalPredicates(f.where, in.view(start, in.n).cols, in.n-start)
	if err != nil {
		return nil, fmt.Errorf("windower: where: %w", err)
	}
	in.compactTail(start, pass)
	if keep == nil {
		return pass, nil
	}
	// pass is over the rows keep kept: map it back onto all of them.
	j := 0
	for i, k := range keep {
		if k {
			keep[i] = pass[j]
			j++
		}
	}
	return keep, nil
}

// appendLive appends the rows of arr that keep keeps (all when keep is
// nil) to v, decoding through scratch when some are dropped so that v
// never grows past its live rows (a loader writes in place).
func appendLive(v *vector, arr arrow.Array, keep []bool, scratch *vector) error {
	if keep == nil {
		return v.appendArrow(arr)
	}
	scratch.kind, scratch.typ = v.kind, v.typ
	scratch.truncate(0)
	scratch.nulls, scratch.payload = nil, 0
	if err := scratch.appendArrow(arr); err != nil {
		return err
	}
	n := v.len()
	switch v.kind {
	case kindFloat:
		v.floats = appendKept(v.floats, scratch.floats, keep)
	case kindString:
		v.strs = appendKept(v.strs, scratch.strs, keep)
	default:
		v.ints = appendKept(v.ints, scratch.ints, keep)
	}
	switch {
	case scratch.nulls != nil:
		if v.nulls == nil {
			v.nulls = make([]bool, n, v.len())
		}
		v.nulls = appendKept(v.nulls, scratch.nulls, keep)
	case v.nulls != nil:
		v.nulls = append(v.nulls, make([]bool, v.len()-n)...)
	}
	// The kept strings point into the block's copy, which stays whole.
	v.payload += scratch.payload
	return nil
}

// appendKept appends the values of src that keep keeps to dst, in one
// typed loop.
func appendKept[T any](dst, src []T, keep []bool) []T {
	for i, k := range keep {
		if k {
			dst = append(dst, src[i])
		}
	}
	return dst
}
