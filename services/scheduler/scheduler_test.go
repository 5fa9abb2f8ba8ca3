package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-db/strata/internal/natsutil"
	"github.com/strata-db/strata/internal/natsutil/natstest"
	"github.com/strata-db/strata/internal/service"
	"github.com/strata-db/strata/messages"
	"github.com/strata-db/strata/scheduler"
)

// testBucket is kv, a bucket of js, as the scheduler's KV.
func testBucket(t testing.TB, js jetstream.JetStream, kv jetstream.KeyValue) bucketKV {
	t.Helper()
	b, err := bucketOf(context.Background(), js, kv)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// catalogBucket starts a NATS server and returns the catalog bucket, as
// jetstream's and as the scheduler's KV, with a context for the test.
func catalogBucket(t *testing.T) (context.Context, jetstream.KeyValue, bucketKV) {
	t.Helper()
	_, js := startNATS(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	b, err := js.KeyValue(ctx, messages.BucketCatalog)
	if err != nil {
		t.Fatal(err)
	}
	return ctx, b, testBucket(t, js, b)
}

func startNATS(t *testing.T) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	_, nc, js := natstest.Start(t, natsutil.Topology{})
	return nc, js
}

func TestBucketKVSemantics(t *testing.T) {
	_, js := startNATS(t)
	ctx := context.Background()
	b, err := js.KeyValue(ctx, messages.BucketCatalog)
	if err != nil {
		t.Fatal(err)
	}
	kv := testBucket(t, js, b)
	if keys, err := kv.Keys(ctx, ""); err != nil || len(keys) != 0 {
		t.Fatalf("empty bucket keys = %v, %v", keys, err)
	}
	if _, _, err := kv.Get(ctx, "t/p"); !errors.Is(err, scheduler.ErrKeyNotFound) {
		t.Fatalf("missing key: %v", err)
	}
	rev, err := kv.Create(ctx, "t/p", []byte("1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Create(ctx, "t/p", []byte("2")); !errors.Is(err, scheduler.ErrConflict) {
		t.Fatalf("second create: %v, want ErrConflict", err)
	}
	rev2, err := kv.Update(ctx, "t/p", []byte("3"), rev)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Update(ctx, "t/p", []byte("4"), rev); !errors.Is(err, scheduler.ErrConflict) {
		t.Fatalf("stale update: %v, want ErrConflict", err)
	}
	v, r, err := kv.Get(ctx, "t/p")
	if err != nil || string(v) != "3" || r != rev2 {
		t.Fatalf("get = %q, %d, %v", v, r, err)
	}
	kv.Create(ctx, "u/p", []byte("x"))
	if keys, _ := kv.Keys(ctx, "t/"); len(keys) != 1 || keys[0] != "t/p" {
		t.Fatalf("prefix keys %v", keys)
	}
	if err := kv.Delete(ctx, "t/p"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := kv.Get(ctx, "t/p"); !errors.Is(err, scheduler.ErrKeyNotFound) {
		t.Fatalf("deleted key: %v", err)
	}
}

// TestServiceRoundTrip runs the scheduler's wiring against a real server:
// a load registered over the API starts a mergeout on JOBS, a done event on
// EVENTS swaps the catalog, and the system tables answer.
func TestServiceRoundTrip(t *testing.T) {
	nc, js := startNATS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	log := slog.New(slog.DiscardHandler)
	catalogKV, _ := js.KeyValue(ctx, messages.BucketCatalog)
	poolsKV, _ := js.KeyValue(ctx, messages.BucketPools)
	s, err := scheduler.New(ctx, testBucket(t, js, catalogKV), testBucket(t, js, poolsKV), jsPublisher{js}, scheduler.Options{
		Strata: scheduler.StrataOptions{Capacity: 4}, Logger: log,
	})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	api := newAPIServer(s, log, reg)
	sub, err := nc.Subscribe(messages.SubjectAPIAll, api.handle)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	cons, err := js.Consumer(ctx, messages.StreamEvents, messages.ConsumerScheduler)
	if err != nil {
		t.Fatal(err)
	}
	loop := newEventLoop(s, cons, service.NewRejecter("scheduler", js, log, reg), log, reg)
	loopCtx, stopLoop := context.WithCancel(ctx)
	loopDone := make(chan error, 1)
	go func() { loopDone <- loop.run(loopCtx) }()
	defer func() { stopLoop(); <-loopDone }()

	request := func(subject string, req, rep messages.Message) {
		t.Helper()
		data, err := messages.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		msg, err := nc.RequestWithContext(ctx, subject, data)
		if err != nil {
			t.Fatal(err)
		}
		if err := messages.Unmarshal(msg.Data, rep); err != nil {
			t.Fatal(err)
		}
	}
	reg4 := &messages.RegisterRequest{Table: "t", Projection: "p"}
	for i := range 4 {
		reg4.Containers = append(reg4.Containers, messages.ContainerRef{Table: "t", Projection: "p", ID: fmt.Sprintf("c%04d", i), Rows: 10, Bytes: 100})
	}
	var rr messages.RegisterReply
	request(messages.SubjectAPIRegister, reg4, &rr)
	if rr.Error != nil || rr.Live != 4 {
		t.Fatalf("register reply %+v", rr)
	}
	// A malformed request gets a reply that says why.
	msg, err := nc.RequestWithContext(ctx, messages.SubjectAPIRegister, []byte("junk"))
	if err != nil {
		t.Fatal(err)
	}
	var bad messages.RegisterReply
	if err := messages.Unmarshal(msg.Data, &bad); err != nil || bad.Error == nil || bad.Error.Code != "invalid" {
		t.Fatalf("malformed request reply %+v, %v", bad, err)
	}

	// The mergeout job is on JOBS, deduplicated by job ID.
	jobs, err := js.Consumer(ctx, messages.StreamJobs, messages.ConsumerMerger)
	if err != nil {
		t.Fatal(err)
	}
	m, err := jobs.Next(jetstream.FetchMaxWait(10 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var job messages.MergeoutJob
	if err := messages.Unmarshal(m.Data(), &job); err != nil {
		t.Fatal(err)
	}
	if m.Headers().Get(jetstream.MsgIDHeader) != job.JobID || len(job.Inputs) != 4 || job.Grant.Pool != "tm" {
		t.Fatalf("job %+v, msg id %q", job, m.Headers().Get(jetstream.MsgIDHeader))
	}
	m.Ack()

	out := messages.ContainerRef{Table: "t", Projection: "p", ID: job.Output, Rows: 40, Bytes: 400}
	accepted := &messages.JobEvent{JobID: job.JobID, Operation: messages.OperationMergeout, Type: messages.EventAccepted, Worker: "w1", Delivery: 1}
	if _, err := natsutil.Publish(ctx, js, accepted.Type.Subject(), "", accepted); err != nil {
		t.Fatal(err)
	}
	done := &messages.JobEvent{JobID: job.JobID, Operation: messages.OperationMergeout, Type: messages.EventDone, Worker: "w1", Output: &out, RowsTotal: 40, PeakBytes: 200 << 20}
	if _, err := natsutil.Publish(ctx, js, done.Type.Subject(), "", done); err != nil {
		t.Fatal(err)
	}
	// Junk on EVENTS is dead-lettered, not fatal.
	if _, err := js.Publish(ctx, messages.SubjectEventDone, []byte("junk")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		var cr messages.CatalogReply
		request(messages.SubjectAPICatalog, &messages.CatalogRequest{Table: "t"}, &cr)
		if len(cr.Projections) == 1 && len(cr.Projections[0].Live) == 1 && cr.Projections[0].Live[0].ID == job.Output {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("catalog never swapped: %+v", cr)
		}
		time.Sleep(50 * time.Millisecond)
	}
	var ops messages.OperationsReply
	request(messages.SubjectAPIOperations, &messages.OperationsRequest{}, &ops)
	if len(ops.Operations) != 1 || ops.Operations[0].Status != messages.StatusDone || !ops.Operations[0].MemoryConstrained {
		t.Fatalf("operations %+v", ops)
	}
	var pools messages.PoolsReply
	request(messages.SubjectAPIPools, &messages.PoolsRequest{}, &pools)
	if len(pools.Pools) != 2 || pools.Pools[1].Recommendation == "" {
		t.Fatalf("pools %+v", pools)
	}
	mem := int64(1 << 30)
	request(messages.SubjectAPIPoolAlter, &messages.AlterPoolRequest{Name: "tm", MemorySize: &mem}, &pools)
	if pools.Error != nil || pools.Pools[1].Config.MemorySize != 1<<30 {
		t.Fatalf("alter %+v", pools)
	}
	request(messages.SubjectAPIPoolAlter, &messages.AlterPoolRequest{Name: "nope", MemorySize: &mem}, &pools)
	if pools.Error == nil || pools.Error.Code != "not_found" {
		t.Fatalf("alter unknown pool: %+v", pools.Error)
	}
	// The stored pool survives: read it from the bucket.
	e, err := poolsKV.Get(ctx, "tm")
	if err != nil || len(e.Value()) == 0 {
		t.Fatalf("pool tm not stored: %v", err)
	}
	// A restarted scheduler gets the finished job's row back from the streams.
	s2, err := scheduler.New(ctx, testBucket(t, js, catalogKV), testBucket(t, js, poolsKV), jsPublisher{js}, scheduler.Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	if err := restoreHistory(ctx, js, s2, 100, log); err != nil {
		t.Fatal(err)
	}
	restored, _ := s2.Operations(&messages.OperationsRequest{})
	if len(restored.Operations) != 1 || restored.Operations[0].JobID != job.JobID || restored.Operations[0].Status != messages.StatusDone ||
		restored.Operations[0].Worker != "w1" || restored.Operations[0].Rows != 40 {
		t.Fatalf("restored operations %+v", restored.Operations)
	}
	// And its acquisitions row, from the job as published and its events.
	acqs, _ := s2.Acquisitions(&messages.AcquisitionsRequest{})
	if len(acqs.Acquisitions) != 1 || acqs.Acquisitions[0].JobID != job.JobID || acqs.Acquisitions[0].Pool != "tm" ||
		acqs.Acquisitions[0].Status != messages.AcquisitionReleased || acqs.Acquisitions[0].Grant != job.Grant.Bytes ||
		acqs.Acquisitions[0].Peak != 200<<20 || acqs.Acquisitions[0].Acquired == 0 {
		t.Fatalf("restored acquisitions %+v (job's grant %+v)", acqs.Acquisitions, job.Grant)
	}
	// The junk event went to the dead-letter stream.
	dl, err := js.Stream(ctx, "DEADLETTER")
	if err != nil {
		t.Fatal(err)
	}
	for {
		info, err := dl.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Msgs >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("malformed event not dead-lettered")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestHistoryReadInPartNotApplied: with JOBS read and EVENTS unreadable,
// restoreHistory fails and adds no row: a job read without its events
// would show as running for good.
func TestHistoryReadInPartNotApplied(t *testing.T) {
	_, js := startNATS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	job := &messages.MergeoutJob{JobID: "mergeout.t.p.1", Table: "t", Projection: "p", Output: "m1",
		Inputs: []messages.ContainerRef{{Table: "t", Projection: "p", ID: "c1"}, {Table: "t", Projection: "p", ID: "c2"}}}
	data, err := messages.Marshal(job)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, messages.SubjectJobMergeout, data); err != nil {
		t.Fatal(err)
	}
	if err := js.DeleteStream(ctx, messages.StreamEvents); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	catalogKV, _ := js.KeyValue(ctx, messages.BucketCatalog)
	poolsKV, _ := js.KeyValue(ctx, messages.BucketPools)
	s, err := scheduler.New(ctx, testBucket(t, js, catalogKV), testBucket(t, js, poolsKV), jsPublisher{js}, scheduler.Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	if err := restoreHistory(ctx, js, s, 100, log); err == nil {
		t.Fatal("history restored without the EVENTS stream")
	}
	if ops, _ := s.Operations(&messages.OperationsRequest{}); len(ops.Operations) != 0 {
		t.Fatalf("a history read in part was applied: %+v", ops.Operations)
	}
}

// TestPurgeDeletes: the delete markers the catalog's job bodies leave are
// purged, and with them the bodies' history.
func TestPurgeDeletes(t *testing.T) {
	ctx, b, kv := catalogBucket(t)
	kv.Create(ctx, "t/p", []byte("{}"))
	kv.Create(ctx, "t/p/job/1", []byte("{}"))
	if err := kv.Delete(ctx, "t/p/job/1"); err != nil {
		t.Fatal(err)
	}
	if h, err := b.History(ctx, "t/p/job/1"); err != nil || len(h) != 2 {
		t.Fatalf("history of a deleted body: %d entries, %v; want the body and its marker", len(h), err)
	}
	run, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- purgeDeletes(kv, 10*time.Millisecond, 0, slog.New(slog.DiscardHandler))(run) }()
	defer func() { stop(); <-done }()
	for {
		if _, err := b.History(ctx, "t/p/job/1"); errors.Is(err, jetstream.ErrKeyNotFound) {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("delete marker of t/p/job/1 never purged")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, _, err := kv.Get(ctx, "t/p"); err != nil {
		t.Fatalf("a live key went with the markers: %v", err)
	}
}

// TestPurgeMarkersKeepKeyWrittenAgain: a key deleted, its marker listed,
// then written again before the purge keeps its new value. jetstream's
// PurgeDeletes purged the whole subject: a table dropped and loaded again
// while a purge pass ran lost its catalog entry.
func TestPurgeMarkersKeepKeyWrittenAgain(t *testing.T) {
	ctx, b, kv := catalogBucket(t)
	for _, k := range []string{"t/p", "u/p"} {
		if _, err := kv.Create(ctx, k, []byte("old")); err != nil {
			t.Fatal(err)
		}
		if err := kv.Delete(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	markers, err := deleteMarkers(ctx, b, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(markers) != 2 {
		t.Fatalf("markers %+v, want those of t/p and u/p", markers)
	}
	if _, err := kv.Create(ctx, "t/p", []byte("new")); err != nil {
		t.Fatal(err)
	}
	if err := purgeMarkers(ctx, kv, markers); err != nil {
		t.Fatal(err)
	}
	if v, _, err := kv.Get(ctx, "t/p"); err != nil || string(v) != "new" {
		t.Fatalf("t/p written again before the purge: %q, %v; want its new value", v, err)
	}
	if h, err := b.History(ctx, "u/p"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("u/p after the purge: %d entries, %v; want none", len(h), err)
	}
	if keys, err := kv.Keys(ctx, ""); err != nil || !slices.Equal(keys, []string{"t/p"}) {
		t.Fatalf("keys %v, %v; want [t/p]", keys, err)
	}
}

// TestPurgeMarkersSpareYoungOnes: a marker younger than the age given
// stays.
func TestPurgeMarkersSpareYoungOnes(t *testing.T) {
	ctx, b, kv := catalogBucket(t)
	kv.Create(ctx, "t/p/job/1", []byte("{}"))
	if err := kv.Delete(ctx, "t/p/job/1"); err != nil {
		t.Fatal(err)
	}
	if err := purgeDeletesOnce(ctx, kv, time.Hour); err != nil {
		t.Fatal(err)
	}
	if h, err := b.History(ctx, "t/p/job/1"); err != nil || len(h) != 2 {
		t.Fatalf("history of a body deleted just now: %d entries, %v; want the body and its marker", len(h), err)
	}
}

// vanishingMarkerKV answers the first Create of a key as jetstream's
// Create does when the key's delete marker is purged between its two
// writes: the key exists, though it holds no value.
type vanishingMarkerKV struct {
	jetstream.KeyValue
	raced bool
}

func (v *vanishingMarkerKV) Create(ctx context.Context, key string, value []byte, opts ...jetstream.KVCreateOpt) (uint64, error) {
	if !v.raced {
		v.raced = true
		return 0, jetstream.ErrKeyExists
	}
	return v.KeyValue.Create(ctx, key, value, opts...)
}

// TestCreateOverPurgedMarker: a Create that lost its key's marker to a
// purge pass creates the key, not a conflict.
func TestCreateOverPurgedMarker(t *testing.T) {
	ctx, b, _ := catalogBucket(t)
	kv := bucketKV{kv: &vanishingMarkerKV{KeyValue: b}}
	if _, err := kv.Create(ctx, "t/p", []byte("v")); err != nil {
		t.Fatalf("create over a purged marker: %v", err)
	}
	if _, err := kv.Create(ctx, "t/p", []byte("w")); !errors.Is(err, scheduler.ErrConflict) {
		t.Fatalf("create of a key that holds a value: %v, want a conflict", err)
	}
}

// TestKeysWhileWritten: a key written again and again while the bucket is
// listed is in every listing. jetstream's KeyValue.Keys missed it in most
// listings: it stops once the entries it started with are read, and the
// key's new entry comes after.
func TestKeysWhileWritten(t *testing.T) {
	ctx, b, kv := catalogBucket(t)
	for i := range 20 {
		if _, err := kv.Create(ctx, fmt.Sprintf("r%d/result", i), []byte("{}")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := kv.Create(ctx, "t/p", []byte("0")); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	written := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				written <- nil
				return
			default:
			}
			// What a job's end writes: the entry, its body's delete.
			if _, err := b.Put(ctx, "t/p", []byte(fmt.Sprint(i))); err != nil {
				written <- err
				return
			}
			if _, err := b.Put(ctx, "t/p/job/1", []byte("{}")); err != nil {
				written <- err
				return
			}
			if err := b.Delete(ctx, "t/p/job/1"); err != nil {
				written <- err
				return
			}
		}
	}()
	missed := 0
	const listings = 200
	for range listings {
		keys, err := kv.Keys(ctx, "t/")
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(keys, "t/p") {
			missed++
		}
	}
	close(stop)
	if err := <-written; err != nil {
		t.Fatal(err)
	}
	if missed > 0 {
		t.Fatalf("t/p, written during the listings, missing from %d of %d", missed, listings)
	}
}
