package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-db/strata/internal/natsutil"
	"github.com/strata-db/strata/messages"
)

// Job is what a JobWorker needs to know of a decoded job.
type Job interface {
	messages.Message
	ID() string
	MemoryGrant() messages.Grant
}

// Outcome is what a job handler reports when its output is committed.
type Outcome struct {
	Output       *messages.ContainerRef
	Plan         string
	RowsTotal    int64
	Bytes        int64
	PeakBytes    int64
	SpilledBytes int64
	// BlocksFetched and BytesFetched are what the job read from an object
	// store rather than local disk.
	BlocksFetched int64
	BytesFetched  int64
	// Existing is true when the output was found already committed (a
	// redelivered job) and nothing was done.
	Existing bool
}

// Progress lets a running job report how far it got. Reports are
// published as progress events at most once per interval.
type Progress struct {
	w     *jobRun
	mu    sync.Mutex
	last  time.Time
	every time.Duration
}

// Report records rows done out of total and publishes a progress event if
// the last one is older than the interval. A nil Progress ignores reports.
func (p *Progress) Report(rowsDone, rowsTotal int64) {
	if p == nil || p.w == nil {
		return
	}
	p.mu.Lock()
	now := time.Now()
	if now.Sub(p.last) < p.every {
		p.mu.Unlock()
		return
	}
	p.last = now
	p.mu.Unlock()
	p.w.publish(messages.EventProgress, func(e *messages.JobEvent) {
		e.RowsDone, e.RowsTotal = rowsDone, rowsTotal
	})
}

// permanentError marks an error that retrying cannot fix.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Permanent marks err as one no redelivery can fix (a bad spec, a schema
// mismatch): the job is failed at once instead of retried.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err}
}

// IsPermanent reports whether err was marked by Permanent.
func IsPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p)
}

// ErrPanic is wrapped by the error of a job whose handler panicked.
var ErrPanic = errors.New("panic")

// PanicError is the error of a job whose handler panicked: the panic's
// value, where it was raised, and the stack (logged, not put in events).
type PanicError struct {
	Value any
	Site  string // function and file:line that panicked, if known
	Stack []byte
}

func (e *PanicError) Error() string {
	if e.Site == "" {
		return fmt.Sprintf("panic: %v", e.Value)
	}
	return fmt.Sprintf("panic: %v (in %s)", e.Value, e.Site)
}

func (e *PanicError) Unwrap() error { return ErrPanic }

// panicSite names the function that raised the panic being recovered: the
// first frame below runtime.gopanic that is not the runtime's own. It must
// be called from the deferred function that recovers.
func panicSite() string {
	pcs := make([]uintptr, 64)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs)])
	panicking := false
	for {
		f, more := frames.Next()
		switch {
		case f.Function == "runtime.gopanic":
			panicking = true
		case panicking && !strings.HasPrefix(f.Function, "runtime."):
			fn := f.Function
			if i := strings.LastIndex(fn, "/"); i >= 0 {
				fn = fn[i+1:]
			}
			return fmt.Sprintf("%s %s:%d", fn, filepath.Base(f.File), f.Line)
		}
		if !more {
			return ""
		}
	}
}

