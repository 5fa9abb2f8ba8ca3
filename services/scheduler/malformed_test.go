package main

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/strata-db/strata/messages"
	"github.com/strata-db/strata/scheduler"
)

// TestMalformedAPIRequests sends garbage, a message of the wrong kind and a
// message of an unknown version to every API subject. Each gets a reply of
// the subject's type carrying an "invalid" error (never a timeout), the
// refusal is counted, and the scheduler goes on answering good requests.
func TestMalformedAPIRequests(t *testing.T) {
	nc, js := startNATS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	log := slog.New(slog.DiscardHandler)
	catalogKV, _ := js.KeyValue(ctx, messages.BucketCatalog)
	poolsKV, _ := js.KeyValue(ctx, messages.BucketPools)
	s, err := scheduler.New(ctx, testBucket(t, js, catalogKV), testBucket(t, js, poolsKV), jsPublisher{js}, scheduler.Options{Logger: log})
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

	wrongKind, err := messages.Marshal(&messages.JobEvent{JobID: "j", Type: messages.EventDone})
	if err != nil {
		t.Fatal(err)
	}
	// A header claiming version 99: [99, "pools_request", {}].
	futureVersion := []byte{0x93, 0x63, 0xad, 'p', 'o', 'o', 'l', 's', '_', 'r', 'e', 'q', 'u', 'e', 's', 't', 0x80}
	bodies := map[string][]byte{
		"garbage":        []byte("\xc1\xff not msgpack"),
		"empty":          nil,
		"wrong kind":     wrongKind,
		"future version": futureVersion,
		"truncated":      wrongKind[:len(wrongKind)/2],
	}
	replies := map[string]func() messages.Message{
		messages.SubjectAPIRegister:     func() messages.Message { return new(messages.RegisterReply) },
		messages.SubjectAPIMergeout:     func() messages.Message { return new(messages.MergeoutReply) },
		messages.SubjectAPIWindow:       func() messages.Message { return new(messages.WindowReply) },
		messages.SubjectAPIOperations:   func() messages.Message { return new(messages.OperationsReply) },
		messages.SubjectAPIAcquisitions: func() messages.Message { return new(messages.AcquisitionsReply) },
		messages.SubjectAPIPools:        func() messages.Message { return new(messages.PoolsReply) },
		messages.SubjectAPIPoolCreate:   func() messages.Message { return new(messages.PoolsReply) },
		messages.SubjectAPIPoolAlter:    func() messages.Message { return new(messages.PoolsReply) },
		messages.SubjectAPICatalog:      func() messages.Message { return new(messages.CatalogReply) },
	}
	for subject, newReply := range replies {
		for name, body := range bodies {
			msg, err := nc.RequestWithContext(ctx, subject, body)
			if err != nil {
				t.Fatalf("%s, %s: no reply: %v", subject, name, err)
			}
			rep := newReply()
			if err := messages.Unmarshal(msg.Data, rep); err != nil {
				t.Fatalf("%s, %s: reply does not decode: %v", subject, name, err)
			}
			apiErr := replyError(rep)
			if apiErr == nil || apiErr.Code != "invalid" || apiErr.Message == "" {
				t.Errorf("%s, %s: reply error %+v, want code invalid with a reason", subject, name, apiErr)
			}
		}
		if got := counterValue(t, api.requests.WithLabelValues(subject, "error")); got != float64(len(bodies)) {
			t.Errorf("%s: %v refusals counted, want %d", subject, got, len(bodies))
		}
	}

	// Still serving.
	data, err := messages.Marshal(&messages.PoolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	msg, err := nc.RequestWithContext(ctx, messages.SubjectAPIPools, data)
	if err != nil {
		t.Fatal(err)
	}
	var pools messages.PoolsReply
	if err := messages.Unmarshal(msg.Data, &pools); err != nil || pools.Error != nil || len(pools.Pools) < 2 {
		t.Fatalf("pools after malformed requests: %+v, %v", pools, err)
	}
}

func replyError(m messages.Message) *messages.APIError {
	switch r := m.(type) {
	case *messages.RegisterReply:
		return r.Error
	case *messages.MergeoutReply:
		return r.Error
	case *messages.WindowReply:
		return r.Error
	case *messages.OperationsReply:
		return r.Error
	case *messages.AcquisitionsReply:
		return r.Error
	case *messages.PoolsReply:
		return r.Error
	case *messages.CatalogReply:
		return r.Error
	}
	return nil
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
