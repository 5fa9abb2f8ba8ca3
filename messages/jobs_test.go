package messages

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func sampleMergeoutJob() *MergeoutJob {
	return &MergeoutJob{
		JobID: "mergeout.t.p.7", Table: "t", Projection: "p", Output: "m00000007", Stratum: 2, Created: 1700000000000000000,
		Inputs: []ContainerRef{{Table: "t", Projection: "p", ID: "c0001", Rows: 10000, Bytes: 1 << 20}, {Table: "t", Projection: "p", ID: "c0002", Rows: 5}},
		Grant:  Grant{Pool: "tm", Bytes: 100 << 20, Target: 100 << 20},
	}
}

// jobSamples is one filled-in value of each job and event type.
func jobSamples() map[string]Message {
	return map[string]Message{
		"mergeout_job": sampleMergeoutJob(),
		"window_job":   sampleWindowJob(),
		"window_query": &sampleWindowJob().Query,
		// Written before IntervalMonths and IntervalDays existed.
		"window_job_interval_micros": sampleMicrosJob(),
		"window_job_interval":        sampleCalendarJob(),
		"job_event_done": &JobEvent{JobID: "mergeout.t.p.7", Operation: OperationMergeout, Type: EventDone, Worker: "merger-1", Time: 1700000000000000001,
			Delivery: 2, RowsDone: 10005, RowsTotal: 10005, Bytes: 1 << 20, Plan: "vertical", PeakBytes: 12 << 20, SpilledBytes: 4096,
			Output: &ContainerRef{Table: "t", Projection: "p", ID: "m00000007", Rows: 10005}},
		"job_event_failed": &JobEvent{JobID: "w1", Operation: OperationWindow, Type: EventFailed, Worker: "windower-1", Time: 1, Delivery: 5,
			Reason: "grant of 1 bytes is below the minimum", Retryable: false},
	}
}

// TestJobsGolden pins the wire bytes of jobs and events: a change that
// alters them breaks recorded job streams and deployed workers, and must bump
// Version. STRATA_UPDATE_GOLDEN=1 rewrites testdata after a deliberate change.
func TestJobsGolden(t *testing.T) {
	for name, m := range jobSamples() {
		t.Run(name, func(t *testing.T) {
			want := checkGolden(t, filepath.Join("testdata", "jobs", name+".hex"), m)
			// The golden bytes decode to the sample.
			raw := want
			got := reflect.New(reflect.TypeOf(m).Elem()).Interface().(Message)
			if err := Unmarshal(raw, got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, m) {
				t.Fatalf("golden decodes to\n%+v\nwant\n%+v", got, m)
			}
		})
	}
}