// JobWorker pulls jobs one at a time from a shared durable pull consumer,
// and runs each within the worker's memory:
//
//   - A message that does not decode or validate is rejected to the dead
//     letter stream with the reason (see Rejecter).
//   - A job whose grant exceeds Memory is handed back (Nak with delay) for
//     a worker with more memory; after MaxDeliver attempts it fails.
//   - Otherwise the worker publishes an accepted event, keeps its lease with
//     InProgress every Heartbeat while Run works, publishes done (deduplicated
//     by job ID) and acks only after Run returns, that is after the output
//     is committed. A failed Run is retried by redelivery until MaxDeliver,
//     then failed for good and dead-lettered; the message stays in JOBS.
//   - A permanent error (marked by Permanent, or one the Permanent
//     classifier says no redelivery can fix) fails the job at once, at
//     whatever delivery; so does a panic in Run, which is recovered, logged
//     with its stack and reported with its message. The worker goes on to
//     the next job.
//   - On stop, a running job gets StopGrace to finish; then it is cancelled
//     and Nak'ed, so another worker runs it.
type JobWorker[J Job] struct {
	Consumer   jetstream.Consumer
	JS         jetstream.JetStream
	Operation  string // "mergeout" or "window"
	Worker     string // this worker's name in events
	Memory     int64  // bytes this worker may grant to its job
	Heartbeat  time.Duration
	MaxDeliver int // the consumer's MaxDeliver
	StopGrace  time.Duration
	// ProgressEvery bounds how often progress events are published.
	ProgressEvery time.Duration
	// GrantRetryDelay is how long a job too large for Memory waits before
	// it is offered again.
	GrantRetryDelay time.Duration
	Log             *slog.Logger
	Rejecter        *Rejecter
	Metrics         *JobMetrics
	// Cancels, if set, are the scheduler's cancel notices: a job one
	// names is stopped (its context cancelled) and failed with the
	// notice's reason, not retried; nil ignores them.
	Cancels *Cancels

	New func() J
	Run func(ctx context.Context, job J, progress *Progress) (Outcome, error)
	// Permanent, if set, reports whether an error of Run is one no
	// redelivery can fix (the engines' deterministic errors). Errors marked
	// by Permanent and panics are permanent whatever it says; every other
	// error is retried until MaxDeliver.
	Permanent func(error) bool
	// AfterJob, if set, is called when a job that ran has ended, its
	// outcome published and its message acked or handed back, before the
	// next job is pulled: a worker's collection between jobs
	// (heaplimit.Setting.Collect).
	AfterJob func()
}

// JobMetrics are a worker's Prometheus metrics. Every series exists from
// the start (counters at zero), so a rate over it is defined before the
// first job.
type JobMetrics struct {
	jobs     *prometheus.CounterVec
	running  prometheus.Gauge
	seconds  prometheus.Histogram
	peak     prometheus.Gauge
	deferred prometheus.Counter
	panics   prometheus.Counter
	rows     prometheus.Counter
	bytes    prometheus.Counter
	spilled  prometheus.Counter
	fetched  prometheus.Counter
}

// JobResults are the values of strata_jobs_total's result label.
var JobResults = []string{"done", "existing", "failed", "retried", "released", "undelivered", "cancelled"}

// NewJobMetrics registers a worker's metrics in reg.
func NewJobMetrics(reg prometheus.Registerer, service string) *JobMetrics {
	cl := prometheus.Labels{"service": service}
	m := &JobMetrics{
		jobs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_jobs_total", Help: "Jobs finished by this worker, by result (done, existing, failed, retried, released, undelivered, cancelled).", ConstLabels: cl,
		}, []string{"result"}),
		running: prometheus.NewGauge(prometheus.GaugeOpts{Name: "strata_jobs_running", Help: "Jobs running now.", ConstLabels: cl}),
		seconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "strata_job_duration_seconds", Help: "Wall time of jobs done (output committed).", ConstLabels: cl,
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 18),
		}),
		peak: prometheus.NewGauge(prometheus.GaugeOpts{Name: "strata_job_peak_bytes", Help: "Peak memory of the last job done.", ConstLabels: cl}),
		deferred: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "strata_jobs_deferred_total", Help: "Jobs handed back because their grant exceeds this worker's memory.", ConstLabels: cl,
		}),
		panics: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "strata_job_panics_total", Help: "Jobs whose handler panicked (each failed at once; the worker went on).", ConstLabels: cl,
		}),
		rows: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "strata_job_rows_total", Help: "Rows written by the jobs done here (a merger: rows merged; a windower: result rows).", ConstLabels: cl,
		}),
		bytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "strata_job_bytes_total", Help: "Bytes of output containers written by the jobs done here (a merger: bytes merged).", ConstLabels: cl,
		}),
		spilled: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "strata_job_spilled_bytes_total", Help: "Bytes the jobs done here spilled to the temporary directory.", ConstLabels: cl,
		}),
		fetched: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "strata_job_fetched_bytes_total", Help: "Bytes the jobs done here read from the object store (--store) rather than local disk.", ConstLabels: cl,
		}),
	}
	for _, r := range JobResults {
		m.jobs.WithLabelValues(r)
	}
	reg.MustRegister(m.jobs, m.running, m.seconds, m.peak, m.deferred, m.panics, m.rows, m.bytes, m.spilled, m.fetched)
	return m
}

