package walarchive

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strata-db/strata/columnar/store"
	"github.com/strata-db/strata/walwriter"
)

// Options configure an Archiver. The zero value of each field picks its
// default.
type Options struct {
	// Prefix is where the archive's keys go in the store: "" (its root) or
	// a key prefix ending in "/", such as "wal/db1/".
	Prefix string
	Logger *slog.Logger
	// Interval is how often the archiver looks again without a change of
	// the WAL (a segment sealed, a checkpoint). Default 1m.
	Interval time.Duration
	// After a failed listing or upload the archiver waits MinBackoff,
	// doubling after each further failure up to MaxBackoff. Defaults 1s
	// and 1m.
	MinBackoff, MaxBackoff time.Duration
	// UploadTimeout bounds one listing, upload or comparison. Default 10m.
	UploadTimeout time.Duration
}

func (o Options) withDefaults() (Options, error) {
	if o.Prefix != "" && (!strings.HasSuffix(o.Prefix, "/") || strings.HasPrefix(o.Prefix, "/")) {
		return o, fmt.Errorf("walarchive: prefix %q: want a relative key prefix ending in \"/\"", o.Prefix)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Interval <= 0 {
		o.Interval = time.Minute
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = time.Second
	}
	if o.MaxBackoff < o.MinBackoff {
		o.MaxBackoff = max(time.Minute, o.MinBackoff)
	}
	if o.UploadTimeout <= 0 {
		o.UploadTimeout = 10 * time.Minute
	}
	return o, nil
}

// Stats are an archiver's counters since Start.
type Stats struct {
	Segments    uint64 // segments uploaded
	Bytes       uint64 // bytes of segments uploaded
	Checkpoints uint64 // checkpoint files uploaded
	Failures    uint64 // failed listings, uploads and comparisons
	// LagSegments and LagBytes are the sealed segments not in the bucket,
	// as of the last look at the WAL.
	LagSegments int
	LagBytes    int64
	// CheckpointLSN is the LSN of the checkpoint file in the bucket, 0 for
	// none (as of the last listing).
	CheckpointLSN walwriter.LSN
}

// Archiver uploads a WAL's sealed segments and checkpoint file to a store
// in the background (see the package doc). Its methods are safe for
// concurrent use.
type Archiver struct {
	wal  *walwriter.WAL
	st   store.Store
	opts Options
	log  *slog.Logger

	passMu sync.Mutex // one pass at a time

	mu sync.Mutex
	// listed is set once the prefix was listed: from then on remote and
	// remoteHasCkpt follow what this archiver uploads, and a pass lists
	// again only after a failed one (an upload that failed may have
	// happened after all).
	listed        bool
	remote        map[string]int64 // segment name -> size of its archived copy
	remoteHasCkpt bool             // the checkpoint file is in the bucket
	// archived maps each segment known to be in the bucket to the local
	// size the bucket's copy covers.
	archived map[string]int64
	// compared remembers the segments whose archived copy was uploaded
	// here or found to hold the local file's records: name -> {local,
	// archived} sizes.
	compared   map[string][2]int64
	remoteCkpt walwriter.LSN
	ckptKnown  bool // remoteCkpt was read from the bucket
	lagSegs    int
	lagBytes   int64

	segments, bytes, checkpoints, failures atomic.Uint64

	cancel context.CancelFunc
	done   chan struct{}
}

// Start returns an archiver of w's directory to st and starts it. Its first
// look, in the background, uploads every sealed segment the bucket lacks.
// From now on w.RemoveObsoleteSegments keeps segments not yet archived.
func Start(w *walwriter.WAL, st store.Store, opts Options) (*Archiver, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	a := &Archiver{
		wal: w, st: st, opts: opts,
		log:      opts.Logger.With("archive", st.String()+"/"+opts.Prefix),
		archived: map[string]int64{},
		compared: map[string][2]int64{},
		cancel:   cancel,
		done:     make(chan struct{}),
	}
	w.SetRemoveGuard(a.keep)
	go a.run(ctx)
	return a, nil
}

// Close stops the archiver, abandoning an upload under way (it is made
// again on the next Start). The WAL keeps its remove guard, with what was
// archived by then.
func (a *Archiver) Close() error {
	a.cancel()
	<-a.done
	return nil
}

// Sync uploads, now, every sealed segment and the checkpoint file the
// bucket lacks, and returns the first error.
func (a *Archiver) Sync(ctx context.Context) error { return a.pass(ctx) }

// Stats returns a snapshot of the archiver's counters.
func (a *Archiver) Stats() Stats {
	a.mu.Lock()
	defer a.mu.Unlock()
	return Stats{
		Segments: a.segments.Load(), Bytes: a.bytes.Load(), Checkpoints: a.checkpoints.Load(), Failures: a.failures.Load(),
		LagSegments: a.lagSegs, LagBytes: a.lagBytes, CheckpointLSN: a.remoteCkpt,
	}
}

// keep is the WAL's remove guard: a segment is kept unless the bucket's
// copy covers the local file.
func (a *Archiver) keep(segment string) bool {
	a.mu.Lock()
	covered, ok := a.archived[segment]
	a.mu.Unlock()
	if !ok {
		return true
	}
	st, err := os.Stat(filepath.Join(a.wal.Dir(), segment))
	return err != nil || st.Size() != covered
}

func (a *Archiver) run(ctx context.Context) {
	defer close(a.done)
	backoff := a.opts.MinBackoff
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	failing := false
	for {
		err := a.pass(ctx)
		if ctx.Err() != nil {
			return
		}
		wait := a.opts.Interval
		changed := a.wal.Changed()
		if err != nil {
			s := a.Stats()
			a.log.Warn("WAL archive: cannot upload; will retry", "err", err, "in", backoff, "lag_segments", s.LagSegments, "lag_bytes", s.LagBytes)
			wait, backoff = backoff, min(2*backoff, a.opts.MaxBackoff)
			changed = nil // a change does not cut the backoff short
			failing = true
		} else {
			if failing {
				a.log.Info("WAL archive caught up")
				failing = false
			}
			backoff = a.opts.MinBackoff
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-changed:
		}
	}
}

// pass lists the bucket and uploads what it lacks: sealed segments oldest
// first, then the checkpoint file.
func (a *Archiver) pass(ctx context.Context) error {
	a.passMu.Lock()
	defer a.passMu.Unlock()
	dir := a.wal.Dir()
	// The checkpoint file is read before the segments are listed: the
	// segment holding its record exists by then.
	ckptFile, err := os.ReadFile(filepath.Join(dir, walwriter.CheckpointFile))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("walarchive: read checkpoint file: %w", err)
	}
	segs, err := a.wal.Segments()
	if err != nil {
		return err
	}
	a.updateLag(segs)
	if err := a.list(ctx); err != nil {
		return err
	}
	// What the bucket is known to hold; the rest is uploaded below.
	a.mu.Lock()
	a.archived = map[string]int64{}
	for _, s := range segs {
		if r, ok := a.remote[s.Name]; ok && s.Sealed && a.compared[s.Name] == [2]int64{s.Size, r} {
			a.archived[s.Name] = s.Size
		}
	}
	a.mu.Unlock()
	a.updateLag(segs)

	err = a.upload(ctx, segs, ckptFile)
	if err != nil {
		a.mu.Lock()
		a.listed = false
		a.mu.Unlock()
	}
	return err
}

