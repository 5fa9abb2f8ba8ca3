package scheduler

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/strata-db/strata/messages"
)

// The fixtures are one catalog bucket, as a JSON object of key to value:
// a projection t/p with live, dead and pending containers and jobs of both
// kinds (running, accepted, queued), and a window result table.
// testdata/catalog_v0.json was written by the scheduler before the catalog
// had stored types of its own (format 0); testdata/catalog_v1.json is the
// same state in format 1. STRATA_UPDATE_GOLDEN=1 rewrites catalog_v1.json
// after a deliberate change of the format, which must bump catalogVersion
// and keep reading the older formats.

func at(s int) int64 { return t0.Add(time.Duration(s) * time.Second).UnixNano() }

func fixtureQuery() messages.WindowQuery {
	one := int64(1)
	return messages.WindowQuery{SQL: "SELECT a, row_number() OVER (PARTITION BY b ORDER BY a DESC) AS rn FROM t WHERE a > 1 LIMIT 10", Table: "t",
		Select: []messages.SelectItem{{Alias: "a", Expr: &messages.Expr{Column: "a"}},
			{Alias: "rn", Window: &messages.WindowCall{Func: "row_number", PartitionBy: []messages.Expr{{Column: "b"}},
				OrderBy: []messages.SortItem{{Expr: messages.Expr{Column: "a"}, Desc: true}}}}},
		Where: []messages.Predicate{{Left: messages.Expr{Column: "a"}, Op: ">", Right: &messages.Value{Int: &one}}},
		Limit: 10}
}

func containerRefs(table, projection string, rows, bytes int64, ids ...string) []messages.ContainerRef {
	out := make([]messages.ContainerRef, len(ids))
	for i, id := range ids {
		out[i] = messages.ContainerRef{Table: table, Projection: projection, ID: id, Rows: rows, Bytes: bytes}
	}
	return out
}

// fixture is the fixtures' state: entries by key, and job bodies by key.
func fixture() (map[string]*ProjectionState, map[string]job) {
	general := messages.Grant{Pool: "general", Bytes: 256 << 20, Target: 256 << 20}
	tm := messages.Grant{Pool: "tm", Bytes: 100 << 20, Target: 100 << 20}
	old := containerRefs("t", "p", 100, 1000, "c0000", "c0001", "c0002", "c0003")
	newer := containerRefs("t", "p", 100, 1000, "c0004", "c0005", "c0006", "c0007")
	live := append(containerRefs("t", "p", 400, 4000, "m00000001"), newer...)
	simple := messages.WindowQuery{Table: "t", Select: []messages.SelectItem{{Alias: "a", Expr: &messages.Expr{Column: "a"}}}}
	entries := map[string]*ProjectionState{
		"t/p": {Table: "t", Projection: "p", NextSeq: 6, Live: live, Dead: old,
			Pending: []PendingJob{
				{JobID: "window.t.p.2", Seq: 2, Operation: "window", Granted: true, Grant: general, Created: at(1), GrantedAt: at(1), Worker: "windower-1", Delivery: 1},
				{JobID: "mergeout.t.p.4", Seq: 4, Operation: "mergeout", Granted: true, Grant: tm, Created: at(4), GrantedAt: at(4), Worker: "merger-2", Delivery: 2},
				{JobID: "window.t.p.5", Seq: 5, Operation: "window", Granted: true, Grant: general, Created: at(5), GrantedAt: at(5)},
				{JobID: "window.t.p.6", Seq: 6, Operation: "window", Grant: messages.Grant{Pool: "general"}, Created: at(6)},
			},
			Readers: map[string]int{"c0000": 1, "c0001": 1, "c0002": 1, "c0003": 1, "m00000001": 2,
				"c0004": 3, "c0005": 3, "c0006": 3, "c0007": 3}},
		"t_window_3/result": {Table: "t_window_3", Projection: "result", Live: containerRefs("t_window_3", "result", 400, 2048, "w00000003"),
			Readers: map[string]int{}, ResultOf: "window.t.p.3", Created: at(3)},
	}
	bodies := map[string]job{
		"t/p/job/2": &windowJob{messages.WindowJob{JobID: "window.t.p.2", Query: fixtureQuery(), Inputs: old,
			ResultTable: "t_window_2", Output: "w00000002", Created: at(1)}},
		"t/p/job/4": &mergeoutJob{messages.MergeoutJob{JobID: "mergeout.t.p.4", Table: "t", Projection: "p", Inputs: newer,
			Output: "m00000004", Created: at(4)}},
		"t/p/job/5": &windowJob{messages.WindowJob{JobID: "window.t.p.5", Query: simple, Inputs: live,
			ResultTable: "t_window_5", Output: "w00000005", Created: at(5)}},
		"t/p/job/6": &windowJob{messages.WindowJob{JobID: "window.t.p.6", Query: simple, Inputs: live,
			ResultTable: "t_window_6", Output: "w00000006", Created: at(6)}},
	}
	return entries, bodies
}

