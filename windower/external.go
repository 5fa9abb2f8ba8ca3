package windower

import (
	"context"
	"fmt"

	"github.com/strata-db/strata/columnar"
)

// runExternal evaluates a query whose input does not fit the grant.
func runExternal(ctx context.Context, p *plan, cs []*columnar.Container, rows int64, o Options) (*Result, error) {
	return nil, fmt.Errorf("%w: %d input rows need about %d bytes, more than the %d-byte grant, and spilling is not implemented yet",
		ErrUnsupported, rows, p.memoryPerRow()*rows, o.Budget.Limit())
}
