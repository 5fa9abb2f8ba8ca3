package messages

import (
	"errors"
	"fmt"
)

// Subjects of the scheduler's request/reply API (plain NATS request/reply,
// not JetStream). Every request has a matching reply type; a reply whose
// Error is set reports a refused or failed request.
const (
	SubjectAPIRegister       = SubjectAPIPrefix + "register"        // RegisterRequest -> RegisterReply
	SubjectAPIMergeout       = SubjectAPIPrefix + "mergeout"        // MergeoutRequest -> MergeoutReply
	SubjectAPIWindow         = SubjectAPIPrefix + "window"          // WindowRequest -> WindowReply
	SubjectAPIOperations     = SubjectAPIPrefix + "operations"      // OperationsRequest -> OperationsReply
	SubjectAPIAcquisitions   = SubjectAPIPrefix + "acquisitions"    // AcquisitionsRequest -> AcquisitionsReply
	SubjectAPIPools          = SubjectAPIPrefix + "pools"           // PoolsRequest -> PoolsReply
	SubjectAPIPoolCreate     = SubjectAPIPrefix + "pools.create"    // CreatePoolRequest -> PoolsReply
	SubjectAPIPoolAlter      = SubjectAPIPrefix + "pools.alter"     // AlterPoolRequest -> PoolsReply
	SubjectAPICatalog        = SubjectAPIPrefix + "catalog"         // CatalogRequest -> CatalogReply
	SubjectAPIDropContainers = SubjectAPIPrefix + "containers.drop" // DropContainersRequest -> DropContainersReply
	SubjectAPIReserve        = SubjectAPIPrefix + "reserve"         // ReserveRequest -> ReserveReply
	SubjectAPIApply          = SubjectAPIPrefix + "apply"           // ApplyRequest -> ApplyReply
	SubjectAPIAll            = SubjectAPIPrefix + ">"               // what the scheduler subscribes to
	DefaultMergeoutPool      = "tm"                                 // pool mergeouts run in
	DefaultWindowPool        = "general"                            // pool window jobs run in unless the request names one
	OperationMergeout        = "mergeout"                           // JobEvent.Operation and Operation.Operation values
	OperationWindow          = "window"                             //
	ErrCodeTooManyContainers = "too_many_containers"                // APIError.Code of a refused load
	ErrCodeInternal          = "internal"                           // APIError.Code of a request the scheduler could not carry out; its outcome may be unknown
	ErrCodeFrozen            = "frozen"                             // APIError.Code of a refused apply: the batch holds changes at or below the table's frozen floor (ApplyReply.FrozenThrough)
)

// APIError is the error part of every reply. Code is a stable machine-readable
// reason ("too_many_containers", "not_found", "invalid", "internal"); Message
// is for people.
type APIError struct {
	Code    string `msgpack:"code" json:"code"`
	Message string `msgpack:"message" json:"message"`
}

func (e *APIError) Error() string { return e.Message }

// Definite reports whether the error is the scheduler's decision about
// the request (refused, invalid, not found, ...). An internal error is
// not: the scheduler failed while carrying the request out (its catalog
// unreachable, say), and a request that changes state may or may not have
// taken effect. A client settles it by sending the request again with the
// same RequestID.
func (e *APIError) Definite() bool { return e != nil && e.Code != ErrCodeInternal }

// Err returns the reply's error as a Go error, or nil.
func (e *APIError) Err() error {
	if e == nil {
		return nil
	}
	return e
}

// Reply is every reply of the API: a message with an error part.
type Reply interface {
	Message
	// ReplyError returns the reply's error part, nil when the request was
	// carried out.
	ReplyError() *APIError
}

func (r *RegisterReply) ReplyError() *APIError       { return r.Error }
func (r *ApplyReply) ReplyError() *APIError          { return r.Error }
func (r *MergeoutReply) ReplyError() *APIError       { return r.Error }
func (r *WindowReply) ReplyError() *APIError         { return r.Error }
func (r *OperationsReply) ReplyError() *APIError     { return r.Error }
func (r *AcquisitionsReply) ReplyError() *APIError   { return r.Error }
func (r *PoolsReply) ReplyError() *APIError          { return r.Error }
func (r *CatalogReply) ReplyError() *APIError        { return r.Error }
func (r *DropContainersReply) ReplyError() *APIError { return r.Error }
func (r *ReserveReply) ReplyError() *APIError        { return r.Error }

