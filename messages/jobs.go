package messages

import (
	"cmp"
	"errors"
	"fmt"
)

// Grant is the memory a job may hold, decided by the scheduler from a
// resource pool. The worker holds the job to Bytes and reports its peak.
type Grant struct {
	Pool   string `msgpack:"pool"`
	Bytes  int64  `msgpack:"bytes"`  // granted bytes: the pool's target, plus any borrowed
	Target int64  `msgpack:"target"` // the pool's target per plan: memorysize / plannedconcurrency
}

// ContainerRef names one storage container under a data directory:
// DATA/<table>/<projection>/<id>/.
type ContainerRef struct {
	Table      string `msgpack:"table"`
	Projection string `msgpack:"projection"`
	ID         string `msgpack:"id"`
	Rows       int64  `msgpack:"rows,omitempty"`
	Bytes      int64  `msgpack:"bytes,omitempty"` // on-disk size
}

// MergeoutJob asks a merger to merge Inputs into one container named Output.
// The job ID names the output, so a redelivered job finds its output
// committed and does not merge again.
type MergeoutJob struct {
	JobID      string         `msgpack:"job_id"`
	Table      string         `msgpack:"table"`
	Projection string         `msgpack:"projection"`
	Inputs     []ContainerRef `msgpack:"inputs"`
	Output     string         `msgpack:"output"` // container ID of the result
	Grant      Grant          `msgpack:"grant"`
	Stratum    int            `msgpack:"stratum"`
	Created    int64          `msgpack:"created"` // unix nanoseconds, set by the scheduler
	// DropMarkersThrough, for a keyed table, lets the merge drop the
	// delete markers of version at most this (merger.Options): set only
	// when Inputs are every live container of the projection, to the
	// version through which every change is applied; 0 keeps them all.
	DropMarkersThrough int64 `msgpack:"drop_markers_through,omitempty" json:"drop_markers_through,omitempty"`
}

func (*MergeoutJob) Kind() string { return "mergeout_job" }

// ID returns the job's ID.
func (j *MergeoutJob) ID() string { return j.JobID }

// MemoryGrant returns the memory the job may hold.
func (j *MergeoutJob) MemoryGrant() Grant { return j.Grant }

// Validate checks the fields a merger relies on.
func (j *MergeoutJob) Validate() error {
	switch {
	case j.JobID == "":
		return errors.New("job_id is empty")
	case j.Table == "" || j.Projection == "":
		return fmt.Errorf("job %s: table and projection are required", j.JobID)
	case len(j.Inputs) == 0:
		return fmt.Errorf("job %s: no inputs", j.JobID)
	case j.Output == "":
		return fmt.Errorf("job %s: output is empty", j.JobID)
	case j.Grant.Bytes <= 0:
		return fmt.Errorf("job %s: grant of %d bytes", j.JobID, j.Grant.Bytes)
	case j.DropMarkersThrough < 0:
		return fmt.Errorf("job %s: drop_markers_through %d is negative", j.JobID, j.DropMarkersThrough)
	}
	if err := ValidTable(j.Table); err != nil {
		return fmt.Errorf("job %s: table: %w", j.JobID, err)
	}
	for _, n := range []string{j.Projection, j.Output} {
		if err := ValidName(n); err != nil {
			return fmt.Errorf("job %s: %w", j.JobID, err)
		}
	}
	for i, in := range j.Inputs {
		// An input's table and projection may be left empty: the job's.
		if err := validRef(ContainerRef{Table: cmp.Or(in.Table, j.Table), Projection: cmp.Or(in.Projection, j.Projection), ID: in.ID}); err != nil {
			return fmt.Errorf("job %s: input %d: %w", j.JobID, i, err)
		}
		if in.Table != "" && in.Table != j.Table || in.Projection != "" && in.Projection != j.Projection {
			return fmt.Errorf("job %s: input %d is of %s.%s, not %s.%s", j.JobID, i, in.Table, in.Projection, j.Table, j.Projection)
		}
	}
	return nil
}

// WindowJob asks a windower to evaluate a window query and write its result
// as container Output of table ResultTable.
type WindowJob struct {
	JobID       string         `msgpack:"job_id"`
	Query       WindowQuery    `msgpack:"query"`
	Inputs      []ContainerRef `msgpack:"inputs"` // the live containers of Query.Table when the job was made
	ResultTable string         `msgpack:"result_table"`
	Output      string         `msgpack:"output"`
	Grant       Grant          `msgpack:"grant"`
	Created     int64          `msgpack:"created"`
}

