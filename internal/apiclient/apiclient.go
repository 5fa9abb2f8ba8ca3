// Package apiclient is the client side of the scheduler's request/reply
// API (strata.api.*), shared by the strata CLI and the PostgreSQL front
// door: requests that change nothing are sent again when their reply may
// be lost; requests that change something carry a request ID the
// scheduler answers once, and are settled — sent again until the
// scheduler answers, never taken as done or refused for want of a reply
// (ARCHITECTURE.md, "A request of unknown outcome is settled").
package apiclient

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/strata-db/strata/messages"
)

// Client makes the scheduler's requests over a NATS connection.
type Client struct {
	NC *nats.Conn
	// Timeout bounds one request's wait for its reply: a read is given up
	// after it, a change asked about until Settle.
	Timeout time.Duration
	// Settle is how long a change whose reply does not come is asked
	// about before its outcome is called unknown.
	Settle time.Duration
	// Denied, if set, carries the permissions violations the server
	// reports on the connection: a request refused that way gets no reply,
	// and the call stops waiting at once.
	Denied <-chan error
	// Notices, if set, is told while a change waits for its answer.
	Notices io.Writer
}

func (c *Client) notice(format string, args ...any) {
	if c.Notices != nil {
		fmt.Fprintf(c.Notices, "strata: "+format+"\n", args...)
	}
}

func orNone(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// Reads are the requests that change nothing: Call sends one again when
// its reply may be lost (the NATS node the client or the scheduler was
// connected to died) until the client's Timeout.
var Reads = map[string]bool{
	messages.SubjectAPIOperations:   true,
	messages.SubjectAPIAcquisitions: true,
	messages.SubjectAPIPools:        true,
	messages.SubjectAPICatalog:      true,
}

// Changes are the requests that change something. Each carries a request
// ID (NewRequestID) that the scheduler answers once, recording its answer
// with the change (a pool alteration sets absolute values, so it needs
// none), and is settled: sent again until the scheduler answers it, never
// taken as refused for want of a reply (Call).
var Changes = map[string]bool{
	messages.SubjectAPIRegister:       true,
	messages.SubjectAPIWindow:         true,
	messages.SubjectAPIMergeout:       true,
	messages.SubjectAPIDropContainers: true,
	messages.SubjectAPIPoolCreate:     true,
	messages.SubjectAPIPoolAlter:      true,
	messages.SubjectAPIReserve:        true,
	messages.SubjectAPIApply:          true,
}

// NewRequestID returns a random ID for a request a client may send again.
func NewRequestID() string {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "" // no ID: the request is answered as a new one each time
	}
	return "req-" + hex.EncodeToString(b[:])
}

// NoRespondersGrace is how long a request that no scheduler receives is
// sent again before the client says none answers: long enough for a scheduler
// restart or its reconnection to another node.
const NoRespondersGrace = 10 * time.Second

// ErrNotReceived wraps the error of a request no scheduler received:
// nothing was done.
var ErrNotReceived = errors.New("no scheduler received the request; nothing was done")

// OutcomeUnknownError is the error of a change the scheduler did not
// answer before the client stopped asking: it may or may not have taken
// effect. What the change made must be kept (a registration's files), as
// it may be in use.
type OutcomeUnknownError struct {
	Subject, RequestID string
	Waited             time.Duration
	Sent               int
	Last               error // the last thing that went wrong, if known
}

func (e *OutcomeUnknownError) Error() string {
	msg := fmt.Sprintf("no answer to %s (request %s) in %s, sent %d times: the outcome is unknown",
		e.Subject, orNone(e.RequestID), e.Waited.Round(time.Second), e.Sent)
	if e.Last != nil {
		msg += " (last: " + e.Last.Error() + ")"
	}
	return msg
}

func (e *OutcomeUnknownError) Unwrap() error { return e.Last }

// Refusal returns the scheduler's decision that refused a request, or nil
// when err is not one (the outcome unknown, the request not received).
func Refusal(err error) *messages.APIError {
	var unknown *OutcomeUnknownError
	var e *messages.APIError
	if errors.As(err, &unknown) || !errors.As(err, &e) || !e.Definite() {
		return nil
	}
	return e
}

