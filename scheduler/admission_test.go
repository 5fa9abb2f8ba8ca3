package scheduler

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/strata-db/strata/messages"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func testPool(name string, mem, maxMem int64, planned, maxConc int) messages.PoolConfig {
	return messages.PoolConfig{Name: name, MemorySize: mem, MaxMemorySize: maxMem, PlannedConcurrency: planned,
		MaxConcurrency: maxConc, QueueTimeout: int64(time.Minute)}
}

func newTestAdmission(t *testing.T, pools ...messages.PoolConfig) *Admission {
	t.Helper()
	a, err := NewAdmission(pools, 100)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func mustAcquire(t *testing.T, a *Admission, job, pool string, want int64) (messages.Grant, bool) {
	t.Helper()
	g, q, err := a.Acquire(Request{JobID: job, Pool: pool, Want: want}, t0)
	if err != nil {
		t.Fatal(err)
	}
	return g, q
}

func TestAdmissionTargetGrant(t *testing.T) {
	a := newTestAdmission(t, DefaultPools()...)
	g, queued := mustAcquire(t, a, "j1", "tm", 0)
	if queued || g.Bytes != 100<<20 || g.Target != 100<<20 || g.Pool != "tm" {
		t.Fatalf("first tm grant = %+v queued=%v, want 100MiB target", g, queued)
	}
	mustAcquire(t, a, "j2", "tm", 0)
	if _, queued := mustAcquire(t, a, "j3", "tm", 0); !queued {
		t.Fatal("third job admitted into a 200MiB pool of 100MiB targets")
	}
	st := a.Status()[1]
	if st.Config.Name != "tm" || st.InUse != 200<<20 || st.Running != 2 || st.Queued != 1 || st.Borrowed != 0 {
		t.Fatalf("tm status %+v", st)
	}
	admitted := a.Release("j1", 50<<20, t0.Add(time.Second))
	if len(admitted) != 1 || admitted[0].JobID != "j3" {
		t.Fatalf("release admitted %+v, want j3", admitted)
	}
	acq := a.Acquisitions("tm", 0)
	if acq[2].JobID != "j1" || acq[2].Status != messages.AcquisitionReleased || acq[2].Peak != 50<<20 {
		t.Fatalf("j1 acquisition %+v", acq[2])
	}
}

func TestAdmissionBorrowing(t *testing.T) {
	// memorysize 100, max 250, target 50: the third and later grants borrow.
	a := newTestAdmission(t, testPool("p", 100, 250, 2, 0))
	for i := range 5 {
		g, q := mustAcquire(t, a, fmt.Sprint("j", i), "p", 0)
		if q || g.Bytes != 50 {
			t.Fatalf("job %d: %+v queued=%v", i, g, q)
		}
	}
	if _, q := mustAcquire(t, a, "j5", "p", 0); !q {
		t.Fatal("admitted past maxmemorysize")
	}
	st := a.Status()[0]
	if st.InUse != 250 || st.Borrowed != 150 {
		t.Fatalf("status %+v, want 250 in use, 150 borrowed", st)
	}
	acq := a.Acquisitions("p", 0)
	if acq[1].JobID != "j4" || acq[1].Borrowed != 50 || acq[4].Borrowed != 0 {
		t.Fatalf("borrowed per acquisition: %+v", acq)
	}
}

func TestAdmissionWantBorrowsWhenFree(t *testing.T) {
	// memorysize 100 (two targets of 50), max 300: 200 can be borrowed.
	a := newTestAdmission(t, testPool("p", 100, 300, 2, 0))
	g, _ := mustAcquire(t, a, "big", "p", 1000)
	if g.Bytes != 250 || g.Target != 50 {
		t.Fatalf("grant %+v, want the target plus the 200 above memorysize", g)
	}
	// The other planned share is still there for a job at its target...
	if g, q := mustAcquire(t, a, "next", "p", 1000); q || g.Bytes != 50 {
		t.Fatalf("second job %+v queued=%v, want its 50-byte target", g, q)
	}
	// ...and then the pool is full.
	if _, q := mustAcquire(t, a, "third", "p", 0); !q {
		t.Fatal("admitted with nothing free")
	}
	// Without borrowable memory a job gets its target whatever it wants.
	b := newTestAdmission(t, testPool("q", 100, 100, 2, 0))
	if g, _ := mustAcquire(t, b, "big", "q", 1000); g.Bytes != 50 {
		t.Fatalf("grant %+v in a pool with maxmemorysize = memorysize", g)
	}
}

func TestAdmissionOrder(t *testing.T) {
	// One slot: admission order shows the queue order.
	a := newTestAdmission(t, testPool("p", 100, 100, 1, 0))
	mustAcquire(t, a, "running", "p", 0)
	mustAcquire(t, a, "a", "p", 0)
	mustAcquire(t, a, "b", "p", 0)
	// A priority change reorders only later arrivals; raise it and add c.
	cfg, _ := a.Pool("p")
	cfg.Priority = 5
	if _, err := a.AlterPool(cfg, t0); err != nil {
		t.Fatal(err)
	}
	mustAcquire(t, a, "c", "p", 0)
	var order []string
	next := "running"
	for range 3 {
		adm := a.Release(next, 0, t0)
		if len(adm) != 1 {
			t.Fatalf("release of %s admitted %v", next, adm)
		}
		next = adm[0].JobID
		order = append(order, next)
	}
	if got := strings.Join(order, ","); got != "c,a,b" {
		t.Fatalf("admission order %s, want c (higher priority) then a, b (FIFO)", got)
	}
}

func TestAdmissionMaxConcurrency(t *testing.T) {
	a := newTestAdmission(t, testPool("p", 1000, 1000, 10, 2))
	mustAcquire(t, a, "a", "p", 0)
	mustAcquire(t, a, "b", "p", 0)
	if _, q := mustAcquire(t, a, "c", "p", 0); !q {
		t.Fatal("maxconcurrency 2 admitted a third job")
	}
}

func TestAdmissionQueueTimeout(t *testing.T) {
	a := newTestAdmission(t, testPool("p", 100, 100, 1, 0))
	mustAcquire(t, a, "a", "p", 0)
	mustAcquire(t, a, "b", "p", 0)
	if out := a.Expire(t0.Add(59 * time.Second)); len(out) != 0 {
		t.Fatalf("expired early: %+v", out)
	}
	out := a.Expire(t0.Add(time.Minute))
	if len(out) != 1 || out[0].JobID != "b" || !strings.Contains(out[0].Reason, "queued 1m0s in pool p") {
		t.Fatalf("expired %+v", out)
	}
	if adm := a.Release("a", 0, t0.Add(time.Minute)); len(adm) != 0 {
		t.Fatalf("timed-out job admitted: %+v", adm)
	}
	if st := a.Status()[0]; st.InUse != 0 || st.Queued != 0 || st.Running != 0 {
		t.Fatalf("status after all gone: %+v", st)
	}
	if acq := a.Acquisitions("p", 1); acq[0].Status != messages.AcquisitionTimedOut {
		t.Fatalf("acquisition %+v", acq[0])
	}
}

func TestAdmissionRedeliveredJobCountedOnce(t *testing.T) {
	a := newTestAdmission(t, testPool("p", 100, 100, 2, 0))
	g1, _ := mustAcquire(t, a, "a", "p", 0)
	g2, q := mustAcquire(t, a, "a", "p", 0)
	if q || g1 != g2 {
		t.Fatalf("second acquire %+v queued=%v, want the same grant", g2, q)
	}
	if st := a.Status()[0]; st.InUse != 50 || st.Running != 1 {
		t.Fatalf("status %+v", st)
	}
	a.Release("a", 0, t0)
	a.Release("a", 0, t0) // duplicate done event
	if st := a.Status()[0]; st.InUse != 0 || st.Running != 0 {
		t.Fatalf("double release: %+v", st)
	}
}

func TestAdmissionErrors(t *testing.T) {
	a := newTestAdmission(t, DefaultPools()...)
	if _, _, err := a.Acquire(Request{JobID: "x", Pool: "nope"}, t0); !errors.Is(err, ErrUnknownPool) {
		t.Fatalf("unknown pool: %v", err)
	}
	if err := a.CreatePool(DefaultPools()[0]); !errors.Is(err, ErrPoolExists) {
		t.Fatalf("duplicate pool: %v", err)
	}
	if err := a.CreatePool(messages.PoolConfig{Name: "bad"}); err == nil {
		t.Fatal("invalid pool accepted")
	}
}

func TestAdmissionShrinkWhileRunning(t *testing.T) {
	a := newTestAdmission(t, testPool("p", 200, 200, 2, 0))
	mustAcquire(t, a, "a", "p", 0)
	mustAcquire(t, a, "b", "p", 0)
	mustAcquire(t, a, "c", "p", 0)
	if _, err := a.AlterPool(testPool("p", 100, 100, 1, 0), t0); err != nil {
		t.Fatal(err)
	}
	// 200 in use of a new max of 100: c waits until both are gone.
	if adm := a.Release("a", 0, t0); len(adm) != 0 {
		t.Fatalf("admitted over the shrunk pool: %+v", adm)
	}
	adm := a.Release("b", 0, t0)
	if len(adm) != 1 || adm[0].Grant.Bytes != 100 {
		t.Fatalf("after shrink: %+v", adm)
	}
}

// TestAdmissionProperty drives random acquire, release, fail, timeout,
// redelivery and pool changes, and checks after every step that a pool never
// holds more than its maximum (except what it held before shrinking) nor
// more running jobs than maxconcurrency, that the accounting equals the sum
// of the grants held, and that once every job is gone nothing is held.
func TestAdmissionProperty(t *testing.T) {
	for seed := range uint64(50) {
		rng := rand.New(rand.NewPCG(seed, 7))
		a := newTestAdmission(t, testPool("p", 1000, 1500, 4, 5), testPool("q", 300, 300, 3, 0))
		now := t0
		held := map[string]int64{} // job -> granted bytes, per our own bookkeeping
		known := map[string]bool{} // jobs acquired and not yet settled
		jobPool := map[string]string{}
		next := 0
		grant := func(adm []Admitted) {
			for _, x := range adm {
				if _, dup := held[x.JobID]; dup {
					t.Fatalf("seed %d: %s granted twice", seed, x.JobID)
				}
				held[x.JobID] = x.Grant.Bytes
			}
		}
		for step := range 400 {
			before := map[string]bool{}
			for job := range held {
				before[job] = true
			}
			now = now.Add(time.Duration(rng.IntN(5000)) * time.Millisecond)
			switch op := rng.IntN(10); {
			case op < 4: // acquire
				job := fmt.Sprint("j", next)
				next++
				pool := []string{"p", "q"}[rng.IntN(2)]
				g, q, err := a.Acquire(Request{JobID: job, Pool: pool, Want: int64(rng.IntN(600))}, now)
				if err != nil {
					t.Fatal(err)
				}
				known[job], jobPool[job] = true, pool
				if !q {
					held[job] = g.Bytes
				}
			case op < 7: // release (done or failed), possibly a job still queued
				for job := range known {
					grant(a.Release(job, int64(rng.IntN(500)), now))
					delete(known, job)
					delete(held, job)
					break
				}
			case op < 8: // redelivery: ask again for a held job
				for job := range held {
					g, q, err := a.Acquire(Request{JobID: job, Pool: jobPool[job]}, now)
					if err != nil || q || g.Bytes != held[job] {
						t.Fatalf("seed %d: redelivered %s: %+v %v %v", seed, job, g, q, err)
					}
					break
				}
			case op < 9: // timeouts
				for _, x := range a.Expire(now) {
					if _, ok := held[x.JobID]; ok {
						t.Fatalf("seed %d: running job %s timed out", seed, x.JobID)
					}
					delete(known, x.JobID)
				}
			default: // grow or shrink a pool
				mem := int64(200 + rng.IntN(1500))
				grant(mustAlter(t, a, testPool("p", mem, mem+int64(rng.IntN(500)), 1+rng.IntN(5), rng.IntN(6)), now))
			}
			where := fmt.Sprintf("seed %d step %d", seed, step)
			checkAccounting(t, a, held, jobPool, where)
			// A step that admitted a job left its pool within maxmemorysize.
			for job := range held {
				if before[job] {
					continue
				}
				p := a.pools[jobPool[job]]
				if p.inUse > p.cfg.MaxMemorySize {
					t.Fatalf("%s: admitting %s put pool %s at %d bytes, over its max %d", where, job, p.cfg.Name, p.inUse, p.cfg.MaxMemorySize)
				}
				if p.cfg.MaxConcurrency > 0 && p.running > p.cfg.MaxConcurrency {
					t.Fatalf("%s: admitting %s put pool %s at %d running, over maxconcurrency %d", where, job, p.cfg.Name, p.running, p.cfg.MaxConcurrency)
				}
			}
		}
		for job := range known {
			grant(a.Release(job, 0, now))
			delete(known, job)
			delete(held, job)
		}
		// Anything admitted by the last releases must be released too.
		for len(held) > 0 {
			for job := range held {
				grant(a.Release(job, 0, now))
				delete(held, job)
			}
		}
		for _, st := range a.Status() {
			if st.InUse != 0 || st.Running != 0 || st.Queued != 0 {
				t.Fatalf("seed %d: leaked: %+v", seed, st)
			}
		}
	}
}

func mustAlter(t *testing.T, a *Admission, cfg messages.PoolConfig, now time.Time) []Admitted {
	t.Helper()
	adm, err := a.AlterPool(cfg, now)
	if err != nil {
		t.Fatal(err)
	}
	return adm
}

func checkAccounting(t *testing.T, a *Admission, held map[string]int64, jobPool map[string]string, where string) {
	t.Helper()
	sum := map[string]int64{}
	count := map[string]int{}
	for job, b := range held {
		sum[jobPool[job]] += b
		count[jobPool[job]]++
	}
	for _, st := range a.Status() {
		name := st.Config.Name
		if st.InUse != sum[name] || st.Running != count[name] {
			t.Fatalf("%s: pool %s accounts %d bytes / %d jobs, grants held sum to %d / %d", where, name, st.InUse, st.Running, sum[name], count[name])
		}
		if st.Queued > 0 && st.InUse+st.Target <= st.Config.MaxMemorySize &&
			(st.Config.MaxConcurrency == 0 || st.Running < st.Config.MaxConcurrency) {
			t.Fatalf("%s: pool %s has room (%d in use, target %d, max %d) yet %d queued", where, name, st.InUse, st.Target, st.Config.MaxMemorySize, st.Queued)
		}
	}
}