// upload uploads the sealed segments the bucket lacks, oldest first, then
// the checkpoint file.
func (a *Archiver) upload(ctx context.Context, segs []walwriter.SegmentFile, ckptFile []byte) error {
	for _, s := range segs {
		if !s.Sealed {
			break
		}
		if a.isArchived(s) {
			continue
		}
		if err := a.archiveSegment(ctx, s); err != nil {
			return err
		}
		a.updateLag(segs)
	}
	if len(ckptFile) == 0 {
		return nil
	}
	return a.archiveCheckpoint(ctx, segs, ckptFile)
}

// list lists the prefix unless the archiver knows what it holds: on the
// first pass, and after a failed one.
func (a *Archiver) list(ctx context.Context) error {
	a.mu.Lock()
	listed := a.listed
	a.mu.Unlock()
	if listed {
		return nil
	}
	lctx, cancel := context.WithTimeout(ctx, a.opts.UploadTimeout)
	objs, err := a.st.List(lctx, a.opts.Prefix)
	cancel()
	if err != nil {
		a.failures.Add(1)
		return fmt.Errorf("walarchive: list archive: %w", err)
	}
	remote := map[string]int64{}
	hasCkpt := false
	for _, o := range objs {
		name := strings.TrimPrefix(o.Key, a.opts.Prefix)
		if name == walwriter.CheckpointFile {
			hasCkpt = true
		} else if _, ok := walwriter.ParseSegmentName(name); ok {
			remote[name] = o.Size
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.remote, a.remoteHasCkpt, a.listed = remote, hasCkpt, true
	if !hasCkpt {
		a.remoteCkpt, a.ckptKnown = 0, true
	} else if a.ckptKnown && a.remoteCkpt == 0 {
		a.ckptKnown = false // put by someone else since: read it again
	}
	return nil
}

func (a *Archiver) isArchived(s walwriter.SegmentFile) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	covered, ok := a.archived[s.Name]
	return ok && covered == s.Size
}

func (a *Archiver) updateLag(segs []walwriter.SegmentFile) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.lagSegs, a.lagBytes = 0, 0
	for _, s := range segs {
		if s.Sealed && a.archived[s.Name] != s.Size {
			a.lagSegs++
			a.lagBytes += s.Size
		}
	}
}

