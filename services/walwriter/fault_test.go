package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-db/strata/internal/natsutil"
	"github.com/strata-db/strata/internal/natsutil/natstest"
	"github.com/strata-db/strata/internal/service"
	"github.com/strata-db/strata/messages"
	"github.com/strata-db/strata/walwriter"
)

// Short leases, so that spending deliveries shows within the test: an event
// NAK'ed once a second, or left un-acked, runs out its deliveries in seconds.
const (
	testAckWait    = 2 * time.Second
	testMaxDeliver = 3
)

// harness is a walwriter (appender, consumer, /healthz) on an embedded NATS.
type harness struct {
	t      *testing.T
	js     jetstream.JetStream
	nc     *nats.Conn
	cons   jetstream.Consumer
	wal    *walwriter.WAL
	walDir string
	a      *appender
	reg    *prometheus.Registry
	http   *httptest.Server
	stop   chan struct{}
	done   chan error
	maxDel atomic.Int64 // max-deliveries advisories seen
	// watched is closed when watchMaxDeliveries has returned.
	watched chan struct{}
}

// startHarness starts the walwriter; with manual set it only watches for
// events out of deliveries, and the test takes events itself.
func startHarness(t *testing.T, opts walwriter.Options, manual ...bool) *harness {
	t.Helper()
	_, nc, js := natstest.Start(t, natsutil.Topology{UpdateAckWait: testAckWait, UpdateMaxDeliver: testMaxDeliver},
		jetstream.WithPublishAsyncMaxPending(4096))
	ctx := context.Background()
	h := &harness{t: t, js: js, nc: nc, walDir: t.TempDir(), stop: make(chan struct{}), done: make(chan error, 1)}
	if _, err := nc.Subscribe(fmt.Sprintf("$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.%s.%s", messages.StreamUpdates, messages.ConsumerWalwriter),
		func(*nats.Msg) { h.maxDel.Add(1) }); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	opts.Logger = log
	m := newMetrics()
	opts.OnSync = m.onSync
	var err error
	if h.wal, err = walwriter.Open(h.walDir, opts); err != nil {
		t.Fatal(err)
	}
	runner := service.NewRunner("walwriter", log)
	h.reg = runner.Registry()
	h.a = &appender{wal: h.wal, rejecter: service.NewRejecter("walwriter", js, log, runner.Registry(), messages.SubjectUpdatesAll), log: log,
		appended: m.appended, failed: m.failed}
	m.register(runner.Registry(), h.wal, h.a)
	runner.AddCheck("wal", h.a.health)
	h.http = httptest.NewServer(runner.Handler())
	t.Cleanup(h.http.Close)
	if h.cons, err = js.Consumer(ctx, messages.StreamUpdates, messages.ConsumerWalwriter); err != nil {
		t.Fatal(err)
	}
	h.watched = make(chan struct{})
	go func() {
		defer close(h.watched)
		if err := h.a.watchMaxDeliveries(h.stop, nc, js); err != nil {
			t.Error(err)
		}
	}()
	if len(manual) > 0 && manual[0] {
		go func() { <-h.stop; h.done <- nil }()
		return h
	}
	go h.a.heartbeat(h.stop, testAckWait/3)
	go func() { h.done <- h.a.consume(h.stop, h.cons, 1024, 20*time.Millisecond) }()
	return h
}

// close stops consuming and closes the WAL.
func (h *harness) close() {
	close(h.stop)
	if err := <-h.done; err != nil {
		h.t.Errorf("consume: %v", err)
	}
	<-h.watched
	if err := h.wal.Close(); err != nil {
		h.t.Errorf("close WAL: %v", err)
	}
}

func (h *harness) healthz() (int, string) {
	resp, err := http.Get(h.http.URL + "/healthz")
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func (h *harness) consumerInfo() *jetstream.ConsumerInfo {
	info, err := h.cons.Info(context.Background())
	if err != nil {
		h.t.Fatal(err)
	}
	return info
}

// walEvents reads the closed WAL back: how many times each event ID is in it.
func walEvents(t *testing.T, dir string) map[string]int {
	t.Helper()
	r, err := walwriter.NewReader(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	seen := map[string]int{}
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return seen
		}
		if err != nil {
			t.Fatal(err)
		}
		if rec.Kind != walwriter.KindCheckpoint {
			seen[rec.EventID]++
		}
	}
}

