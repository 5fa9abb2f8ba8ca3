package merger

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/strata-db/strata/columnar"
)

// passes merges inputs too many to merge at once: consecutive groups of
// p.fanIn inputs go into intermediate containers under a temporary
// directory, level after level, until one merge fits; that one writes
// output. Merging consecutive groups keeps the merge stable. Keyed inputs
// are folded where they are first read (an input may wait for a later
// level when its group is itself); the resolution's bitmaps are released
// once every input they filter is read.
func (m *merge) passes(ins []input, output string, p plan, blockRows int, total int64) error {
	tmp, err := os.MkdirTemp(m.opts.TempDir, "strata-mergeout-*")
	if err != nil {
		return fmt.Errorf("merger: create directory for intermediate containers: %w", err)
	}
	defer os.RemoveAll(tmp)

	dirs := make([]columnar.Source, len(ins))
	drops := make([]*roaring.Bitmap, len(ins))
	for i, in := range ins {
		dirs[i], drops[i] = in.c.Source(), in.drop
	}
	closeInputs(ins) // each level reopens what it reads
	level := 0
	for {
		level++
		m.stats.Passes = level
		if len(dirs) <= p.fanIn {
			return m.level(dirs, drops, output, blockRows, total, true)
		}
		var next []columnar.Source
		var nextDrops []*roaring.Bitmap
		for g := 0; g*p.fanIn < len(dirs); g++ {
			lo, hi := g*p.fanIn, min(len(dirs), (g+1)*p.fanIn)
			if hi-lo == 1 {
				next, nextDrops = append(next, dirs[lo]), append(nextDrops, drops[lo])
				continue
			}
			dst := filepath.Join(tmp, fmt.Sprintf("level%d-%04d", level, g))
			if err := m.level(dirs[lo:hi], drops[lo:hi], dst, blockRows, total, false); err != nil {
				return err
			}
			next, nextDrops = append(next, columnar.DirSource(dst)), append(nextDrops, nil)
		}
		if !slices.ContainsFunc(nextDrops, func(b *roaring.Bitmap) bool { return b != nil }) {
			m.fold.release() // every folded input is read
		}
		// Intermediates of the previous level are no longer needed.
		for _, d := range dirs {
			if dir, ok := d.(columnar.DirSource); ok && filepath.Dir(string(dir)) == tmp && !slices.Contains(next, d) {
				os.RemoveAll(string(dir))
			}
		}
		dirs, drops = next, nextDrops
	}
}

// level merges dirs into dst with a single-level plan under the same budget
// and counters; drops[i], if not nil, are the rows of dirs[i] folded away.
func (m *merge) level(dirs []columnar.Source, drops []*roaring.Bitmap, dst string, blockRows int, total int64, final bool) error {
	ins, err := m.open(dirs)
	if err != nil {
		return err
	}
	defer closeInputs(ins)
	for i := range ins {
		ins[i].drop = drops[i]
	}
	keyIdx, err := ins[0].c.SortKey().Indices(ins[0].c.Schema())
	if err != nil {
		return fmt.Errorf("merger: %w", err)
	}
	rows := keptRows(ins)
	costs := columnCosts(ins, keyIdx, blockRows)
	freezeCost(costs, m.freezeColumn(ins, keyIdx))
	p, err := makePlan(planInput{
		inputs:    len(ins),
		columns:   costs,
		grant:     m.opts.Grant,
		workers:   m.opts.Parallelism,
		rowSource: rowSourceEstimate(rows, len(ins)),
		rows:      rows,
		held:      m.fold.bytes(),
	})
	if err != nil {
		return err
	}
	if p.kind == PlanPasses {
		return fmt.Errorf("%w: a group of %d inputs planned as passes", ErrInternal, len(ins))
	}
	saved := m.opts
	if !final {
		m.opts.ID = filepath.Base(dst)
	}
	defer func() { m.opts = saved }()
	return m.once(ins, dst, p, keyIdx, blockRows, total)
}
