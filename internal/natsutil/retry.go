package natsutil

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// APIAttempt bounds one JetStream API request that is tried again when it
// goes unanswered: on a cluster whose meta or stream leader is changing (a
// node just died or came back) a request can be lost, and without a bound
// it waits out the caller's whole context.
const APIAttempt = 5 * time.Second

// Unanswered reports whether err says NATS did not answer a request (a
// time-out, no responders, the connection between servers), or JetStream
// answered that it cannot serve it now (503): the same request or publish
// may well succeed a moment later. parent is the caller's context; its own
// end is no reason to try again.
func Unanswered(parent context.Context, err error) bool {
	if err == nil || parent.Err() != nil {
		return false
	}
	var apiErr *jetstream.APIError
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout), errors.Is(err, nats.ErrNoResponders),
		errors.Is(err, jetstream.ErrNoStreamResponse), errors.Is(err, jetstream.ErrNoHeartbeat),
		// The connection is between servers; a closed one (ErrConnectionClosed) is not coming back.
		errors.Is(err, nats.ErrConnectionReconnecting), errors.Is(err, nats.ErrDisconnected),
		errors.Is(err, nats.ErrNoServers), errors.Is(err, nats.ErrReconnectBufExceeded):
		return true
	case errors.As(err, &apiErr):
		return apiErr.Code == http.StatusServiceUnavailable || apiErr.ErrorCode == errCodeClusterNoPeers
	}
	return false
}

// errCodeClusterNoPeers is JetStream's "no suitable peers for placement"
// (nats-server's JSClusterNoPeersErr): a stream or bucket asked of a
// cluster whose nodes have not all joined yet, as just after they start.
const errCodeClusterNoPeers jetstream.ErrorCode = 10005

// RetryUnanswered runs op, each attempt bounded by APIAttempt, until it
// returns an error Unanswered does not recognise, or nil, or ctx ends.
func RetryUnanswered(ctx context.Context, op func(context.Context) error) error {
	backoff := 100 * time.Millisecond
	for {
		actx, cancel := context.WithTimeout(ctx, APIAttempt)
		err := op(actx)
		cancel()
		if !Unanswered(ctx, err) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}
