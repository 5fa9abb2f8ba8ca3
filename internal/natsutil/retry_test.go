package natsutil_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/strata-db/strata/internal/natsutil"
)

func TestUnanswered(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{context.DeadlineExceeded, true},
		{fmt.Errorf("stream info: %w", nats.ErrTimeout), true},
		{nats.ErrNoResponders, true},
		{jetstream.ErrNoStreamResponse, true},
		{&jetstream.APIError{Code: 503, Description: "JetStream system temporarily unavailable"}, true},
		{&jetstream.APIError{Code: 400, Description: "stream name already in use"}, false},
		// A cluster whose nodes are still joining (seen as the chaos
		// suite's fresh three-node cluster started its scheduler).
		{&jetstream.APIError{Code: 500, ErrorCode: 10005, Description: "insufficient resources: no suitable peers for placement, peer offline"}, true},
		{jetstream.ErrStreamNotFound, false},
		{errors.New("permissions violation"), false},
	} {
		if got := natsutil.Unanswered(ctx, tc.err); got != tc.want {
			t.Errorf("Unanswered(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	if natsutil.Unanswered(done, context.DeadlineExceeded) {
		t.Error("the caller's own context ending counts as unanswered")
	}
}

func TestRetryUnanswered(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	calls := 0
	err := natsutil.RetryUnanswered(ctx, func(actx context.Context) error {
		calls++
		if _, ok := actx.Deadline(); !ok {
			t.Error("an attempt without a deadline of its own")
		}
		if calls < 3 {
			return nats.ErrNoResponders
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("after %d calls: %v", calls, err)
	}
	calls = 0
	err = natsutil.RetryUnanswered(ctx, func(context.Context) error { calls++; return jetstream.ErrStreamNotFound })
	if !errors.Is(err, jetstream.ErrStreamNotFound) || calls != 1 {
		t.Fatalf("an answered error was tried %d times: %v", calls, err)
	}
	short, stop := context.WithTimeout(ctx, 300*time.Millisecond)
	defer stop()
	err = natsutil.RetryUnanswered(short, func(context.Context) error { return nats.ErrTimeout })
	if !errors.Is(err, nats.ErrTimeout) || short.Err() == nil {
		t.Fatalf("a store that never answers: %v (context %v)", err, short.Err())
	}
}
