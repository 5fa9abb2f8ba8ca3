// Package service is the scaffolding every strata binary shares: common
// flags with environment-variable equivalents, log/slog setup, and a Runner —
// an oklog/run group with a signal handler and an HTTP listener serving
// /metrics (Prometheus) and /healthz.
//
// Every flag --some-name can also be set as STRATA_SOME_NAME; a flag given on
// the command line wins over the environment.
package service
