package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/strata-db/strata/internal/natsutil"
	"github.com/strata-db/strata/internal/natsutil/natstest"
	"github.com/strata-db/strata/messages"
)

// fakeScheduler answers window and mergeout requests as the scheduler
// does, publishing one job for each, and lists every job as running.
func fakeScheduler(t *testing.T) string {
	t.Helper()
	srv, nc, js := natstest.Start(t, natsutil.DefaultTopology())
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
	return srv.ClientURL()
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
