package s3test_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/strata-db/strata/columnar/store"
	"github.com/strata-db/strata/columnar/store/s3test"
)

// TestHoldPuts: a PUT of a held key is reported and waits, unstored,
// while other keys are served; after the release it is answered 503 and
// the client's retry is served.
func TestHoldPuts(t *testing.T) {
	srv := s3test.Start(t, "b")
	st, err := store.Open(t.Context(), srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	src := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(src, []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	held, release := srv.HoldPuts("t/*/col-0001.arrow")
	putErr := make(chan error, 1)
	go func() { putErr <- st.Put(t.Context(), "t/x/col-0001.arrow", src, store.PutOptions{}) }()
	select {
	case key := <-held:
		if key != "t/x/col-0001.arrow" {
			t.Errorf("held %q", key)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the PUT was not held")
	}
	if err := st.Put(t.Context(), "t/x/col-0000.arrow", src, store.PutOptions{}); err != nil {
		t.Errorf("a key not held: %v", err)
	}
	select {
	case err := <-putErr:
		t.Fatalf("the held PUT returned before the release: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	if _, err := st.Stat(t.Context(), "t/x/col-0001.arrow"); !errors.Is(err, store.ErrNotExist) {
		t.Errorf("the held key: %v, want ErrNotExist", err)
	}
	release()
	// Answered 503, the client retries, and the retry is served.
	if err := <-putErr; err != nil {
		t.Errorf("the held PUT after the release and a retry: %v", err)
	}
	release()
}