// RegisterRequest adds loaded containers to the live set of a projection.
// The containers must already be committed in the data directory.
type RegisterRequest struct {
	Table      string         `msgpack:"table" json:"table"`
	Projection string         `msgpack:"projection" json:"projection"`
	Containers []ContainerRef `msgpack:"containers" json:"containers"`
	// RequestID, if set, names this request: the scheduler records its
	// answer in the catalog with the change, and answers the same request
	// sent again (its reply late or lost, the scheduler restarted) with
	// that first answer. See ValidRequestID.
	RequestID string `msgpack:"request_id,omitempty" json:"request_id,omitempty"`
	// Reservations are the reservations (ReserveReply) the containers were
	// numbered from; registering releases them.
	Reservations []string `msgpack:"reservations,omitempty" json:"reservations,omitempty"`
}

func (*RegisterRequest) Kind() string { return "register_request" }

func (r *RegisterRequest) Validate() error {
	if err := validTableProjection(r.Table, r.Projection); err != nil {
		return err
	}
	if len(r.Containers) == 0 {
		return errors.New("no containers")
	}
	seen := make(map[string]bool, len(r.Containers))
	for i, c := range r.Containers {
		if err := validRef(c); err != nil {
			return fmt.Errorf("container %d: %w", i, err)
		}
		if c.Table != r.Table || c.Projection != r.Projection {
			return fmt.Errorf("container %s belongs to %s.%s, not %s.%s", c.ID, c.Table, c.Projection, r.Table, r.Projection)
		}
		if seen[c.ID] {
			return fmt.Errorf("container %s named twice", c.ID)
		}
		seen[c.ID] = true
	}
	for _, id := range r.Reservations {
		if err := validName(id); err != nil {
			return fmt.Errorf("reservation: %v", err)
		}
	}
	return ValidRequestID(r.RequestID)
}

// ValidRequestID checks a request ID: empty (the request is answered as
// new each time it arrives) or a name as ValidName has them.
func ValidRequestID(id string) error {
	if id == "" {
		return nil
	}
	if err := validName(id); err != nil {
		return fmt.Errorf("request id: %v", err)
	}
	return nil
}

// RegisterReply reports the projection's live container count after the
// registration.
type RegisterReply struct {
	Live int `msgpack:"live" json:"live"`
	// Repeat is set on the answer to a request the scheduler had already
	// answered (the same RequestID): Live is as it was then.
	Repeat bool      `msgpack:"repeat,omitempty" json:"repeat,omitempty"`
	Error  *APIError `msgpack:"error,omitempty" json:"error,omitempty"`
}

func (*RegisterReply) Kind() string { return "register_reply" }

// MergeoutRequest asks for a mergeout now: every live container of the
// projection (every projection of Table when Projection is empty) that no
// running job already merges is merged into one.
type MergeoutRequest struct {
	Table      string `msgpack:"table" json:"table"`
	Projection string `msgpack:"projection,omitempty" json:"projection,omitempty"`
	// RequestID, if set, names this request as RegisterRequest's does: the
	// same request sent again gets the jobs the first one started.
	RequestID string `msgpack:"request_id,omitempty" json:"request_id,omitempty"`
}

func (*MergeoutRequest) Kind() string { return "mergeout_request" }

func (r *MergeoutRequest) Validate() error {
	if err := ValidTable(r.Table); err != nil {
		return fmt.Errorf("table: %v", err)
	}
	if r.Projection != "" {
		if err := validName(r.Projection); err != nil {
			return fmt.Errorf("projection: %v", err)
		}
	}
	return ValidRequestID(r.RequestID)
}

// MergeoutReply names the jobs the request started. A client learns their
// outcome from the EVENTS stream (done or failed, by job ID).
type MergeoutReply struct {
	Jobs []JobRef `msgpack:"jobs" json:"jobs"`
	// Running are the table's mergeouts that were already under way and
	// hold the containers the request did not get.
	Running []JobRef  `msgpack:"running,omitempty" json:"running,omitempty"`
	Error   *APIError `msgpack:"error,omitempty" json:"error,omitempty"`
}

func (*MergeoutReply) Kind() string { return "mergeout_reply" }

// JobRef names a job the scheduler made and whether it waits for memory.
type JobRef struct {
	JobID      string `msgpack:"job_id" json:"job_id"`
	Table      string `msgpack:"table" json:"table"`
	Projection string `msgpack:"projection" json:"projection"`
	Inputs     int    `msgpack:"inputs" json:"inputs"`
	Output     string `msgpack:"output" json:"output"`
	Queued     bool   `msgpack:"queued,omitempty" json:"queued,omitempty"` // waiting in its pool's queue
	Grant      Grant  `msgpack:"grant" json:"grant"`                       // zero while queued
}

