package scheduler

import (
	"context"
	"errors"
	"fmt"
	"testing"

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
