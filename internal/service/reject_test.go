package service

import "testing"

// A subject label takes a bounded set of values, whatever is published.
func TestSubjectKind(t *testing.T) {
	for subject, want := range map[string]string{
		"strata.jobs.mergeout":      "strata.jobs.mergeout",
		"strata.jobs.window":        "strata.jobs.window",
		"strata.jobs.other":         "strata.jobs.*",
		"strata.events.done":        "strata.events.done",
		"strata.events.exploded":    "strata.events.*",
		"strata.events.>":           "strata.events.*",
		"strata.updates.accounts":   "strata.updates.*",
		"strata.updates.>":          "strata.updates.*",
		"strata.updates.t.extra":    "strata.updates.*",
		"strata.api.register":       "other",
		"":                          "other",
		"something.else.altogether": "other",
	} {
		if got := SubjectKind(subject); got != want {
			t.Errorf("SubjectKind(%q) = %q; want %q", subject, got, want)
		}
	}
}
