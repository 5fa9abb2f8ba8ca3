package scheduler

import (
	"testing"

	"github.com/strata-db/strata/messages"
)

// TestCatalogEntryStaysSmall: a projection's catalog entry must stay far
// below the NATS payload limit (1 MiB by default) however many containers
// are live and however many jobs read them. 400 live containers read by 50
// pending window jobs once made an entry of 1.7 MB, and window requests
// failed with "maximum payload exceeded".
func TestCatalogEntryStaysSmall(t *testing.T) {
	const containers, windows, limit = 400, 50, 256 << 10
	h := newHarness(t, Options{Strata: StrataOptions{Capacity: 1024, MaxContainers: 1024}})
	for i := 0; i < containers; i += 100 {
		if err := h.load("t", i, 100, 1000); err != nil {
			t.Fatal(err)
		}
	}
	for i := range windows {
		if _, err := h.s.SubmitWindow(h.ctx, &messages.WindowRequest{Query: messages.WindowQuery{Table: "t",
			Select: []messages.SelectItem{{Alias: "a", Expr: &messages.Expr{Column: "a"}}}}}); err != nil {
			t.Fatalf("window request %d of %d: %v", i+1, windows, err)
		}
	}
	entry, _, err := h.catalog.Get(h.ctx, "t/p")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("catalog entry of %d live containers and %d pending window jobs: %d bytes", containers, windows, len(entry))
	if st := h.state("t"); len(st.Live) != containers || len(st.Pending) != windows {
		t.Fatalf("entry holds %d live containers and %d pending jobs, want %d and %d", len(st.Live), len(st.Pending), containers, windows)
	}
	if len(entry) > limit {
		t.Fatalf("catalog entry is %d bytes, more than %d", len(entry), limit)
	}
}