// dumpBucket is the fixture form of a bucket's content.
func dumpBucket(t *testing.T, kv *MemKV) []byte {
	t.Helper()
	ctx := context.Background()
	keys, err := kv.Keys(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	bucket := map[string]json.RawMessage{}
	for _, k := range keys {
		v, _, err := kv.Get(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		bucket[k] = v
	}
	data, err := json.MarshalIndent(bucket, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(data, '\n')
}

// loadBucket fills a MemKV from a fixture.
func loadBucket(t *testing.T, path string) *MemKV {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var bucket map[string]json.RawMessage
	if err := json.Unmarshal(data, &bucket); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	kv := NewMemKV()
	keys := make([]string, 0, len(bucket))
	for k := range bucket {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		var compact bytes.Buffer
		if err := json.Compact(&compact, bucket[k]); err != nil {
			t.Fatal(err)
		}
		if _, err := kv.Create(context.Background(), k, compact.Bytes()); err != nil {
			t.Fatal(err)
		}
	}
	return kv
}

// TestCatalogGolden pins format 1: the fixture state encodes to the bytes
// of testdata/catalog_v1.json, and the file decodes to that state.
func TestCatalogGolden(t *testing.T) {
	const path = "testdata/catalog_v1.json"
	ctx := context.Background()
	entries, bodies := fixture()
	kv := NewMemKV()
	for key, st := range entries {
		data, err := encodeEntry(st)
		if err != nil {
			t.Fatal(err)
		}
		kv.Create(ctx, key, data)
	}
	for key, j := range bodies {
		table, projection, seq, ok := parseJobKey(key)
		if !ok {
			t.Fatalf("bad job key %q", key)
		}
		data, err := encodeJob(table, projection, seq, j)
		if err != nil {
			t.Fatal(err)
		}
		kv.Create(ctx, key, data)
	}
	got := dumpBucket(t, kv)
	if os.Getenv("STRATA_UPDATE_GOLDEN") != "" {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden (STRATA_UPDATE_GOLDEN=1 writes it): %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("catalog format changed: the fixture encodes to\n%s\nwant (%s)\n%s", got, path, want)
	}

	// The file decodes to the fixture.
	c := NewCatalog(loadBucket(t, path))
	for key, want := range entries {
		st, _, err := c.Get(ctx, want.Table, want.Projection)
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		if !reflect.DeepEqual(st, want) {
			t.Fatalf("%s decodes to\n%+v\nwant\n%+v", key, st, want)
		}
		for i := range st.Pending {
			p := &st.Pending[i]
			j, err := c.Job(ctx, st.Table, st.Projection, p)
			if err != nil {
				t.Fatalf("%s: %v", p.JobID, err)
			}
			if want := bodies[jobKey(st.Table, st.Projection, p.Seq)]; !reflect.DeepEqual(j, want) {
				t.Fatalf("job %s decodes to\n%+v\nwant\n%+v", p.JobID, j, want)
			}
		}
	}
	// A few values spelled out, as a reader of the file sees them.
	st, _, _ := c.Get(ctx, "t", "p")
	if st.Readers["c0004"] != 3 || st.Readers["c0000"] != 1 || st.Pending[1].Worker != "merger-2" || st.Pending[1].Delivery != 2 ||
		st.Pending[3].Granted || st.NextSeq != 6 || st.Live[0].ID != "m00000001" || st.Live[0].Rows != 400 {
		t.Fatalf("t/p decodes to %+v", st)
	}
	w, err := c.Job(ctx, "t", "p", &st.Pending[0])
	if err != nil {
		t.Fatal(err)
	}
	if subject, m := w.message(st.Pending[0].Grant); subject != messages.SubjectJobWindow ||
		m.(*messages.WindowJob).Query.SQL != fixtureQuery().SQL || m.(*messages.WindowJob).Grant.Bytes != 256<<20 || len(w.inputs()) != 4 {
		t.Fatalf("window job 2 publishes %+v on %s", m, subject)
	}
}

// TestCatalogReadsV0 reads the bucket as the scheduler wrote it before
// format 1 (Go field names as keys, job bodies inside the entry): it
// decodes to the same state, its first write stores it as format 1 (the
// bodies first, under their own keys), and a scheduler started on it
// rewrites it and publishes its running jobs as they were.
func TestCatalogReadsV0(t *testing.T) {
	const v0, v1 = "testdata/catalog_v0.json", "testdata/catalog_v1.json"
	ctx := context.Background()
	entries, bodies := fixture()
	kv := loadBucket(t, v0)
	c := NewCatalog(kv)
	for key, want := range entries {
		st, _, err := c.Get(ctx, want.Table, want.Projection)
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		if !st.legacy {
			t.Fatalf("%s not read as format 0", key)
		}
		got, err := encodeEntry(st)
		if err != nil {
			t.Fatal(err)
		}
		if exp, _ := encodeEntry(want); !bytes.Equal(got, exp) {
			t.Fatalf("%s (format 0) reads as\n%s\nwant\n%s", key, got, exp)
		}
		for i := range st.Pending {
			p := &st.Pending[i]
			j, err := c.Job(ctx, st.Table, st.Projection, p)
			if err != nil {
				t.Fatal(err)
			}
			if want := bodies[jobKey(st.Table, st.Projection, p.Seq)]; !reflect.DeepEqual(j, want) {
				t.Fatalf("job %s (format 0) reads as\n%+v\nwant\n%+v", p.JobID, j, want)
			}
		}
	}
	for key, st := range entries {
		if _, err := c.Update(ctx, st.Table, st.Projection, func(*ProjectionState) error { return nil }); err != nil {
			t.Fatalf("rewrite %s: %v", key, err)
		}
	}
	want, err := os.ReadFile(v1)
	if err != nil {
		t.Fatal(err)
	}
	if got := dumpBucket(t, kv); !bytes.Equal(got, want) {
		t.Fatalf("format 0 rewritten is\n%s\nwant %s", got, v1)
	}

	// A scheduler started on format 0 rewrites it and publishes the three
	// running jobs again, grants included; the queued one stays queued.
	pools := DefaultPools()
	pools[1].MaxConcurrency = 2 // as when the fixture was written
	h := &harness{t: t, ctx: ctx, catalog: loadBucket(t, v0), pools: NewMemKV(), pub: &recorder{}, clock: NewManualClock(t0.Add(time.Minute)), dir: t.TempDir()}
	h.opts = Options{Strata: StrataOptions{Capacity: 4}, Pools: pools, Clock: h.clock, Data: newRootStorage(t, h.dir)}
	h.start()
	if got := dumpBucket(t, h.catalog); !bytes.Equal(got, want) {
		t.Fatalf("scheduler started on format 0 leaves\n%s\nwant %s", got, v1)
	}
	if len(h.pub.mergeouts) != 1 || len(h.pub.windows) != 2 {
		t.Fatalf("published %d mergeouts and %d windows, want 1 and 2", len(h.pub.mergeouts), len(h.pub.windows))
	}
	m := h.pub.mergeouts[0]
	if m.JobID != "mergeout.t.p.4" || m.Grant != entries["t/p"].Pending[1].Grant || len(m.Inputs) != 4 || m.Output != "m00000004" {
		t.Fatalf("mergeout published again as %+v", m)
	}
	w := h.pub.windows[0]
	if w.JobID != "window.t.p.2" || !reflect.DeepEqual(w.Query, fixtureQuery()) || w.Grant.Bytes != 256<<20 || w.ResultTable != "t_window_2" {
		t.Fatalf("window published again as %+v", w)
	}
	if _, pending := h.s.where["window.t.p.6"]; !pending {
		t.Fatal("queued window job forgotten")
	}
	if granted, ok := h.s.adm.Holding("window.t.p.6"); !ok || granted {
		t.Fatalf("queued window job: granted %v, known %v; want queued", granted, ok)
	}
}
