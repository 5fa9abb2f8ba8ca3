// Package service is the scaffolding every strata binary shares: common
// flags with environment-variable equivalents, log/slog setup, and a Runner —
// an oklog/run group with a signal handler and an HTTP listener serving
// /metrics (Prometheus) and /healthz.
//
// A binary starts from a Binary (NewBinary: the common flags; Start: logger
// and Runner; Connect: NATS and the stream topology). A job worker (merger,
// windower) is a Worker, whose whole run is RunJobs with its JobSpec.
//
// Every flag --some-name can also be set as STRATA_SOME_NAME; a flag given on
// the command line wins over the environment.
package service
