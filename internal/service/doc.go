// Package service is the scaffolding every strata binary shares: common
// flags with environment-variable equivalents, log/slog setup, and a Runner —
// an oklog/run group with a signal handler and an HTTP listener serving
// /metrics (Prometheus) and /healthz.
//
// A binary starts from a Binary (NewBinary: the common flags; Start: logger
// and Runner; Connect: NATS and the stream topology). A job worker (merger,
// windower) is a Worker, whose whole run is RunJobs with its JobSpec.
//
// Metrics every service shares are made here: a job worker's JobMetrics,
// the Rejecter's strata_rejected_messages_total, and ConsumerLag, which
// polls durable consumers for strata_consumer_lag_messages. Each carries
// the label service; counters start at zero for every label value known
// in advance. Logs (NewLogger) give durations in seconds and sizes in
// bytes, in both formats.
//
// Every flag --some-name can also be set as STRATA_SOME_NAME; a flag given on
// the command line wins over the environment.
//
// The command-line conventions every binary, the strata CLI included,
// shares come from here: Parse prints -h to stdout and takes flags among
// the positional arguments; --version prints Version (module version, VCS
// commit, Go version, from the build info); ExitCode maps a run's error to
// the exit status — 0 for success, -h and --version, 2 for a usage error
// (ErrUsage: a bad flag, value or argument), 1 for any other failure. A
// client registers only the connection flags (Common.RegisterConn), a
// service all of them (Common.Register).
package service
