package walarchive

import "time"

// WithClock returns o with the archiver's clock (retention by age) set to
// now.
func WithClock(o Options, now func() time.Time) Options {
	o.now = now
	return o
}
