// Package scheduler decides what strata runs and with how much memory. It
// keeps the catalog of live containers, chooses mergeouts with Vertica's
// strata algorithm, admits mergeout and window jobs into resource pools
// (memorysize, maxmemorysize, plannedconcurrency, maxconcurrency,
// queuetimeout, priority), and learns from job events when to swap a
// mergeout's inputs for its output, delete dead containers and release
// memory. It keeps the operations, acquisitions and pools system tables,
// and says plainly when a pool is too small.
//
// The package has no NATS in it: it takes a KV (a JetStream key-value bucket
// in production, MemKV in tests), a Publisher for jobs and events, and a
// Clock. services/scheduler wires it to NATS.
//
// # Format
//
// Catalog bucket (messages.BucketCatalog): one key per projection,
// "<table>/<projection>", whose value is the JSON encoding of
// ProjectionState:
//
//	{"table": "t", "projection": "p", "next_seq": 7,
//	 "live":    [{"Table": "t", "Projection": "p", "ID": "c0001", "Rows": 1000, "Bytes": 4096}, ...],
//	 "dead":    [...same shape: retired, still read by a pending job...],
//	 "pending": [{"job_id": "mergeout.t.p.7", "operation": "mergeout", "inputs": ["c0001", ...],
//	              "granted": true, "grant": {...}, "created": 1700000000000000000,
//	              "granted_at": ..., "mergeout": {...the MergeoutJob...}}],
//	 "result_of": "window.t.p.8", "created": ...}   (window result tables only)
//
// Every change is a compare-and-set on the entry's revision, retried on
// conflict, so a finished mergeout removes its inputs from live, adds them to
// dead and adds its output in one atomic write. next_seq numbers the jobs of
// the projection; job IDs ("mergeout.<table>.<projection>.<seq>",
// "window.<table>.<projection>.<seq>") and output container IDs
// ("m%08d", "w%08d") derive from it, so they are never reused. A
// pending job is written before it is granted or published, so after a
// restart the scheduler knows which containers are read, which grants are
// held and which jobs to publish again (duplicates are dropped by job ID).
//
// Pools bucket (messages.BucketPools): one key per pool name, whose value is
// the JSON encoding of messages.PoolConfig (sizes in bytes, queuetimeout in
// nanoseconds).
//
// A window job's result is registered live in its own table
// ("<table>_window_<seq>"); the scheduler keeps the newest
// Options.KeepResults result tables and drops older ones.
//
// Container directories are DATA/<table>/<projection>/<id>/. A dead
// container's directory is removed once no pending job reads it; at start,
// directories of a cataloged projection that the catalog does not name and
// that are older than Options.OrphanGrace are removed.
package scheduler
