package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/strata-db/strata/internal/bytesize"
	"github.com/strata-db/strata/internal/natsutil"
	"github.com/strata-db/strata/messages"
)

// apiClient is the connection of a command that talks to the scheduler.
type apiClient struct {
	nc      *nats.Conn
	js      jetstream.JetStream
	timeout time.Duration
	denied  chan error // permissions violations the server reports
}

// apiFlags are the flags of the commands that talk to the scheduler.
type apiFlags struct {
	natsFlags
	timeout time.Duration
}

func (f *apiFlags) register(fs *flag.FlagSet) {
	f.natsFlags.register(fs)
	fs.DurationVar(&f.timeout, "request-timeout", 30*time.Second, "how long to wait for the scheduler's reply")
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
	return &apiClient{nc: nc, js: js, timeout: f.timeout, denied: denied}, nil
}

func (c *apiClient) Close() { c.nc.Close() }

// resendable are the requests the CLI sends again when their reply may be
// lost (the NATS node it or the scheduler was connected to died): reads, a
// registration (it adds only containers not yet live), and a window
// request, which carries a request ID the scheduler answers once.
var resendable = map[string]bool{
	messages.SubjectAPIRegister:     true,
	messages.SubjectAPIWindow:       true,
	messages.SubjectAPIOperations:   true,
	messages.SubjectAPIAcquisitions: true,
	messages.SubjectAPIPools:        true,
	messages.SubjectAPICatalog:      true,
}

// newRequestID returns a random ID for a request the CLI may send again.
func newRequestID() string {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "" // no ID: the request is answered as a new one each time
	}
	return "req-" + hex.EncodeToString(b[:])
}

// noRespondersGrace is how long a request that no scheduler receives is
// sent again before the CLI says none answers: long enough for a scheduler
// restart or its reconnection to another node.
const noRespondersGrace = 10 * time.Second

// call sends req on subject and decodes the reply into rep, within the
// client's timeout. A request no scheduler received is sent again for up
// to noRespondersGrace; a resendable one whose reply does not come within
// a third of the timeout is sent again too.
func (c *apiClient) call(ctx context.Context, subject string, req, rep messages.Message) error {
	data, err := messages.Marshal(req)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	attempt := c.timeout
	if resendable[subject] {
		attempt = max(c.timeout/3, time.Second)
	}
	start, backoff := time.Now(), 100*time.Millisecond
	for {
		msg, err := c.request(ctx, subject, data, attempt)
		retry := false
		switch {
		case err == nil:
			if err := messages.Unmarshal(msg.Data, rep); err != nil {
				return fmt.Errorf("reply to %s: %w", subject, err)
			}
			return nil
		case errors.Is(err, nats.ErrNoResponders):
			if time.Since(start) >= noRespondersGrace {
				return fmt.Errorf("no scheduler answers on %s: is the scheduler running and connected to %s?", subject, c.nc.ConnectedUrlRedacted())
			}
			retry = true
		case errors.Is(err, context.DeadlineExceeded) && resendable[subject]:
			retry = ctx.Err() == nil
		}
		if !retry {
			return fmt.Errorf("request %s: %w", subject, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("request %s: %w", subject, err)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// request makes one request with its own timeout. A request the server
// refuses gets no reply: it stops waiting as soon as the server says so.
func (c *apiClient) request(ctx context.Context, subject string, data []byte, timeout time.Duration) (*nats.Msg, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	refused := make(chan error, 1)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		select {
		case err := <-c.denied:
			refused <- err
			cancel()
		case <-stop:
		}
	}()
	msg, err := c.nc.RequestWithContext(ctx, subject, data)
	if err != nil {
		select {
		case perr := <-refused:
			return nil, fmt.Errorf("refused: %w (this NATS user may not make it)", perr)
		default:
		}
	}
	return msg, err
}

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
