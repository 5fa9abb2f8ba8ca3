package main

import (
	"bytes"
	"context"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/strata-db/strata/internal/natsembed"
	"github.com/strata-db/strata/internal/natsutil"
	"github.com/strata-db/strata/internal/natsutil/natstest"
	"github.com/strata-db/strata/messages"
)

// fakeScheduler answers window and mergeout requests as the scheduler
// does, publishing one job for each, and lists every job as running.
func fakeScheduler(t *testing.T) string {
	t.Helper()
	srv, nc, js := natstest.Start(t, natsutil.DefaultTopology())
	fakeSchedulerOn(t, nc, js)
	return srv.ClientURL()
}

// fakeSchedulerOn is fakeScheduler answering on nc (whose subscriptions
// outlive a reconnection).
func fakeSchedulerOn(t *testing.T, nc *nats.Conn, js jetstream.JetStream) {
	t.Helper()
	grant := messages.Grant{Pool: "general", Bytes: 64 << 20}
	reply := func(m *nats.Msg, rep messages.Message) {
		data, err := messages.Marshal(rep)
		if err != nil {
			t.Error(err)
			return
		}
		_ = m.Respond(data)
	}
	publish := func(subject string, job messages.Message) {
		data, err := messages.Marshal(job)
		if err == nil {
			_, err = js.Publish(context.Background(), subject, data)
		}
		if err != nil {
			t.Error(err)
		}
	}
	subscribe := func(subject string, fn func(m *nats.Msg)) {
		if _, err := nc.Subscribe(subject, fn); err != nil {
			t.Fatal(err)
		}
	}
	subscribe(messages.SubjectAPIWindow, func(m *nats.Msg) {
		var req messages.WindowRequest
		if err := messages.Unmarshal(m.Data, &req); err != nil {
			t.Error(err)
			return
		}
		publish(messages.SubjectJobWindow, &messages.WindowJob{JobID: "w-1", Query: req.Query, ResultTable: "t_w", Output: "w-1", Grant: grant,
			Inputs: []messages.ContainerRef{{Table: "t", Projection: "p", ID: "c0000"}}})
		reply(m, &messages.WindowReply{Job: messages.JobRef{JobID: "w-1", Table: "t", Inputs: 1, Output: "w-1", Grant: grant}, ResultTable: "t_w"})
	})
	subscribe(messages.SubjectAPIMergeout, func(m *nats.Msg) {
		g := messages.Grant{Pool: "tm", Bytes: 32 << 20}
		publish(messages.SubjectJobMergeout, &messages.MergeoutJob{JobID: "m-1", Table: "t", Projection: "p", Output: "c0099", Grant: g,
			Inputs: []messages.ContainerRef{{ID: "c0000"}, {ID: "c0001"}}})
		reply(m, &messages.MergeoutReply{Jobs: []messages.JobRef{{JobID: "m-1", Table: "t", Projection: "p", Inputs: 2, Output: "c0099", Grant: g}}})
	})
	subscribe(messages.SubjectAPIOperations, func(m *nats.Msg) {
		var req messages.OperationsRequest
		_ = messages.Unmarshal(m.Data, &req)
		reply(m, &messages.OperationsReply{Operations: []messages.Operation{{JobID: req.JobID, Status: messages.StatusRunning, Grant: grant}}})
	})
}

