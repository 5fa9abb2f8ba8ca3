package scheduler

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/strata-db/strata/messages"
)

// Requests of unknown outcome.
//
// A client whose request changes the catalog (register, drop containers,
// a mergeout or window request) may not learn the outcome: its reply comes
// after the client stopped waiting, is lost with a NATS node, or is never
// sent because the scheduler died between its catalog write and the reply.
// The client then sends the same request again, with the same request ID,
// until it gets an answer. The scheduler keeps its answer to each such
// request in the catalog entry the request changed, written in the same
// compare-and-set as the change, so the change and the record of it land
// together or not at all. A request that arrives again (while the first is
// still being carried out, or after, across scheduler restarts) gets the
// first answer and changes nothing more.

// Request operations, the Op of a RequestRecord.
const (
	requestRegister = "register"
	requestDrop     = "drop"
	requestMergeout = "mergeout"
	requestWindow   = "window"
	requestCancel   = "cancel"
)

// maxRequestRecords and requestRecordTTL bound the records an entry keeps:
// the newest 64, none older than a day. A client stops resending within
// minutes, so these are far more than a resend needs, and an entry of 64
// records stays a few KiB.
const (
	maxRequestRecords = 64
	requestRecordTTL  = 24 * time.Hour
)

// RequestRecord is the scheduler's answer to a client request that changed
// a projection's catalog entry (or was refused by a decision that must not
// change on a resend, like a load that would pass the container limit).
type RequestRecord struct {
	ID    string          // the request's ID (messages.ValidRequestID)
	Op    string          // register, drop, mergeout, window, cancel
	At    int64           // when it was answered, unix ns
	Reply json.RawMessage // the reply, as JSON of its wire type
}

// request returns the entry's record of request id for op, or nil.
func (st *ProjectionState) request(op, id string) *RequestRecord {
	if id == "" {
		return nil
	}
	for i := range st.Requests {
		if r := &st.Requests[i]; r.ID == id && r.Op == op {
			return r
		}
	}
	return nil
}

// recordRequest keeps the answer rep to request id, dropping the records
// older than requestRecordTTL and, past maxRequestRecords, the oldest.
func (st *ProjectionState) recordRequest(op, id string, now time.Time, rep messages.Message) error {
	if id == "" {
		return nil
	}
	data, err := json.Marshal(rep)
	if err != nil {
		return fmt.Errorf("record request %s: %w", id, err)
	}
	cutoff := now.Add(-requestRecordTTL).UnixNano()
	st.Requests = slices.DeleteFunc(st.Requests, func(r RequestRecord) bool { return r.At < cutoff })
	st.Requests = append(st.Requests, RequestRecord{ID: id, Op: op, At: now.UnixNano(), Reply: data})
	if n := len(st.Requests) - maxRequestRecords; n > 0 {
		st.Requests = slices.Delete(st.Requests, 0, n)
	}
	return nil
}

// answer decodes the recorded reply into rep. A recorded refusal comes
// back as its *messages.APIError, which APIError passes on unchanged.
func (r *RequestRecord) answer(rep messages.Message, replyErr **messages.APIError) error {
	if err := json.Unmarshal(r.Reply, rep); err != nil {
		return fmt.Errorf("catalog: recorded answer to %s request %s: %w", r.Op, r.ID, err)
	}
	if e := *replyErr; e != nil {
		*replyErr = nil
		return e
	}
	return nil
}

// once runs fn for the request named id, unless a call for the same op and
// id is under way: then it waits for that call and returns its result, so
// a request sent again while the first is still being carried out (a
// registration checking many containers, say) is not carried out twice.
// Requests without an ID run as they come.
func once[R any](ctx context.Context, s *Scheduler, op, id string, fn func() (R, error)) (R, error) {
	var zero R
	if id == "" {
		return fn()
	}
	ch := s.inflight.DoChan(op+"/"+id, func() (any, error) { return fn() })
	select {
	case res := <-ch:
		if res.Err != nil {
			return zero, res.Err
		}
		return res.Val.(R), nil
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}
