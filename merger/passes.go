package merger

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/strata-db/strata/columnar"
)

// passes merges inputs too many to merge at once: consecutive groups of
// p.fanIn inputs go into intermediate containers under a temporary
// directory, level after level, until one merge fits; that one writes
// output. Merging consecutive groups keeps the merge stable.
func (m *merge) passes(ins []input, output string, p plan, blockRows int, total int64) error {
	tmp, err := os.MkdirTemp(m.opts.TempDir, "strata-mergeout-*")
	if err != nil {
		return fmt.Errorf("merger: create directory for intermediate containers: %w", err)
	}
	defer os.RemoveAll(tmp)

	dirs := make([]columnar.Source, len(ins))
	for i, in := range ins {
		dirs[i] = in.c.Source()
	}
	closeInputs(ins) // each level reopens what it reads
	level := 0
	for {
		level++
		m.stats.Passes = level
		if len(dirs) <= p.fanIn {
			return m.level(dirs, output, blockRows, total, true)
		}
		var next []columnar.Source
		for g := 0; g*p.fanIn < len(dirs); g++ {
			group := dirs[g*p.fanIn : min(len(dirs), (g+1)*p.fanIn)]
			if len(group) == 1 {
				next = append(next, group[0])
				continue
			}
			dst := filepath.Join(tmp, fmt.Sprintf("level%d-%04d", level, g))
			if err := m.level(group, dst, blockRows, total, false); err != nil {
				return err
			}
			next = append(next, columnar.DirSource(dst))
		}
		// Intermediates of the previous level are no longer needed.
		for _, d := range dirs {
			if dir, ok := d.(columnar.DirSource); ok && filepath.Dir(string(dir)) == tmp && !slices.Contains(next, d) {
				os.RemoveAll(string(dir))
			}
		}
		dirs = next
	}
}

// level merges dirs into dst with a single-level plan under the same budget
// and counters.
func (m *merge) level(dirs []columnar.Source, dst string, blockRows int, total int64, final bool) error {
	ins, err := m.open(dirs)
	if err != nil {
		return err
	}
	defer closeInputs(ins)
	keyIdx, err := ins[0].c.SortKey().Indices(ins[0].c.Schema())
	if err != nil {
		return fmt.Errorf("merger: %w", err)
	}
	var rows int64
	for _, in := range ins {
		rows += in.c.Rows()
	}
	p, err := makePlan(planInput{
		inputs:    len(ins),
		columns:   columnCosts(ins, keyIdx, blockRows),
		grant:     m.opts.Grant,
		workers:   m.opts.Parallelism,
		rowSource: rowSourceEstimate(rows, len(ins)),
		rows:      rows,
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
