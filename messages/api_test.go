package messages

import (
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func i64(v int64) *int64 { return &v }
func intp(v int) *int    { return &v }

// apiSamples is one filled-in value of every API request and reply.
func apiSamples() map[string]Message {
	ref := ContainerRef{Table: "t", Projection: "p", ID: "c0001", Rows: 1000, Bytes: 4096}
	grant := Grant{Pool: "tm", Bytes: 100 << 20, Target: 100 << 20}
	job := JobRef{JobID: "mergeout.t.p.1", Table: "t", Projection: "p", Inputs: 32, Output: "m00000001", Grant: grant}
	pool := PoolConfig{Name: "tm", MemorySize: 200 << 20, MaxMemorySize: 200 << 20, PlannedConcurrency: 2, QueueTimeout: 300e9, Priority: 10}
	return map[string]Message{
		"register_request":       &RegisterRequest{Table: "t", Projection: "p", Containers: []ContainerRef{ref}},
		"register_reply":         &RegisterReply{Live: 33},
		"register_reply_error":   &RegisterReply{Error: &APIError{Code: ErrCodeTooManyContainers, Message: "too many containers"}},
		"mergeout_request":       &MergeoutRequest{Table: "t"},
		"mergeout_reply":         &MergeoutReply{Jobs: []JobRef{job}},
		"mergeout_reply_running": &MergeoutReply{Running: []JobRef{job}},
		"window_request":         &WindowRequest{Query: WindowQuery{Table: "t", Select: []SelectItem{{Alias: "a", Expr: &Expr{Column: "a"}}}}, Pool: "general"},
		"window_reply":           &WindowReply{Job: job, ResultTable: "window_1"},
		"operations_request":     &OperationsRequest{Table: "t", Limit: 10},
		"operations_reply": &OperationsReply{Operations: []Operation{{
			JobID: "mergeout.t.p.1", Operation: OperationMergeout, Status: StatusDone, Table: "t", Projection: "p",
			Inputs: 32, Output: "m00000001", Rows: 1000, Bytes: 4096, Plan: "vertical", Worker: "merger-1",
			Created: 1, Start: 2, End: 3, PeakBytes: 120 << 20, Grant: grant, MemoryConstrained: true,
			InputIDs: []string{"c0001"},
		}}},
		"acquisitions_request": &AcquisitionsRequest{Pool: "tm"},
		"acquisitions_reply": &AcquisitionsReply{Acquisitions: []Acquisition{{
			Pool: "tm", JobID: "mergeout.t.p.1", Status: AcquisitionReleased, Target: 100 << 20, Grant: 100 << 20,
			Peak: 90 << 20, Queued: 1, Acquired: 2, Released: 3,
		}}},
		"pools_request":           &PoolsRequest{},
		"pools_reply":             &PoolsReply{Pools: []PoolStatus{{Config: pool, Target: 100 << 20, InUse: 100 << 20, Running: 1, Recommendation: "grow pool tm"}}},
		"create_pool_request":     &CreatePoolRequest{Pool: pool},
		"alter_pool_request":      &AlterPoolRequest{Name: "tm", MemorySize: i64(8 << 30)},
		"catalog_request":         &CatalogRequest{Table: "t"},
		"catalog_reply":           &CatalogReply{Projections: []ProjectionCatalog{{Table: "t", Projection: "p", Live: []ContainerRef{ref}, Running: []string{"j"}}}},
		"drop_containers_request": &DropContainersRequest{Table: "t", Projection: "p", IDs: []string{"c0001"}},
		"drop_containers_reply":   &DropContainersReply{Dropped: []ContainerRef{ref}, Live: 3},
		"cancel_request":          &CancelRequest{JobID: "window.t.p.7", Reason: "client cancel", RequestID: "r-1"},
		"cancel_reply":            &CancelReply{JobID: "window.t.p.7", State: CancelRunning},
		"cancel_notice":           &CancelNotice{JobID: "window.t.p.7", Reason: CancelledPrefix + "client cancel", Time: 1},
	}
}

func TestAPIRoundTrip(t *testing.T) {
	for name, m := range apiSamples() {
		t.Run(name, func(t *testing.T) {
			data, err := Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			kind, version, err := PeekKind(data)
			if err != nil || kind != m.Kind() || version != Version {
				t.Fatalf("PeekKind = %q, %d, %v; want %q, %d", kind, version, err, m.Kind(), Version)
			}
			got := reflect.New(reflect.TypeOf(m).Elem()).Interface().(Message)
			if err := Unmarshal(data, got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, m) {
				t.Fatalf("round trip:\n got %+v\nwant %+v", got, m)
			}
		})
	}
}

// TestAPIGolden pins the wire bytes: a change that alters them breaks every
// deployed client and must bump Version. Run with STRATA_UPDATE_GOLDEN=1 to
// rewrite testdata after a deliberate change.
func TestAPIGolden(t *testing.T) {
	for name, m := range apiSamples() {
		t.Run(name, func(t *testing.T) {
			checkGolden(t, filepath.Join("testdata", "api", name+".hex"), m)
		})
	}
}

func TestAPIValidate(t *testing.T) {
	ref := ContainerRef{Table: "t", Projection: "p", ID: "c1"}
	pool := PoolConfig{Name: "x", MemorySize: 100, MaxMemorySize: 100, PlannedConcurrency: 2}
	tests := []struct {
		name string
		m    Message
		want string // substring of the error; empty: valid
	}{
		{"register ok", &RegisterRequest{Table: "t", Projection: "p", Containers: []ContainerRef{ref}}, ""},
		{"register no containers", &RegisterRequest{Table: "t", Projection: "p"}, "no containers"},
		{"register bad table", &RegisterRequest{Table: "../x", Projection: "p", Containers: []ContainerRef{ref}}, "table"},
		{"register foreign container", &RegisterRequest{Table: "t", Projection: "q", Containers: []ContainerRef{ref}}, "belongs to t.p"},
		{"register duplicate", &RegisterRequest{Table: "t", Projection: "p", Containers: []ContainerRef{ref, ref}}, "named twice"},
		{"register bad id", &RegisterRequest{Table: "t", Projection: "p", Containers: []ContainerRef{{Table: "t", Projection: "p", ID: "a/b"}}}, "invalid name"},
		{"mergeout ok", &MergeoutRequest{Table: "t"}, ""},
		{"mergeout no table", &MergeoutRequest{}, "table"},
		{"window ok", &WindowRequest{Query: WindowQuery{Table: "t", Select: []SelectItem{{Alias: "a"}}}}, ""},
		{"window empty select", &WindowRequest{Query: WindowQuery{Table: "t"}}, "selects nothing"},
		{"window bad pool", &WindowRequest{Query: WindowQuery{Table: "t", Select: []SelectItem{{Alias: "a"}}}, Pool: "a b"}, "pool"},
		{"ops negative limit", &OperationsRequest{Limit: -1}, "negative"},
		{"acq negative limit", &AcquisitionsRequest{Limit: -1}, "negative"},
		{"create ok", &CreatePoolRequest{Pool: pool}, ""},
		{"create max below memory", &CreatePoolRequest{Pool: PoolConfig{Name: "x", MemorySize: 100, MaxMemorySize: 50, PlannedConcurrency: 1}}, "below memorysize"},
		{"create zero concurrency", &CreatePoolRequest{Pool: PoolConfig{Name: "x", MemorySize: 100, MaxMemorySize: 100}}, "plannedconcurrency"},
		{"create zero memory", &CreatePoolRequest{Pool: PoolConfig{Name: "x", PlannedConcurrency: 1}}, "memorysize"},
		{"alter nothing", &AlterPoolRequest{Name: "tm"}, "nothing to alter"},
		{"alter ok", &AlterPoolRequest{Name: "tm", PlannedConcurrency: intp(4)}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, ok := tt.m.(interface{ Validate() error })
			if !ok {
				t.Fatalf("%T has no Validate", tt.m)
			}
			err := v.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestAPIUnmarshalRejectsInvalid(t *testing.T) {
	data, err := Marshal(&RegisterRequest{Table: "t", Projection: "p"})
	if err != nil {
		t.Fatal(err)
	}
	err = Unmarshal(data, &RegisterRequest{})
	if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "no containers") {
		t.Fatalf("got %v, want ErrMalformed naming the problem", err)
	}
	if err := Unmarshal(data, &MergeoutRequest{}); !errors.Is(err, ErrMalformed) {
		t.Fatalf("wrong kind accepted: %v", err)
	}
}

func TestAlterPoolApply(t *testing.T) {
	cfg := PoolConfig{Name: "tm", MemorySize: 200 << 20, MaxMemorySize: 200 << 20, PlannedConcurrency: 2}
	got := (&AlterPoolRequest{Name: "tm", MemorySize: i64(8 << 30)}).Apply(cfg)
	if got.MemorySize != 8<<30 || got.MaxMemorySize != 8<<30 || got.PlannedConcurrency != 2 {
		t.Fatalf("raising memorysize: %+v", got)
	}
	got = (&AlterPoolRequest{Name: "tm", MemorySize: i64(1 << 30), MaxMemorySize: i64(4 << 30), MaxConcurrency: intp(3)}).Apply(cfg)
	if got.MemorySize != 1<<30 || got.MaxMemorySize != 4<<30 || got.MaxConcurrency != 3 {
		t.Fatalf("explicit max: %+v", got)
	}
	if got.Target() != 512<<20 {
		t.Fatalf("target %d", got.Target())
	}
}

func FuzzAPIUnmarshal(f *testing.F) {
	for _, m := range apiSamples() {
		data, err := Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, m := range apiSamples() {
			dst := reflect.New(reflect.TypeOf(m).Elem()).Interface().(Message)
			if err := Unmarshal(data, dst); err != nil {
				continue
			}
			// Whatever decodes must encode again.
			if _, err := Marshal(dst); err != nil {
				t.Fatalf("%s decoded but does not encode: %v", dst.Kind(), err)
			}
		}
	})
}
