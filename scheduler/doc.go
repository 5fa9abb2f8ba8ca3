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
// Catalog bucket (messages.BucketCatalog), format version 1
// (testdata/catalog_v1.json pins it). Two kinds of key:
//
// "<table>/<projection>", the projection's entry: its containers, the jobs
// that read them, and only what decisions need of those jobs, so the
// entry stays small however many jobs read however many containers
// (about 27 KB for 400 live containers read by 50 window jobs; a NATS
// value may not pass 1 MB):
//
//	{"version": 1, "table": "t", "projection": "p", "next_seq": 7,
//	 "live":    [{"id": "c0001", "rows": 1000, "bytes": 4096, "readers": 2}, ...],
//	 "dead":    [...same shape: retired, still read by a pending job...],
//	 "pending": [{"job_id": "mergeout.t.p.7", "seq": 7, "kind": "mergeout",
//	              "granted": true, "grant": {"pool": "tm", "bytes": ..., "target": ...},
//	              "created": 1700000000000000000, "granted_at": ...,
//	              "worker": "merger-1", "delivery": 1}],
//	 "result_of": "window.t.p.8", "created": ...,   (window result tables only)
//	 "requests": [{"id": "req-5f0c...", "op": "register", "at": ...,
//	               "reply": {"live": 12}}, ...],
//	 "next_container": 40,
//	 "reservations": [{"id": "res-32", "first": 32, "count": 8, "expires": ...}]}
//
// Containers are those of the entry's projection; "readers" counts the
// pending jobs whose inputs hold the container (omitted when none). A
// dead container is deleted once its count is zero.
//
// "requests" are the scheduler's answers to the latest client requests
// with an ID that changed the entry ("op": register, drop, mergeout,
// window; "reply" the JSON of the wire reply, a refusal as its "error"),
// written in the same compare-and-set as the change, so a request sent
// again (its reply late or lost, the scheduler restarted) gets the first
// answer and changes nothing more: the newest 64, none older than a day
// (requests.go). Absent when empty; an entry written before it existed
// reads as having none.
//
// "next_container" is one past the highest container number a load was
// handed, and "reservations" the runs of numbers loads hold (first to
// first+count-1) until "expires" (unix ns) unless renewed; registering a
// load's containers releases its reservations (reserve.go). The orphan
// sweep leaves the containers of a held reservation alone. Both absent
// until a load reserves.
//
// "primary_key" names a keyed table's key columns (["aid"]), set from the
// containers' manifests by the projection's first load (register.go),
// which refuses loads that do not fit it; "applied" maps a WAL ID to the
// WAL position through which that WAL's changes of the table are live
// (apply.go). Both absent for an append-only table.
//
// "frozen_through" (a keyed table's) is the change floor through which a
// full mergeout wrote its rows' versions as 0 (merger.Options.FreezeThrough):
// set, to the job's drop_markers_through, in the write that adds such a
// mergeout and again in the one that makes its output live, and only ever
// raised; an apply whose container's least version (its manifest's
// changes.min_version) is at or below it is refused with code "frozen"
// (apply.go). "changed_rows" counts the rows of the changes applied since
// the last full mergeout, less the rows mergeouts folded away since; it
// drives the purge of strata selection (strata.go). Both absent when 0,
// and in entries written before they existed, which read as 0: a table
// never frozen, with no changes counted yet.
//
// "<table>/<projection>/job/<seq>", the body of pending job seq of the
// projection: the job as made, its full input list and what its kind
// needs ("spec"), everything but the grant, which the entry holds and the
// published message carries:
//
//	{"version": 1, "job_id": "window.t.p.8", "kind": "window", "table": "t",
//	 "projection": "p", "seq": 8, "created": ...,
//	 "inputs": [{"id": "c0001", "rows": 1000, "bytes": 4096}, ...],
//	 "spec": {"result_table": "t_window_8", "output": "w00000008",
//	          "query": "<base64 of the query's wire encoding, a messages.WindowQuery>"}}
//
// A mergeout's spec is {"output": "m00000007", "stratum": 0}, with
// "drop_markers_through" (the change floor) for a full mergeout of a keyed
// table, which drops delete markers and freezes versions through it.
//
// Every change of an entry is a compare-and-set on its revision, retried
// on conflict, so a finished mergeout removes its inputs from live, adds
// them to dead, uncounts its reads and adds its output in one atomic
// write. next_seq numbers the jobs of the projection; job IDs
// ("mergeout.<table>.<projection>.<seq>", "window.<table>.<projection>.<seq>")
// and output container IDs ("m%08d", "w%08d") derive from it, so they are
// never reused. A job's body is created (only if its key is absent) before
// the entry write that names it, counts its inputs and takes its number;
// the body is deleted after the entry write that ends the job. So an entry
// never names a missing body, and a crash between the two writes leaves
// at most a body no entry names: it is ignored, its number is passed over
// by the next job, and the start of a scheduler deletes it once the
// entry's next_seq has passed it. A pending job is written before it is
// granted or published, so after a restart the scheduler knows which
// containers are read, which grants are held and which jobs to publish
// again (duplicates are dropped by job ID).
//
// Format 0, written before the catalog had types of its own, has no
// "version": it is the JSON encoding of the wire types with their Go field
// names as keys ({"ID": "c0001", "Rows": ...}, "grant": {"Pool": ...}), and
// each pending job holds "inputs" (IDs) and its whole wire job ("mergeout"
// or "window") inside the entry. It is still read; a scheduler rewrites
// every format-0 entry at start, storing the bodies first
// (testdata/catalog_v0.json).
//
// Pools bucket (messages.BucketPools): one key per pool name, whose value is
// the JSON encoding of messages.PoolConfig (sizes in bytes, queuetimeout in
// nanoseconds).
//
// A window job's result is registered live in its own table
// ("<table>_window_<seq>"); the scheduler keeps the newest
// Options.KeepResults result tables and drops older ones at its next
// Tick.
//
// Container directories are DATA/<table>/<projection>/<id>/. A dead
// container's directory is removed once no pending job reads it; at start,
// directories of a cataloged projection that the catalog does not name and
// that are older than Options.OrphanGrace are removed.
//
// # Job kinds
//
// Each kind of job (mergeout, window) is one type implementing the job
// interface (kinds.go): the memory it wants, the message and subject it is
// published as, its fields in the operations table, the output a done job
// must have written and what settling it changes in the catalog, and how
// its body is stored. Granting, publishing, recovery, the trust rules for
// events and the reader counts are the same for every kind; a new kind is
// one type and its decoder in jobKinds.
package scheduler
