// Package natsutil is strata's NATS client plumbing: connections (URL
// lists, credentials files, user/password, TLS), the idempotent creation
// of the JetStream streams, durable consumers and key-value buckets that
// the services share, and the roles a deployment's NATS users have. It
// imports the client (nats.go) only; the embedded server is
// internal/natsembed, linked by the binaries that run one.
//
// Engine packages never import this package; only services/ and the
// integration tests do.
//
// # Streams
//
//	JOBS        strata.jobs.>        limits retention (history kept for record/replay), dedup window
//	EVENTS      strata.events.>      limits retention, bounded by age
//	UPDATES     strata.updates.>     limits retention, bounded by age
//	DEADLETTER  strata.deadletter.>  limits retention; malformed or undeliverable messages, with the reason
//
// # Consumers
//
// Workers of one kind share one durable pull consumer with explicit acks:
// merger on strata.jobs.mergeout, windower on strata.jobs.window, walwriter on
// strata.updates.>, and the scheduler on strata.events.>. A worker that does
// not ack within AckWait (and does not extend its lease with InProgress) has
// its message redelivered, up to MaxDeliver times.
//
// # Dead letters
//
// A message a service cannot process is republished on
// strata.deadletter.<original subject> with its original payload and the
// headers Strata-Reason (why), Strata-Class (malformed, failed or
// rejected), Strata-Subject (where it came from),
// Strata-Service (who rejected it) and Strata-Stream-Seq (its sequence in the
// original stream, when known), then terminated in its original consumer.
//
// # Credentials
//
// The embedded server's users (internal/natsembed) are the roles of
// auth.go, one password per role in DATA/nats-auth/<role>.password (mode
// 0600, directory 0700). The file holds the password on its first line;
// the user name is the role.
package natsutil
