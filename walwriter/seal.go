package walwriter

import (
	"fmt"
	"os"
	"path/filepath"
)

// A segment is sealed once nothing more will ever be written to it: the
// syncer closed it full after its last batch was durable, a clean Close
// cut it after its last durable batch (sealAtClose), or Open (or the
// recovery from a failed write) found it on disk and continued in a new
// segment. A sealed segment's records are final; only the preallocated
// zeros after them may still be cut when recovery truncates the segment it
// continues from. The segment being written is not sealed. Sealed segments
// are what an archiver may copy elsewhere (package walarchive).

// SegmentFile describes one segment file of a WAL directory.
type SegmentFile struct {
	Name   string // 00000000000000000001.wal
	First  LSN    // the LSN of its first record, from its name
	Size   int64  // bytes of the file now
	Sealed bool   // never written again (WAL.Segments only)
}

// ListSegments returns the segment files of the WAL in dir in LSN order.
// A missing directory has none.
func ListSegments(dir string) ([]SegmentFile, error) {
	if _, err := os.Stat(dir); os.IsNotExist(err) {
		return nil, nil
	}
	segs, err := listSegments(dir)
	if err != nil {
		return nil, err
	}
	out := make([]SegmentFile, 0, len(segs))
	for _, s := range segs {
		st, err := os.Stat(filepath.Join(dir, s.Name))
		if os.IsNotExist(err) {
			continue // removed since the listing
		}
		if err != nil {
			return nil, fmt.Errorf("walwriter: stat segment %s: %w", s.Name, err)
		}
		out = append(out, SegmentFile{Name: s.Name, First: s.First, Size: st.Size()})
	}
	return out, nil
}

// ParseSegmentName returns the first LSN of the segment file named name,
// and false when name is not a segment's name.
func ParseSegmentName(name string) (LSN, bool) { return parseSegmentName(name) }

// Segments returns the WAL's segment files in LSN order, each marked
// whether it is sealed (see above). The sealed ones come first.
func (w *WAL) Segments() ([]SegmentFile, error) {
	segs, err := ListSegments(w.dir)
	if err != nil {
		return nil, err
	}
	through := LSN(w.sealedThrough.Load())
	for i := range segs {
		segs[i].Sealed = through != 0 && segs[i].First <= through
	}
	return segs, nil
}

// Changed returns a channel that receives a value when a segment is sealed
// or the checkpoint file is replaced. Signals coalesce (the channel holds
// at most one) and never make the WAL wait; it is meant for one reader, an
// archiver, which looks at Segments and the checkpoint file on each.
func (w *WAL) Changed() <-chan struct{} { return w.changed }

// SetRemoveGuard makes RemoveObsoleteSegments keep every segment for which
// keep returns true (an archiver keeps those not yet in its bucket). keep
// is called from the goroutine of RemoveObsoleteSegments; nil removes the
// guard.
func (w *WAL) SetRemoveGuard(keep func(segment string) bool) {
	if keep == nil {
		w.removeGuard.Store(nil)
		return
	}
	w.removeGuard.Store(&keep)
}

// seal marks every segment whose first LSN is at most first as sealed.
func (w *WAL) seal(first LSN) {
	for {
		old := w.sealedThrough.Load()
		if uint64(first) <= old {
			return
		}
		if w.sealedThrough.CompareAndSwap(old, uint64(first)) {
			w.notifyChanged()
			return
		}
	}
}

func (w *WAL) notifyChanged() {
	select {
	case w.changed <- struct{}{}:
	default:
	}
}