func (w *JobWorker[J]) defaults() {
	if w.Heartbeat <= 0 {
		w.Heartbeat = 10 * time.Second
	}
	if w.MaxDeliver <= 0 {
		w.MaxDeliver = natsutil.DefaultTopology().JobMaxDeliver
	}
	if w.ProgressEvery <= 0 {
		w.ProgressEvery = time.Second
	}
	if w.GrantRetryDelay <= 0 {
		w.GrantRetryDelay = 2 * time.Second
	}
}

// Serve pulls and runs jobs until ctx is cancelled.
func (w *JobWorker[J]) Serve(ctx context.Context) error {
	w.defaults()
	w.Log.Info("worker ready", "operation", w.Operation, "memory", w.Memory)
	for ctx.Err() == nil {
		fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		msg, err := w.Consumer.Next(jetstream.FetchContext(fctx))
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) || errors.Is(err, jetstream.ErrNoMessages) || errors.Is(err, jetstream.ErrNoHeartbeat) {
				continue
			}
			w.Log.Warn("fetch job", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		w.handle(ctx, msg)
	}
	return nil
}

// jobRun is one delivery of one job.
type jobRun struct {
	js        jetstream.JetStream
	log       *slog.Logger
	operation string
	worker    string
	jobID     string
	streamSeq uint64
	delivery  uint64
}

// eventMsgID is the Nats-Msg-Id of r's event of type t: a worker's retry
// of one event is deduplicated, and nothing else is. The worker is part
// of it because a delivery number does not name one delivery: a NATS
// server restarted before it stored a job's delivery count hands the job
// out again as the same delivery, to another worker, and the scheduler
// takes an outcome only from the worker whose claim it holds, which must
// not be dropped as a duplicate of the other's.
func (r *jobRun) eventMsgID(t messages.EventType) string {
	switch t {
	case messages.EventDone:
		// Per delivery: the scheduler takes a done claim only from the
		// latest delivery's worker, so a later delivery's done must not be
		// deduplicated against an earlier, refused one.
		return fmt.Sprintf("%s.done.%d.%s", r.jobID, r.delivery, r.worker)
	case messages.EventProgress:
		return "" // not deduplicated: each report is news
	}
	// One accepted or failed event per delivery of each job message.
	return fmt.Sprintf("%s.%s.%d.%d.%s", r.jobID, t, r.streamSeq, r.delivery, r.worker)
}

// event is r's event of type t, completed by fill (if not nil).
func (r *jobRun) event(t messages.EventType, fill func(*messages.JobEvent)) *messages.JobEvent {
	ev := &messages.JobEvent{JobID: r.jobID, Operation: r.operation, Type: t, Worker: r.worker, Time: time.Now().UnixNano(), Delivery: r.delivery}
	if fill != nil {
		fill(ev)
	}
	return ev
}

func (r *jobRun) publish(t messages.EventType, fill func(*messages.JobEvent)) {
	ev := r.event(t, fill)
	msgID := r.eventMsgID(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := natsutil.Publish(ctx, r.js, t.Subject(), msgID, ev); err != nil {
		r.log.Warn("publish job event", "type", t, "err", err)
	}
}

// outcomeWait bounds how long a worker tries to store a job's outcome
// event (retrying across a NATS restart or leader election) before it
// hands the job back undecided.
const outcomeWait = 2 * time.Minute

// publishOutcome publishes a done or failed event and returns only once
// JetStream stored it, retrying for outcomeWait while it keeps the job's
// lease: the job message is acked (or terminated) only after its outcome
// is stored, so a lost event cannot leave a job running for ever.
func (r *jobRun) publishOutcome(msg jetstream.Msg, heartbeat time.Duration, t messages.EventType, fill func(*messages.JobEvent)) error {
	ev := r.event(t, fill)
	msgID := r.eventMsgID(t)
	ctx, cancel := context.WithTimeout(context.Background(), outcomeWait)
	defer cancel()
	if heartbeat <= 0 {
		heartbeat = 5 * time.Second
	}
	for {
		// One attempt per heartbeat, extending the lease between them.
		actx, acancel := context.WithTimeout(ctx, heartbeat)
		_, err := natsutil.Publish(actx, r.js, t.Subject(), msgID, ev)
		acancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%s event not stored within %v: %w", t, outcomeWait, err)
		}
		r.log.Warn("job outcome not stored yet; retrying", "type", t, "err", err)
		_ = msg.InProgress()
	}
}

