package main

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/strata-db/strata/internal/natsutil"
	"github.com/strata-db/strata/internal/natsutil/natstest"
	"github.com/strata-db/strata/messages"
)

// TestCallSendsAgain: a window request whose reply is lost is sent again
// with the same request ID; a request no scheduler receives is sent again
// until one answers; one that is not resendable is not.
func TestCallSendsAgain(t *testing.T) {
	srv, nc, _ := natstest.Start(t, natsutil.DefaultTopology())
	client := &apiClient{nc: nc, timeout: 3 * time.Second, denied: make(chan error, 1)}
	var mu sync.Mutex
	var ids []string
	sub, err := nc.Subscribe(messages.SubjectAPIWindow, func(m *nats.Msg) {
		req := new(messages.WindowRequest)
		if err := messages.Unmarshal(m.Data, req); err != nil {
			t.Error(err)
			return
		}
		mu.Lock()
		ids = append(ids, req.RequestID)
		first := len(ids) == 1
		mu.Unlock()
		if first {
			return // the reply lost
		}
		data, _ := messages.Marshal(&messages.WindowReply{Job: messages.JobRef{JobID: "window.t.p.1"}, ResultTable: "t_window_1"})
		_ = m.Respond(data)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	req := &messages.WindowRequest{RequestID: newRequestID(), Query: messages.WindowQuery{Table: "t",
		Select: []messages.SelectItem{{Alias: "a", Expr: &messages.Expr{Column: "a"}}}}}
	var rep messages.WindowReply
	if err := client.call(context.Background(), messages.SubjectAPIWindow, req, &rep); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if rep.Job.JobID != "window.t.p.1" || len(ids) != 2 || ids[0] != req.RequestID || ids[1] != req.RequestID {
		t.Fatalf("reply %+v after requests with IDs %q (sent %q)", rep, ids, req.RequestID)
	}
	mu.Unlock()

	// No scheduler yet: the request goes again until one subscribes.
	go func() {
		time.Sleep(500 * time.Millisecond)
		nc2, err := nats.Connect(srv.ClientURL())
		if err != nil {
			t.Error(err)
			return
		}
		t.Cleanup(nc2.Close)
		_, _ = nc2.Subscribe(messages.SubjectAPIPools, func(m *nats.Msg) {
			data, _ := messages.Marshal(&messages.PoolsReply{})
			_ = m.Respond(data)
		})
	}()
	if err := client.call(context.Background(), messages.SubjectAPIPools, &messages.PoolsRequest{}, &messages.PoolsReply{}); err != nil {
		t.Fatalf("pools request while the scheduler comes up: %v", err)
	}

	// A pool creation is not sent again after a timeout: it might be done.
	var creates atomic.Int32
	sub2, err := nc.Subscribe(messages.SubjectAPIPoolCreate, func(*nats.Msg) { creates.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	defer sub2.Unsubscribe()
	client.timeout = time.Second
	err = client.call(context.Background(), messages.SubjectAPIPoolCreate, &messages.CreatePoolRequest{}, &messages.PoolsReply{})
	if err == nil || !strings.Contains(err.Error(), "deadline") || creates.Load() != 1 {
		t.Fatalf("pool create with no reply: %v after %d requests", err, creates.Load())
	}
}