func deadLetters(t *testing.T, js jetstream.JetStream) []jetstream.Msg {
	t.Helper()
	ctx := context.Background()
	c, err := js.OrderedConsumer(ctx, messages.StreamDeadLetter, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var out []jetstream.Msg
	for {
		batch, err := c.Fetch(100, jetstream.FetchMaxWait(500*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for m := range batch.Messages() {
			out = append(out, m)
			n++
		}
		if n == 0 {
			return out
		}
	}
}

var testColumns = []messages.RowType{messages.RowInt64, messages.RowInt64, messages.RowText}

func publishUpdates(t *testing.T, js jetstream.JetStream, from, n int) {
	t.Helper()
	filler := strings.Repeat("x", 120)
	for i := from; i < from+n; i++ {
		row, _ := messages.EncodeRow(testColumns, []any{int64(i), int64(i), filler})
		ev := &messages.UpdateEvent{EventID: fmt.Sprintf("ev-%d", i), Table: "accounts", Columns: testColumns, Key: fmt.Appendf(nil, "%d", i), NewRow: row}
		data, err := messages.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		for {
			_, err := js.PublishAsync(messages.SubjectUpdates(ev.Table), data)
			if errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
				// A busy machine: wait for the window to drain, then send it again.
				select {
				case <-js.PublishAsyncComplete():
				case <-time.After(time.Minute):
					t.Fatal("publishes not acknowledged")
				}
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(time.Minute):
		t.Fatal("publishes not acknowledged")
	}
}

// budgetDisk is a walwriter.Faults with a byte budget, like a small tmpfs:
// a write past it is cut short with ENOSPC, and so is creating a segment
// (its preallocation) that does not fit.
type budgetDisk struct {
	mu   sync.Mutex
	free int64
}

func (d *budgetDisk) faults(segSize int64) *walwriter.Faults {
	return &walwriter.Faults{
		Write: func(_ string, _ int64, n int) (int, error) {
			d.mu.Lock()
			defer d.mu.Unlock()
			if int64(n) > d.free {
				k := d.free
				d.free = 0
				return int(k), syscall.ENOSPC
			}
			d.free -= int64(n)
			return n, nil
		},
		Create: func(string) error {
			d.mu.Lock()
			defer d.mu.Unlock()
			if d.free < segSize {
				return syscall.ENOSPC
			}
			d.free -= segSize
			return nil
		},
	}
}

func (d *budgetDisk) set(n int64) {
	d.mu.Lock()
	d.free = n
	d.mu.Unlock()
}

// TestFullDiskLosesNothing publishes update events while the WAL's disk is
// full: the walwriter must stop taking events (so none spends its
// deliveries), say so on /healthz, and once space is freed write every
// event exactly once, without a restart.
func TestFullDiskLosesNothing(t *testing.T) {
	const segSize = 1 << 20
	disk := &budgetDisk{}
	disk.set(segSize + 600<<10) // the first segment, and 600KiB of records: a write is cut short
	h := startHarness(t, walwriter.Options{SegmentSize: segSize, RetryBackoff: 200 * time.Millisecond, Faults: disk.faults(segSize)})
	if code, body := h.healthz(); code != http.StatusOK {
		t.Fatalf("/healthz %d before the disk filled: %s", code, body)
	}
	const events = 30000 // about 5MiB of records
	publishUpdates(t, h.js, 0, events)

	deadline := time.Now().Add(time.Minute)
	var code int
	var body string
	for code, body = h.healthz(); code == http.StatusOK; code, body = h.healthz() {
		if time.Now().After(deadline) {
			t.Fatalf("/healthz stayed 200 on a full disk; %v events durable, stats %+v", counterValue(h.a.appended), h.wal.Stats())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "no space left on device") {
		t.Errorf("/healthz on a full disk: %d %q, want 503 with the reason", code, body)
	}
	// Stay full for longer than the deliveries of an event last.
	full := time.Now()
	for time.Since(full) < testMaxDeliver*testAckWait+time.Second {
		if code, body := h.healthz(); code != http.StatusServiceUnavailable {
			t.Fatalf("/healthz %d while the disk is full: %s", code, body)
		}
		time.Sleep(200 * time.Millisecond)
	}
	info := h.consumerInfo()
	t.Logf("disk full for %v: %v events durable, %d pending in the stream, %d taken and not acked, %d redelivered",
		time.Since(full).Round(time.Millisecond), counterValue(h.a.appended), info.NumPending, info.NumAckPending, info.NumRedelivered)
	if info.NumPending == 0 {
		t.Error("every event was taken from the stream while the disk was full")
	}

	disk.set(1 << 40)
	deadline = time.Now().Add(2 * time.Minute)
	for {
		info = h.consumerInfo()
		if info.NumPending == 0 && info.NumAckPending == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after space was freed: %d pending, %d not acked, %v durable", info.NumPending, info.NumAckPending, counterValue(h.a.appended))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code, body := h.healthz(); code != http.StatusOK {
		t.Errorf("/healthz %d after space was freed: %s", code, body)
	}
	st := h.wal.Stats()
	h.close()
	seen := walEvents(t, h.walDir)
	dls := deadLetters(t, h.js)
	t.Logf("published %d, in the WAL %d, dead-lettered %d; write failures %d, recoveries %d, max-deliveries advisories %d",
		events, len(seen), len(dls), st.WriteFailures, st.Recoveries, h.maxDel.Load())
	for i := range events {
		if c := seen[fmt.Sprintf("ev-%d", i)]; c != 1 {
			t.Errorf("event ev-%d is in the WAL %d times", i, c)
			break
		}
	}
	if len(seen) != events || len(dls) != 0 {
		t.Errorf("%d events in the WAL, %d dead letters: want %d and 0", len(seen), len(dls), events)
	}
	if n := h.maxDel.Load(); n != 0 {
		t.Errorf("%d events ran out of deliveries", n)
	}
	if st.WriteFailures == 0 || st.Recoveries == 0 {
		t.Errorf("write failures %d, recoveries %d: the disk never filled", st.WriteFailures, st.Recoveries)
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// TestPermanentBadEventsAreDeadLettered publishes events that can never be
// written (garbage, a row that does not fit its columns, a table whose
// columns conflict with what the WAL knows, an oversized key) among good
// ones: each bad one is dead-lettered with its reason and terminated, each
// good one is in the WAL, and nothing is left pending.
func TestPermanentBadEventsAreDeadLettered(t *testing.T) {
	h := startHarness(t, walwriter.Options{})
	publishUpdates(t, h.js, 0, 100)
	good, _ := messages.EncodeRow(testColumns, []any{int64(1), int64(2), "x"})
	bad := map[string][]byte{"garbage": []byte("\xff\x00not an update event")}
	short, _ := messages.EncodeRow(testColumns[:2], []any{int64(1), int64(2)})
	for name, ev := range map[string]*messages.UpdateEvent{
		"short row":       {EventID: "bad-short", Table: "accounts", Columns: testColumns, Key: []byte("k"), NewRow: short},
		"schema conflict": {EventID: "bad-schema", Table: "accounts", Columns: testColumns[:2], Key: []byte("k"), NewRow: short},
		"oversized key":   {EventID: "bad-key", Table: "accounts", Columns: testColumns, Key: make([]byte, 100<<10), NewRow: good},
	} {
		data, err := messages.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		bad[name] = data
	}
	for _, data := range bad {
		if _, err := h.js.Publish(context.Background(), messages.SubjectUpdates("accounts"), data); err != nil {
			t.Fatal(err)
		}
	}
	publishUpdates(t, h.js, 100, 100)
	deadline := time.Now().Add(time.Minute)
	for {
		info := h.consumerInfo()
		if info.NumPending == 0 && info.NumAckPending == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d pending, %d not acked", info.NumPending, info.NumAckPending)
		}
		time.Sleep(20 * time.Millisecond)
	}
	h.close()
	seen := walEvents(t, h.walDir)
	dls := deadLetters(t, h.js)
	t.Logf("published %d, in the WAL %d, dead-lettered %d", 200+len(bad), len(seen), len(dls))
	if len(seen) != 200 {
		t.Errorf("%d events in the WAL, want 200", len(seen))
	}
	if len(dls) != len(bad) {
		t.Fatalf("%d dead letters, want %d", len(dls), len(bad))
	}
	for _, m := range dls {
		reason := m.Headers().Get(messages.HeaderReason)
		if reason == "" || m.Subject() != messages.SubjectDeadLetter(messages.SubjectUpdates("accounts")) {
			t.Errorf("dead letter on %s with reason %q", m.Subject(), reason)
		}
		t.Logf("dead letter: %s", reason)
	}
	if n := h.maxDel.Load(); n != 0 {
		t.Errorf("%d events ran out of deliveries", n)
	}
}

// TestOutOfDeliveriesIsDeadLettered: an update event that runs out of
// deliveries however that happened (here NAK'ed by hand) is dead-lettered,
// not dropped.
func TestOutOfDeliveriesIsDeadLettered(t *testing.T) {
	h := startHarness(t, walwriter.Options{}, true)
	time.Sleep(100 * time.Millisecond) // the advisory subscription is in place
	publishUpdates(t, h.js, 0, 1)
	for range testMaxDeliver {
		batch, err := h.cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for m := range batch.Messages() {
			_ = m.Nak()
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	var dls []jetstream.Msg
	for len(dls) == 0 && time.Now().Before(deadline) {
		// JetStream announces the event when it would deliver it again.
		if _, err := h.cons.Fetch(1, jetstream.FetchMaxWait(200*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		dls = deadLetters(t, h.js)
	}
	h.close()
	if len(dls) != 1 || !strings.Contains(dls[0].Headers().Get(messages.HeaderReason), "delivered 3 times") {
		t.Fatalf("%d dead letters, want one for the event out of deliveries", len(dls))
	}
	t.Logf("dead letter: %s", dls[0].Headers().Get(messages.HeaderReason))
}
