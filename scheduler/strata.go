package scheduler

import (
	"cmp"
	"math"
	"slices"
	"sort"

	"github.com/strata-db/strata/messages"
)

// StrataOptions configures strata selection, Vertica's Tuple Mover
// algorithm: a projection's containers are grouped into strata by size,
// geometrically, and a stratum is merged when it holds Capacity containers.
// Merging Capacity containers of stratum s makes one container of about
// Ratio times their size, which lands in stratum s+1, so each row is merged
// about log_Ratio(table size / BaseBytes) times in its life.
type StrataOptions struct {
	// Capacity is the number of containers a stratum holds before it is
	// merged. Default 32.
	Capacity int
	// BaseBytes is the upper size bound of stratum 0. Default 1 MiB.
	BaseBytes int64
	// Ratio is the size ratio between consecutive strata. Default Capacity.
	Ratio float64
	// MaxContainers is the most live containers a projection may have; a
	// load that would pass it is refused. Default 1024.
	MaxContainers int
	// MaxInputs bounds the inputs of one requested ("now") mergeout.
	// Default MaxContainers.
	MaxInputs int
	// PurgeFraction is the purge rule of keyed tables (SelectPurge): a
	// table whose changes since its last full mergeout reach this share of
	// its rows is merged whole, whatever its strata. Default 0.5;
	// negative turns purging off.
	PurgeFraction float64
}

func (o StrataOptions) withDefaults() StrataOptions {
	if o.Capacity <= 1 {
		o.Capacity = 32
	}
	if o.BaseBytes <= 0 {
		o.BaseBytes = 1 << 20
	}
	if o.Ratio <= 1 {
		o.Ratio = float64(o.Capacity)
	}
	if o.MaxContainers <= 0 {
		o.MaxContainers = 1024
	}
	if o.MaxInputs <= 1 {
		o.MaxInputs = o.MaxContainers
	}
	if o.PurgeFraction == 0 {
		o.PurgeFraction = DefaultPurgeFraction
	}
	return o
}

// DefaultPurgeFraction is StrataOptions.PurgeFraction's default.
const DefaultPurgeFraction = 0.5

// Stratum returns the stratum of a container of the given on-disk size:
// 0 below BaseBytes, then s for sizes in [Base*Ratio^(s-1), Base*Ratio^s).
func (o StrataOptions) Stratum(bytes int64) int {
	o = o.withDefaults()
	if bytes < o.BaseBytes {
		return 0
	}
	s := int(math.Floor(math.Log(float64(bytes)/float64(o.BaseBytes))/math.Log(o.Ratio))) + 1
	// Guard float rounding at exact boundaries.
	for s > 1 && float64(bytes) < float64(o.BaseBytes)*math.Pow(o.Ratio, float64(s-1)) {
		s--
	}
	return s
}

// Selection is one mergeout strata selection chose.
type Selection struct {
	Stratum int
	Inputs  []messages.ContainerRef
}

// SelectStrata picks the mergeouts a projection needs: for each stratum
// holding at least Capacity containers that no running job reads, merge
// Capacity of them (the smallest first, so the output stays in the next
// stratum), repeatedly. busy names the containers running jobs read; they
// are never chosen, so two mergeouts never share an input.
func SelectStrata(live []messages.ContainerRef, busy map[string]bool, opts StrataOptions) []Selection {
	opts = opts.withDefaults()
	byStratum := map[int][]messages.ContainerRef{}
	for _, c := range live {
		if busy[c.ID] {
			continue
		}
		s := opts.Stratum(c.Bytes)
		byStratum[s] = append(byStratum[s], c)
	}
	strata := make([]int, 0, len(byStratum))
	for s := range byStratum {
		strata = append(strata, s)
	}
	sort.Ints(strata)
	var out []Selection
	for _, s := range strata {
		cs := byStratum[s]
		slices.SortFunc(cs, smallestFirst)
		for len(cs) >= opts.Capacity {
			out = append(out, Selection{Stratum: s, Inputs: append([]messages.ContainerRef(nil), cs[:opts.Capacity]...)})
			cs = cs[opts.Capacity:]
		}
	}
	return out
}

// SelectAll picks a requested mergeout: every live container no running job
// reads, up to MaxInputs of the smallest, when there are at least two.
func SelectAll(live []messages.ContainerRef, busy map[string]bool, opts StrataOptions) (Selection, bool) {
	opts = opts.withDefaults()
	var cs []messages.ContainerRef
	for _, c := range live {
		if !busy[c.ID] {
			cs = append(cs, c)
		}
	}
	if len(cs) < 2 {
		return Selection{}, false
	}
	slices.SortFunc(cs, smallestFirst)
	if len(cs) > opts.MaxInputs {
		cs = cs[:opts.MaxInputs]
	}
	var total int64
	for _, c := range cs {
		total += c.Bytes
	}
	return Selection{Stratum: opts.Stratum(total), Inputs: cs}, true
}

// smallestFirst orders containers by size, then ID.
func smallestFirst(a, b messages.ContainerRef) int {
	return cmp.Or(cmp.Compare(a.Bytes, b.Bytes), cmp.Compare(a.ID, b.ID))
}

// SelectPurge is the purge of a keyed table, Vertica's purge of deleted
// rows: strata selection merges containers by size only, so the rows a
// table's changes superseded stay in its large old containers until their
// stratum fills, and every query resolves them again. changed is the
// entry's ChangedRows, the rows of changes since its last full mergeout
// (less those folded away since): each supersedes at most one older row
// (an insert of a new key, none), so changed/rows bounds the share of the
// live containers' rows a full fold would drop. When it reaches
// PurgeFraction and no running job reads any container, every live
// container is merged: a full fold, which drops the superseded rows and
// the delete markers and freezes the versions. It costs nothing to decide
// (two sums over the entry) and, after the fold, changed starts again
// from 0, so a table is purged again only once as many changes again have
// come.
func SelectPurge(live []messages.ContainerRef, busy map[string]bool, changed int64, opts StrataOptions) (Selection, bool) {
	opts = opts.withDefaults()
	if opts.PurgeFraction < 0 || changed <= 0 || len(live) < 2 {
		return Selection{}, false
	}
	var rows int64
	for _, c := range live {
		if busy[c.ID] {
			return Selection{}, false // a full fold only: wait for the job
		}
		rows += c.Rows
	}
	if rows <= 0 || float64(changed) < opts.PurgeFraction*float64(rows) {
		return Selection{}, false
	}
	return SelectAll(live, busy, opts)
}
