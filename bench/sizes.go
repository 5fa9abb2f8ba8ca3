package main

import "time"

// sizes are the data sizes and repetitions of one run.
type sizes struct {
	// Windows.
	WindowRows   int           // rows of the window table
	WindowGroups int           // distinct values of g
	Repeats      int           // timed runs per query and system; the fastest counts
	QueryLimit   time.Duration // a query running longer is stopped and reported as "> limit"

	// Threads are the windower thread counts strata's window runs use
	// besides one and runtime.NumCPU() (--threads).
	Threads []int `json:",omitempty"`

	// Mergeout.
	MergeWidths     []int   // table widths (columns)
	MergeContainers int     // K inputs per merge
	MergeRows       int     // rows per input container
	MergeGrants     []int64 // memory grants in bytes
	MergeRepeats    int

	// Store: mergeout widths of StoreContainers inputs of StoreRows rows
	// merged within StoreGrant, and window queries over StoreWindowRows,
	// read locally and from an object store, StoreRepeats times each way
	// (StoreWindowRepeats for a window query, which takes a tenth of the
	// time).
	StoreWidths     []int `json:",omitempty"`
	StoreContainers int   `json:",omitempty"`
	StoreRows       int   `json:",omitempty"`
	StoreGrant      int64 `json:",omitempty"`
	StoreWindowRows int   `json:",omitempty"`
	StoreRepeats    int   `json:",omitempty"`
	// StoreWindowRepeats: 0 in results of runs before it, which ran
	// StoreRepeats.
	StoreWindowRepeats int `json:",omitempty"`

	// WAL.
	WALRows    int // rows in the table being updated
	WALUpdates int // updates per workload

	// ProfileDir, when set, receives a CPU profile of each strata mergeout
	// case and window query (the first timed run), to explain a figure.
	ProfileDir string `json:"-"`
}

const (
	kib = 1 << 10
	mib = 1 << 20
	gib = 1 << 30
)

// storeWindowRuns is a store window query's runs each way:
// StoreWindowRepeats, never fewer than a mergeout's.
func (s sizes) storeWindowRuns() int { return max(s.StoreWindowRepeats, s.StoreRepeats) }

func sizesFor(quick bool) sizes {
	s := sizes{
		WindowRows:         1_000_000,
		WindowGroups:       1000,
		Repeats:            3,
		QueryLimit:         60 * time.Second,
		MergeWidths:        []int{100, 200, 400},
		MergeContainers:    32,
		MergeRows:          8192,
		MergeGrants:        []int64{32 * mib, 100 * mib, 1 * gib, 8 * gib},
		MergeRepeats:       2,
		WALRows:            100_000,
		WALUpdates:         100_000,
		StoreWidths:        []int{100, 400},
		StoreContainers:    32,
		StoreRows:          8192,
		StoreGrant:         32 * mib,
		StoreWindowRows:    1_000_000,
		StoreRepeats:       3,
		StoreWindowRepeats: 5,
	}
	if quick {
		s.WindowRows = 200_000
		s.WindowGroups = 200
		s.Repeats = 2
		s.QueryLimit = 20 * time.Second
		s.MergeWidths = []int{50, 100}
		s.MergeContainers = 16
		s.MergeRows = 8192
		s.MergeRepeats = 3
		s.WALRows = 20_000
		s.WALUpdates = 20_000
		s.StoreWidths = []int{50, 100}
		s.StoreRows = 2048
		s.StoreWindowRows = 200_000
		s.StoreRepeats = 2
		s.StoreWindowRepeats = 2
	}
	return s
}
