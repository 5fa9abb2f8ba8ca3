package scheduler

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/strata-db/strata/messages"
)

// The catalog's stored format (see the package documentation). The types
// here are what the bucket holds; ProjectionState, PendingJob and the job
// kinds are what the scheduler decides with, and the wire types of
// package messages are what it publishes. Converting happens only here.

// catalogVersion is the format version written. Entries without a version
// are format 0, read and rewritten (entryV0).
const catalogVersion = 1

// storedEntry is a projection's entry: "<table>/<projection>".
type storedEntry struct {
	Version    int               `json:"version"`
	Table      string            `json:"table"`
	Projection string            `json:"projection"`
	NextSeq    uint64            `json:"next_seq"`
	Live       []storedContainer `json:"live"`
	Dead       []storedContainer `json:"dead,omitempty"`
	Pending    []storedPending   `json:"pending,omitempty"`
	ResultOf   string            `json:"result_of,omitempty"`
	Created    int64             `json:"created,omitempty"`
	Requests   []storedRequest   `json:"requests,omitempty"`
	// NextContainer and Reservations: container numbers handed out to
	// loads (reserve.go).
	NextContainer int                 `json:"next_container,omitempty"`
	Reservations  []storedReservation `json:"reservations,omitempty"`
	// PrimaryKey: a keyed table's key columns. Applied: per WAL ID, the
	// WAL position through which its changes are live (apply.go).
	PrimaryKey []string          `json:"primary_key,omitempty"`
	Applied    map[string]uint64 `json:"applied,omitempty"`
	// FrozenThrough: the version through which a full mergeout of the
	// keyed table wrote its rows' versions as 0; applies of changes at
	// or below it are refused (apply.go). ChangedRows: the rows of
	// changes since the last full mergeout, less those folds dropped, for
	// the purge rule of strata selection (strata.go). Both are absent (0)
	// in entries written before they existed, which load as a table never
	// frozen and with no changes counted yet.
	FrozenThrough int64 `json:"frozen_through,omitempty"`
	ChangedRows   int64 `json:"changed_rows,omitempty"`
}

type storedReservation struct {
	ID      string `json:"id"`
	First   int    `json:"first"`
	Count   int    `json:"count"`
	Expires int64  `json:"expires"`
}

// storedRequest is the scheduler's answer to a client request that changed
// the entry: the request's ID and operation, when it was answered, and
// the reply as JSON of its wire type (messages' json names).
type storedRequest struct {
	ID    string          `json:"id"`
	Op    string          `json:"op"`
	At    int64           `json:"at"`
	Reply json.RawMessage `json:"reply"`
}

// storedContainer is a container of the entry's projection. In a job body
// Readers is always zero.
type storedContainer struct {
	ID      string `json:"id"`
	Rows    int64  `json:"rows,omitempty"`
	Bytes   int64  `json:"bytes,omitempty"`
	Readers int    `json:"readers,omitempty"` // pending jobs reading it
}

// storedPending is what the entry keeps of a pending job: enough to grant,
// hold and find it. The job is its body.
type storedPending struct {
	JobID     string      `json:"job_id"`
	Seq       uint64      `json:"seq"`
	Kind      string      `json:"kind"`
	Granted   bool        `json:"granted,omitempty"`
	Grant     storedGrant `json:"grant"`
	Created   int64       `json:"created"`
	GrantedAt int64       `json:"granted_at,omitempty"`
	Worker    string      `json:"worker,omitempty"`
	Delivery  uint64      `json:"delivery,omitempty"`
	Cancel    string      `json:"cancel,omitempty"`
}

type storedGrant struct {
	Pool   string `json:"pool"`
	Bytes  int64  `json:"bytes,omitempty"`
	Target int64  `json:"target,omitempty"`
}

// storedJob is a pending job's body: "<table>/<projection>/job/<seq>".
type storedJob struct {
	Version    int               `json:"version"`
	JobID      string            `json:"job_id"`
	Kind       string            `json:"kind"`
	Table      string            `json:"table"`
	Projection string            `json:"projection"`
	Seq        uint64            `json:"seq"`
	Created    int64             `json:"created"`
	Inputs     []storedContainer `json:"inputs"`
	Spec       json.RawMessage   `json:"spec"` // the kind's own fields
}

func jobKey(table, projection string, seq uint64) string {
	return fmt.Sprintf("%s/%s/job/%d", table, projection, seq)
}

