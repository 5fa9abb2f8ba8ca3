package scheduler

import (
	"context"
	"testing"
	"time"

	"github.com/strata-db/strata/messages"
)

// countingKV counts the reads of a catalog.
type countingKV struct {
	*MemKV
	gets int
}

func (c *countingKV) Get(ctx context.Context, key string) ([]byte, uint64, error) {
	c.gets++
	return c.MemKV.Get(ctx, key)
}

// A window job's end reads a few catalog entries, not one per result
// table kept: the oldest past KeepResults is found from the keys and
// the ages read before; the results kept are still the newest.
func TestWindowResultsPruneReadsLittle(t *testing.T) {
	const keep = 30
	h := newHarness(t, Options{Strata: StrataOptions{Capacity: 1000}, KeepResults: keep})
	counting := &countingKV{MemKV: h.catalog}
	s, err := New(h.ctx, counting, h.pools, h.pub, h.opts)
	if err != nil {
		t.Fatal(err)
	}
	h.s = s
	if err := h.load("t", 0, 2, 1000); err != nil {
		t.Fatal(err)
	}
	var results []messages.ContainerRef
	most := 0
	for i := range keep + 20 {
		if _, err := h.s.SubmitWindow(h.ctx, &messages.WindowRequest{Query: messages.WindowQuery{Table: "t",
			Select: []messages.SelectItem{{Alias: "a"}}}}); err != nil {
			t.Fatal(err)
		}
		w := h.pub.windows[i]
		out := messages.ContainerRef{Table: w.ResultTable, Projection: "result", ID: w.Output, Rows: 2}
		h.mkdir(out)
		h.clock.Advance(time.Second)
		counting.gets = 0
		h.event(&messages.JobEvent{JobID: w.JobID, Type: messages.EventDone, Output: &out})
		if i > keep+1 { // past the first prune, which reads every result's age once
			most = max(most, counting.gets)
		}
		results = append(results, out)
	}
	if most > 15 { // 43 when every entry was read
		t.Fatalf("a job's end read %d catalog entries with %d results kept", most, keep)
	}
	for i, r := range results {
		if kept := i >= len(results)-keep; h.exists(r) != kept {
			t.Fatalf("result %d (%s): exists=%v, want %v", i, r.Table, h.exists(r), kept)
		}
	}
}
