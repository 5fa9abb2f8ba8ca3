package walwriter

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Reader iterates the records of a WAL directory in LSN order, giving back
// the full new row of every data record (deltas applied).
type Reader struct {
	dir     string
	from    LSN
	segs    []segmentInfo
	i       int // index of the current segment in segs
	f       *os.File
	fr      frameReader
	dec     *segmentDecoder
	images  *imageStore
	nextLSN LSN // the LSN the next record must have, 0 before the first
	// based is set once every delta can be resolved: reading started at
	// LSN 1 or has passed a checkpoint.
	based bool
	// Unresolved counts deltas skipped before the first checkpoint because
	// their base image is in a removed segment; all precede from.
	Unresolved uint64
	// skipUnresolved skips such deltas whatever their LSN (for Verify).
	skipUnresolved bool
	// Gaps are the ranges of LSNs missing between segments that Repair
	// left (see Repair), as read so far.
	Gaps []Gap
}

// Gap is a range of LSNs missing from a repaired WAL.
type Gap struct {
	First  LSN    `json:"first_lsn"` // the missing LSNs: First..Last
	Last   LSN    `json:"last_lsn"`
	Before string `json:"before"` // the segment after the gap
}

func (g Gap) String() string {
	return fmt.Sprintf("LSNs %d..%d lost before segment %s (cut by a repair)", g.First, g.Last, g.Before)
}

// ErrNoBase is returned by Reader.Next for a delta at or after the
// requested LSN whose base image is in a segment that no longer exists.
// Reading from the last checkpoint (ReadCheckpoint) never meets it.
var ErrNoBase = errors.New("walwriter: delta whose base image precedes the first segment; read from a checkpoint")

// NewReader opens the WAL in dir for reading records with LSN >= from.
// Deltas need the key's previous image, which may be anywhere after the
// last checkpoint before from, so reading starts at the segment holding the
// last checkpoint when that is at or before from, else at the first
// segment; records before from are read and not returned.
func NewReader(dir string, from LSN) (*Reader, error) {
	segs, err := listSegments(dir)
	if err != nil {
		return nil, err
	}
	ckpt, err := ReadCheckpoint(dir)
	if err != nil {
		return nil, err
	}
	r := &Reader{dir: dir, from: from, segs: segs, i: -1, images: newImageStore()}
	if ckpt != 0 && ckpt <= from {
		for i, s := range segs {
			if s.First <= ckpt {
				r.i = i - 1 // the first openNext opens segs[i]
			}
		}
	}
	return r, nil
}

// Next returns the next data or checkpoint record, io.EOF after the last
// one, or a *CorruptError (wrapping ErrCorrupt) that names the segment and
// offset of a record that fails its checks. The record's slices stay valid
// and must not be modified.
func (r *Reader) Next() (Record, error) {
	for {
		if r.f == nil {
			if err := r.openNext(); err != nil {
				return Record{}, err
			}
		}
		start := r.fr.off
		body, size, err := r.fr.next()
		if err == io.EOF {
			r.f.Close()
			r.f = nil
			continue
		}
		if err != nil {
			return Record{}, err
		}
		var rec Record
		isRecord, err := r.dec.decode(body, &rec)
		if errors.Is(err, errNoBase) && !r.based {
			if rec.LSN >= r.from && !r.skipUnresolved {
				return Record{}, fmt.Errorf("%w: segment %s offset %d: %v", ErrNoBase, r.fr.name, start, err)
			}
			r.Unresolved++
			r.nextLSN = rec.LSN + 1
			continue
		}
		if err != nil {
			return Record{}, &CorruptError{Segment: r.fr.name, Offset: start, Reason: err.Error()}
		}
		if !isRecord {
			continue
		}
		if rec.Kind == KindCheckpoint {
			r.based = true
		}
		if r.nextLSN != 0 && rec.LSN != r.nextLSN {
			return Record{}, &CorruptError{Segment: r.fr.name, Offset: start, Reason: fmt.Sprintf("LSN %d, want %d", rec.LSN, r.nextLSN)}
		}
		r.nextLSN = rec.LSN + 1
		if rec.LSN < r.from {
			continue
		}
		rec.Segment, rec.Offset, rec.Size = r.fr.name, start, size
		return rec, nil
	}
}