// parseJobKey splits a job body's key; ok is false for any other key.
func parseJobKey(key string) (table, projection string, seq uint64, ok bool) {
	parts := strings.Split(key, "/")
	if len(parts) != 4 || parts[2] != "job" {
		return "", "", 0, false
	}
	seq, err := strconv.ParseUint(parts[3], 10, 64)
	if err != nil || seq == 0 {
		return "", "", 0, false
	}
	return parts[0], parts[1], seq, true
}

func storeContainers(table, projection string, cs []messages.ContainerRef, readers map[string]int) ([]storedContainer, error) {
	out := make([]storedContainer, len(cs))
	for i, c := range cs {
		if c.Table != table || c.Projection != projection {
			return nil, fmt.Errorf("container %s is of %s.%s, not %s.%s", c.ID, c.Table, c.Projection, table, projection)
		}
		out[i] = storedContainer{ID: c.ID, Rows: c.Rows, Bytes: c.Bytes, Readers: readers[c.ID]}
	}
	return out, nil
}

func loadContainers(table, projection string, cs []storedContainer, readers map[string]int) ([]messages.ContainerRef, error) {
	var out []messages.ContainerRef
	for _, c := range cs {
		if err := messages.ValidName(c.ID); err != nil {
			return nil, fmt.Errorf("container: %w", err)
		}
		if c.Readers < 0 {
			return nil, fmt.Errorf("container %s: %d readers", c.ID, c.Readers)
		}
		if c.Readers > 0 && readers != nil {
			readers[c.ID] += c.Readers
		}
		out = append(out, messages.ContainerRef{Table: table, Projection: projection, ID: c.ID, Rows: c.Rows, Bytes: c.Bytes})
	}
	return out, nil
}

// encodeEntry is the stored form of st. Reader counts are stored with
// their containers; a count of a container neither live nor dead protects
// nothing and is not stored.
func encodeEntry(st *ProjectionState) ([]byte, error) {
	e := storedEntry{Version: catalogVersion, Table: st.Table, Projection: st.Projection, NextSeq: st.NextSeq,
		ResultOf: st.ResultOf, Created: st.Created}
	var err error
	if e.Live, err = storeContainers(st.Table, st.Projection, st.Live, st.Readers); err != nil {
		return nil, err
	}
	if e.Dead, err = storeContainers(st.Table, st.Projection, st.Dead, st.Readers); err != nil {
		return nil, err
	}
	if e.Live == nil {
		e.Live = []storedContainer{} // "live": [], never null
	}
	for _, p := range st.Pending {
		e.Pending = append(e.Pending, storedPending{JobID: p.JobID, Seq: p.Seq, Kind: p.Operation, Granted: p.Granted,
			Grant:   storedGrant{Pool: p.Grant.Pool, Bytes: p.Grant.Bytes, Target: p.Grant.Target},
			Created: p.Created, GrantedAt: p.GrantedAt, Worker: p.Worker, Delivery: p.Delivery, Cancel: p.Cancel})
	}
	for _, r := range st.Requests {
		e.Requests = append(e.Requests, storedRequest{ID: r.ID, Op: r.Op, At: r.At, Reply: r.Reply})
	}
	e.NextContainer = st.NextContainer
	e.PrimaryKey = st.PrimaryKey
	e.FrozenThrough, e.ChangedRows = st.FrozenThrough, st.ChangedRows
	if len(st.Applied) > 0 {
		e.Applied = st.Applied
	}
	for _, r := range st.Reservations {
		e.Reservations = append(e.Reservations, storedReservation{ID: r.ID, First: r.First, Count: r.Count, Expires: r.Expires})
	}
	return json.Marshal(e)
}