// WindowRequest submits a window query. Pool names the resource pool to run
// in; empty means DefaultWindowPool.
type WindowRequest struct {
	Query WindowQuery `msgpack:"query" json:"query"`
	Pool  string      `msgpack:"pool,omitempty" json:"pool,omitempty"`
	// RequestID, if set, names this request so a client may send it again
	// (its reply lost when a NATS node died, the scheduler restarted) and
	// get the same job, not a second one: the scheduler records it in the
	// catalog with the job.
	RequestID string `msgpack:"request_id,omitempty" json:"request_id,omitempty"`
}

func (*WindowRequest) Kind() string { return "window_request" }

func (r *WindowRequest) Validate() error {
	if err := ValidTable(r.Query.Table); err != nil {
		return fmt.Errorf("query table: %v", err)
	}
	if len(r.Query.Select) == 0 {
		return errors.New("query selects nothing")
	}
	if r.Pool != "" {
		if err := validName(r.Pool); err != nil {
			return fmt.Errorf("pool: %v", err)
		}
	}
	return ValidRequestID(r.RequestID)
}

// WindowReply names the window job and where its result will be. The
// result container is ready when the job's done event arrives.
type WindowReply struct {
	Job         JobRef    `msgpack:"job" json:"job"`
	ResultTable string    `msgpack:"result_table" json:"result_table"`
	Error       *APIError `msgpack:"error,omitempty" json:"error,omitempty"`
}

func (*WindowReply) Kind() string { return "window_reply" }

// OperationsRequest lists the operations system table, newest first.
// Zero Limit means all the scheduler keeps. Applies also asks for the
// applies log (the walwriter's flushes, kept apart from the jobs), under
// the same Table filter and Limit.
type OperationsRequest struct {
	Table   string `msgpack:"table,omitempty" json:"table,omitempty"`
	JobID   string `msgpack:"job_id,omitempty" json:"job_id,omitempty"`
	Limit   int    `msgpack:"limit,omitempty" json:"limit,omitempty"`
	Applies bool   `msgpack:"applies,omitempty" json:"applies,omitempty"`
}

func (*OperationsRequest) Kind() string { return "operations_request" }

func (r *OperationsRequest) Validate() error {
	if r.Table != "" {
		if err := ValidTable(r.Table); err != nil {
			return fmt.Errorf("table: %w", err)
		}
	}
	if r.Limit < 0 {
		return fmt.Errorf("negative limit %d", r.Limit)
	}
	return nil
}

// Operation statuses.
const (
	StatusQueued  = "queued"  // waiting for memory in its pool
	StatusRunning = "running" // published to workers
	StatusDone    = "done"
	StatusFailed  = "failed"
)

// Operation is one row of the operations system table (Vertica's
// tuple_mover_operations, for mergeouts and window jobs alike). Times are
// unix nanoseconds; zero until known.
type Operation struct {
	JobID             string   `msgpack:"job_id" json:"job_id"`
	Operation         string   `msgpack:"operation" json:"operation"` // mergeout, window
	Status            string   `msgpack:"status" json:"status"`
	Table             string   `msgpack:"table" json:"table"`
	Projection        string   `msgpack:"projection" json:"projection"`
	Stratum           int      `msgpack:"stratum,omitempty" json:"stratum,omitempty"`
	Inputs            int      `msgpack:"inputs" json:"inputs"`
	Output            string   `msgpack:"output,omitempty" json:"output,omitempty"`
	Rows              int64    `msgpack:"rows,omitempty" json:"rows,omitempty"`
	Bytes             int64    `msgpack:"bytes,omitempty" json:"bytes,omitempty"`
	Plan              string   `msgpack:"plan,omitempty" json:"plan,omitempty"` // horizontal, vertical, passes
	Worker            string   `msgpack:"worker,omitempty" json:"worker,omitempty"`
	Deliveries        uint64   `msgpack:"deliveries,omitempty" json:"deliveries,omitempty"`
	Created           int64    `msgpack:"created" json:"created"`
	Start             int64    `msgpack:"start,omitempty" json:"start,omitempty"` // published to workers
	End               int64    `msgpack:"end,omitempty" json:"end,omitempty"`
	PeakBytes         int64    `msgpack:"peak_bytes,omitempty" json:"peak_bytes,omitempty"`
	SpilledBytes      int64    `msgpack:"spilled_bytes,omitempty" json:"spilled_bytes,omitempty"`
	BlocksFetched     int64    `msgpack:"blocks_fetched,omitempty" json:"blocks_fetched,omitempty"` // read from an object store
	BytesFetched      int64    `msgpack:"bytes_fetched,omitempty" json:"bytes_fetched,omitempty"`
	Grant             Grant    `msgpack:"grant" json:"grant"`
	MemoryConstrained bool     `msgpack:"memory_constrained,omitempty" json:"memory_constrained,omitempty"` // peak exceeded the pool's target
	Reason            string   `msgpack:"reason,omitempty" json:"reason,omitempty"`
	InputIDs          []string `msgpack:"input_ids,omitempty" json:"input_ids,omitempty"`
}

