package apiclient

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/strata-db/strata/internal/natsembed"
	"github.com/strata-db/strata/internal/natsutil"
	"github.com/strata-db/strata/internal/natsutil/natstest"
	"github.com/strata-db/strata/messages"
)

// TestCallSendsAgain: a window request whose reply is lost is sent again
// with the same request ID; a request no scheduler receives is sent again
// until one answers; one that is not resendable is not.
func TestCallSendsAgain(t *testing.T) {
	srv, nc, _ := natstest.Start(t, natsutil.DefaultTopology())
	client := &Client{NC: nc, Timeout: 3 * time.Second}
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
	req := &messages.WindowRequest{RequestID: NewRequestID(), Query: messages.WindowQuery{Table: "t",
		Select: []messages.SelectItem{{Alias: "a", Expr: &messages.Expr{Column: "a"}}}}}
	var rep messages.WindowReply
	if err := client.Call(context.Background(), messages.SubjectAPIWindow, req, &rep); err != nil {
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
	if err := client.Call(context.Background(), messages.SubjectAPIPools, &messages.PoolsRequest{}, &messages.PoolsReply{}); err != nil {
		t.Fatalf("pools request while the scheduler comes up: %v", err)
	}

}

// TestSettleCall: a change whose reply does not come is sent again with
// the same request ID until an answer comes, to any of its sends; an
// internal error is asked again; no answer at all is an outcome unknown,
// and no scheduler at all is a request not received.
func TestSettleCall(t *testing.T) {
	_, nc, _ := natstest.Start(t, natsutil.DefaultTopology())
	client := &Client{NC: nc, Timeout: 300 * time.Millisecond, Settle: 20 * time.Second}
	var out syncBuilder
	client.Notices = &out
	// subscribe plays the scheduler on subject, calling fn with each
	// request's number (from 1); it returns the requests' bytes.
	subscribe := func(t *testing.T, subject string, fn func(n int, m *nats.Msg)) *[]string {
		var mu sync.Mutex
		var sent []string
		sub, err := nc.Subscribe(subject, func(m *nats.Msg) {
			mu.Lock()
			sent = append(sent, string(m.Data))
			n := len(sent)
			mu.Unlock()
			fn(n, m)
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sub.Unsubscribe() })
		return &sent
	}
	reply := func(m *nats.Msg, rep messages.Message) {
		data, _ := messages.Marshal(rep)
		_ = m.Respond(data)
	}
	req := &messages.RegisterRequest{Table: "t", Projection: "p", RequestID: NewRequestID(),
		Containers: []messages.ContainerRef{{Table: "t", Projection: "p", ID: "c0000"}}}

	t.Run("late reply to the first send", func(t *testing.T) {
		sent := subscribe(t, messages.SubjectAPIRegister, func(n int, m *nats.Msg) {
			if n == 1 { // answered only after the client has sent it again
				go func() { time.Sleep(2 * time.Second); reply(m, &messages.RegisterReply{Live: 7}) }()
			}
		})
		var rep messages.RegisterReply
		if err := client.Call(context.Background(), messages.SubjectAPIRegister, req, &rep); err != nil || rep.Live != 7 {
			t.Fatalf("reply %+v, %v", rep, err)
		}
		for i, data := range *sent {
			var got messages.RegisterRequest
			if err := messages.Unmarshal([]byte(data), &got); err != nil || got.RequestID != req.RequestID {
				t.Fatalf("send %d: request ID %q, %v; want %q", i, got.RequestID, err, req.RequestID)
			}
		}
		if len(*sent) < 2 {
			t.Fatalf("sent %d times, want at least twice", len(*sent))
		}
		if !strings.Contains(out.String(), "no answer yet to strata.api.register (request "+req.RequestID) {
			t.Fatalf("no notice while waiting: %q", out.String())
		}
	})

	t.Run("internal error asked again", func(t *testing.T) {
		subscribe(t, messages.SubjectAPIDropContainers, func(n int, m *nats.Msg) {
			if n == 1 {
				reply(m, &messages.DropContainersReply{Error: &messages.APIError{Code: messages.ErrCodeInternal, Message: "catalog: write: timeout"}})
				return
			}
			reply(m, &messages.DropContainersReply{Live: 3})
		})
		var rep messages.DropContainersReply
		drop := &messages.DropContainersRequest{Table: "t", Projection: "p", IDs: []string{"c1"}, RequestID: NewRequestID()}
		if err := client.Call(context.Background(), messages.SubjectAPIDropContainers, drop, &rep); err != nil || rep.Live != 3 || rep.Error != nil {
			t.Fatalf("reply %+v, %v", rep, err)
		}
	})

	t.Run("a refusal is an answer", func(t *testing.T) {
		sent := subscribe(t, messages.SubjectAPIPoolCreate, func(_ int, m *nats.Msg) {
			reply(m, &messages.PoolsReply{Error: &messages.APIError{Code: "exists", Message: "pool exists"}})
		})
		var rep messages.PoolsReply
		err := client.Call(context.Background(), messages.SubjectAPIPoolCreate, &messages.CreatePoolRequest{RequestID: "p1"}, &rep)
		if err != nil || rep.Error == nil || Refusal(rep.Error) == nil || len(*sent) != 1 {
			t.Fatalf("reply %+v, %v after %d sends", rep, err, len(*sent))
		}
	})

	t.Run("no answer", func(t *testing.T) {
		sent := subscribe(t, messages.SubjectAPIMergeout, func(int, *nats.Msg) {})
		c := *client
		c.Settle = 2 * time.Second
		err := c.Call(context.Background(), messages.SubjectAPIMergeout, &messages.MergeoutRequest{Table: "t", RequestID: "m1"}, &messages.MergeoutReply{})
		var unknown *OutcomeUnknownError
		if !errors.As(err, &unknown) || unknown.RequestID != "m1" || unknown.Sent < 2 || Refusal(err) != nil || errors.Is(err, ErrNotReceived) {
			t.Fatalf("no answer: %v", err)
		}
		if len(*sent) != unknown.Sent {
			t.Fatalf("error says %d sends, the scheduler saw %d", unknown.Sent, len(*sent))
		}
	})

	t.Run("no scheduler", func(t *testing.T) {
		c := *client
		c.Settle = time.Second
		err := c.Call(context.Background(), messages.SubjectAPIWindow, &messages.WindowRequest{RequestID: "w1"}, &messages.WindowReply{})
		if !errors.Is(err, ErrNotReceived) {
			t.Fatalf("no scheduler: %v", err)
		}
	})
}

// TestSettleCallWithRolePermissions: the scheduler answers through
// allow_responses, which lets a responder publish once to the reply
// subject of each request it received. Every send of a change used to
// share one reply subject, so two sends answered together (the second
// waiting for the first's registration) counted as one request with two
// responses: both were refused, and the client asked until a third send.
// Each send now has a reply subject of its own.
func TestSettleCallWithRolePermissions(t *testing.T) {
	passwords := map[string]string{}
	for _, role := range []string{natsutil.RoleScheduler, natsutil.RoleCLIAdmin} {
		passwords[role] = "pw-" + role
	}
	srv := natstest.Server(t, natsembed.Options{DataDir: t.TempDir(), Passwords: passwords})
	connect := func(role string) *nats.Conn {
		nc, err := nats.Connect(srv.ClientURL(), nats.UserInfo(role, passwords[role]), nats.CustomInboxPrefix(natsutil.InboxPrefix(role)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
	sched, cli := connect(natsutil.RoleScheduler), connect(natsutil.RoleCLIAdmin)
	var mu sync.Mutex
	var held []*nats.Msg
	sub, err := sched.Subscribe(messages.SubjectAPIRegister, func(m *nats.Msg) {
		mu.Lock()
		defer mu.Unlock()
		held = append(held, m)
		if len(held) < 2 {
			return
		}
		// The second send has arrived: answer both, as a registration
		// that the first send started answers every send waiting for it.
		data, _ := messages.Marshal(&messages.RegisterReply{Live: 4})
		for _, h := range held {
			if err := h.Respond(data); err != nil {
				t.Error(err)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := sched.Flush(); err != nil {
		t.Fatal(err)
	}
	client := &Client{NC: cli, Timeout: 300 * time.Millisecond, Settle: 5 * time.Second}
	req := &messages.RegisterRequest{Table: "t", Projection: "p", RequestID: NewRequestID(),
		Containers: []messages.ContainerRef{{Table: "t", Projection: "p", ID: "c0000"}}}
	var rep messages.RegisterReply
	start := time.Now()
	if err := client.Call(context.Background(), messages.SubjectAPIRegister, req, &rep); err != nil || rep.Live != 4 {
		t.Fatalf("reply %+v, %v", rep, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(held) != 2 || time.Since(start) > 3*time.Second {
		t.Fatalf("answered after %d sends, %s: a reply to the first two was refused", len(held), time.Since(start))
	}
}

// syncBuilder is a strings.Builder safe to write from the call and read
// from the test.
type syncBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuilder) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuilder) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
