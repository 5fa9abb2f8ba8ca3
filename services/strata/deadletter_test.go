package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/strata-db/strata/internal/natsutil"
	"github.com/strata-db/strata/internal/natsutil/natstest"
	"github.com/strata-db/strata/messages"
)

func TestDeadLetter(t *testing.T) {
	srv, _, js := natstest.Start(t, natsutil.DefaultTopology())
	ctx := context.Background()
	for i, dl := range []natsutil.DeadLetter{
		{Subject: messages.SubjectJobMergeout, Data: []byte("not msgpack"), Reason: "decode: not msgpack", Class: "malformed", Service: "merger", StreamSeq: 7, Delivery: 1},
		{Subject: "strata.updates.accounts", Data: []byte("xy"), Reason: "unknown table", Class: "failed", Service: "walwriter"},
		{Subject: messages.SubjectJobWindow, Data: []byte("abc"), Reason: "grant too small", Class: "rejected", Service: "windower", StreamSeq: 9},
	} {
		if err := natsutil.PublishDeadLetter(ctx, js, dl); err != nil {
			t.Fatalf("dead letter %d: %v", i, err)
		}
	}
	conn := []string{"--nats", srv.ClientURL(), "--data", t.TempDir()}

	code, out, errText := run(t, append([]string{"deadletter", "--format", "json"}, conn...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errText)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if len(rows) != 3 {
		t.Fatalf("%d dead letters, want 3:\n%s", len(rows), out)
	}
	first := rows[0]
	for k, want := range map[string]any{"seq": float64(1), "subject": messages.SubjectJobMergeout, "service": "merger", "class": "malformed",
		"reason": "decode: not msgpack", "stream_seq": float64(7), "delivery": float64(1), "size_bytes": float64(11)} {
		if first[k] != want {
			t.Errorf("%s = %#v, want %#v", k, first[k], want)
		}
	}
	if rows[1]["stream_seq"] != nil || rows[1]["time"] == nil {
		t.Errorf("second dead letter: %v", rows[1])
	}

	code, out, _ = run(t, append([]string{"deadletter", "--limit", "1"}, conn...)...)
	if code != 0 || !strings.Contains(out, "grant too small") || strings.Contains(out, "merger") {
		t.Errorf("--limit 1: exit %d:\n%s", code, out)
	}
	code, out, _ = run(t, append([]string{"deadletter", "--subject", "strata.jobs.>", "--format", "csv"}, conn...)...)
	if code != 0 || strings.Count(out, "\n") != 3 || strings.Contains(out, "walwriter") {
		t.Errorf("--subject strata.jobs.>: exit %d:\n%s", code, out)
	}
}

func TestSubjectMatches(t *testing.T) {
	for _, tc := range []struct {
		filter, subject string
		want            bool
	}{
		{"", "a.b", true}, {"a.b", "a.b", true}, {"a.b", "a.c", false}, {"a.*", "a.b", true}, {"a.*", "a.b.c", false},
		{"a.>", "a.b.c", true}, {"a.>", "a", false}, {"*.b", "a.b", true}, {"a.b.c", "a.b", false},
	} {
		if got := subjectMatches(tc.filter, tc.subject); got != tc.want {
			t.Errorf("subjectMatches(%q, %q) = %v, want %v", tc.filter, tc.subject, got, tc.want)
		}
	}
}