// OperationsReply carries the operations table and, when asked, the
// applies log.
type OperationsReply struct {
	Operations []Operation    `msgpack:"operations" json:"operations"`
	Applies    []AppliedBatch `msgpack:"applies,omitempty" json:"applies,omitempty"`
	Error      *APIError      `msgpack:"error,omitempty" json:"error,omitempty"`
}

// AppliedBatch is one row of the applies log: a batch of changes the
// scheduler made live (one walwriter flush of one table), or refused.
// At is unix nanoseconds.
type AppliedBatch struct {
	Table      string `msgpack:"table" json:"table"`
	Projection string `msgpack:"projection" json:"projection"`
	Container  string `msgpack:"container" json:"container"`
	WAL        string `msgpack:"wal" json:"wal"`
	To         uint64 `msgpack:"to" json:"to"` // the WAL position the batch reaches
	Rows       int64  `msgpack:"rows" json:"rows"`
	Bytes      int64  `msgpack:"bytes,omitempty" json:"bytes,omitempty"`
	MinVersion int64  `msgpack:"min_version,omitempty" json:"min_version,omitempty"`
	MaxVersion int64  `msgpack:"max_version,omitempty" json:"max_version,omitempty"`
	Live       int    `msgpack:"live" json:"live"` // live containers after it
	At         int64  `msgpack:"at" json:"at"`
	Refused    string `msgpack:"refused,omitempty" json:"refused,omitempty"` // why, when it was refused
}

func (*OperationsReply) Kind() string { return "operations_reply" }

// AcquisitionsRequest lists resource acquisitions, newest first.
type AcquisitionsRequest struct {
	Pool  string `msgpack:"pool,omitempty" json:"pool,omitempty"`
	Limit int    `msgpack:"limit,omitempty" json:"limit,omitempty"`
}

func (*AcquisitionsRequest) Kind() string { return "acquisitions_request" }

func (r *AcquisitionsRequest) Validate() error {
	if r.Limit < 0 {
		return fmt.Errorf("negative limit %d", r.Limit)
	}
	return nil
}

// Acquisition is one row of the acquisitions system table (Vertica's
// resource_acquisitions): one job's memory from one pool. Times are unix
// nanoseconds; zero until it happens.
type Acquisition struct {
	Pool     string `msgpack:"pool" json:"pool"`
	JobID    string `msgpack:"job_id" json:"job_id"`
	Status   string `msgpack:"status" json:"status"` // queued, granted, released, timed_out
	Target   int64  `msgpack:"target" json:"target"`
	Grant    int64  `msgpack:"grant" json:"grant"`
	Borrowed int64  `msgpack:"borrowed,omitempty" json:"borrowed,omitempty"` // part of Grant above the pool's memorysize
	Peak     int64  `msgpack:"peak,omitempty" json:"peak,omitempty"`
	Queued   int64  `msgpack:"queued" json:"queued"`
	Acquired int64  `msgpack:"acquired,omitempty" json:"acquired,omitempty"`
	Released int64  `msgpack:"released,omitempty" json:"released,omitempty"`
	Reason   string `msgpack:"reason,omitempty" json:"reason,omitempty"`
}

// Acquisition statuses.
const (
	AcquisitionQueued   = "queued"
	AcquisitionGranted  = "granted"
	AcquisitionReleased = "released"
	AcquisitionTimedOut = "timed_out"
)

// AcquisitionsReply carries the acquisitions table.
type AcquisitionsReply struct {
	Acquisitions []Acquisition `msgpack:"acquisitions" json:"acquisitions"`
	Error        *APIError     `msgpack:"error,omitempty" json:"error,omitempty"`
}

func (*AcquisitionsReply) Kind() string { return "acquisitions_reply" }

// PoolConfig is a resource pool's configuration, with Vertica's knobs.
// Sizes are bytes; QueueTimeout is nanoseconds (zero: wait forever).
type PoolConfig struct {
	Name               string `msgpack:"name" json:"name"`
	MemorySize         int64  `msgpack:"memorysize" json:"memorysize"`
	MaxMemorySize      int64  `msgpack:"maxmemorysize" json:"maxmemorysize"`
	PlannedConcurrency int    `msgpack:"plannedconcurrency" json:"plannedconcurrency"`
	MaxConcurrency     int    `msgpack:"maxconcurrency" json:"maxconcurrency"` // zero: no limit but memory
	QueueTimeout       int64  `msgpack:"queuetimeout" json:"queuetimeout"`
	Priority           int    `msgpack:"priority" json:"priority"` // higher is admitted first
}