func (w *JobWorker[J]) handle(ctx context.Context, msg jetstream.Msg) {
	md, err := msg.Metadata()
	if err != nil {
		_ = w.Rejecter.Reject(ctx, msg, ClassMalformed, fmt.Sprintf("not a JetStream message: %v", err))
		return
	}
	job := w.New()
	if err := messages.Unmarshal(msg.Data(), job); err != nil {
		_ = w.Rejecter.Reject(ctx, msg, ClassMalformed, err.Error())
		return
	}
	run := &jobRun{js: w.JS, log: w.Log.With("job", job.ID(), "delivery", md.NumDelivered), operation: w.Operation, worker: w.Worker, jobID: job.ID(), streamSeq: md.Sequence.Stream, delivery: md.NumDelivered}
	last := md.NumDelivered >= uint64(w.MaxDeliver)

	if reason, ok := w.Cancels.Cancelled(job.ID()); ok {
		w.cancelled(ctx, msg, run, reason)
		return
	}
	if g := job.MemoryGrant(); g.Bytes > w.Memory {
		w.Metrics.deferred.Inc()
		reason := fmt.Sprintf("grant of %d bytes exceeds this worker's memory of %d bytes", g.Bytes, w.Memory)
		if last {
			w.fail(ctx, msg, run, reason+"; no worker took it after "+fmt.Sprint(md.NumDelivered)+" deliveries")
			return
		}
		run.log.Info("job handed back", "reason", reason)
		_ = msg.NakWithDelay(w.GrantRetryDelay)
		return
	}

	run.log.Info("job accepted", "grant", job.MemoryGrant().Bytes)
	run.publish(messages.EventAccepted, nil)
	if w.AfterJob != nil {
		defer w.AfterJob() // deferred first, so it runs last: after the outcome and the ack
	}
	w.Metrics.running.Inc()
	defer w.Metrics.running.Dec()
	start := time.Now()

	jobCtx, cancelJob := context.WithCancelCause(context.Background())
	defer cancelJob(nil)
	untrack := w.Cancels.track(job.ID(), func(reason string) { cancelJob(&CancelledError{Reason: reason}) })
	defer untrack()
	done := make(chan struct{})
	defer close(done)
	stopped := make(chan struct{})
	go w.keepLease(ctx, msg, run, done, stopped, func() { cancelJob(nil) })

	out, err := w.runJob(jobCtx, run, job, &Progress{w: run, every: w.ProgressEvery})
	elapsed := time.Since(start)
	select {
	case <-stopped:
		if err != nil {
			// Cancelled by a stop: hand the job to another worker.
			w.Metrics.jobs.WithLabelValues("released").Inc()
			run.log.Info("job released on stop", "err", err)
			_ = msg.Nak()
			return
		}
	default:
	}
	if err != nil {
		if ce := cancelCause(jobCtx); ce != nil {
			w.cancelled(ctx, msg, run, ce.Reason)
			return
		}
		if w.permanent(err) || last {
			w.fail(ctx, msg, run, err.Error())
			return
		}
		w.Metrics.jobs.WithLabelValues("retried").Inc()
		run.log.Warn("job failed; will be retried", "err", err, "elapsed", elapsed)
		run.publish(messages.EventFailed, func(e *messages.JobEvent) { e.Reason = err.Error(); e.Retryable = true })
		_ = msg.NakWithDelay(time.Second)
		return
	}
	result := "done"
	if out.Existing {
		result = "existing"
	} else {
		w.Metrics.seconds.Observe(elapsed.Seconds())
		w.Metrics.peak.Set(float64(out.PeakBytes))
		w.Metrics.rows.Add(float64(max(out.RowsTotal, 0)))
		w.Metrics.bytes.Add(float64(max(out.Bytes, 0)))
		w.Metrics.spilled.Add(float64(max(out.SpilledBytes, 0)))
		w.Metrics.fetched.Add(float64(max(out.BytesFetched, 0)))
	}
	w.Metrics.jobs.WithLabelValues(result).Inc()
	err = run.publishOutcome(msg, w.Heartbeat, messages.EventDone, func(e *messages.JobEvent) {
		e.Output, e.Plan, e.RowsDone, e.RowsTotal, e.Bytes = out.Output, out.Plan, out.RowsTotal, out.RowsTotal, out.Bytes
		e.PeakBytes, e.SpilledBytes = out.PeakBytes, out.SpilledBytes
		e.BlocksFetched, e.BytesFetched = out.BlocksFetched, out.BytesFetched
	})
	if err != nil {
		// Not acked: a redelivery finds the committed output and reports
		// done again.
		run.log.Error("job done but its outcome could not be stored; handing it back", "err", err)
		_ = msg.Nak()
		return
	}
	actx, acancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer acancel()
	if err := msg.DoubleAck(actx); err != nil {
		// The output is committed; a redelivery finds it and reports done again.
		run.log.Warn("ack job", "err", err)
	}
	run.log.Info("job done", "result", result, "plan", out.Plan, "rows", out.RowsTotal, "peak_bytes", out.PeakBytes, "elapsed", elapsed)
}

