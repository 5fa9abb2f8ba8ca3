package natsutil

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/strata-db/strata/messages"
)

// Topology describes the streams, consumers and buckets strata needs, with
// the limits an operator may tune. The zero value of a field means its
// default (see DefaultTopology).
type Topology struct {
	// Replicas of every stream and bucket: 1 for a single server, 3 for a
	// cluster.
	Replicas int
	// Storage of the streams; default file.
	Storage jetstream.StorageType
	// DuplicateWindow is how long JetStream remembers Nats-Msg-Id values
	// to drop duplicate publishes.
	DuplicateWindow time.Duration
	// JobsMaxAge bounds how long jobs are kept (0: forever, so a job
	// stream can always be recorded and replayed).
	JobsMaxAge time.Duration
	// EventsMaxAge, UpdatesMaxAge and DeadLetterMaxAge bound the other
	// streams (0: forever).
	EventsMaxAge, UpdatesMaxAge, DeadLetterMaxAge time.Duration

	// Worker leases. A worker that neither acks nor calls InProgress within
	// AckWait loses its message to another worker; after MaxDeliver
	// deliveries the message stays in the stream but is not redelivered.
	JobAckWait          time.Duration
	JobMaxDeliver       int
	UpdateAckWait       time.Duration
	UpdateMaxAckPending int
	UpdateMaxDeliver    int
	EventAckWait        time.Duration
}

// DefaultTopology returns the limits EnsureStreams uses.
func DefaultTopology() Topology {
	return Topology{
		Replicas:         1,
		Storage:          jetstream.FileStorage,
		DuplicateWindow:  10 * time.Minute,
		EventsMaxAge:     7 * 24 * time.Hour,
		UpdatesMaxAge:    7 * 24 * time.Hour,
		DeadLetterMaxAge: 30 * 24 * time.Hour,
		JobAckWait:       30 * time.Second,
		JobMaxDeliver:    5,
		UpdateAckWait:    30 * time.Second,
		// The walwriter acks a change once it is visible, up to a flush
		// interval (1s) after it is durable: room for a few seconds of
		// changes at 100k/s.
		UpdateMaxAckPending: 1 << 19,
		UpdateMaxDeliver:    10,
		EventAckWait:        30 * time.Second,
	}
}

func (t Topology) withDefaults() Topology {
	d := DefaultTopology()
	if t.Replicas <= 0 {
		t.Replicas = d.Replicas
	}
	if t.DuplicateWindow <= 0 {
		t.DuplicateWindow = d.DuplicateWindow
	}
	if t.JobAckWait <= 0 {
		t.JobAckWait = d.JobAckWait
	}
	if t.JobMaxDeliver <= 0 {
		t.JobMaxDeliver = d.JobMaxDeliver
	}
	if t.UpdateAckWait <= 0 {
		t.UpdateAckWait = d.UpdateAckWait
	}
	if t.UpdateMaxAckPending <= 0 {
		t.UpdateMaxAckPending = d.UpdateMaxAckPending
	}
	if t.UpdateMaxDeliver <= 0 {
		t.UpdateMaxDeliver = d.UpdateMaxDeliver
	}
	if t.EventAckWait <= 0 {
		t.EventAckWait = d.EventAckWait
	}
	return t
}

// Streams returns the stream configurations of t.
func (t Topology) Streams() []jetstream.StreamConfig {
	t = t.withDefaults()
	stream := func(name, subject, desc string, maxAge time.Duration) jetstream.StreamConfig {
		return jetstream.StreamConfig{
			Name:        name,
			Description: desc,
			Subjects:    []string{subject},
			Retention:   jetstream.LimitsPolicy,
			Storage:     t.Storage,
			Replicas:    t.Replicas,
			Duplicates:  t.DuplicateWindow,
			MaxAge:      maxAge,
			Discard:     jetstream.DiscardOld,
		}
	}
	return []jetstream.StreamConfig{
		stream(messages.StreamJobs, messages.SubjectJobsAll, "strata jobs: mergeout and window (history kept for record/replay)", t.JobsMaxAge),
		stream(messages.StreamEvents, messages.SubjectEventsAll, "strata job events: accepted, progress, done, failed", t.EventsMaxAge),
		stream(messages.StreamUpdates, messages.SubjectUpdatesAll, "strata update events for the walwriter", t.UpdatesMaxAge),
		stream(messages.StreamDeadLetter, messages.SubjectDeadLetterAll, "strata messages a service rejected, with the reason", t.DeadLetterMaxAge),
	}
}

// ConsumerSpec is a durable consumer and the stream it reads.
type ConsumerSpec struct {
	Stream string
	Config jetstream.ConsumerConfig
}