// Validate checks the pool's knobs are consistent.
func (p *PoolConfig) Validate() error {
	if err := validName(p.Name); err != nil {
		return fmt.Errorf("pool name: %v", err)
	}
	switch {
	case p.MemorySize <= 0:
		return fmt.Errorf("pool %s: memorysize %d must be positive", p.Name, p.MemorySize)
	case p.MaxMemorySize < p.MemorySize:
		return fmt.Errorf("pool %s: maxmemorysize %d is below memorysize %d", p.Name, p.MaxMemorySize, p.MemorySize)
	case p.PlannedConcurrency <= 0:
		return fmt.Errorf("pool %s: plannedconcurrency %d must be positive", p.Name, p.PlannedConcurrency)
	case p.MaxConcurrency < 0:
		return fmt.Errorf("pool %s: maxconcurrency %d is negative", p.Name, p.MaxConcurrency)
	case p.QueueTimeout < 0:
		return fmt.Errorf("pool %s: queuetimeout %d is negative", p.Name, p.QueueTimeout)
	}
	return nil
}

// Target is the memory one plan gets: memorysize / plannedconcurrency.
func (p *PoolConfig) Target() int64 { return p.MemorySize / int64(p.PlannedConcurrency) }

// PoolStatus is one row of the pools system table: configuration and live
// accounting.
type PoolStatus struct {
	Config   PoolConfig `msgpack:"config" json:"config"`
	Target   int64      `msgpack:"target" json:"target"`
	InUse    int64      `msgpack:"in_use" json:"in_use"`
	Borrowed int64      `msgpack:"borrowed" json:"borrowed"` // in use above memorysize
	Running  int        `msgpack:"running" json:"running"`
	Queued   int        `msgpack:"queued" json:"queued"`
	// Memory-constrained operations of the pool the scheduler still keeps.
	Constrained int   `msgpack:"constrained,omitempty" json:"constrained,omitempty"`
	Failed      int   `msgpack:"failed,omitempty" json:"failed,omitempty"` // failed operations the scheduler still keeps
	LargestPeak int64 `msgpack:"largest_peak,omitempty" json:"largest_peak,omitempty"`
	// Recommendation is a plain sentence when the pool should grow.
	Recommendation string `msgpack:"recommendation,omitempty" json:"recommendation,omitempty"`
}

// PoolsRequest lists the pools.
type PoolsRequest struct{}

func (*PoolsRequest) Kind() string { return "pools_request" }

// PoolsReply carries the pools table.
type PoolsReply struct {
	Pools []PoolStatus `msgpack:"pools" json:"pools"`
	Error *APIError    `msgpack:"error,omitempty" json:"error,omitempty"`
}

func (*PoolsReply) Kind() string { return "pools_reply" }

// CreatePoolRequest creates a user-defined pool.
type CreatePoolRequest struct {
	Pool PoolConfig `msgpack:"pool" json:"pool"`
	// RequestID, if set, names this request as RegisterRequest's does: the
	// scheduler stores it with the pool, and the same request sent again
	// finds the pool made by it and is answered as done.
	RequestID string `msgpack:"request_id,omitempty" json:"request_id,omitempty"`
}

func (*CreatePoolRequest) Kind() string { return "create_pool_request" }

func (r *CreatePoolRequest) Validate() error {
	if err := r.Pool.Validate(); err != nil {
		return err
	}
	return ValidRequestID(r.RequestID)
}

// AlterPoolRequest changes the knobs that are set (non-nil) of pool Name.
type AlterPoolRequest struct {
	Name               string `msgpack:"name" json:"name"`
	MemorySize         *int64 `msgpack:"memorysize,omitempty" json:"memorysize,omitempty"`
	MaxMemorySize      *int64 `msgpack:"maxmemorysize,omitempty" json:"maxmemorysize,omitempty"`
	PlannedConcurrency *int   `msgpack:"plannedconcurrency,omitempty" json:"plannedconcurrency,omitempty"`
	MaxConcurrency     *int   `msgpack:"maxconcurrency,omitempty" json:"maxconcurrency,omitempty"`
	QueueTimeout       *int64 `msgpack:"queuetimeout,omitempty" json:"queuetimeout,omitempty"`
	Priority           *int   `msgpack:"priority,omitempty" json:"priority,omitempty"`
}

