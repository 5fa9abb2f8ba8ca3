package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/strata-db/strata/merger"
)

// strataMerge runs strata's mergeout on the suite's inputs. The figures the
// report shows besides the time come from merger.Stats.
func strataMerge(ctx context.Context, log *slog.Logger, inputs []string, out, tmp string, grant int64) (*merger.Stats, error) {
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return nil, err
	}
	return merger.Merge(ctx, inputs, out, merger.Options{
		Grant:   grant,
		TempDir: tmp,
		Logger:  log.With("component", "merger"),
	})
}
