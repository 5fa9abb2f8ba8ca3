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
// fan-in inputs go into intermediate containers under a temporary
// directory, level after level, until one merge fits; that one writes
// output. Merging consecutive groups keeps the merge stable. Keyed inputs
// are folded where they are first read (an input may wait for a later
// level when its group is itself); the resolution's bitmaps are released
// once every input they filter is read.
//
// The first level's fan-in is p's, planned over the inputs and an
// estimate of the intermediate containers' blocks. Each later level plans
// again over the containers it reads: an intermediate's blocks can be
// larger than any input block was (sorted strings whose lengths follow
// their values gather the long ones into the same blocks), so a level
// may need a smaller fan-in than the first, or fail with a GrantError,
// never merge a group that does not fit.
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
	fanIn := p.fanIn
	for level := 1; ; level++ {
		m.stats.Passes = level
		if level > 1 {
			ins, err := m.open(dirs)
			if err != nil {
				return err
			}
			lp, keyIdx, err := m.planInputs(ins, drops, blockRows)
			if err == nil && lp.kind != PlanPasses {
				err = m.once(ins, output, lp, keyIdx, blockRows, total)
			}
			closeInputs(ins)
			if err != nil || lp.kind != PlanPasses {
				return err
			}
			fanIn = lp.fanIn
		}
		var next []columnar.Source
		var nextDrops []*roaring.Bitmap
		for g := 0; g*fanIn < len(dirs); g++ {
			lo, hi := g*fanIn, min(len(dirs), (g+1)*fanIn)
			if hi-lo == 1 {
				next, nextDrops = append(next, dirs[lo]), append(nextDrops, drops[lo])
				continue
			}
			dst := filepath.Join(tmp, fmt.Sprintf("level%d-%04d", level, g))
			if err := m.group(dirs[lo:hi], drops[lo:hi], dst, blockRows, total); err != nil {
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

// planInputs plans a single-level merge of ins (drops[i], if not nil,
// the rows of ins[i] folded away), or passes when none fits, from their
// manifests, under the merge's grant; it returns their key columns'
// indexes too.
func (m *merge) planInputs(ins []input, drops []*roaring.Bitmap, blockRows int) (plan, []int, error) {
	for i := range ins {
		ins[i].drop = drops[i]
	}
	keyIdx, err := ins[0].c.SortKey().Indices(ins[0].c.Schema())
	if err != nil {
		return plan{}, nil, fmt.Errorf("merger: %w", err)
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
	return p, keyIdx, err
}

// group merges dirs, a group of a level, into the intermediate container
// dst with a single-level plan under the same budget and counters;
// drops[i], if not nil, are the rows of dirs[i] folded away.
func (m *merge) group(dirs []columnar.Source, drops []*roaring.Bitmap, dst string, blockRows int, total int64) error {
	ins, err := m.open(dirs)
	if err != nil {
		return err
	}
	defer closeInputs(ins)
	p, keyIdx, err := m.planInputs(ins, drops, blockRows)
	if err != nil {
		return err
	}
	if p.kind == PlanPasses {
		// A group's costs are at most those of the level its fan-in was
		// planned over (TestPassesGroupsPlanOnce).
		return fmt.Errorf("%w: a group of %d inputs planned as passes", ErrInternal, len(ins))
	}
	saved := m.opts
	m.opts.ID = filepath.Base(dst)
	defer func() { m.opts = saved }()
	return m.once(ins, dst, p, keyIdx, blockRows, total)
}