func (*WindowJob) Kind() string { return "window_job" }

// ID returns the job's ID.
func (j *WindowJob) ID() string { return j.JobID }

// MemoryGrant returns the memory the job may hold.
func (j *WindowJob) MemoryGrant() Grant { return j.Grant }

// Validate checks the fields a windower relies on; the query itself is
// validated by the windower against the table's schema.
func (j *WindowJob) Validate() error {
	switch {
	case j.JobID == "":
		return errors.New("job_id is empty")
	case j.Output == "" || j.ResultTable == "":
		return fmt.Errorf("job %s: result table and output are required", j.JobID)
	case j.Grant.Bytes <= 0:
		return fmt.Errorf("job %s: grant of %d bytes", j.JobID, j.Grant.Bytes)
	}
	if err := ValidTable(j.ResultTable); err != nil {
		return fmt.Errorf("job %s: result table: %w", j.JobID, err)
	}
	if err := ValidName(j.Output); err != nil {
		return fmt.Errorf("job %s: output: %w", j.JobID, err)
	}
	if err := j.Query.Validate(); err != nil {
		return fmt.Errorf("job %s: %w", j.JobID, err)
	}
	if j.ResultTable == j.Query.Table {
		return fmt.Errorf("job %s: result table %s is the query's table", j.JobID, j.ResultTable)
	}
	for i, in := range j.Inputs {
		// An input's table may be left empty: the query's.
		if err := validRef(ContainerRef{Table: cmp.Or(in.Table, j.Query.Table), Projection: in.Projection, ID: in.ID}); err != nil {
			return fmt.Errorf("job %s: input %d: %w", j.JobID, i, err)
		}
		if in.Table != "" && in.Table != j.Query.Table {
			return fmt.Errorf("job %s: input %d is of table %s, not the query's %s", j.JobID, i, in.Table, j.Query.Table)
		}
	}
	return nil
}

// EventType is the phase a JobEvent reports.
type EventType string

const (
	EventAccepted EventType = "accepted"
	EventProgress EventType = "progress"
	EventDone     EventType = "done"
	EventFailed   EventType = "failed"
)

// Subject returns the EVENTS subject an event of this type is published on.
func (t EventType) Subject() string { return "strata.events." + string(t) }

// JobEvent reports a job's progress from a worker to the scheduler and to
// anyone watching EVENTS.
type JobEvent struct {
	JobID     string    `msgpack:"job_id"`
	Operation string    `msgpack:"operation"` // "mergeout" or "window"
	Type      EventType `msgpack:"type"`
	Worker    string    `msgpack:"worker"`
	Time      int64     `msgpack:"time"` // unix nanoseconds
	Delivery  uint64    `msgpack:"delivery,omitempty"`

	// Progress and result figures; zero until known.
	RowsDone     int64  `msgpack:"rows_done,omitempty"`
	RowsTotal    int64  `msgpack:"rows_total,omitempty"`
	Bytes        int64  `msgpack:"bytes,omitempty"`
	Plan         string `msgpack:"plan,omitempty"` // horizontal, vertical, passes
	PeakBytes    int64  `msgpack:"peak_bytes,omitempty"`
	SpilledBytes int64  `msgpack:"spilled_bytes,omitempty"`
	// BlocksFetched and BytesFetched are the input blocks and bytes read
	// from an object store rather than local disk; set on done.
	BlocksFetched int64         `msgpack:"blocks_fetched,omitempty"`
	BytesFetched  int64         `msgpack:"bytes_fetched,omitempty"`
	Output        *ContainerRef `msgpack:"output,omitempty"` // set on done
	Reason        string        `msgpack:"reason,omitempty"` // set on failed
	Retryable     bool          `msgpack:"retryable,omitempty"`
}

func (*JobEvent) Kind() string { return "job_event" }

func (e *JobEvent) Validate() error {
	if e.JobID == "" {
		return errors.New("job_id is empty")
	}
	switch e.Type {
	case EventAccepted, EventProgress, EventDone, EventFailed:
	default:
		return fmt.Errorf("job %s: unknown event type %q", e.JobID, e.Type)
	}
	if len(e.JobID) > 1024 || len(e.Worker) > 1024 {
		return fmt.Errorf("job %.40q...: job_id or worker longer than 1024 bytes", e.JobID)
	}
	if e.Output != nil {
		if err := validRef(*e.Output); err != nil {
			return fmt.Errorf("job %s: output: %w", e.JobID, err)
		}
	}
	return nil
}
