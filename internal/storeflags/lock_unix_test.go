//go:build unix

package storeflags

import (
	"errors"
	"flag"
	"log/slog"
	"strings"
	"testing"

	"github.com/strata-db/strata/columnar/depot"
)

// A second worker given the depot directory of a running one (one data
// directory, the default --depot) does not start.
func TestDepotOfAnotherWorker(t *testing.T) {
	data := t.TempDir()
	store := "file://" + t.TempDir()
	open := func() (*depot.Depot, error) {
		var f Flags
		fs := flag.NewFlagSet("merger", flag.ContinueOnError)
		f.Register(fs, true)
		if err := fs.Parse([]string{"--store", store}); err != nil {
			t.Fatal(err)
		}
		return f.OpenDepot(t.Context(), data, slog.New(slog.DiscardHandler))
	}
	d, err := open()
	if err != nil {
		t.Fatal(err)
	}
	defer d.Store().Close()
	defer d.Close()
	_, err = open()
	if !errors.Is(err, depot.ErrLocked) || !strings.Contains(err.Error(), "--depot") {
		t.Errorf("a second worker on the same depot: %v; want ErrLocked, naming --depot", err)
	}
}
