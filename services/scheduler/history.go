package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/strata-db/strata/messages"
	"github.com/strata-db/strata/scheduler"
)

// restoreHistory rebuilds the operations table of past jobs from the last
// jobs JOBS holds and the events EVENTS holds about them (see
// scheduler.RestoreJob). It reads at most keepJobs jobs and
// eventsPerJob*keepJobs events, newest, so a long history does not slow the
// start down without bound.
func restoreHistory(ctx context.Context, js jetstream.JetStream, s *scheduler.Scheduler, keepJobs int, log *slog.Logger) error {
	const eventsPerJob = 16
	jobs, err := readTail(ctx, js, messages.StreamJobs, uint64(keepJobs), func(msg jetstream.Msg) {
		var job messages.Message
		switch msg.Subject() {
		case messages.SubjectJobMergeout:
			job = new(messages.MergeoutJob)
		case messages.SubjectJobWindow:
			job = new(messages.WindowJob)
		default:
			return
		}
		if messages.Unmarshal(msg.Data(), job) != nil {
			return // malformed jobs were dead-lettered by the workers
		}
		published := time.Time{}
		if meta, err := msg.Metadata(); err == nil {
			published = meta.Timestamp
		}
		s.RestoreJob(job, published)
	})
	if err != nil {
		return err
	}
	events, err := readTail(ctx, js, messages.StreamEvents, uint64(keepJobs*eventsPerJob), func(msg jetstream.Msg) {
		ev := new(messages.JobEvent)
		if messages.Unmarshal(msg.Data(), ev) == nil {
			s.RestoreEvent(ev)
		}
	})
	if err != nil {
		return err
	}
	log.Info("operations history restored", "jobs", jobs, "events", events)
	return nil
}

// readTail feeds fn the last n messages of stream, oldest first, as the
// stream holds them now, and returns how many it read.
func readTail(ctx context.Context, js jetstream.JetStream, stream string, n uint64, fn func(jetstream.Msg)) (int, error) {
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return 0, fmt.Errorf("stream %s: %w", stream, err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("stream %s: %w", stream, err)
	}
	last := info.State.LastSeq
	if info.State.Msgs == 0 || last == 0 {
		return 0, nil
	}
	start := info.State.FirstSeq
	if last >= n && last-n+1 > start {
		start = last - n + 1
	}
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: start,
	})
	if err != nil {
		return 0, fmt.Errorf("read stream %s: %w", stream, err)
	}
	read := 0
	for {
		batch, err := cons.Fetch(512, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return read, fmt.Errorf("read stream %s: %w", stream, err)
		}
		got := 0
		for msg := range batch.Messages() {
			got++
			read++
			fn(msg)
			if meta, err := msg.Metadata(); err == nil && meta.Sequence.Stream >= last {
				return read, nil
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return read, fmt.Errorf("read stream %s: %w", stream, err)
		}
		if got == 0 {
			return read, nil // the rest was deleted meanwhile
		}
	}
}
