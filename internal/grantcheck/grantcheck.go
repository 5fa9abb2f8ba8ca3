// Package grantcheck holds a test package's engine runs to their memory
// grants: a run's promise is that its peak never passes the grant, and a
// run that breaks it still returns correct output, which a test checking
// only the output would pass. A package's TestMain gives its engine's
// hook Passed's Add, runs the tests, and fails them with Exit if any run
// passed its grant.
package grantcheck

import (
	"fmt"
	"io"
	"sync"
)

// Passed collects the runs that passed their grants. It is safe for
// concurrent use.
type Passed struct {
	mu   sync.Mutex
	runs []string
}

// Add records a run, named by what, whose memory peaked at peak bytes
// over a grant of grant bytes.
func (p *Passed) Add(what string, peak, grant int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.runs = append(p.runs, fmt.Sprintf("%s: peak %d bytes over the %d-byte grant", what, peak, grant))
}

// Exit returns the exit code of tests that ended with code: code, or 1
// after listing them on w if any run passed its grant.
func (p *Passed) Exit(code int, w io.Writer) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.runs) == 0 {
		return code
	}
	fmt.Fprintf(w, "FAIL: %d runs passed their memory grants:\n", len(p.runs))
	for _, r := range p.runs {
		fmt.Fprintln(w, "  "+r)
	}
	return 1
}
