package messages

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// allKinds returns a sample of every message type, by kind: jobs, events,
// update events and every API request and reply.
func allKinds(t testing.TB) map[string]Message {
	t.Helper()
	out := map[string]Message{}
	add := func(m Message) {
		if _, dup := out[m.Kind()]; !dup {
			out[m.Kind()] = m
		}
	}
	for _, m := range jobSamples() {
		add(m)
	}
	for _, m := range apiSamples() {
		add(m)
	}
	cols := []RowType{RowInt64, RowText}
	row, err := EncodeRow(cols, []any{int64(1), "x"})
	if err != nil {
		t.Fatal(err)
	}
	add(&UpdateEvent{EventID: "e1", Table: "accounts", Columns: cols, Key: []byte("k"), NewRow: row})
	return out
}

// newOfKind returns a new zero message of m's type.
func newOfKind(m Message) Message {
	return reflect.New(reflect.TypeOf(m).Elem()).Interface().(Message)
}

// header encodes a message header with an arbitrary body.
func header(t *testing.T, n int, version uint64, kind string, body any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	if err := enc.EncodeArrayLen(n); err != nil {
		t.Fatal(err)
	}
	if err := enc.EncodeUint(version); err != nil {
		t.Fatal(err)
	}
	if err := enc.EncodeString(kind); err != nil {
		t.Fatal(err)
	}
	if body != nil {
		if err := enc.Encode(body); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

func TestCodecRoundTripEveryKind(t *testing.T) {
	for kind, m := range allKinds(t) {
		data, err := Marshal(m)
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		k, v, err := PeekKind(data)
		if err != nil || k != kind || v != Version {
			t.Fatalf("%s: PeekKind = %q, %d, %v", kind, k, v, err)
		}
		got := newOfKind(m)
		if err := Unmarshal(data, got); err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Fatalf("%s: round trip\n got %+v\nwant %+v", kind, got, m)
		}
	}
}

func TestCodecRejects(t *testing.T) {
	job := sampleMergeoutJob()
	good, err := Marshal(job)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		data    []byte
		version bool   // want *UnknownVersionError rather than ErrMalformed
		want    string // substring of the error
	}{
		{"empty", nil, false, "header"},
		{"not msgpack", []byte("hello"), false, "header"},
		{"map instead of array", []byte{0x80}, false, "header"},
		{"two-element header", header(t, 2, Version, "mergeout_job", nil), false, "array of 2 elements"},
		{"string version", append([]byte{0x93, 0xa1, '1'}, good[2:]...), false, "version"},
		{"unknown version", header(t, 3, 2, "mergeout_job", map[string]any{}), true, "unknown version 2"},
		{"wrong kind", header(t, 3, Version, "window_job", map[string]any{}), false, `kind "window_job", want "mergeout_job"`},
		{"body not a map", header(t, 3, Version, "mergeout_job", "text"), false, "body"},
		{"wrong field type", header(t, 3, Version, "mergeout_job", map[string]any{"job_id": []int{1}}), false, "body"},
		{"trailing bytes", append(append([]byte{}, good...), 0xc0), false, "trailing"},
		{"truncated", good[:len(good)-3], false, "body"},
		{"invalid content", header(t, 3, Version, "mergeout_job", map[string]any{"job_id": "j"}), false, "table and projection"},
		{"too large", append(header(t, 3, Version, "mergeout_job", nil), make([]byte, MaxMessageBytes)...), false, "exceeds"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Unmarshal(tt.data, new(MergeoutJob))
			if err == nil {
				t.Fatal("accepted")
			}
			var uv *UnknownVersionError
			if tt.version != errors.As(err, &uv) {
				t.Fatalf("error %v: unknown-version %v, want %v", err, !tt.version, tt.version)
			}
			if !tt.version && !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q does not contain %q", err, tt.want)
			}
		})
	}
}

func TestMarshalRefusesOversized(t *testing.T) {
	j := sampleMergeoutJob()
	j.Inputs = make([]ContainerRef, 20000)
	for i := range j.Inputs {
		j.Inputs[i] = ContainerRef{Table: strings.Repeat("t", 40), Projection: "p", ID: "c"}
	}
	if _, err := Marshal(j); err == nil || !strings.Contains(err.Error(), "limit") {
		t.Fatalf("Marshal of an oversized job: %v", err)
	}
}

// FuzzDecode feeds arbitrary bytes to the decoder of every kind: it must
// return a message or an error, never panic, and what it accepts must
// encode and decode again to the same value.
func FuzzDecode(f *testing.F) {
	kinds := allKinds(f)
	for _, m := range kinds {
		data, err := Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte{})
	f.Add([]byte{0x93, 0x01, 0xa0, 0x80})
	f.Fuzz(func(t *testing.T, data []byte) {
		kind, _, err := PeekKind(data)
		for _, m := range kinds {
			got := newOfKind(m)
			if err := Unmarshal(data, got); err != nil {
				continue
			}
			if got.Kind() != kind {
				t.Fatalf("decoded a %s from a message of kind %q", got.Kind(), kind)
			}
			again, err := Marshal(got)
			if err != nil {
				t.Fatalf("%s: accepted message does not encode: %v", got.Kind(), err)
			}
			back := newOfKind(m)
			if err := Unmarshal(again, back); err != nil {
				t.Fatalf("%s: re-encoded message does not decode: %v", got.Kind(), err)
			}
			if !reflect.DeepEqual(back, got) {
				t.Fatalf("%s: round trip of an accepted message changed it:\n%+v\n%+v", got.Kind(), got, back)
			}
		}
		_ = err
	})
}
