package scheduler

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/strata-db/strata/messages"
)

// job is one pending job as its kind sees it: what the scheduler needs to
// grant it memory, publish it, record it (in the catalog and the
// operations table), settle it when it is done and retire what it
// replaces. Everything else about a pending job (its grant, its holder,
// the containers it keeps read) is the same for every kind and lives in
// PendingJob and ProjectionState.
//
// A job is made once, when the scheduler decides it, and never changes:
// the catalog keeps it under its own key (see the package documentation)
// and the grant is added only to the message published. A new kind is one
// type implementing job plus its decoder in jobKinds.
type job interface {
	// kind names the kind: the job's operation ("mergeout", "window") in
	// the operations table and its "kind" in the catalog.
	kind() string
	id() string
	created() int64
	// inputs are the containers of the job's projection it reads. Each
	// counts as read (ProjectionState.Readers) from the write that makes
	// the job pending to the write that ends it.
	inputs() []messages.ContainerRef
	// want is the memory the job could use (Request.Want); 0 asks for the
	// pool's target.
	want() int64
	// message is the job as published with its grant, and the subject.
	message(grant messages.Grant) (subject string, m messages.Message)
	// record fills the kind's own fields of the job's operations row.
	record(op *messages.Operation)
	// output is the container a done job must have written, and the rows
	// it must hold (-1: any number).
	output() (messages.ContainerRef, int64)
	// settle changes the job's projection entry, in the compare-and-set
	// that ends the done job, for its checked output out.
	settle(st *ProjectionState, out messages.ContainerRef)
	// settled does what follows once that write is made.
	settled(ctx context.Context, s *Scheduler, out messages.ContainerRef, now time.Time)
	// spec is the kind's own fields as the catalog stores them ("spec"
	// of a job body), decoded by the kind's entry in jobKinds.
	spec() (any, error)
}

// jobKinds decodes a stored job body of each kind; the common fields are
// already checked.
var jobKinds = map[string]func(b *storedJob, spec json.RawMessage) (job, error){
	messages.OperationMergeout: decodeMergeout,
	messages.OperationWindow:   decodeWindow,
}

// mergeoutJob merges Inputs, containers of one stratum (or every free
// container, when requested), into one container of the same projection.
type mergeoutJob struct{ w messages.MergeoutJob }

func (j *mergeoutJob) kind() string                    { return messages.OperationMergeout }
func (j *mergeoutJob) id() string                      { return j.w.JobID }
func (j *mergeoutJob) created() int64                  { return j.w.Created }
func (j *mergeoutJob) inputs() []messages.ContainerRef { return j.w.Inputs }

// want is the inputs' size on disk: a merge could hold all of them at once.
func (j *mergeoutJob) want() int64 {
	var n int64
	for _, in := range j.w.Inputs {
		n += in.Bytes
	}
	return n
}

func (j *mergeoutJob) message(grant messages.Grant) (string, messages.Message) {
	m := j.w
	m.Grant = grant
	return messages.SubjectJobMergeout, &m
}

func (j *mergeoutJob) record(op *messages.Operation) {
	op.Output, op.Stratum = j.w.Output, j.w.Stratum
}

// output is the merged container, holding every row of the inputs.
func (j *mergeoutJob) output() (messages.ContainerRef, int64) {
	var rows int64
	for _, in := range j.w.Inputs {
		rows += in.Rows
	}
	return messages.ContainerRef{Table: j.w.Table, Projection: j.w.Projection, ID: j.w.Output}, rows
}

// settle retires the inputs (dead until no job reads them) and makes the
// output live, in one write. Of a keyed table it also counts the changes
// left (ChangedRows): a full mergeout with a change floor (it froze the
// versions through it, recorded again as the entry's FrozenThrough) leaves
// only the rows applied while it ran; any other, those it did not fold
// away.
func (j *mergeoutJob) settle(st *ProjectionState, out messages.ContainerRef) {
	var in int64
	for _, c := range j.w.Inputs {
		in += c.Rows
		if i := st.liveIndex(c.ID); i >= 0 {
			st.Dead = append(st.Dead, st.Live[i])
			st.Live = append(st.Live[:i], st.Live[i+1:]...)
		}
	}
	if st.liveIndex(out.ID) < 0 {
		st.Live = append(st.Live, out)
	}
	if len(st.PrimaryKey) == 0 {
		return
	}
	if j.w.DropMarkersThrough > 0 {
		st.FrozenThrough = max(st.FrozenThrough, j.w.DropMarkersThrough)
		st.ChangedRows = 0
		for _, c := range st.Live {
			if c.ID != out.ID {
				st.ChangedRows += c.Rows
			}
		}
		return
	}
	st.ChangedRows = max(0, st.ChangedRows-max(0, in-out.Rows))
}