// Consumers returns the durable consumer configurations of t.
func (t Topology) Consumers() []ConsumerSpec {
	t = t.withDefaults()
	return []ConsumerSpec{
		{messages.StreamJobs, jetstream.ConsumerConfig{
			Durable:       messages.ConsumerMerger,
			Description:   "mergers share mergeout jobs",
			FilterSubject: messages.SubjectJobMergeout,
			DeliverPolicy: jetstream.DeliverAllPolicy,
			AckPolicy:     jetstream.AckExplicitPolicy,
			AckWait:       t.JobAckWait,
			MaxDeliver:    t.JobMaxDeliver,
		}},
		{messages.StreamJobs, jetstream.ConsumerConfig{
			Durable:       messages.ConsumerWindower,
			Description:   "windowers share window jobs",
			FilterSubject: messages.SubjectJobWindow,
			DeliverPolicy: jetstream.DeliverAllPolicy,
			AckPolicy:     jetstream.AckExplicitPolicy,
			AckWait:       t.JobAckWait,
			MaxDeliver:    t.JobMaxDeliver,
		}},
		{messages.StreamUpdates, jetstream.ConsumerConfig{
			Durable:       messages.ConsumerWalwriter,
			Description:   "walwriters share update events",
			FilterSubject: messages.SubjectUpdatesAll,
			DeliverPolicy: jetstream.DeliverAllPolicy,
			AckPolicy:     jetstream.AckExplicitPolicy,
			AckWait:       t.UpdateAckWait,
			MaxDeliver:    t.UpdateMaxDeliver,
			MaxAckPending: t.UpdateMaxAckPending,
		}},
		{messages.StreamEvents, jetstream.ConsumerConfig{
			Durable:       messages.ConsumerScheduler,
			Description:   "the scheduler follows job events",
			FilterSubject: messages.SubjectEventsAll,
			DeliverPolicy: jetstream.DeliverAllPolicy,
			AckPolicy:     jetstream.AckExplicitPolicy,
			AckWait:       t.EventAckWait,
		}},
	}
}

// Buckets returns the key-value bucket configurations of t.
func (t Topology) Buckets() []jetstream.KeyValueConfig {
	t = t.withDefaults()
	return []jetstream.KeyValueConfig{
		{Bucket: messages.BucketCatalog, Description: "live containers per projection, changed by compare-and-set", History: 16, Storage: t.Storage, Replicas: t.Replicas},
		{Bucket: messages.BucketPools, Description: "resource pool configuration", History: 8, Storage: t.Storage, Replicas: t.Replicas},
	}
}

// Ensure creates or updates every stream, consumer and bucket of t. It is
// idempotent: running it again (from any service, at any time) changes
// nothing unless the configuration changed. A request the cluster leaves
// unanswered (a leader changing) is sent again until ctx ends.
func (t Topology) Ensure(ctx context.Context, js jetstream.JetStream) error {
	for _, cfg := range t.Streams() {
		err := RetryUnanswered(ctx, func(ctx context.Context) error {
			_, err := js.CreateOrUpdateStream(ctx, cfg)
			return err
		})
		if err != nil {
			return fmt.Errorf("natsutil: ensure stream %s: %w", cfg.Name, err)
		}
	}
	for _, c := range t.Consumers() {
		err := RetryUnanswered(ctx, func(ctx context.Context) error {
			_, err := js.CreateOrUpdateConsumer(ctx, c.Stream, c.Config)
			return err
		})
		if err != nil {
			return fmt.Errorf("natsutil: ensure consumer %s on stream %s: %w", c.Config.Durable, c.Stream, err)
		}
	}
	for _, cfg := range t.Buckets() {
		err := RetryUnanswered(ctx, func(ctx context.Context) error {
			_, err := js.CreateOrUpdateKeyValue(ctx, cfg)
			return err
		})
		if err != nil {
			return fmt.Errorf("natsutil: ensure key-value bucket %s: %w", cfg.Bucket, err)
		}
		if err := RetryUnanswered(ctx, func(ctx context.Context) error { return leaderReads(ctx, js, cfg.Bucket) }); err != nil {
			return err
		}
	}
	return nil
}

// leaderReads turns off direct gets on a bucket's stream. nats.go makes
// every bucket with allow_direct, which lets any replica, lagging or not,
// answer a get: on a three-replica cluster the scheduler then read a
// catalog entry older than its own last write and decided on it. Without
// direct gets every read goes through the stream leader, which has every
// acknowledged write (read-your-writes). A handle to the bucket must be
// taken after this: the client decides at bind time.
func leaderReads(ctx context.Context, js jetstream.JetStream, bucket string) error {
	name := "KV_" + bucket
	s, err := js.Stream(ctx, name)
	if err != nil {
		return fmt.Errorf("natsutil: key-value bucket %s: %w", bucket, err)
	}
	cfg := s.CachedInfo().Config
	if !cfg.AllowDirect && !cfg.MirrorDirect {
		return nil
	}
	cfg.AllowDirect, cfg.MirrorDirect = false, false
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		return fmt.Errorf("natsutil: key-value bucket %s: turn off direct gets: %w", bucket, err)
	}
	return nil
}

// EnsureStreams creates or updates strata's streams, durable consumers and
// key-value buckets with DefaultTopology's limits.
func EnsureStreams(ctx context.Context, js jetstream.JetStream) error {
	return DefaultTopology().Ensure(ctx, js)
}

// CreateMissingStreams creates the streams of t that do not exist and
// leaves existing ones as they are. Clients (the CLI) use it: they need the
// streams to publish, but the services own their configuration.
func (t Topology) CreateMissingStreams(ctx context.Context, js jetstream.JetStream) error {
	for _, cfg := range t.Streams() {
		_, err := js.CreateStream(ctx, cfg)
		if err != nil && !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			return fmt.Errorf("natsutil: create stream %s: %w", cfg.Name, err)
		}
	}
	return nil
}