func (r *Reader) openNext() error {
	r.i++
	if r.i >= len(r.segs) {
		return io.EOF
	}
	seg := r.segs[r.i]
	f, err := os.Open(filepath.Join(r.dir, seg.Name))
	if err != nil {
		return fmt.Errorf("walwriter: open segment %s: %w", seg.Name, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("walwriter: stat segment %s: %w", seg.Name, err)
	}
	br := bufio.NewReaderSize(f, 1<<20)
	hdr := make([]byte, segmentHeaderSize)
	if _, err := io.ReadFull(br, hdr); err != nil {
		f.Close()
		return &CorruptError{Segment: seg.Name, Reason: fmt.Sprintf("header: %v", err)}
	}
	first, err := parseSegmentHeader(hdr)
	if err == nil && first != seg.First {
		err = fmt.Errorf("header says first LSN %d", first)
	}
	if err == nil && r.nextLSN != 0 && first != r.nextLSN {
		prev := r.segs[r.i-1].First
		if first > r.nextLSN && repairedBetween(r.dir, prev, first) {
			// Records lost to a repair: their images are unknown, so
			// deltas wait for a full image or a checkpoint.
			r.Gaps = append(r.Gaps, Gap{First: r.nextLSN, Last: first - 1, Before: seg.Name})
			r.images.reset()
			r.based = false
			r.nextLSN = first
		} else {
			err = fmt.Errorf("segment starts at LSN %d, want %d (segment missing?)", first, r.nextLSN)
		}
	}
	if err != nil {
		f.Close()
		return &CorruptError{Segment: seg.Name, Reason: err.Error()}
	}
	r.f = f
	r.fr = frameReader{r: br, name: seg.Name, off: segmentHeaderSize, maxBody: int(st.Size())}
	if r.nextLSN == 0 && first == 1 {
		r.based = true
	}
	r.dec = newSegmentDecoder(first, r.images, maxRowLimit)
	return nil
}

// Close releases the reader's open file.
func (r *Reader) Close() error {
	if r.f == nil {
		return nil
	}
	err := r.f.Close()
	r.f = nil
	return err
}

// VerifyReport summarizes a WAL directory that Verify read end to end.
//
// Its JSON form (strata wal verify --json) has snake_case keys, as every
// report of the strata CLI.
type VerifyReport struct {
	Segments      int    `json:"segments"`
	Records       uint64 `json:"records"` // data records
	FullImages    uint64 `json:"full_images"`
	Deltas        uint64 `json:"deltas"`
	Deletes       uint64 `json:"deletes"`
	Checkpoints   uint64 `json:"checkpoints"`
	RecordBytes   uint64 `json:"record_bytes"` // framed bytes of data and checkpoint records
	FirstLSN      LSN    `json:"first_lsn"`
	LastLSN       LSN    `json:"last_lsn"`
	CheckpointLSN LSN    `json:"checkpoint_lsn"` // from the checkpoint file, 0 if none
	// Unresolved deltas precede the first checkpoint and have their base in
	// a removed segment; their framing and checksums were checked.
	Unresolved uint64   `json:"unresolved"`
	Broken     []string `json:"broken"`
	// Gaps are LSNs lost to a repair (see Repair).
	Gaps []Gap `json:"gaps"`
}

// Verify reads every record of the WAL in dir, checking checksums, LSN
// continuity and that every delta applies to a row that fits its table. It
// returns the report of what it read and the first problem found.
func Verify(dir string) (rep VerifyReport, err error) {
	ckpt, err := ReadCheckpoint(dir)
	if err != nil {
		return rep, err
	}
	rep.CheckpointLSN = ckpt
	entries, err := os.ReadDir(dir)
	if err != nil {
		return rep, fmt.Errorf("walwriter: read %s: %w", dir, err)
	}
	for _, e := range entries {
		if n := e.Name(); len(n) > len(brokenSuffix) && n[len(n)-len(brokenSuffix):] == brokenSuffix {
			rep.Broken = append(rep.Broken, n)
		}
	}
	r, err := NewReader(dir, 0)
	if err != nil {
		return rep, err
	}
	defer r.Close()
	r.skipUnresolved = true
	defer func() { rep.Unresolved, rep.Gaps = r.Unresolved, r.Gaps }()
	rep.Segments = len(r.segs)
	sawCheckpoint := ckpt == 0
	for {
		rec, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return rep, err
		}
		if rep.FirstLSN == 0 {
			rep.FirstLSN = rec.LSN
		}
		rep.LastLSN = rec.LSN
		rep.RecordBytes += uint64(rec.Size)
		switch rec.Kind {
		case KindCheckpoint:
			rep.Checkpoints++
			if rec.LSN == ckpt {
				sawCheckpoint = true
			}
		case KindFull:
			rep.Records++
			rep.FullImages++
		case KindDelta:
			rep.Records++
			rep.Deltas++
		case KindDelete:
			rep.Records++
			rep.Deletes++
		}
	}
	if !sawCheckpoint && (rep.FirstLSN == 0 || ckpt >= rep.FirstLSN) {
		return rep, &CorruptError{Segment: CheckpointFile, Reason: fmt.Sprintf("checkpoint LSN %d has no checkpoint record", ckpt)}
	}
	return rep, nil
}
