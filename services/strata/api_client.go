package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/strata-db/strata/internal/apiclient"
	"github.com/strata-db/strata/internal/bytesize"
	"github.com/strata-db/strata/internal/natsutil"
	"github.com/strata-db/strata/messages"
)

// apiClient is the connection of a command that talks to the scheduler.
type apiClient struct {
	nc  *nats.Conn
	js  jetstream.JetStream
	api *apiclient.Client
}

// apiFlags are the flags of the commands that talk to the scheduler.
type apiFlags struct {
	natsFlags
	timeout, settle time.Duration
}

func (f *apiFlags) register(fs *flag.FlagSet) {
	f.natsFlags.register(fs)
	fs.DurationVar(&f.timeout, "request-timeout", 30*time.Second, "how long to wait for the scheduler's reply")
	fs.DurationVar(&f.settle, "settle-timeout", 5*time.Minute,
		"how long to keep asking the scheduler about a change (a load's registration, a drop, a job request)\n"+
			"whose reply does not come within --request-timeout, before saying its outcome is unknown")
}

func (f *apiFlags) dial(ctx context.Context) (*apiClient, error) {
	denied := make(chan error, 16)
	nc, js, err := f.connect(ctx, func(o *natsutil.ConnOptions) {
		o.AsyncError = func(err error) {
			if errors.Is(err, nats.ErrPermissionViolation) || strings.Contains(err.Error(), "Permissions Violation") {
				select {
				case denied <- err:
				default:
				}
			}
		}
	})
	if err != nil {
		return nil, fmt.Errorf("connect to NATS at %s: %w", f.common.NATS, err)
	}
	api := &apiclient.Client{NC: nc, Timeout: f.timeout, Settle: f.settle, Denied: denied, Notices: stderrWriter{}}
	return &apiClient{nc: nc, js: js, api: api}, nil
}

func (c *apiClient) Close() { c.nc.Close() }

// call makes a request of the scheduler (apiclient.Client.Call).
func (c *apiClient) call(ctx context.Context, subject string, req, rep messages.Message) error {
	return c.api.Call(ctx, subject, req, rep)
}

// newRequestID returns a random ID for a request the CLI may send again.
func newRequestID() string { return apiclient.NewRequestID() }

// refusal returns the scheduler's decision that refused a request, or nil.
func refusal(err error) *messages.APIError { return apiclient.Refusal(err) }

// errNotReceived wraps the error of a request no scheduler received.
var errNotReceived = apiclient.ErrNotReceived

// stderrWriter writes to stderr as it is when written to (tests swap it).
type stderrWriter struct{}

func (stderrWriter) Write(p []byte) (int, error) { return stderr.Write(p) }

func fmtBytes(n int64) string {
	if n == 0 {
		return "-"
	}
	return bytesize.Format(n)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
