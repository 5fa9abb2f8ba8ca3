package scheduler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/strata-db/strata/messages"
)

// racingKV makes another writer change a key between every Get and the
// write that follows it, race times.
type racingKV struct {
	*MemKV
	race  int
	other func()
}

func (r *racingKV) Update(ctx context.Context, key string, value []byte, last uint64) (uint64, error) {
	if r.race > 0 {
		r.race--
		r.other()
	}
	return r.MemKV.Update(ctx, key, value, last)
}

func TestCatalogCASRetry(t *testing.T) {
	ctx := context.Background()
	kv := &racingKV{MemKV: NewMemKV()}
	c := NewCatalog(kv)
	if _, err := c.Update(ctx, "t", "p", func(st *ProjectionState) error {
		st.Live = refs("a", 2, 10)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// The competing writer registers a container each time it wins.
	other := NewCatalog(kv.MemKV)
	n := 0
	kv.other = func() {
		if _, err := other.Update(ctx, "t", "p", func(st *ProjectionState) error {
			st.Live = append(st.Live, messages.ContainerRef{Table: "t", Projection: "p", ID: fmt.Sprint("x", n)})
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		n++
	}
	kv.race = 3
	calls := 0
	st, err := c.Update(ctx, "t", "p", func(st *ProjectionState) error {
		calls++
		st.Live = st.Live[1:] // retire a0000
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if calls != 4 {
		t.Fatalf("fn applied %d times, want 4 (three conflicts)", calls)
	}
	got, _, _ := c.Get(ctx, "t", "p")
	if len(got.Live) != 4 || got.Live[0].ID != "a0001" || len(st.Live) != 4 {
		t.Fatalf("live after racing writes: %+v; want a0001 and x0..x2, none lost", got.Live)
	}
}

func TestCatalogConflictGivesUp(t *testing.T) {
	ctx := context.Background()
	kv := &racingKV{MemKV: NewMemKV()}
	c := NewCatalog(kv)
	c.Update(ctx, "t", "p", func(*ProjectionState) error { return nil })
	kv.race = 1 << 30
	kv.other = func() { kv.MemKV.Update(ctx, "t/p", []byte(`{"table":"t","projection":"p"}`), kv.MemKV.rev) }
	_, err := c.Update(ctx, "t", "p", func(*ProjectionState) error { return nil })
	if !errors.Is(err, ErrConflict) {
		t.Fatalf("endless conflict: %v, want ErrConflict", err)
	}
}

func TestCatalogCreateRace(t *testing.T) {
	ctx := context.Background()
	kv := NewMemKV()
	c := NewCatalog(kv)
	first := true
	_, err := c.Update(ctx, "t", "p", func(st *ProjectionState) error {
		if first {
			first = false
			// Someone creates the entry after our read found none.
			NewCatalog(kv).Update(ctx, "t", "p", func(st *ProjectionState) error {
				st.Live = refs("z", 1, 1)
				return nil
			})
		}
		st.Live = append(st.Live, refs("a", 1, 1)...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got, _, _ := c.Get(ctx, "t", "p")
	if len(got.Live) != 2 {
		t.Fatalf("live %+v, want both writers' containers", got.Live)
	}
}

func TestCatalogRejectsCorruptEntry(t *testing.T) {
	ctx := context.Background()
	kv := NewMemKV()
	kv.Create(ctx, "t/p", []byte("{not json"))
	if _, _, err := NewCatalog(kv).Get(ctx, "t", "p"); err == nil {
		t.Fatal("corrupt entry accepted")
	}
	kv.Create(ctx, "t/q", []byte(`{"table":"u","projection":"q"}`))
	if _, _, err := NewCatalog(kv).Get(ctx, "t", "q"); err == nil {
		t.Fatal("entry naming another projection accepted")
	}
}

// addMergeout adds a mergeout of every live container through AddJob.
func addMergeout(ctx context.Context, c *Catalog) (*ProjectionState, job, error) {
	return c.AddJob(ctx, "t", "p", "tm", func(st *ProjectionState, seq uint64) (job, error) {
		return &mergeoutJob{messages.MergeoutJob{JobID: fmt.Sprintf("mergeout.t.p.%d", seq), Table: "t", Projection: "p",
			Inputs: append([]messages.ContainerRef(nil), st.Live...), Output: fmt.Sprintf("m%08d", seq)}}, nil
	}, nil)
}

func bucketKeys(t *testing.T, kv KV) []string {
	t.Helper()
	keys, err := kv.Keys(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// TestAddJobLosesRace: when the entry changed between AddJob's read and
// its write, the body it wrote is deleted and the job made again on the
// new state, under the same number.
func TestAddJobLosesRace(t *testing.T) {
	ctx := context.Background()
	kv := &racingKV{MemKV: NewMemKV()}
	c := NewCatalog(kv)
	c.Update(ctx, "t", "p", func(st *ProjectionState) error { st.Live = refs("a", 2, 10); return nil })
	kv.other = func() {
		NewCatalog(kv.MemKV).Update(ctx, "t", "p", func(st *ProjectionState) error {
			st.Live = append(st.Live, messages.ContainerRef{Table: "t", Projection: "p", ID: "late"})
			return nil
		})
	}
	kv.race = 1
	st, j, err := addMergeout(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if j.id() != "mergeout.t.p.1" || len(j.inputs()) != 3 || st.Readers["late"] != 1 || st.NextSeq != 1 {
		t.Fatalf("job %s of %d inputs, state %+v; want job 1 reading the late container too", j.id(), len(j.inputs()), st)
	}
	if got := bucketKeys(t, kv); !slices.Equal(got, []string{"t/p", "t/p/job/1"}) {
		t.Fatalf("bucket holds %v, want the entry and one body", got)
	}
	body, err := c.Job(ctx, "t", "p", &st.Pending[0])
	if err != nil || len(body.inputs()) != 3 {
		t.Fatalf("stored body %+v (%v), want the one made on the new state", body, err)
	}
}

// failingKV fails the writes of the entry "t/p" while failEntry is set, as
// a scheduler that dies (or loses its connection) between two writes.
type failingKV struct {
	*MemKV
	failEntry bool
}

var errDown = errors.New("connection lost")

func (f *failingKV) Update(ctx context.Context, key string, value []byte, last uint64) (uint64, error) {
	if f.failEntry && key == "t/p" {
		return 0, errDown
	}
	return f.MemKV.Update(ctx, key, value, last)
}

// TestCrashBetweenBodyAndEntry: a body whose entry write never happened is
// named by no entry. It is ignored, its number is passed over, and the
// sweep at the next start removes it once the entry's numbers pass it.
func TestCrashBetweenBodyAndEntry(t *testing.T) {
	ctx := context.Background()
	kv := &failingKV{MemKV: NewMemKV()}
	c := NewCatalog(kv)
	c.Update(ctx, "t", "p", func(st *ProjectionState) error { st.Live = refs("a", 2, 10); return nil })
	kv.failEntry = true
	if _, _, err := addMergeout(ctx, c); !errors.Is(err, errDown) {
		t.Fatalf("add job with the entry write failing: %v", err)
	}
	kv.failEntry = false
	st, _, _ := c.Get(ctx, "t", "p")
	if len(st.Pending) != 0 || len(st.readers()) != 0 || st.NextSeq != 0 {
		t.Fatalf("entry after the failed write %+v, want it unchanged", st)
	}
	// Numbered past NextSeq, the body may be a live writer's: kept.
	if swept, err := c.SweepJobs(ctx); err != nil || len(swept) != 0 {
		t.Fatalf("swept %v (%v) while the entry's numbers had not passed the body", swept, err)
	}
	st, j, err := addMergeout(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if j.id() != "mergeout.t.p.2" || st.NextSeq != 2 {
		t.Fatalf("next job %s (next_seq %d), want number 1 passed over", j.id(), st.NextSeq)
	}
	swept, err := c.SweepJobs(ctx)
	if err != nil || !slices.Equal(swept, []string{"t/p/job/1"}) {
		t.Fatalf("swept %v (%v), want the orphaned body of job 1", swept, err)
	}
	if got := bucketKeys(t, kv); !slices.Equal(got, []string{"t/p", "t/p/job/2"}) {
		t.Fatalf("bucket holds %v", got)
	}
	// A body of a projection the catalog does not hold is an orphan too.
	kv.Create(ctx, "gone/p/job/3", []byte(`{}`))
	if swept, _ := c.SweepJobs(ctx); !slices.Equal(swept, []string{"gone/p/job/3"}) {
		t.Fatalf("swept %v, want the body of a forgotten projection", swept)
	}
}

// TestEndedJobBodyDeleted: the body of a job goes after the write that
// ends it; one left by a crash between the two is swept at the next start.
func TestEndedJobBodyDeleted(t *testing.T) {
	h := newHarness(t, Options{Strata: StrataOptions{Capacity: 4}})
	if err := h.load("t", 0, 4, 1000); err != nil {
		t.Fatal(err)
	}
	body, _, err := h.catalog.Get(h.ctx, "t/p/job/1")
	if err != nil {
		t.Fatalf("body of the pending mergeout: %v", err)
	}
	h.finish(h.pub.mergeouts[0], 1)
	if got := bucketKeys(t, h.catalog); !slices.Equal(got, []string{"t/p"}) {
		t.Fatalf("bucket after the mergeout %v, want its body deleted", got)
	}
	h.catalog.Create(h.ctx, "t/p/job/1", body) // as if the delete had not happened
	h.start()
	if got := bucketKeys(t, h.catalog); !slices.Equal(got, []string{"t/p"}) {
		t.Fatalf("bucket after a restart %v, want the ended job's body swept", got)
	}
	if st := h.state("t"); len(st.Live) != 1 || len(st.Pending) != 0 {
		t.Fatalf("state after the restart %+v", st)
	}
}

// TestCatalogTakesNoLock: a catalog request is answered while the
// scheduler holds its lock (settling a job, say): pgwire's lookup before
// every query waited for the previous query's job to be settled.
func TestCatalogTakesNoLock(t *testing.T) {
	h := newHarness(t, Options{Strata: StrataOptions{Capacity: 1000}})
	if err := h.load("t", 0, 2, 1000); err != nil {
		t.Fatal(err)
	}
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	got := make(chan *messages.CatalogReply, 1)
	go func() {
		rep, err := h.s.Catalog(h.ctx, &messages.CatalogRequest{Table: "t"})
		if err != nil {
			t.Error(err)
		}
		got <- rep
	}()
	select {
	case rep := <-got:
		if rep == nil || len(rep.Projections) != 1 || len(rep.Projections[0].Live) != 2 {
			t.Fatalf("catalog of t: %+v, want one projection of 2 live containers", rep)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a catalog request waited for the scheduler's lock")
	}
}