// Call sends req on subject and decodes the reply into rep. A change is
// settled (settle); a read is sent again when its reply does not come
// within a third of the client's timeout, and given up after it. A request
// no scheduler received is sent again for up to NoRespondersGrace.
func (c *Client) Call(ctx context.Context, subject string, req, rep messages.Message) error {
	data, err := messages.Marshal(req)
	if err != nil {
		return err
	}
	if Changes[subject] {
		r, ok := rep.(messages.Reply)
		if !ok {
			return fmt.Errorf("request %s: reply %T has no error part", subject, rep)
		}
		return c.settle(ctx, subject, RequestID(req), data, r)
	}
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	attempt := c.Timeout
	if Reads[subject] {
		attempt = max(c.Timeout/3, time.Second)
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
			if time.Since(start) >= NoRespondersGrace {
				return fmt.Errorf("%w: no scheduler answers on %s: is the scheduler running and connected to %s?", ErrNotReceived, subject, c.NC.ConnectedUrlRedacted())
			}
			retry = true
		case errors.Is(err, context.DeadlineExceeded) && Reads[subject]:
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

// RequestID returns the ID a change carries, "" if none.
func RequestID(req messages.Message) string {
	switch r := req.(type) {
	case *messages.RegisterRequest:
		return r.RequestID
	case *messages.WindowRequest:
		return r.RequestID
	case *messages.MergeoutRequest:
		return r.RequestID
	case *messages.DropContainersRequest:
		return r.RequestID
	case *messages.CreatePoolRequest:
		return r.RequestID
	case *messages.ReserveRequest:
		return r.RequestID
	case *messages.ApplyRequest:
		return r.RequestID
	}
	return ""
}

// settleFirstNotice and settleNotice are when settle first says it is
// still waiting (or at the request timeout, if sooner), and how often
// after that.
const (
	settleFirstNotice = 5 * time.Second
	settleNotice      = 15 * time.Second
)

// settle sends a change and waits for the scheduler's answer, sending
// it again (the same bytes, so the same request ID) when no answer comes:
// first after a third of the client's timeout, then at doubling intervals
// up to 30s. Every send's reply comes to one subscription (a reply
// subject of its own under one inbox), so a late answer to an earlier
// send settles the call as well as the answer to the last. An
// answer that is not a decision (an internal error: the scheduler could
// not tell whether its catalog write landed, say) is asked again too.
//
// It returns nil with rep filled for an answer (which may be a refusal in
// rep's error part); ErrNotReceived wrapped when no send reached a
// scheduler within NoRespondersGrace; an *OutcomeUnknownError when sends
// may have reached one but no answer came within the settle timeout (or
// before ctx ended). While it waits it says so on c.Notices, with why
// (after settleFirstNotice or the request timeout, then every
// settleNotice).
func (c *Client) settle(ctx context.Context, subject, id string, data []byte, rep messages.Reply) error {
	// Each send has a reply subject of its own under one subscription:
	// the scheduler answers through allow_responses, which lets it reply
	// once to each request it received, so two sends sharing one reply
	// subject would have both their answers refused.
	inbox := c.NC.NewInbox()
	replies := make(chan *nats.Msg, 64)
	sub, err := c.NC.ChanSubscribe(inbox+".*", replies)
	if err != nil {
		return fmt.Errorf("request %s: subscribe to replies: %w", subject, err)
	}
	defer sub.Unsubscribe()
	start := time.Now()
	ctx, cancel := context.WithDeadline(ctx, start.Add(max(c.Settle, c.Timeout)))
	defer cancel()
	var sends, notReceived int
	var last error
	interval := max(c.Timeout/3, time.Second)
	resend := time.NewTimer(0)
	defer resend.Stop()
	notice := time.NewTimer(min(c.Timeout, settleFirstNotice))
	defer notice.Stop()
	done, resendC := ctx.Done(), resend.C
	var final <-chan time.Time
	for {
		select {
		case <-resendC:
			if err := c.NC.PublishRequest(subject, inbox+"."+strconv.Itoa(sends), data); err != nil {
				last = err
			} else {
				sends++
			}
			resend.Reset(interval)
			interval = min(2*interval, 30*time.Second)
		case msg := <-replies:
			if msg.Header.Get("Status") == "503" { // no responders to one send
				notReceived++
				last = nats.ErrNoResponders
				if notReceived == sends && time.Since(start) >= NoRespondersGrace {
					return fmt.Errorf("%w: no scheduler answers on %s: is the scheduler running and connected to %s?",
						ErrNotReceived, subject, c.NC.ConnectedUrlRedacted())
				}
				// Try again soon: a scheduler may be (re)starting.
				resend.Reset(min(interval, 500*time.Millisecond))
				continue
			}
			// Decoded over a zero reply: fields an earlier answer set
			// (its error) must not survive into this one.
			reflect.ValueOf(rep).Elem().SetZero()
			if err := messages.Unmarshal(msg.Data, rep); err != nil {
				return fmt.Errorf("reply to %s: %w", subject, err)
			}
			if e := rep.ReplyError(); e != nil && !e.Definite() {
				last = e
				continue // asked again at the next resend
			}
			return nil
		case err := <-c.Denied:
			return fmt.Errorf("%w: refused: %w (this NATS user may not make it)", ErrNotReceived, err)
		case <-notice.C:
			if !c.NC.IsConnected() {
				last = fmt.Errorf("NATS unreachable (%s)", c.NC.Status())
			}
			c.notice("no answer yet to %s (request %s) after %s, sent %d times; asking until the outcome is known (settle timeout %s)%s",
				subject, orNone(id), time.Since(start).Round(time.Second), sends, max(c.Settle, c.Timeout), lastSuffix(last))
			notice.Reset(settleNotice)
		case <-done:
			// Replies already on their way (a no-responders status comes
			// within milliseconds) are still taken for a moment.
			done, resendC = nil, nil
			final = time.After(settleDrain)
		case <-final:
			if sends == notReceived && sends > 0 {
				return fmt.Errorf("%w: no scheduler answers on %s", ErrNotReceived, subject)
			}
			return &OutcomeUnknownError{Subject: subject, RequestID: id, Waited: time.Since(start), Sent: sends, Last: last}
		}
	}
}

// settleDrain is how long settleCall still takes replies once it stops
// asking.
const settleDrain = 250 * time.Millisecond

func lastSuffix(err error) string {
	if err == nil {
		return ""
	}
	return " (last: " + err.Error() + ")"
}

// request makes one request with its own timeout. A request the server
// refuses gets no reply: it stops waiting as soon as the server says so.
func (c *Client) request(ctx context.Context, subject string, data []byte, timeout time.Duration) (*nats.Msg, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	refused := make(chan error, 1)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		select {
		case err := <-c.Denied:
			refused <- err
			cancel()
		case <-stop:
		}
	}()
	msg, err := c.NC.RequestWithContext(ctx, subject, data)
	if err != nil {
		select {
		case perr := <-refused:
			return nil, fmt.Errorf("refused: %w (this NATS user may not make it)", perr)
		default:
		}
	}
	return msg, err
}