// runJob calls Run. A panic in it is recovered here, at the job boundary,
// so that no input can end the worker: it is logged with its stack and
// returned as a *PanicError, which fails the job for good.
func (w *JobWorker[J]) runJob(ctx context.Context, run *jobRun, job J, p *Progress) (out Outcome, err error) {
	defer func() {
		v := recover()
		if v == nil {
			return
		}
		pe := &PanicError{Value: v, Site: panicSite(), Stack: debug.Stack()}
		w.Metrics.panics.Inc()
		run.log.Error("job panicked", "panic", fmt.Sprint(v), "site", pe.Site, "stack", string(pe.Stack))
		out, err = Outcome{}, pe
	}()
	return w.Run(ctx, job, p)
}

// permanent reports whether err fails the job at once rather than after
// MaxDeliver deliveries.
func (w *JobWorker[J]) permanent(err error) bool {
	return IsPermanent(err) || errors.Is(err, ErrPanic) || (w.Permanent != nil && w.Permanent(err))
}

// keepLease extends the job's lease every Heartbeat until done. When ctx is
// cancelled (the worker is stopping) it gives the job StopGrace to finish,
// then closes stopped and cancels it.
func (w *JobWorker[J]) keepLease(ctx context.Context, msg jetstream.Msg, run *jobRun, done <-chan struct{}, stopped chan<- struct{}, cancelJob context.CancelFunc) {
	tick := time.NewTicker(w.Heartbeat)
	defer tick.Stop()
	stopping := ctx.Done()
	var grace <-chan time.Time
	for {
		select {
		case <-done:
			return
		case <-tick.C:
			if err := msg.InProgress(); err != nil {
				run.log.Warn("extend job lease", "err", err)
			}
		case <-stopping:
			stopping = nil
			run.log.Info("stopping: letting the running job finish", "grace", w.StopGrace)
			grace = time.After(w.StopGrace)
		case <-grace:
			close(stopped)
			cancelJob()
			return
		}
	}
}

// cancelled reports a job stopped by a cancel notice (or delivered after
// one) as failed with the notice's reason, not to be retried, and
// terminates its message: no dead letter, the failure was asked for.
func (w *JobWorker[J]) cancelled(_ context.Context, msg jetstream.Msg, run *jobRun, reason string) {
	w.Metrics.jobs.WithLabelValues("cancelled").Inc()
	run.log.Info("job cancelled", "reason", reason)
	if err := run.publishOutcome(msg, w.Heartbeat, messages.EventFailed, func(e *messages.JobEvent) { e.Reason = reason }); err != nil {
		run.log.Error("the job's cancellation could not be stored; handing it back", "err", err)
		_ = msg.NakWithDelay(5 * time.Second)
		return
	}
	if err := msg.TermWithReason("cancelled"); err != nil {
		run.log.Warn("terminate cancelled job", "err", err)
	}
}

func (w *JobWorker[J]) fail(ctx context.Context, msg jetstream.Msg, run *jobRun, reason string) {
	w.Metrics.jobs.WithLabelValues("failed").Inc()
	run.log.Error("job failed", "reason", reason)
	if err := run.publishOutcome(msg, w.Heartbeat, messages.EventFailed, func(e *messages.JobEvent) { e.Reason = reason }); err != nil {
		// Not terminated: the failure is told on a later delivery.
		run.log.Error("the job's failure could not be stored; handing it back", "err", err)
		_ = msg.NakWithDelay(5 * time.Second)
		return
	}
	_ = w.Rejecter.Reject(ctx, msg, ClassFailed, reason)
}