func (*AlterPoolRequest) Kind() string { return "alter_pool_request" }

func (r *AlterPoolRequest) Validate() error {
	if err := validName(r.Name); err != nil {
		return fmt.Errorf("pool name: %v", err)
	}
	if r.MemorySize == nil && r.MaxMemorySize == nil && r.PlannedConcurrency == nil &&
		r.MaxConcurrency == nil && r.QueueTimeout == nil && r.Priority == nil {
		return fmt.Errorf("pool %s: nothing to alter", r.Name)
	}
	return nil
}

// Apply returns cfg with the request's changes; the caller validates it.
// A maxmemorysize left unset follows a memorysize raised above it.
func (r *AlterPoolRequest) Apply(cfg PoolConfig) PoolConfig {
	if r.MemorySize != nil {
		cfg.MemorySize = *r.MemorySize
		if r.MaxMemorySize == nil && cfg.MaxMemorySize < cfg.MemorySize {
			cfg.MaxMemorySize = cfg.MemorySize
		}
	}
	if r.MaxMemorySize != nil {
		cfg.MaxMemorySize = *r.MaxMemorySize
	}
	if r.PlannedConcurrency != nil {
		cfg.PlannedConcurrency = *r.PlannedConcurrency
	}
	if r.MaxConcurrency != nil {
		cfg.MaxConcurrency = *r.MaxConcurrency
	}
	if r.QueueTimeout != nil {
		cfg.QueueTimeout = *r.QueueTimeout
	}
	if r.Priority != nil {
		cfg.Priority = *r.Priority
	}
	return cfg
}

// CatalogRequest lists live containers; empty fields match everything.
type CatalogRequest struct {
	Table      string `msgpack:"table,omitempty" json:"table,omitempty"`
	Projection string `msgpack:"projection,omitempty" json:"projection,omitempty"`
}

func (*CatalogRequest) Kind() string { return "catalog_request" }

// ProjectionCatalog is the catalog of one projection.
type ProjectionCatalog struct {
	Table      string         `msgpack:"table" json:"table"`
	Projection string         `msgpack:"projection" json:"projection"`
	Live       []ContainerRef `msgpack:"live" json:"live"`
	Dead       []ContainerRef `msgpack:"dead,omitempty" json:"dead,omitempty"` // no longer live, still read by a running job
	Running    []string       `msgpack:"running,omitempty" json:"running,omitempty"`
	// PrimaryKey names a keyed table's key columns; empty for an
	// append-only table.
	PrimaryKey []string `msgpack:"primary_key,omitempty" json:"primary_key,omitempty"`
	// Applied is, per WAL ID, the WAL position through which that WAL's
	// changes of the table are live.
	Applied map[string]uint64 `msgpack:"applied,omitempty" json:"applied,omitempty"`
}

// CatalogReply carries the catalog.
type CatalogReply struct {
	Projections []ProjectionCatalog `msgpack:"projections" json:"projections"`
	Error       *APIError           `msgpack:"error,omitempty" json:"error,omitempty"`
}

func (*CatalogReply) Kind() string { return "catalog_reply" }

// DropContainersRequest takes live containers out of a projection: an
// operator's way to remove an entry that names a container which is gone or
// damaged. The dropped containers' rows leave the table; their files are
// deleted once no running job reads them.
type DropContainersRequest struct {
	Table      string   `msgpack:"table" json:"table"`
	Projection string   `msgpack:"projection" json:"projection"`
	IDs        []string `msgpack:"ids" json:"ids"`
	// RequestID, if set, names this request as RegisterRequest's does: the
	// same request sent again gets the first answer.
	RequestID string `msgpack:"request_id,omitempty" json:"request_id,omitempty"`
}

func (*DropContainersRequest) Kind() string { return "drop_containers_request" }

// Validate checks the names.
func (r *DropContainersRequest) Validate() error {
	if err := validTableProjection(r.Table, r.Projection); err != nil {
		return err
	}
	if len(r.IDs) == 0 {
		return errors.New("no containers")
	}
	seen := make(map[string]bool, len(r.IDs))
	for i, id := range r.IDs {
		if err := ValidName(id); err != nil {
			return fmt.Errorf("container %d: %w", i, err)
		}
		if seen[id] {
			return fmt.Errorf("container %s named twice", id)
		}
		seen[id] = true
	}
	return ValidRequestID(r.RequestID)
}

