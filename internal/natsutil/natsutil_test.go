package natsutil_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/strata-db/strata/messages"

	"github.com/strata-db/strata/internal/natsembed"
	"github.com/strata-db/strata/internal/natsutil"
	"github.com/strata-db/strata/internal/natsutil/natstest"
)

func startTestServer(t *testing.T) (*natsembed.Server, jetstream.JetStream) {
	t.Helper()
	srv := natstest.Server(t, natsembed.Options{})
	nc, err := natsutil.Connect(natsutil.ConnOptions{URLs: []string{srv.ClientURL()}, Name: "natsutil-test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return srv, js
}

func TestEnsureStreamsIsIdempotent(t *testing.T) {
	_, js := startTestServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := 0; i < 2; i++ {
		if err := natsutil.EnsureStreams(ctx, js); err != nil {
			t.Fatalf("run %d: %v", i+1, err)
		}
	}
	for _, cfg := range natsutil.DefaultTopology().Streams() {
		s, err := js.Stream(ctx, cfg.Name)
		if err != nil {
			t.Fatalf("stream %s: %v", cfg.Name, err)
		}
		info, err := s.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.Config.Retention != jetstream.LimitsPolicy {
			t.Errorf("stream %s: retention %v, want limits", cfg.Name, info.Config.Retention)
		}
		if info.Config.Duplicates != 10*time.Minute {
			t.Errorf("stream %s: duplicate window %v", cfg.Name, info.Config.Duplicates)
		}
	}
	for _, c := range natsutil.DefaultTopology().Consumers() {
		cons, err := js.Consumer(ctx, c.Stream, c.Config.Durable)
		if err != nil {
			t.Fatalf("consumer %s: %v", c.Config.Durable, err)
		}
		if got := cons.CachedInfo().Config.FilterSubject; got != c.Config.FilterSubject {
			t.Errorf("consumer %s filters %q, want %q", c.Config.Durable, got, c.Config.FilterSubject)
		}
	}
	for _, b := range []string{messages.BucketCatalog, messages.BucketPools} {
		kv, err := js.KeyValue(ctx, b)
		if err != nil {
			t.Fatalf("bucket %s: %v", b, err)
		}
		// Reads go through the leader: no replica answers with an older
		// entry than the last acknowledged write.
		s, err := js.Stream(ctx, "KV_"+b)
		if err != nil {
			t.Fatal(err)
		}
		if cfg := s.CachedInfo().Config; cfg.AllowDirect || cfg.MirrorDirect {
			t.Errorf("bucket %s allows direct gets", b)
		}
		if _, err := kv.Put(ctx, "k", []byte("v")); err != nil {
			t.Fatal(err)
		}
		if e, err := kv.Get(ctx, "k"); err != nil || string(e.Value()) != "v" {
			t.Errorf("bucket %s: get after put: %v", b, err)
		}
	}
}

func TestPublishDeduplicatesByMsgID(t *testing.T) {
	_, js := startTestServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := natsutil.EnsureStreams(ctx, js); err != nil {
		t.Fatal(err)
	}
	ev := &messages.JobEvent{JobID: "j1", Operation: "mergeout", Type: messages.EventDone, Worker: "w"}
	for i := 0; i < 3; i++ {
		ack, err := natsutil.Publish(ctx, js, messages.SubjectEventDone, "j1-done", ev)
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 && !ack.Duplicate {
			t.Errorf("publish %d not reported as duplicate", i+1)
		}
	}
	s, _ := js.Stream(ctx, messages.StreamEvents)
	info, _ := s.Info(ctx)
	if info.State.Msgs != 1 {
		t.Errorf("EVENTS holds %d messages, want 1", info.State.Msgs)
	}
}

func TestPublishDeadLetterKeepsReason(t *testing.T) {
	_, js := startTestServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := natsutil.EnsureStreams(ctx, js); err != nil {
		t.Fatal(err)
	}
	dl := natsutil.DeadLetter{Subject: messages.SubjectJobMergeout, Data: []byte("garbage"), Reason: "not msgpack", Service: "merger", StreamSeq: 7, Delivery: 1}
	for i := 0; i < 2; i++ { // the same rejected message twice: one dead letter
		if err := natsutil.PublishDeadLetter(ctx, js, dl); err != nil {
			t.Fatal(err)
		}
	}
	s, _ := js.Stream(ctx, messages.StreamDeadLetter)
	msg, err := s.GetLastMsgForSubject(ctx, messages.SubjectDeadLetter(messages.SubjectJobMergeout))
	if err != nil {
		t.Fatal(err)
	}
	if got := msg.Header.Get(messages.HeaderReason); got != "not msgpack" {
		t.Errorf("reason %q", got)
	}
	if got := msg.Header.Get(messages.HeaderStreamSeq); got != "7" {
		t.Errorf("stream seq %q", got)
	}
	if string(msg.Data) != "garbage" {
		t.Errorf("payload %q", msg.Data)
	}
	info, _ := s.Info(ctx)
	if info.State.Msgs != 1 {
		t.Errorf("DEADLETTER holds %d messages, want 1", info.State.Msgs)
	}
}

func TestSplitURLs(t *testing.T) {
	got := natsutil.SplitURLs(" nats://a:4222, ,nats://b:4222,")
	if len(got) != 2 || got[0] != "nats://a:4222" || got[1] != "nats://b:4222" {
		t.Errorf("SplitURLs = %q", got)
	}
}

func TestConnectRejectsHalfTLSPair(t *testing.T) {
	if _, err := natsutil.Connect(natsutil.ConnOptions{TLSCert: "cert.pem"}); err == nil {
		t.Error("Connect with a certificate and no key succeeded")
	}
}

func TestRecordAndReplayStream(t *testing.T) {
	_, js := startTestServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := natsutil.EnsureStreams(ctx, js); err != nil {
		t.Fatal(err)
	}
	for i, id := range []string{"a", "b", "c"} {
		j := &messages.MergeoutJob{JobID: id, Table: "t", Projection: "p", Inputs: []messages.ContainerRef{{ID: "c1"}}, Output: "m" + id, Grant: messages.Grant{Bytes: int64(i + 1)}}
		if _, err := natsutil.Publish(ctx, js, messages.SubjectJobMergeout, "job-"+id, j); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	n, err := natsutil.RecordStream(ctx, js, messages.StreamJobs, &buf)
	if err != nil || n != 3 {
		t.Fatalf("RecordStream = %d, %v", n, err)
	}
	msgs, err := natsutil.ReadRecording(bytes.NewReader(buf.Bytes()))
	if err != nil || len(msgs) != 3 || msgs[1].MsgID != "job-b" {
		t.Fatalf("ReadRecording = %d messages, %v", len(msgs), err)
	}

	_, fresh := startTestServer(t)
	if err := natsutil.EnsureStreams(ctx, fresh); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ { // twice: deduplicated by msg id
		if err := natsutil.Replay(ctx, fresh, msgs, nil); err != nil {
			t.Fatal(err)
		}
	}
	var again bytes.Buffer
	if n, err := natsutil.RecordStream(ctx, fresh, messages.StreamJobs, &again); err != nil || n != 3 {
		t.Fatalf("record replayed stream = %d, %v", n, err)
	}
	replayed, _ := natsutil.ReadRecording(&again)
	for i := range msgs {
		if !bytes.Equal(msgs[i].Data, replayed[i].Data) || msgs[i].Subject != replayed[i].Subject {
			t.Errorf("message %d differs after replay", i)
		}
	}
	if _, err := natsutil.ReadRecording(strings.NewReader(`{"format":"other"}`)); err == nil {
		t.Error("foreign file accepted as a recording")
	}
}

func TestCreateMissingStreamsKeepsConfiguration(t *testing.T) {
	_, js := startTestServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	custom := natsutil.DefaultTopology()
	custom.DuplicateWindow = time.Minute
	if err := custom.Ensure(ctx, js); err != nil {
		t.Fatal(err)
	}
	if err := natsutil.DefaultTopology().CreateMissingStreams(ctx, js); err != nil {
		t.Fatal(err)
	}
	s, _ := js.Stream(ctx, messages.StreamJobs)
	info, _ := s.Info(ctx)
	if info.Config.Duplicates != time.Minute {
		t.Errorf("existing stream reconfigured: duplicate window %v", info.Config.Duplicates)
	}
}