func TestWaitSaysWhichConsumerWaitsWhenNoWorkerRuns(t *testing.T) {
	url := fakeScheduler(t)
	for _, tc := range []struct {
		name, job, consumer string
		run                 func(context.Context, []string) error
		arg                 string
	}{
		{"window", "w-1", messages.ConsumerWindower, runWindow, "SELECT k0, row_number() OVER (ORDER BY k0) AS rn FROM t"},
		{"mergeout", "m-1", messages.ConsumerMerger, runMergeout, "t"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			stderr = &out
			defer func() { stderr = os.Stderr }()
			start := time.Now()
			err := tc.run(context.Background(), []string{"--nats", url, "--accept-timeout", "200ms", "--timeout", "1s", tc.arg})
			if err == nil || !strings.Contains(err.Error(), "gave up after --timeout 1s") {
				t.Fatalf("err %v, want the --timeout to stop the wait", err)
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("took %s with --timeout 1s", d)
			}
			text := out.String()
			t.Logf("stderr:\n%s", text)
			want := tc.job + `: no worker has accepted it after `
			if n := strings.Count(text, want); n < 2 {
				t.Errorf("%d notices %q, want one every --accept-timeout", n, want)
			}
			for _, w := range []string{
				`Consumer "` + tc.consumer + `" on stream JOBS has pull requests waiting (idle ` + tc.consumer + `s): 0, jobs not yet delivered: 1, delivered and unacknowledged: 0`,
				"no " + tc.consumer + " is connected",
				"Still waiting, up to --timeout 1s",
			} {
				if !strings.Contains(text, w) {
					t.Errorf("stderr lacks %q", w)
				}
			}
		})
	}
}

// TestWaitSaysNATSIsUnreachable stops the NATS server while strata
// mergeout waits for its job: the wait says that NATS cannot be reached,
// where and for how long, instead of nothing (and no job's notice with
// figures it cannot have); once the server is back on the same port and
// store, that it is reachable again, and the job's notices resume.
func TestWaitSaysNATSIsUnreachable(t *testing.T) {
	oldFirst, oldEvery := unreachableFirst, unreachableEvery
	unreachableFirst, unreachableEvery = 300*time.Millisecond, 700*time.Millisecond
	defer func() { unreachableFirst, unreachableEvery = oldFirst, oldEvery }()

	dir := t.TempDir()
	srv := natstest.Server(t, natsembed.Options{DataDir: dir})
	url := srv.ClientURL()
	port, err := strconv.Atoi(url[strings.LastIndex(url, ":")+1:])
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := natsutil.DefaultTopology().Ensure(ctx, js); err != nil {
		t.Fatal(err)
	}
	fakeSchedulerOn(t, nc, js)

	out := &syncBuffer{}
	stderr = out
	defer func() { stderr = os.Stderr }()
	errc := make(chan error, 1)
	mctx, stop := context.WithCancel(context.Background())
	go func() {
		errc <- runMergeout(mctx, []string{"--nats", url, "--accept-timeout", "400ms", "--timeout", "20s", "t"})
	}()
	defer func() {
		stop()
		<-errc
		t.Logf("stderr:\n%s", out)
	}()
	waitFor(t, out, "mergeout m-1: t.p, 2 containers -> c0099")

	srv.Shutdown()
	want := "NATS at " + url + " unreachable for "
	text := waitFor(t, out, want)
	if !strings.Contains(text, "; reconnecting; still waiting for 1 of 1 jobs, up to --timeout 20s") {
		t.Errorf("the notice lacks what the wait does meanwhile:\n%s", text)
	}
	// It says so again while the outage lasts; the notice of a job no
	// worker took, which cannot ask the consumer meanwhile, is left out.
	text = waitFor(t, out, "unreachable for 1s")
	if strings.Contains(text[strings.Index(text, want):], "no worker has accepted it") {
		t.Errorf("a job's notice while NATS is down:\n%s", text)
	}

	natstest.Server(t, natsembed.Options{DataDir: dir, Port: port})
	text = waitFor(t, out, "NATS at "+url+" reachable again; still waiting for 1 of 1 jobs")
	waitForAfter(t, out, len(text), "m-1: no worker has accepted it after ")

	select {
	case err := <-errc:
		t.Fatalf("mergeout ended: %v", err)
	default:
	}
}

// syncBuffer is a bytes.Buffer safe to write from one goroutine and read
// from another.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// waitFor waits up to 15s for out to hold want and returns out's text.
func waitFor(t *testing.T, out *syncBuffer, want string) string {
	t.Helper()
	return waitForAfter(t, out, 0, want)
}

// waitForAfter waits up to 15s for out to hold want after its first from
// bytes and returns out's text.
func waitForAfter(t *testing.T, out *syncBuffer, from int, want string) string {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		text := out.String()
		if strings.Contains(text[from:], want) {
			return text
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 15s stderr lacks %q:\n%s", want, text)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