// archiveSegment uploads sealed segment s, or settles a copy of another
// size already in the bucket (see the package doc).
func (a *Archiver) archiveSegment(ctx context.Context, s walwriter.SegmentFile) error {
	key := a.opts.Prefix + s.Name
	path := filepath.Join(a.wal.Dir(), s.Name)
	overwrite := false
	a.mu.Lock()
	r, ok := a.remote[s.Name]
	a.mu.Unlock()
	if ok {
		// Found in the bucket, not uploaded here: the same segment of
		// this WAL, from before a restart, or another WAL's? Segments of
		// equal size are compared by their first records (full segments
		// all have the segment size), others whole.
		limit := int64(-1)
		if r == s.Size {
			limit = min(headBytes, s.Size)
		}
		cctx, cancel := context.WithTimeout(ctx, a.opts.UploadTimeout)
		same, err := sameRecords(cctx, a.st, key, path, limit)
		cancel()
		if err != nil {
			a.failures.Add(1)
			return err
		}
		if !same {
			a.failures.Add(1)
			return fmt.Errorf("walarchive: %s in %s differs from segment %s of %s: the prefix holds another WAL's archive (give each WAL a prefix of its own), "+
				"or the segment was repaired since it was archived; the archived copy is left as it is and nothing more is uploaded",
				key, a.st, s.Name, a.wal.Dir())
		}
		if r >= s.Size {
			// The same segment, or a copy with the same records and the
			// preallocated zeros that recovery cut off here: it stays.
			a.mu.Lock()
			a.compared[s.Name] = [2]int64{s.Size, r}
			a.archived[s.Name] = s.Size
			a.mu.Unlock()
			return nil
		}
		overwrite = true // a shorter copy of the same records
	}
	start := time.Now()
	uctx, cancel := context.WithTimeout(ctx, a.opts.UploadTimeout)
	err := a.st.Put(uctx, key, path, store.PutOptions{IfAbsent: !overwrite})
	cancel()
	if errors.Is(err, fs.ErrNotExist) {
		return nil // removed since the listing: it was archived (the remove guard)
	}
	if err != nil {
		a.failures.Add(1)
		return fmt.Errorf("walarchive: upload segment %s: %w", s.Name, err)
	}
	// The file may have been cut (its zeros) during the upload: the next
	// look compares sizes again.
	a.mu.Lock()
	a.archived[s.Name] = s.Size
	a.compared[s.Name] = [2]int64{s.Size, s.Size}
	a.remote[s.Name] = s.Size
	a.mu.Unlock()
	a.segments.Add(1)
	a.bytes.Add(uint64(s.Size))
	a.log.Info("archived WAL segment", "segment", s.Name, "bytes", s.Size, "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// headBytes is how much of a segment found in the bucket with the local
// file's size is compared: its header and first records.
const headBytes = 64 << 10

// sameRecords reports whether the object at key and the local segment at
// path hold the same bytes up to the shorter one's end, and the longer one
// only zeros after it; with limit not negative, in their first limit bytes.
func sameRecords(ctx context.Context, st store.Store, key, path string, limit int64) (bool, error) {
	rc, err := st.NewRangeReader(ctx, key, 0, limit)
	if err != nil {
		return false, fmt.Errorf("walarchive: compare segment with %s: %w", key, err)
	}
	defer rc.Close()
	f, err := os.Open(path)
	if err != nil {
		return false, fmt.Errorf("walarchive: compare %s with %s: %w", path, key, err)
	}
	defer f.Close()
	var local io.Reader = f
	if limit >= 0 {
		local = io.LimitReader(f, limit)
	}
	rb, lb := make([]byte, 1<<20), make([]byte, 1<<20)
	for {
		rn, rerr := io.ReadFull(rc, rb)
		ln, lerr := io.ReadFull(local, lb)
		if rerr != nil && rerr != io.EOF && rerr != io.ErrUnexpectedEOF {
			return false, fmt.Errorf("walarchive: read %s: %w", key, rerr)
		}
		if lerr != nil && lerr != io.EOF && lerr != io.ErrUnexpectedEOF {
			return false, fmt.Errorf("walarchive: read %s: %w", path, lerr)
		}
		n := min(rn, ln)
		if !bytes.Equal(rb[:n], lb[:n]) || !allZero(rb[n:rn]) || !allZero(lb[n:ln]) {
			return false, nil
		}
		if rn < len(rb) && ln < len(lb) {
			return true, nil
		}
	}
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// archiveCheckpoint uploads the checkpoint file's contents once the segment
// holding its record is archived and when it is newer than the bucket's.
func (a *Archiver) archiveCheckpoint(ctx context.Context, segs []walwriter.SegmentFile, contents []byte) error {
	lsn, err := walwriter.ParseCheckpointFile(contents)
	if err != nil {
		return fmt.Errorf("walarchive: %s: %w", a.wal.Dir(), err)
	}
	// The segment holding the checkpoint record: the last starting at or
	// before it. It must be sealed and archived.
	holder := -1
	for i, s := range segs {
		if s.First <= lsn {
			holder = i
		}
	}
	if holder < 0 || !segs[holder].Sealed || !a.isArchived(segs[holder]) {
		return nil // once that segment is sealed
	}
	key := a.opts.Prefix + walwriter.CheckpointFile
	a.mu.Lock()
	known, remote, remoteHas := a.ckptKnown, a.remoteCkpt, a.remoteHasCkpt
	a.mu.Unlock()
	if remoteHas && !known {
		rctx, cancel := context.WithTimeout(ctx, a.opts.UploadTimeout)
		b, err := store.ReadAll(rctx, a.st, key)
		cancel()
		if err != nil && !errors.Is(err, store.ErrNotExist) {
			a.failures.Add(1)
			return fmt.Errorf("walarchive: read archived checkpoint: %w", err)
		}
		remote = 0
		if err == nil {
			if remote, err = walwriter.ParseCheckpointFile(b); err != nil {
				a.log.Warn("archived checkpoint file is damaged; replacing it", "key", key, "err", err)
				remote = 0
			}
		}
		a.mu.Lock()
		a.remoteCkpt, a.ckptKnown = remote, true
		a.mu.Unlock()
	}
	if lsn <= remote {
		if lsn < remote {
			a.log.Warn("archived checkpoint is newer than the WAL's; leaving it", "key", key, "archived_lsn", remote, "local_lsn", lsn)
		}
		return nil
	}
	tmp, err := os.CreateTemp("", "strata-wal-checkpoint-*")
	if err != nil {
		return fmt.Errorf("walarchive: copy checkpoint file: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(contents)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("walarchive: copy checkpoint file: %w", err)
	}
	uctx, cancel := context.WithTimeout(ctx, a.opts.UploadTimeout)
	err = a.st.Put(uctx, key, tmp.Name(), store.PutOptions{})
	cancel()
	if err != nil {
		a.failures.Add(1)
		return fmt.Errorf("walarchive: upload checkpoint file: %w", err)
	}
	a.mu.Lock()
	a.remoteCkpt, a.ckptKnown, a.remoteHasCkpt = lsn, true, true
	a.mu.Unlock()
	a.checkpoints.Add(1)
	a.log.Info("archived WAL checkpoint", "checkpoint_lsn", lsn)
	return nil
}