// DropContainersReply lists what was dropped and what stays live.
type DropContainersReply struct {
	Dropped []ContainerRef `msgpack:"dropped" json:"dropped"`
	Live    int            `msgpack:"live" json:"live"`
	Repeat  bool           `msgpack:"repeat,omitempty" json:"repeat,omitempty"` // the answer to a request already answered
	Error   *APIError      `msgpack:"error,omitempty" json:"error,omitempty"`
}

func (*DropContainersReply) Kind() string { return "drop_containers_reply" }

func validTableProjection(table, projection string) error {
	if err := ValidTable(table); err != nil {
		return fmt.Errorf("table: %v", err)
	}
	if err := validName(projection); err != nil {
		return fmt.Errorf("projection: %v", err)
	}
	return nil
}

// ReserveRequest reserves Count container numbers of a projection for a
// load, so that loads on different hosts never pick the same container
// IDs, and the orphan sweep leaves the containers a live load is writing
// alone while the reservation lasts. A load renews its reservations while
// it writes and uploads (Renew), and registering the containers releases
// them. A reservation not renewed expires; its containers, if never
// registered, are then orphans like any.
type ReserveRequest struct {
	Table      string `msgpack:"table" json:"table"`
	Projection string `msgpack:"projection" json:"projection"`
	// Count is how many numbers to reserve; zero with Renew.
	Count int `msgpack:"count,omitempty" json:"count,omitempty"`
	// AtLeast is the lowest number the client will take: one past the
	// highest it sees in its data directory or bucket.
	AtLeast int `msgpack:"at_least,omitempty" json:"at_least,omitempty"`
	// Renew extends the lease of this reservation instead.
	Renew     string `msgpack:"renew,omitempty" json:"renew,omitempty"`
	RequestID string `msgpack:"request_id,omitempty" json:"request_id,omitempty"`
}

func (*ReserveRequest) Kind() string { return "reserve_request" }

// MaxReserve bounds the numbers one reservation may hold.
const MaxReserve = 1 << 20

func (r *ReserveRequest) Validate() error {
	if err := validTableProjection(r.Table, r.Projection); err != nil {
		return err
	}
	switch {
	case r.Renew != "":
		if err := validName(r.Renew); err != nil {
			return fmt.Errorf("renew: %v", err)
		}
		if r.Count != 0 {
			return errors.New("a renewal reserves no numbers")
		}
	case r.Count < 1 || r.Count > MaxReserve:
		return fmt.Errorf("count %d: want 1 to %d", r.Count, MaxReserve)
	}
	if r.AtLeast < 0 {
		return fmt.Errorf("negative first number %d", r.AtLeast)
	}
	return ValidRequestID(r.RequestID)
}

// ReserveReply is a reservation: the numbers First to First+Count-1,
// held until Expires (unix ns) unless renewed.
type ReserveReply struct {
	Reservation string    `msgpack:"reservation" json:"reservation"`
	First       int       `msgpack:"first" json:"first"`
	Count       int       `msgpack:"count" json:"count"`
	Expires     int64     `msgpack:"expires" json:"expires"`
	Error       *APIError `msgpack:"error,omitempty" json:"error,omitempty"`
}

func (*ReserveReply) Kind() string { return "reserve_reply" }

// ApplyRequest makes a batch of changes of a keyed table visible: the
// container holding the batch's rows and delete markers becomes live and
// the position of the WAL the batch came from is recorded, in one
// compare-and-set of the projection's catalog entry. A batch whose
// position the entry already has (To at most Applied[WAL]) is a repeat:
// nothing is added.
type ApplyRequest struct {
	Table      string       `msgpack:"table" json:"table"`
	Projection string       `msgpack:"projection" json:"projection"`
	Container  ContainerRef `msgpack:"container" json:"container"`
	WAL        string       `msgpack:"wal" json:"wal"` // the WAL's ID
	To         uint64       `msgpack:"to" json:"to"`   // the WAL position the batch reaches
	RequestID  string       `msgpack:"request_id,omitempty" json:"request_id,omitempty"`
}

func (*ApplyRequest) Kind() string { return "apply_request" }

func (r *ApplyRequest) Validate() error {
	if err := validTableProjection(r.Table, r.Projection); err != nil {
		return err
	}
	if err := validRef(r.Container); err != nil {
		return fmt.Errorf("container: %w", err)
	}
	if r.Container.Table != r.Table || r.Container.Projection != r.Projection {
		return fmt.Errorf("container %s belongs to %s.%s, not %s.%s", r.Container.ID, r.Container.Table, r.Container.Projection, r.Table, r.Projection)
	}
	if err := ValidName(r.WAL); err != nil {
		return fmt.Errorf("wal: %w", err)
	}
	if r.To == 0 {
		return errors.New("to: WAL position 0")
	}
	return ValidRequestID(r.RequestID)
}