func (j *mergeoutJob) settled(context.Context, *Scheduler, messages.ContainerRef, time.Time) {}

type mergeoutSpec struct {
	Output             string `json:"output"`
	Stratum            int    `json:"stratum"`
	DropMarkersThrough int64  `json:"drop_markers_through,omitempty"`
}

func (j *mergeoutJob) spec() (any, error) {
	return mergeoutSpec{Output: j.w.Output, Stratum: j.w.Stratum, DropMarkersThrough: j.w.DropMarkersThrough}, nil
}

func decodeMergeout(b *storedJob, data json.RawMessage) (job, error) {
	var sp mergeoutSpec
	if err := json.Unmarshal(data, &sp); err != nil {
		return nil, err
	}
	if err := messages.ValidName(sp.Output); err != nil {
		return nil, fmt.Errorf("output: %w", err)
	}
	if len(b.Inputs) == 0 {
		return nil, fmt.Errorf("a mergeout with no inputs")
	}
	if sp.DropMarkersThrough < 0 {
		return nil, fmt.Errorf("drop_markers_through %d is negative", sp.DropMarkersThrough)
	}
	return &mergeoutJob{messages.MergeoutJob{JobID: b.JobID, Table: b.Table, Projection: b.Projection,
		Inputs: b.refs(), Output: sp.Output, Stratum: sp.Stratum, Created: b.Created, DropMarkersThrough: sp.DropMarkersThrough}}, nil
}

// windowJob evaluates a window query over Inputs, the containers live
// when it was made, into container Output of its own result table.
type windowJob struct{ w messages.WindowJob }

func (j *windowJob) kind() string                    { return messages.OperationWindow }
func (j *windowJob) id() string                      { return j.w.JobID }
func (j *windowJob) created() int64                  { return j.w.Created }
func (j *windowJob) inputs() []messages.ContainerRef { return j.w.Inputs }

// want asks for the pool's target.
func (j *windowJob) want() int64 { return 0 }

func (j *windowJob) message(grant messages.Grant) (string, messages.Message) {
	m := j.w
	m.Grant = grant
	return messages.SubjectJobWindow, &m
}

func (j *windowJob) record(op *messages.Operation) {
	op.Output = j.w.ResultTable + "/" + j.w.Output
}

func (j *windowJob) output() (messages.ContainerRef, int64) {
	return messages.ContainerRef{Table: j.w.ResultTable, Projection: messages.ResultProjection, ID: j.w.Output}, -1
}

// settle changes nothing in the projection read: the inputs stay live.
func (j *windowJob) settle(*ProjectionState, messages.ContainerRef) {}

// settled makes the result live in its own table.
func (j *windowJob) settled(ctx context.Context, s *Scheduler, out messages.ContainerRef, now time.Time) {
	s.registerResult(ctx, j.w.JobID, out, now)
}

type windowSpec struct {
	ResultTable string `json:"result_table"`
	Output      string `json:"output"`
	// Query is the query's wire encoding (messages.Marshal of a
	// messages.WindowQuery), which JSON holds as base64: the query is a
	// wire type with its own pinned format, not defined twice.
	Query []byte `json:"query"`
}

func (j *windowJob) spec() (any, error) {
	q, err := messages.Marshal(&j.w.Query)
	if err != nil {
		return nil, fmt.Errorf("query: %w", err)
	}
	return windowSpec{ResultTable: j.w.ResultTable, Output: j.w.Output, Query: q}, nil
}

func decodeWindow(b *storedJob, data json.RawMessage) (job, error) {
	var sp windowSpec
	if err := json.Unmarshal(data, &sp); err != nil {
		return nil, err
	}
	if err := messages.ValidTable(sp.ResultTable); err != nil {
		return nil, fmt.Errorf("result table: %w", err)
	}
	if err := messages.ValidName(sp.Output); err != nil {
		return nil, fmt.Errorf("output: %w", err)
	}
	// Unvalidated, as SubmitWindow took it: the windower validates the
	// query and fails the job with the reason.
	var q messages.WindowQuery
	if err := messages.UnmarshalUnvalidated(sp.Query, &q); err != nil {
		return nil, fmt.Errorf("query: %w", err)
	}
	if q.Table != b.Table {
		return nil, fmt.Errorf("query of table %s in the catalog of %s", q.Table, b.Table)
	}
	return &windowJob{messages.WindowJob{JobID: b.JobID, Query: q, Inputs: b.refs(),
		ResultTable: sp.ResultTable, Output: sp.Output, Created: b.Created}}, nil
}
