package scheduler

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/strata-db/strata/internal/bytesize"
	"github.com/strata-db/strata/messages"
)

// operationLog is the operations system table: the last keep operations,
// oldest first, indexed by job ID.
type operationLog struct {
	keep  int
	rows  []*messages.Operation
	index map[string]*messages.Operation
}

func newOperationLog(keep int) *operationLog {
	if keep <= 0 {
		keep = 10000
	}
	return &operationLog{keep: keep, index: map[string]*messages.Operation{}}
}

// upsert returns the row of op.JobID, adding op when there is none.
func (l *operationLog) upsert(op messages.Operation) *messages.Operation {
	if row, ok := l.index[op.JobID]; ok {
		return row
	}
	row := &op
	l.rows = append(l.rows, row)
	l.index[op.JobID] = row
	for len(l.rows) > l.keep {
		// Drop the oldest finished row; keep unfinished ones whatever their age.
		drop := -1
		for i, r := range l.rows {
			if r.Status == messages.StatusDone || r.Status == messages.StatusFailed {
				drop = i
				break
			}
		}
		if drop < 0 {
			break
		}
		delete(l.index, l.rows[drop].JobID)
		l.rows = append(l.rows[:drop], l.rows[drop+1:]...)
	}
	return row
}

func (l *operationLog) get(jobID string) *messages.Operation { return l.index[jobID] }

// list returns the matching rows, newest (by creation) first.
func (l *operationLog) list(req *messages.OperationsRequest) []messages.Operation {
	var out []messages.Operation
	for i := len(l.rows) - 1; i >= 0; i-- {
		r := l.rows[i]
		if req.Table != "" && r.Table != req.Table || req.JobID != "" && r.JobID != req.JobID {
			continue
		}
		out = append(out, *r)
	}
	slices.SortStableFunc(out, func(a, b messages.Operation) int { return cmp.Compare(b.Created, a.Created) })
	if req.Limit > 0 && len(out) > req.Limit {
		out = out[:req.Limit]
	}
	return out
}

// recommend fills the pools' memory-constrained figures and, where
// operations outgrew their target, a plain recommendation: the memorysize
// that would have given the largest peak seen its own target.
func (l *operationLog) recommend(pools []messages.PoolStatus) {
	for i := range pools {
		p := &pools[i]
		for _, r := range l.rows {
			if r.Grant.Pool != p.Config.Name {
				continue
			}
			if r.Status == messages.StatusFailed {
				p.Failed++
			}
			if !r.MemoryConstrained {
				continue
			}
			p.Constrained++
			p.LargestPeak = max(p.LargestPeak, r.PeakBytes)
		}
		if p.Constrained == 0 {
			continue
		}
		const mib = 1 << 20
		want := (p.LargestPeak*int64(p.Config.PlannedConcurrency) + mib - 1) / mib * mib
		if want <= p.Config.MemorySize {
			continue // already grown
		}
		p.Recommendation = fmt.Sprintf("grow pool %s to %s (memorysize; now %s): %d operations were memory-constrained, largest peak %s against a target of %s",
			p.Config.Name, bytesize.Format(want), bytesize.Format(p.Config.MemorySize), p.Constrained,
			bytesize.Format(p.LargestPeak), bytesize.Format(p.Target))
	}
}

// applyLog is the applies log: the last keep batches of changes the
// scheduler made live or refused (apply.go), oldest first. Walwriters
// apply every half flush interval per table, so these rows are kept apart
// from the operations table, whose bound they would otherwise fill,
// pushing the jobs out; in memory only, like it.
type applyLog struct {
	keep int
	rows []messages.AppliedBatch // a ring once full: next is the oldest
	next int
}

func newApplyLog(keep int) *applyLog {
	if keep <= 0 {
		keep = 1000
	}
	return &applyLog{keep: keep}
}

func (l *applyLog) add(row messages.AppliedBatch) {
	if len(l.rows) < l.keep {
		l.rows = append(l.rows, row)
		return
	}
	l.rows[l.next] = row
	l.next = (l.next + 1) % l.keep
}

// list returns the rows of req.Table (all when empty), newest first, at
// most req.Limit when set.
func (l *applyLog) list(req *messages.OperationsRequest) []messages.AppliedBatch {
	out := []messages.AppliedBatch{}
	for i := range len(l.rows) {
		r := l.rows[(l.next+len(l.rows)-1-i)%len(l.rows)]
		if req.Table != "" && r.Table != req.Table {
			continue
		}
		out = append(out, r)
		if req.Limit > 0 && len(out) == req.Limit {
			break
		}
	}
	return out
}