func TestJobsValidate(t *testing.T) {
	mj := func(f func(*MergeoutJob)) *MergeoutJob { j := sampleMergeoutJob(); f(j); return j }
	wj := func(f func(*WindowJob)) *WindowJob { j := sampleWindowJob(); f(j); return j }
	tests := []struct {
		name string
		m    interface{ Validate() error }
		want string // substring of the error; empty: valid
	}{
		{"mergeout ok", sampleMergeoutJob(), ""},
		{"mergeout no id", mj(func(j *MergeoutJob) { j.JobID = "" }), "job_id"},
		{"mergeout no table", mj(func(j *MergeoutJob) { j.Table = "" }), "table and projection"},
		{"mergeout no inputs", mj(func(j *MergeoutJob) { j.Inputs = nil }), "no inputs"},
		{"mergeout no output", mj(func(j *MergeoutJob) { j.Output = "" }), "output is empty"},
		{"mergeout zero grant", mj(func(j *MergeoutJob) { j.Grant.Bytes = 0 }), "grant of 0 bytes"},
		{"mergeout escaping output", mj(func(j *MergeoutJob) { j.Output = "../../etc" }), "invalid name"},
		{"mergeout escaping input", mj(func(j *MergeoutJob) { j.Inputs[1].ID = ".." }), "input 1"},
		{"mergeout slash in table", mj(func(j *MergeoutJob) { j.Table = "a/b" }), "invalid name"},
		{"mergeout drops markers", mj(func(j *MergeoutJob) { j.DropMarkersThrough = 1234 }), ""},
		{"mergeout negative marker floor", mj(func(j *MergeoutJob) { j.DropMarkersThrough = -1 }), "drop_markers_through -1"},
		{"window ok", sampleWindowJob(), ""},
		{"window no output", wj(func(j *WindowJob) { j.Output = "" }), "result table and output"},
		{"window negative grant", wj(func(j *WindowJob) { j.Grant.Bytes = -1 }), "grant of -1 bytes"},
		{"window bad result table", wj(func(j *WindowJob) { j.ResultTable = "a b" }), "invalid name"},
		{"window input table traversal", wj(func(j *WindowJob) {
			j.Inputs = []ContainerRef{{Table: "t", Projection: "p", ID: "c0000"}}
			j.Inputs[0].Table = "../../otherdeployment/data/secret"
		}), "invalid name"},
		{"window input projection traversal", wj(func(j *WindowJob) {
			j.Inputs = []ContainerRef{{Table: "t", Projection: "p", ID: "c0000"}}
			j.Inputs[0].Projection = ".."
		}), "invalid name"},
		{"window input of another table", wj(func(j *WindowJob) {
			j.Inputs = []ContainerRef{{Table: "t", Projection: "p", ID: "c0000"}}
			j.Inputs[0].Table = "other"
		}), "not the query's"},
		{"window query table traversal", wj(func(j *WindowJob) { j.Query.Table = "../x"; j.Inputs = nil }), "invalid name"},
		{"window query table option", wj(func(j *WindowJob) { j.Query.Table = "-rf"; j.Inputs = nil }), "invalid name"},
		{"window result table option", wj(func(j *WindowJob) { j.ResultTable = "-rf" }), "invalid name"},
		{"window result table is the input", wj(func(j *WindowJob) { j.ResultTable = j.Query.Table }), "query's table"},
		{"mergeout input of another table", mj(func(j *MergeoutJob) { j.Inputs[0].Table = "u" }), "not t.p"},
		{"mergeout input table traversal", mj(func(j *MergeoutJob) { j.Inputs[0].Table = "../t" }), "invalid name"},
		{"mergeout leading dash", mj(func(j *MergeoutJob) { j.Table = "-rf" }), "invalid name"},
		{"mergeout reserved table", mj(func(j *MergeoutJob) { j.Table = "nats" }), "reserved"},
		{"event forged output", &JobEvent{JobID: "j", Type: EventDone, Output: &ContainerRef{Table: "t", Projection: "p", ID: "../../../../outside/victim"}}, "invalid name"},
		{"event ok", &JobEvent{JobID: "j", Type: EventProgress}, ""},
		{"event no id", &JobEvent{Type: EventDone}, "job_id"},
		{"event unknown type", &JobEvent{JobID: "j", Type: "exploded"}, "unknown event type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.m.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("valid message rejected: %v", err)
			case tt.want != "" && err == nil:
				t.Fatalf("invalid message accepted, want an error containing %q", tt.want)
			case tt.want != "" && !strings.Contains(err.Error(), tt.want):
				t.Fatalf("error %q does not contain %q", err, tt.want)
			}
		})
	}
}

func TestEventTypeSubjects(t *testing.T) {
	for typ, want := range map[EventType]string{
		EventAccepted: SubjectEventAccepted, EventProgress: SubjectEventProgress,
		EventDone: SubjectEventDone, EventFailed: SubjectEventFailed,
	} {
		if got := typ.Subject(); got != want {
			t.Errorf("%s.Subject() = %q, want %q", typ, got, want)
		}
	}
	if got := SubjectDeadLetter(SubjectJobMergeout); got != "strata.deadletter.strata.jobs.mergeout" {
		t.Errorf("SubjectDeadLetter = %q", got)
	}
	if got := SubjectUpdates("accounts"); got != "strata.updates.accounts" {
		t.Errorf("SubjectUpdates = %q", got)
	}
}

// TestMergeoutJobMarkerFloorRoundTrip: the marker floor crosses the wire,
// and a job without one (every job before keyed tables) encodes as before.
func TestMergeoutJobMarkerFloorRoundTrip(t *testing.T) {
	plain, err := Marshal(sampleMergeoutJob())
	if err != nil {
		t.Fatal(err)
	}
	j := sampleMergeoutJob()
	j.DropMarkersThrough = 1 << 40
	data, err := Marshal(j)
	if err != nil {
		t.Fatal(err)
	}
	var got MergeoutJob
	if err := Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	if got.DropMarkersThrough != 1<<40 {
		t.Errorf("drop_markers_through %d after a round trip, want %d", got.DropMarkersThrough, int64(1<<40))
	}
	if len(data) <= len(plain) {
		t.Errorf("a job with a marker floor encodes in %d bytes, one without in %d", len(data), len(plain))
	}
	var old MergeoutJob
	if err := Unmarshal(plain, &old); err != nil || old.DropMarkersThrough != 0 {
		t.Errorf("a job without the field: %v, drop_markers_through %d", err, old.DropMarkersThrough)
	}
}