// DecodeEntry decodes a projection's catalog entry, of either format.
func DecodeEntry(data []byte) (*ProjectionState, error) {
	var v struct {
		Version *int `json:"version"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, err
	}
	switch {
	case v.Version == nil:
		return decodeEntryV0(data)
	case *v.Version == catalogVersion:
	default:
		return nil, fmt.Errorf("catalog entry of format version %d; this build reads 0 and %d", *v.Version, catalogVersion)
	}
	var e storedEntry
	if err := json.Unmarshal(data, &e); err != nil {
		return nil, err
	}
	st := &ProjectionState{Table: e.Table, Projection: e.Projection, NextSeq: e.NextSeq, ResultOf: e.ResultOf,
		Created: e.Created, Readers: map[string]int{}}
	var err error
	if st.Live, err = loadContainers(e.Table, e.Projection, e.Live, st.Readers); err != nil {
		return nil, fmt.Errorf("live %w", err)
	}
	if st.Dead, err = loadContainers(e.Table, e.Projection, e.Dead, st.Readers); err != nil {
		return nil, fmt.Errorf("dead %w", err)
	}
	for _, p := range e.Pending {
		if p.JobID == "" || p.Seq == 0 || p.Seq > e.NextSeq {
			return nil, fmt.Errorf("pending job %q numbered %d (next_seq %d)", p.JobID, p.Seq, e.NextSeq)
		}
		st.Pending = append(st.Pending, PendingJob{JobID: p.JobID, Seq: p.Seq, Operation: p.Kind, Granted: p.Granted,
			Grant:   messages.Grant{Pool: p.Grant.Pool, Bytes: p.Grant.Bytes, Target: p.Grant.Target},
			Created: p.Created, GrantedAt: p.GrantedAt, Worker: p.Worker, Delivery: p.Delivery, Cancel: p.Cancel})
	}
	for _, r := range e.Requests {
		if r.ID == "" || messages.ValidRequestID(r.ID) != nil || r.Op == "" || !json.Valid(r.Reply) {
			return nil, fmt.Errorf("request record %q (%s): malformed", r.ID, r.Op)
		}
		st.Requests = append(st.Requests, RequestRecord{ID: r.ID, Op: r.Op, At: r.At, Reply: r.Reply})
	}
	if e.NextContainer < 0 {
		return nil, fmt.Errorf("next_container %d", e.NextContainer)
	}
	st.NextContainer = e.NextContainer
	st.PrimaryKey = e.PrimaryKey
	for wal := range e.Applied {
		if messages.ValidName(wal) != nil {
			return nil, fmt.Errorf("applied position of WAL %q: malformed WAL ID", wal)
		}
	}
	st.Applied = e.Applied
	if e.FrozenThrough < 0 || e.ChangedRows < 0 {
		return nil, fmt.Errorf("frozen_through %d, changed_rows %d: negative", e.FrozenThrough, e.ChangedRows)
	}
	st.FrozenThrough, st.ChangedRows = e.FrozenThrough, e.ChangedRows
	for _, r := range e.Reservations {
		if messages.ValidName(r.ID) != nil || r.First < 0 || r.Count < 1 || r.First+r.Count > e.NextContainer {
			return nil, fmt.Errorf("reservation %q of %d numbers from %d: malformed (next_container %d)", r.ID, r.Count, r.First, e.NextContainer)
		}
		st.Reservations = append(st.Reservations, Reservation{ID: r.ID, First: r.First, Count: r.Count, Expires: r.Expires})
	}
	return st, nil
}

// encodeJob is the stored body of job j, number seq of the projection.
func encodeJob(table, projection string, seq uint64, j job) ([]byte, error) {
	inputs, err := storeContainers(table, projection, j.inputs(), nil)
	if err != nil {
		return nil, err
	}
	sp, err := j.spec()
	if err != nil {
		return nil, err
	}
	spec, err := json.Marshal(sp)
	if err != nil {
		return nil, err
	}
	return json.Marshal(storedJob{Version: catalogVersion, JobID: j.id(), Kind: j.kind(), Table: table, Projection: projection,
		Seq: seq, Created: j.created(), Inputs: inputs, Spec: spec})
}

// decodeJob decodes the body stored as job seq of the projection.
func decodeJob(table, projection string, seq uint64, data []byte) (job, error) {
	var b storedJob
	if err := json.Unmarshal(data, &b); err != nil {
		return nil, err
	}
	switch {
	case b.Version != catalogVersion:
		return nil, fmt.Errorf("job body of format version %d; this build reads %d", b.Version, catalogVersion)
	case b.Table != table || b.Projection != projection || b.Seq != seq:
		return nil, fmt.Errorf("body names job %d of %s.%s", b.Seq, b.Table, b.Projection)
	case b.JobID == "":
		return nil, errors.New("job_id is empty")
	}
	for _, in := range b.Inputs {
		if err := messages.ValidName(in.ID); err != nil {
			return nil, fmt.Errorf("input: %w", err)
		}
	}
	decode, ok := jobKinds[b.Kind]
	if !ok {
		return nil, fmt.Errorf("job %s of unknown kind %q", b.JobID, b.Kind)
	}
	j, err := decode(&b, b.Spec)
	if err != nil {
		return nil, fmt.Errorf("%s job %s: %w", b.Kind, b.JobID, err)
	}
	return j, nil
}

// refs returns the body's inputs as wire container references.
func (b *storedJob) refs() []messages.ContainerRef {
	out := make([]messages.ContainerRef, len(b.Inputs))
	for i, in := range b.Inputs {
		out[i] = messages.ContainerRef{Table: b.Table, Projection: b.Projection, ID: in.ID, Rows: in.Rows, Bytes: in.Bytes}
	}
	return out
}

// entryV0 is format 0, written before the catalog had stored types of its
// own: the JSON encoding of the wire types as they were, so containers,
// grants and job bodies have their Go field names as keys ("ID", "JobID")
// and every pending job holds its whole body, inputs included, in the
// entry. testdata/catalog_v0.json pins it; these types must keep decoding
// it whatever becomes of the wire types' Go names.
type entryV0 struct {
	Table      string                  `json:"table"`
	Projection string                  `json:"projection"`
	Live       []messages.ContainerRef `json:"live"`
	Dead       []messages.ContainerRef `json:"dead,omitempty"`
	Pending    []pendingV0             `json:"pending,omitempty"`
	NextSeq    uint64                  `json:"next_seq"`
	ResultOf   string                  `json:"result_of,omitempty"`
	Created    int64                   `json:"created,omitempty"`
}

type pendingV0 struct {
	JobID     string                `json:"job_id"`
	Operation string                `json:"operation"`
	Inputs    []string              `json:"inputs"`
	Granted   bool                  `json:"granted"`
	Grant     messages.Grant        `json:"grant"`
	Created   int64                 `json:"created"`
	GrantedAt int64                 `json:"granted_at,omitempty"`
	Mergeout  *messages.MergeoutJob `json:"mergeout,omitempty"`
	Window    *messages.WindowJob   `json:"window,omitempty"`
	Worker    string                `json:"worker,omitempty"`
	Delivery  uint64                `json:"delivery,omitempty"`
}

// decodeEntryV0 reads a format-0 entry. Each pending job's number comes
// from its ID ("<kind>.<table>.<projection>.<seq>"), its body from the
// entry (kept inline until the entry is rewritten), and the reader counts
// from the jobs' input lists.
func decodeEntryV0(data []byte) (*ProjectionState, error) {
	var e entryV0
	if err := json.Unmarshal(data, &e); err != nil {
		return nil, err
	}
	st := &ProjectionState{Table: e.Table, Projection: e.Projection, Live: e.Live, Dead: e.Dead, NextSeq: e.NextSeq,
		ResultOf: e.ResultOf, Created: e.Created, Readers: map[string]int{}, legacy: true}
	for _, c := range append(append([]messages.ContainerRef(nil), e.Live...), e.Dead...) {
		if err := messages.ValidName(c.ID); err != nil {
			return nil, fmt.Errorf("container: %w", err)
		}
		if c.Table != e.Table || c.Projection != e.Projection {
			return nil, fmt.Errorf("container %s is of %s.%s", c.ID, c.Table, c.Projection)
		}
	}
	for _, p := range e.Pending {
		dot := strings.LastIndexByte(p.JobID, '.')
		seq, err := strconv.ParseUint(p.JobID[dot+1:], 10, 64)
		if err != nil || seq == 0 || seq > e.NextSeq {
			return nil, fmt.Errorf("pending job %q: no job number in its ID (next_seq %d)", p.JobID, e.NextSeq)
		}
		var j job
		switch {
		case p.Mergeout != nil && p.Operation == messages.OperationMergeout && p.Mergeout.JobID == p.JobID:
			m := *p.Mergeout
			m.Grant = messages.Grant{}
			j = &mergeoutJob{m}
		case p.Window != nil && p.Operation == messages.OperationWindow && p.Window.JobID == p.JobID:
			w := *p.Window
			w.Grant = messages.Grant{}
			j = &windowJob{w}
		default:
			return nil, fmt.Errorf("pending job %s: no %s body", p.JobID, p.Operation)
		}
		// The body must be storable in the projection's format-1 body.
		if _, err := storeContainers(e.Table, e.Projection, j.inputs(), nil); err != nil {
			return nil, fmt.Errorf("pending job %s: %w", p.JobID, err)
		}
		// Counted from the body, as ending the job will uncount them.
		for _, in := range j.inputs() {
			st.Readers[in.ID]++
		}
		st.Pending = append(st.Pending, PendingJob{JobID: p.JobID, Seq: seq, Operation: p.Operation, Granted: p.Granted,
			Grant: p.Grant, Created: p.Created, GrantedAt: p.GrantedAt, Worker: p.Worker, Delivery: p.Delivery, inline: j})
	}
	return st, nil
}
