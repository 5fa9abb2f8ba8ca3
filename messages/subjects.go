package messages

// JetStream streams, their subjects, and the durable consumers that share
// work between workers of one kind.
const (
	StreamJobs       = "JOBS"       // job messages; limits retention, so a job stream can be recorded and replayed
	StreamEvents     = "EVENTS"     // job events: accepted, progress, done, failed
	StreamUpdates    = "UPDATES"    // update events for the walwriter
	StreamDeadLetter = "DEADLETTER" // messages a service could not process, with the reason

	SubjectJobsAll     = "strata.jobs.>"
	SubjectJobMergeout = "strata.jobs.mergeout"
	SubjectJobWindow   = "strata.jobs.window"

	SubjectEventsAll      = "strata.events.>"
	SubjectEventAccepted  = "strata.events.accepted"
	SubjectEventProgress  = "strata.events.progress"
	SubjectEventDone      = "strata.events.done"
	SubjectEventFailed    = "strata.events.failed"
	SubjectUpdatesAll     = "strata.updates.>"
	SubjectUpdatesPrefix  = "strata.updates."    // + table name
	SubjectAPIPrefix      = "strata.api."        // + request name, plain request/reply
	SubjectDeadLetterBase = "strata.deadletter." // + original subject; malformed or failed messages, with the reason
	SubjectDeadLetterAll  = "strata.deadletter.>"

	ConsumerMerger    = "merger"    // shared durable pull consumer on SubjectJobMergeout
	ConsumerWindower  = "windower"  // shared durable pull consumer on SubjectJobWindow
	ConsumerWalwriter = "walwriter" // shared durable pull consumer on SubjectUpdatesAll
	ConsumerScheduler = "scheduler" // the scheduler's durable consumer on EVENTS

	BucketCatalog = "strata_catalog" // key-value: live containers per projection, changed by compare-and-set
	BucketPools   = "strata_pools"   // key-value: resource pool configuration
)

// SubjectUpdates returns the subject update events of table are published on.
func SubjectUpdates(table string) string { return SubjectUpdatesPrefix + table }

// SubjectDeadLetter returns the subject a message that arrived on subject is
// dead-lettered to.
func SubjectDeadLetter(subject string) string { return SubjectDeadLetterBase + subject }

// NATS message headers strata sets.
const (
	HeaderMsgID = "Nats-Msg-Id" // JetStream publish deduplication

	HeaderReason    = "Strata-Reason"     // dead letter: why the message was rejected
	HeaderClass     = "Strata-Class"      // dead letter: the reason's class: malformed, failed or rejected
	HeaderSubject   = "Strata-Subject"    // dead letter: the subject it arrived on
	HeaderService   = "Strata-Service"    // dead letter: the service that rejected it
	HeaderStreamSeq = "Strata-Stream-Seq" // dead letter: its sequence in the original stream
	HeaderDelivery  = "Strata-Delivery"   // dead letter: which delivery attempt was rejected
)
