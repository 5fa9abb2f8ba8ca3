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
// start down without bound. Nothing is applied unless both streams were
// read to their end: a job read without its events would show as running.
func restoreHistory(ctx context.Context, js jetstream.JetStream, s *scheduler.Scheduler, keepJobs int, log *slog.Logger) error {
	const eventsPerJob = 16
	type published struct {
		job messages.Message
		at  time.Time
	}
	var jobs []published
	_, err := readTail(ctx, js, messages.StreamJobs, uint64(keepJobs), func(msg jetstream.Msg) {
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
		p := published{job: job}
		if meta, err := msg.Metadata(); err == nil {
			p.at = meta.Timestamp
		}
		jobs = append(jobs, p)
	})
	if err != nil {
		return err
	}
	var events []*messages.JobEvent
	_, err = readTail(ctx, js, messages.StreamEvents, uint64(keepJobs*eventsPerJob), func(msg jetstream.Msg) {
		ev := new(messages.JobEvent)
		if messages.Unmarshal(msg.Data(), ev) == nil {
			events = append(events, ev)
		}
	})
	if err != nil {
		return err
	}
	var restored []string
	for _, p := range jobs {
		if id := s.RestoreJob(p.job, p.at); id != "" {
			restored = append(restored, id)
		}
	}
	for _, ev := range events {
		s.RestoreEvent(ev)
	}
	s.RestoreAcquisitions(restored)
	log.Info("operations history restored", "jobs", len(jobs), "events", len(events))
	return nil
}

// restoreHistoryRetrying is restoreHistory tried again with backoff until
// it succeeds or ctx ends: a stream without a leader for a moment (a NATS
// node restarting) must not leave the table without its history.
func restoreHistoryRetrying(ctx context.Context, js jetstream.JetStream, s *scheduler.Scheduler, keepJobs int, log *slog.Logger) {
	backoff := time.Second
	for {
		err := restoreHistory(ctx, js, s, keepJobs, log)
		if err == nil || ctx.Err() != nil {
			return
		}
		// The tables are for people; a stream that cannot be read must
		// not keep the scheduler from scheduling.
		log.Warn("restore operations history; will retry", "err", err, "retry_in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 30*time.Second)
	}
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
