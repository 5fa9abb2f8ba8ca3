package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/oklog/run"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Runner runs a service's actors as one oklog/run group: the first actor to
// return stops the others. It always adds a handler for SIGINT and SIGTERM,
// and, when given an address, an HTTP listener for /metrics and /healthz.
type Runner struct {
	name     string
	log      *slog.Logger
	registry *prometheus.Registry
	mux      *http.ServeMux
	group    run.Group

	mu     sync.Mutex
	checks []check
}

type check struct {
	name string
	fn   func() error
}

// NewRunner returns a Runner whose registry already holds the Go runtime and
// process collectors.
func NewRunner(name string, log *slog.Logger) *Runner {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	r := &Runner{name: name, log: log, registry: reg, mux: http.NewServeMux()}
	r.mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	r.mux.HandleFunc("/healthz", r.serveHealth)
	return r
}

// Registry is where the service registers its metrics.
func (r *Runner) Registry() *prometheus.Registry { return r.registry }

// Handler serves /metrics, /healthz and what Handle added, as the --http
// listener does (for tests).
func (r *Runner) Handler() http.Handler { return r.mux }

// Handle adds an HTTP handler beside /metrics and /healthz.
func (r *Runner) Handle(pattern string, h http.Handler) { r.mux.Handle(pattern, h) }

// AddCheck adds a health check; /healthz answers 503 while any fails.
func (r *Runner) AddCheck(name string, fn func() error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.checks = append(r.checks, check{name, fn})
}

// Add adds an actor: execute runs until done or interrupted; interrupt
// makes it return.
func (r *Runner) Add(execute func() error, interrupt func(error)) {
	r.group.Add(execute, interrupt)
}

// AddContext adds an actor that runs fn until fn returns or the group
// stops, which cancels fn's context.
func (r *Runner) AddContext(fn func(ctx context.Context) error) {
	ctx, cancel := context.WithCancel(context.Background())
	r.group.Add(func() error { return fn(ctx) }, func(error) { cancel() })
}

// Run adds the signal handler and, if httpAddr is not empty, the HTTP
// listener, then runs the group until the first actor returns. A stop by
// signal returns nil.
func (r *Runner) Run(httpAddr string) error { return r.runWithAddr(httpAddr, nil) }

// runWithAddr is Run that also sends the bound HTTP address to bound.
func (r *Runner) runWithAddr(httpAddr string, bound chan<- string) error {
	r.group.Add(run.SignalHandler(context.Background(), os.Interrupt, syscall.SIGTERM))
	if httpAddr != "" {
		ln, err := net.Listen("tcp", httpAddr)
		if err != nil {
			return fmt.Errorf("%s: listen on %s for /metrics and /healthz: %w", r.name, httpAddr, err)
		}
		srv := &http.Server{Handler: r.mux, ReadHeaderTimeout: 10 * time.Second}
		r.log.Info("http listening", "addr", ln.Addr().String(), "paths", "/metrics /healthz")
		if bound != nil {
			bound <- ln.Addr().String()
		}
		r.group.Add(func() error {
			if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("%s: http server: %w", r.name, err)
			}
			return nil
		}, func(error) {
			sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer scancel()
			_ = srv.Shutdown(sctx)
		})
	}
	err := r.group.Run()
	var sig *run.SignalError
	if errors.As(err, &sig) && sig != nil {
		r.log.Info("stopped by signal", "signal", fmt.Sprint(sig.Signal))
		return nil
	}
	return err
}

func (r *Runner) serveHealth(w http.ResponseWriter, _ *http.Request) {
	r.mu.Lock()
	checks := append([]check(nil), r.checks...)
	r.mu.Unlock()
	status := http.StatusOK
	body := ""
	for _, c := range checks {
		if err := c.fn(); err != nil {
			status = http.StatusServiceUnavailable
			body += fmt.Sprintf("%s: %v\n", c.name, err)
		} else {
			body += c.name + ": ok\n"
		}
	}
	if body == "" {
		body = "ok\n"
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(body))
}
