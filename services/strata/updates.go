package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/strata-db/strata/internal/natsutil"
	"github.com/strata-db/strata/messages"
)

func init() {
	register(command{
		name:    "updates",
		summary: "publish update events at a rate, like pgbench (the walwriter logs them)",
		run:     runUpdates,
	})
}

// accountsColumns is the pgbench_accounts shape: aid, bid, abalance, filler.
var accountsColumns = []messages.RowType{messages.RowInt64, messages.RowInt64, messages.RowInt64, messages.RowText}

func runUpdates(ctx context.Context, args []string) error {
	var nf natsFlags
	cmd := newCmdLine("updates", "usage: strata updates [flags]\n\nPublishes pgbench-like UPDATE events (abalance += delta on a random account) on strata.updates.TABLE.")
	fs := cmd.fs
	nf.register(fs)
	table := fs.String("table", "pgbench_accounts", "table the events update")
	keys := fs.Int("keys", 100000, "rows (keys) of the table; each event updates one at random")
	events := fs.Int("events", 10000, "events to publish")
	rate := fs.Float64("rate", 0, "events per second (0: as fast as NATS acknowledges)")
	seed := fs.Int64("seed", 1, "random seed (the same seed publishes the same events)")
	prefix := fs.String("id-prefix", "", "event ID prefix (default: the table and seed), so separate runs do not collide")
	inflight := fs.Int("inflight", 512, "publishes awaiting acknowledgement at once")
	if err := cmd.parse(args); err != nil {
		return err
	}
	if *keys <= 0 || *events < 0 || *inflight <= 0 {
		return fmt.Errorf("%w: --keys and --inflight must be positive, --events not negative", errUsage)
	}
	if *prefix == "" {
		*prefix = fmt.Sprintf("%s-%d", *table, *seed)
	}
	nc, _, err := nf.connect(ctx)
	if err != nil {
		return err
	}
	defer nc.Close()
	ajs, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(*inflight))
	if err != nil {
		return err
	}

	rng := rand.New(rand.NewPCG(uint64(*seed), 0x5eed))
	balances := make(map[int64]int64)
	filler := strings.Repeat(" ", 84) // pgbench's filler column is char(84)
	var tick <-chan time.Time
	if *rate > 0 {
		t := time.NewTicker(time.Duration(float64(time.Second) / *rate))
		defer t.Stop()
		tick = t.C
	}
	subject := messages.SubjectUpdates(*table)
	pending := make([]jetstream.PubAckFuture, 0, *inflight)
	start := time.Now()
	lastReport := start
	for i := range *events {
		if tick != nil {
			select {
			case <-tick:
			case <-ctx.Done():
				return ctx.Err()
			}
		} else if ctx.Err() != nil {
			return ctx.Err()
		}
		aid := rng.Int64N(int64(*keys)) + 1
		bid := (aid-1)/100000 + 1
		old, seen := balances[aid]
		balance := old + rng.Int64N(10001) - 5000
		balances[aid] = balance
		ev := &messages.UpdateEvent{
			EventID: fmt.Sprintf("%s-%d", *prefix, i),
			Table:   *table,
			Columns: accountsColumns,
			Key:     fmt.Appendf(nil, "%d", aid),
		}
		if ev.NewRow, err = messages.EncodeRow(accountsColumns, []any{aid, bid, balance, filler}); err != nil {
			return err
		}
		if seen {
			if ev.OldRow, err = messages.EncodeRow(accountsColumns, []any{aid, bid, old, filler}); err != nil {
				return err
			}
		}
		data, err := messages.Marshal(ev)
		if err != nil {
			return err
		}
		msg := &nats.Msg{Subject: subject, Data: data, Header: nats.Header{}}
		msg.Header.Set(messages.HeaderMsgID, ev.EventID)
		fut, err := ajs.PublishMsgAsync(msg)
		if err != nil {
			// Disconnected with a full reconnect buffer, say: publish
			// this one in line, retrying until a server takes it.
			if _, err := natsutil.PublishRetry(ctx, ajs, msg); err != nil {
				return fmt.Errorf("publish event %s: %w", ev.EventID, err)
			}
		} else {
			pending = append(pending, fut)
		}
		if len(pending) >= *inflight {
			if err := checkAcks(ctx, ajs, pending); err != nil {
				return err
			}
			pending = pending[:0]
		}
		if now := time.Now(); now.Sub(lastReport) >= time.Second {
			lastReport = now
			fmt.Fprintf(os.Stderr, "\rpublished %d/%d events, %.0f/s", i+1, *events, float64(i+1)/now.Sub(start).Seconds())
		}
	}
	if err := checkAcks(ctx, ajs, pending); err != nil {
		return err
	}
	el := time.Since(start)
	fmt.Fprintf(os.Stderr, "\rpublished %d events to %s in %v, %.0f events/s\n", *events, subject, el.Round(time.Millisecond), float64(*events)/el.Seconds())
	return nil
}

// checkAcks waits for each publish's acknowledgement. A publish that
// failed or was not acknowledged within a minute (a node lost, a leader
// being elected) is published again, with its Nats-Msg-Id, so the stream
// stores it once, until it is acknowledged or retryFor passes: an event
// the stream did not store must not pass silently.
func checkAcks(ctx context.Context, js jetstream.JetStream, futs []jetstream.PubAckFuture) error {
	for _, f := range futs {
		var failed error
		select {
		case <-f.Ok():
			continue
		case failed = <-f.Err():
		case <-time.After(time.Minute):
			failed = errors.New("not acknowledged after a minute")
		case <-ctx.Done():
			return ctx.Err()
		}
		rctx, cancel := context.WithTimeout(ctx, retryFor)
		_, err := natsutil.PublishRetry(rctx, js, f.Msg())
		cancel()
		if err != nil {
			return fmt.Errorf("publish %s: %v; again for %v: %w", f.Msg().Header.Get(messages.HeaderMsgID), failed, retryFor, err)
		}
	}
	return nil
}

// retryFor bounds how long a failed publish is tried again: longer than a
// cluster takes to elect a new leader or a client to reconnect.
const retryFor = 2 * time.Minute
