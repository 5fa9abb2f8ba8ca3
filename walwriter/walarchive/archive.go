package walarchive

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
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
	// UploadTimeout bounds one listing, upload, comparison or deletion.
	// Default 10m.
	UploadTimeout time.Duration
	// Retention (see "Retention" in the package doc): an archived
	// checkpoint that is neither among the RetainCheckpoints newest nor
	// younger than RetainAge is deleted, with the segments wholly before
	// the oldest checkpoint kept. RetainCheckpoints 0 (the zero value)
	// keeps everything; RetainAge 0 lets the count alone decide.
	RetainCheckpoints int
	RetainAge         time.Duration

	now func() time.Time // the clock of RetainAge; tests set it
}

func (o Options) withDefaults() (Options, error) {
	if o.Prefix != "" && (!strings.HasSuffix(o.Prefix, "/") || strings.HasPrefix(o.Prefix, "/")) {
		return o, fmt.Errorf("walarchive: prefix %q: want a relative key prefix ending in \"/\"", o.Prefix)
	}
	if o.RetainCheckpoints < 0 || o.RetainAge < 0 {
		return o, fmt.Errorf("walarchive: retention of %d checkpoints, %s: want neither negative", o.RetainCheckpoints, o.RetainAge)
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
	if o.now == nil {
		o.now = time.Now
	}
	return o, nil
}

// Stats are an archiver's counters since Start.
type Stats struct {
	Segments    uint64 // segments uploaded
	Bytes       uint64 // bytes of segments uploaded
	Checkpoints uint64 // checkpoint files uploaded
	Failures    uint64 // failed listings, uploads, comparisons and deletions
	// LagSegments and LagBytes are the sealed segments not in the bucket,
	// as of the last look at the WAL.
	LagSegments int
	LagBytes    int64
	// CheckpointLSN is the LSN of the checkpoint file in the bucket, 0 for
	// none (as of the last listing).
	CheckpointLSN walwriter.LSN
	// StoredSegments, StoredBytes and StoredCheckpoints are what the
	// bucket holds: segments, their bytes, and checkpoints (as of the last
	// pass; 0 before the first listing).
	StoredSegments    int
	StoredBytes       int64
	StoredCheckpoints int
	// DeletedSegments and DeletedCheckpoints count what retention deleted.
	DeletedSegments, DeletedCheckpoints uint64
}

// remoteSegment is a segment's copy in the bucket.
type remoteSegment struct {
	name  string // the segment's file name
	key   string
	first walwriter.LSN
	size  int64
	flat  bool // the first layout's key, <prefix><segment name>
}

// Archiver uploads a WAL's sealed segments and checkpoint file to a store
// in the background, and deletes what retention lets go (see the package
// doc). Its methods are safe for concurrent use.
type Archiver struct {
	wal  *walwriter.WAL
	st   store.Store
	opts Options
	log  *slog.Logger

	passMu sync.Mutex // one pass at a time

	mu sync.Mutex
	// listed is set once the prefix was listed: from then on remote,
	// ckpts and remoteHasCkpt follow what this archiver uploads and
	// deletes, and a pass lists again only after a failed one (an upload
	// that failed may have happened after all).
	listed        bool
	remote        map[string]remoteSegment    // segment name -> its archived copy
	ckpts         map[walwriter.LSN]time.Time // archived checkpoints -> when their copy was put
	remoteHasCkpt bool                        // the CHECKPOINT object is in the bucket
	// floor is the first LSN of the oldest segment the archive needs with
	// retention: the segments before it are deleted, or were never
	// uploaded, and are not uploaded again. 0 without retention.
	floor walwriter.LSN
	// archived maps each segment known to be in the bucket (or below the
	// floor) to the local size the bucket's copy covers.
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
	deletedSegs, deletedCkpts              atomic.Uint64

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
// bucket lacks, applies retention, and returns the first error.
func (a *Archiver) Sync(ctx context.Context) error { return a.pass(ctx) }

// Stats returns a snapshot of the archiver's counters.
func (a *Archiver) Stats() Stats {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := Stats{
		Segments: a.segments.Load(), Bytes: a.bytes.Load(), Checkpoints: a.checkpoints.Load(), Failures: a.failures.Load(),
		LagSegments: a.lagSegs, LagBytes: a.lagBytes, CheckpointLSN: a.remoteCkpt,
		StoredSegments: len(a.remote), StoredCheckpoints: len(a.ckpts),
		DeletedSegments: a.deletedSegs.Load(), DeletedCheckpoints: a.deletedCkpts.Load(),
	}
	for _, r := range a.remote {
		s.StoredBytes += r.size
	}
	if _, ok := a.ckpts[a.remoteCkpt]; !ok && a.remoteCkpt != 0 {
		s.StoredCheckpoints++ // the first layout's CHECKPOINT, with no copy
	}
	return s
}

// keep is the WAL's remove guard: a segment is kept unless the bucket's
// copy covers the local file (or retention let it go).
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

// pass uploads what the bucket lacks, sealed segments oldest first, then
// the checkpoint file, and applies retention.
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
	err = a.list(ctx)
	if err == nil {
		a.settle(segs, ckptFile)
		err = a.upload(ctx, segs, ckptFile)
	}
	if err == nil {
		err = a.prune(ctx)
	}
	if err != nil {
		a.mu.Lock()
		a.listed = false
		a.mu.Unlock()
	}
	return err
}

// settle works out which sealed segments the bucket covers: those whose
// copy was uploaded or compared here, and with retention those before the
// floor.
func (a *Archiver) settle(segs []walwriter.SegmentFile, ckptFile []byte) {
	a.mu.Lock()
	if a.opts.RetainCheckpoints > 0 && len(a.remote) == 0 && len(a.ckpts) == 0 && !a.remoteHasCkpt && len(ckptFile) > 0 {
		// A new archive, and the segment holding the local checkpoint
		// sealed: that checkpoint is the archive's first, this pass, so
		// the segments before that segment would be deleted once
		// uploaded. They are not uploaded. (Not in an archive holding
		// segments already: skipping some would leave a gap.)
		if lsn, err := walwriter.ParseCheckpointFile(ckptFile); err == nil {
			if h := holder(segs, lsn); h >= 0 && segs[h].Sealed {
				a.floor = max(a.floor, segs[h].First)
			}
		}
	}
	a.archived = map[string]int64{}
	for _, s := range segs {
		if !s.Sealed {
			continue
		}
		if s.First < a.floor {
			a.archived[s.Name] = s.Size
		} else if r, ok := a.remote[s.Name]; ok && a.compared[s.Name] == [2]int64{s.Size, r.size} {
			a.archived[s.Name] = s.Size
		}
	}
	a.mu.Unlock()
	a.updateLag(segs)
}

// holder returns the index of the segment holding LSN lsn, the last one
// starting at or before it, or -1.
func holder(segs []walwriter.SegmentFile, lsn walwriter.LSN) int {
	h := -1
	for i, s := range segs {
		if s.First <= lsn {
			h = i
		}
	}
	return h
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
	remote := map[string]remoteSegment{}
	ckpts := map[walwriter.LSN]time.Time{}
	hasCkpt := false
	for _, o := range objs {
		k := parseKey(strings.TrimPrefix(o.Key, a.opts.Prefix))
		switch k.kind {
		case latestKey:
			hasCkpt = true
		case segmentObj, flatSegmentObj:
			if o.Size == 0 {
				continue // a first-layout segment retention emptied
			}
			if old, ok := remote[k.segment]; ok && !old.flat {
				continue
			}
			remote[k.segment] = remoteSegment{name: k.segment, key: o.Key, first: k.lsn, size: o.Size, flat: k.kind == flatSegmentObj}
		case checkpointObj:
			ckpts[k.lsn] = o.Modified
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.remote, a.ckpts, a.remoteHasCkpt, a.listed = remote, ckpts, hasCkpt, true
	if !hasCkpt {
		a.remoteCkpt, a.ckptKnown = 0, true
	} else if a.ckptKnown && a.remoteCkpt == 0 {
		a.ckptKnown = false // put by someone else since: read it again
	}
	if a.opts.RetainCheckpoints > 0 && len(ckpts) > 0 {
		// Segments before the one holding the oldest checkpoint are
		// needed by no restore: deleted, or not uploaded.
		oldest := walwriter.LSN(0)
		for l := range ckpts {
			if oldest == 0 || l < oldest {
				oldest = l
			}
		}
		if h, ok := a.remoteHolder(oldest); ok {
			a.floor = max(a.floor, h.first)
		}
	}
	return nil
}

// remoteHolder returns the archived segment holding LSN lsn, the last one
// starting at or before it. a.mu is held.
func (a *Archiver) remoteHolder(lsn walwriter.LSN) (remoteSegment, bool) {
	var h remoteSegment
	found := false
	for _, r := range a.remote {
		if r.first <= lsn && (!found || r.first > h.first) {
			h, found = r, true
		}
	}
	return h, found
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
	path := filepath.Join(a.wal.Dir(), s.Name)
	a.mu.Lock()
	r, ok := a.remote[s.Name]
	a.mu.Unlock()
	key := a.opts.Prefix + segmentKey(s.Name)
	overwrite := false
	if ok {
		// Found in the bucket, not uploaded here: the same segment of
		// this WAL, from before a restart, or another WAL's? Segments of
		// equal size are compared by their first records (full segments
		// all have the segment size), others whole. A shorter copy is
		// replaced under its own key, of whichever layout.
		key = r.key
		limit := int64(-1)
		if r.size == s.Size {
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
		if r.size >= s.Size {
			// The same segment, or a copy with the same records and the
			// preallocated zeros that recovery cut off here: it stays.
			a.mu.Lock()
			a.compared[s.Name] = [2]int64{s.Size, r.size}
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
	a.remote[s.Name] = remoteSegment{name: s.Name, key: key, first: s.First, size: s.Size, flat: r.flat}
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

// archiveCheckpoint uploads the checkpoint file's contents once the
// segment holding its record is archived: a copy under checkpoints/ and,
// when newer than the bucket's, CHECKPOINT.
func (a *Archiver) archiveCheckpoint(ctx context.Context, segs []walwriter.SegmentFile, contents []byte) error {
	lsn, err := walwriter.ParseCheckpointFile(contents)
	if err != nil {
		return fmt.Errorf("walarchive: %s: %w", a.wal.Dir(), err)
	}
	// The segment holding the checkpoint record must be sealed and
	// archived.
	h := holder(segs, lsn)
	if h < 0 || !segs[h].Sealed || !a.isArchived(segs[h]) {
		return nil // once that segment is sealed
	}
	remote, err := a.remoteCheckpoint(ctx)
	if err != nil {
		return err
	}
	if lsn < remote {
		a.log.Warn("archived checkpoint is newer than the WAL's; leaving it", "key", a.opts.Prefix+walwriter.CheckpointFile, "archived_lsn", remote, "local_lsn", lsn)
		return nil
	}
	a.mu.Lock()
	_, haveCopy := a.ckpts[lsn]
	a.mu.Unlock()
	if lsn == remote && haveCopy {
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
	// The copy first: CHECKPOINT names the newest of the copies (an
	// archive of the first layout gets a copy of its CHECKPOINT here).
	if !haveCopy {
		uctx, cancel := context.WithTimeout(ctx, a.opts.UploadTimeout)
		err = a.st.Put(uctx, a.opts.Prefix+checkpointKey(lsn), tmp.Name(), store.PutOptions{})
		cancel()
		if err != nil {
			a.failures.Add(1)
			return fmt.Errorf("walarchive: upload checkpoint file copy: %w", err)
		}
		a.mu.Lock()
		a.ckpts[lsn] = a.opts.now()
		a.mu.Unlock()
	}
	if lsn == remote {
		return nil
	}
	uctx, cancel := context.WithTimeout(ctx, a.opts.UploadTimeout)
	err = a.st.Put(uctx, a.opts.Prefix+walwriter.CheckpointFile, tmp.Name(), store.PutOptions{})
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

// remoteCheckpoint returns the LSN of the bucket's CHECKPOINT, 0 for none
// or a damaged one, reading it once after each listing that shows one.
func (a *Archiver) remoteCheckpoint(ctx context.Context) (walwriter.LSN, error) {
	a.mu.Lock()
	known, remote, has := a.ckptKnown, a.remoteCkpt, a.remoteHasCkpt
	a.mu.Unlock()
	if known || !has {
		return remote, nil
	}
	key := a.opts.Prefix + walwriter.CheckpointFile
	rctx, cancel := context.WithTimeout(ctx, a.opts.UploadTimeout)
	b, err := store.ReadAll(rctx, a.st, key)
	cancel()
	if err != nil && !errors.Is(err, store.ErrNotExist) {
		a.failures.Add(1)
		return 0, fmt.Errorf("walarchive: read archived checkpoint: %w", err)
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
	return remote, nil
}

// prune applies retention (see the package doc): it deletes the copies of
// the checkpoints it lets go, then the segments wholly before the one
// holding the oldest checkpoint kept, oldest first, so what is left is
// always a checkpoint's restore and what follows it.
func (a *Archiver) prune(ctx context.Context) error {
	if a.opts.RetainCheckpoints == 0 {
		return nil
	}
	latest, err := a.remoteCheckpoint(ctx)
	if err != nil {
		return err
	}
	now := a.opts.now()
	a.mu.Lock()
	lsns := make([]walwriter.LSN, 0, len(a.ckpts))
	for l := range a.ckpts {
		lsns = append(lsns, l)
	}
	slices.Sort(lsns)
	slices.Reverse(lsns) // newest first
	oldest := latest     // CHECKPOINT is always kept
	for i, l := range lsns {
		if i < a.opts.RetainCheckpoints || (a.opts.RetainAge > 0 && now.Sub(a.ckpts[l]) < a.opts.RetainAge) {
			if oldest == 0 || l < oldest {
				oldest = l
			}
		}
	}
	var expired []walwriter.LSN
	for _, l := range lsns {
		if l < oldest {
			expired = append(expired, l)
		}
	}
	h, ok := a.remoteHolder(oldest)
	var doomed []remoteSegment
	if ok && oldest != 0 {
		for _, r := range a.remote {
			if r.first < h.first {
				doomed = append(doomed, r)
			}
		}
		a.floor = max(a.floor, h.first)
	}
	a.mu.Unlock()
	if len(expired) == 0 && len(doomed) == 0 {
		return nil
	}
	slices.SortFunc(doomed, func(x, y remoteSegment) int { return cmp.Compare(x.first, y.first) })
	slices.Reverse(expired) // oldest first

	dctx, cancel := context.WithTimeout(ctx, a.opts.UploadTimeout)
	defer cancel()
	fail := func(what string, err error) error {
		a.failures.Add(1)
		return fmt.Errorf("walarchive: retention: delete %s: %w", what, err)
	}
	for _, l := range expired {
		if err := a.st.DeletePrefix(dctx, a.opts.Prefix+checkpointDir(l)); err != nil {
			return fail(fmt.Sprintf("checkpoint %d", l), err)
		}
		a.mu.Lock()
		delete(a.ckpts, l)
		a.mu.Unlock()
		a.deletedCkpts.Add(1)
	}
	var empty string
	for _, r := range doomed {
		if r.flat {
			// A first-layout key is no prefix of its own: the object is
			// emptied instead, which a restore and a listing skip.
			if empty == "" {
				f, err := os.CreateTemp("", "strata-wal-empty-*")
				if err != nil {
					return fail(r.key, err)
				}
				f.Close()
				empty = f.Name()
				defer os.Remove(empty)
			}
			if err := a.st.Put(dctx, r.key, empty, store.PutOptions{}); err != nil {
				return fail(r.key, err)
			}
		} else if err := a.st.DeletePrefix(dctx, a.opts.Prefix+segmentDir(r.name)); err != nil {
			return fail(r.key, err)
		}
		a.mu.Lock()
		delete(a.remote, r.name)
		a.mu.Unlock()
		a.deletedSegs.Add(1)
	}
	a.log.Info("WAL archive retention: deleted what no kept checkpoint needs", "checkpoints", len(expired), "segments", len(doomed),
		"oldest_kept_checkpoint", oldest, "first_kept_segment", h.key)
	return nil
}