// ApplyReply answers an ApplyRequest: the WAL's position now recorded for
// the table. Repeat is set when the batch was already applied.
//
// An apply refused with code ErrCodeFrozen carries FrozenThrough: the
// version through which the table's folded rows were written as version 0
// (the change floor of a full mergeout). A change at or below it would
// beat a newer change frozen into such a row; it is a late event (acked,
// or dead-lettered after MaxDeliver), so the walwriter drops the batch's
// changes at or below it and applies the rest.
type ApplyReply struct {
	Applied       uint64    `msgpack:"applied" json:"applied"`
	Repeat        bool      `msgpack:"repeat,omitempty" json:"repeat,omitempty"`
	FrozenThrough uint64    `msgpack:"frozen_through,omitempty" json:"frozen_through,omitempty"`
	Error         *APIError `msgpack:"error,omitempty" json:"error,omitempty"`
}

func (*ApplyReply) Kind() string { return "apply_reply" }

// SubjectAPICancel is the request that cancels a job; SubjectCancel is
// where the scheduler tells the workers to stop a running one (plain
// NATS, every worker subscribes; CancelNotice).
const (
	SubjectAPICancel = SubjectAPIPrefix + "cancel" // CancelRequest -> CancelReply
	SubjectCancel    = "strata.control.cancel"     // CancelNotice, from the scheduler to the workers
)

// CancelReply states.
const (
	CancelQueued  = "cancelled"  // the job waited for memory and was never started: it has failed, its place in the queue given up
	CancelRunning = "cancelling" // the job's worker was told to stop; it fails once the worker reports, its grant released then
	CancelDone    = "done"       // the job had finished: nothing was cancelled
	CancelFailed  = "failed"     // the job had failed (or was cancelled) before: nothing more was done
)

// CancelledPrefix starts the reason of a cancelled job (its failed event
// and its row in the operations table): "cancelled: " and the request's
// reason.
const CancelledPrefix = "cancelled: "

// MaxCancelReason bounds a cancel request's reason.
const MaxCancelReason = 1024

// CancelRequest cancels a job: a queued one is never started, a running
// one is stopped by its worker, which frees its grant; a job that has
// ended is left as it is. RequestID names the request as RegisterRequest's
// does: the same request sent again gets the first answer.
type CancelRequest struct {
	JobID     string `msgpack:"job_id" json:"job_id"`
	Reason    string `msgpack:"reason,omitempty" json:"reason,omitempty"`
	RequestID string `msgpack:"request_id,omitempty" json:"request_id,omitempty"`
}

func (*CancelRequest) Kind() string { return "cancel_request" }

func (r *CancelRequest) Validate() error {
	if err := validName(r.JobID); err != nil {
		return fmt.Errorf("job id: %v", err)
	}
	if len(r.Reason) > MaxCancelReason {
		return fmt.Errorf("reason: %d bytes, more than %d", len(r.Reason), MaxCancelReason)
	}
	return ValidRequestID(r.RequestID)
}

// CancelReply says what the cancel did: State is one of the Cancel*
// values; Reason is the job's failure reason once it has one.
type CancelReply struct {
	JobID  string    `msgpack:"job_id" json:"job_id"`
	State  string    `msgpack:"state" json:"state"`
	Reason string    `msgpack:"reason,omitempty" json:"reason,omitempty"`
	Repeat bool      `msgpack:"repeat,omitempty" json:"repeat,omitempty"`
	Error  *APIError `msgpack:"error,omitempty" json:"error,omitempty"`
}

func (*CancelReply) Kind() string { return "cancel_reply" }

func (r *CancelReply) ReplyError() *APIError { return r.Error }

// CancelNotice tells the workers to stop a running job: the one running
// it cancels it and reports it failed with Reason (which starts with
// CancelledPrefix), not to be retried. Workers keep the notices of the
// last while, so a delivery of the job that comes later fails at once.
type CancelNotice struct {
	JobID  string `msgpack:"job_id"`
	Reason string `msgpack:"reason"`
	Time   int64  `msgpack:"time"` // unix nanoseconds
}

func (*CancelNotice) Kind() string { return "cancel_notice" }

func (n *CancelNotice) Validate() error {
	if n.JobID == "" {
		return errors.New("job_id is empty")
	}
	if len(n.JobID) > 1024 || len(n.Reason) > MaxCancelReason+len(CancelledPrefix) {
		return fmt.Errorf("job %.40q...: job_id or reason too long", n.JobID)
	}
	return nil
}
