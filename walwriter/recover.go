package walwriter

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/strata-db/strata/internal/fsutil"
)

// recover brings the directory to a clean state before appends resume:
// leftover temporary files are removed, the last segment is scanned up to
// its first bad or torn record, any damaged tail is copied to a .broken file
// and cut off, and nextLSN and the dedup window are rebuilt from the WAL.
func (w *WAL) recover() error {
	entries, err := os.ReadDir(w.dir)
	if err != nil {
		return fmt.Errorf("walwriter: read %s: %w", w.dir, err)
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), tmpSuffix) {
			if err := os.Remove(filepath.Join(w.dir, e.Name())); err != nil {
				return fmt.Errorf("walwriter: remove leftover %s: %w", e.Name(), err)
			}
		}
	}
	ckpt, err := ReadCheckpoint(w.dir)
	if err != nil {
		return err
	}
	w.stats.checkpointLSN.Store(uint64(ckpt))
	segs, err := listSegments(w.dir)
	if err != nil {
		return err
	}
	w.nextLSN = 1
	if len(segs) == 0 {
		if ckpt != 0 {
			return fmt.Errorf("walwriter: %s has a checkpoint at LSN %d but no segments", w.dir, ckpt)
		}
		return nil
	}
	// Recover the last segment. A segment without records is removed
	// and the one before it recovered instead: the encoder creates the next
	// segment while the syncer may still be writing the previous one's last
	// batch, so a crash can leave an empty new segment after a torn one.
	var scan segmentScan
	for {
		last := segs[len(segs)-1]
		s, err := w.recoverSegment(last)
		if err != nil {
			return w.damaged(err)
		}
		if s.lastLSN >= s.first { // it holds records, not just definitions
			scan = s
			w.nextLSN = s.lastLSN + 1
			break
		}
		if err := os.Remove(filepath.Join(w.dir, last.Name)); err != nil {
			return fmt.Errorf("walwriter: remove empty segment %s: %w", last.Name, err)
		}
		if err := fsutil.SyncDir(w.dir); err != nil {
			return fmt.Errorf("walwriter: %w", err)
		}
		w.log.Info("removed empty segment", "segment", last.Name)
		segs = segs[:len(segs)-1]
		w.nextLSN = last.First
		if len(segs) == 0 {
			break
		}
	}
	// Rebuild the dedup window from the newest segments back.
	ids := [][]dedupEntry{scan.ids}
	have := len(scan.ids)
	if len(segs) == 0 {
		return nil
	}
	for i := len(segs) - 2; i >= 0 && have < w.opts.DedupWindow; i-- {
		s, err := scanSegment(w.dir, segs[i], false)
		if err != nil {
			return w.damaged(err)
		}
		ids = append(ids, s.ids)
		have += len(s.ids)
	}
	for i := len(ids) - 1; i >= 0; i-- {
		for _, e := range ids[i] {
			w.dedup.add(e.id, w.dedup.hash(e.id), e.lsn)
		}
	}
	// Appends continue in a new segment: every one on disk is final.
	w.seal(segs[len(segs)-1].First)
	w.stats.lastLSN.Store(uint64(w.nextLSN - 1))
	w.log.Info("recovered WAL", "segments", len(segs), "next_lsn", w.nextLSN, "dedup_ids", w.dedup.len())
	return nil
}

// damaged turns a corruption Open cannot recover from by itself (a damaged
// record in an older segment, or a damaged header) into an error that says
// where and what to do.
func (w *WAL) damaged(err error) error {
	var ce *CorruptError
	if !errors.As(err, &ce) {
		return err
	}
	w.log.Error("WAL segment damaged; run `strata wal repair` on the directory", "segment", ce.Segment, "offset", ce.Offset, "reason", ce.Reason)
	return fmt.Errorf("walwriter: segment %s of %s is damaged at offset %d (%s): the records from there on cannot be read; "+
		"run `strata wal repair %s` to cut the segment there (keeping the rest as %s%s) and start again: %w",
		ce.Segment, w.dir, ce.Offset, ce.Reason, w.dir, ce.Segment, brokenSuffix, err)
}

// segmentScan is what scanning a segment found.
type segmentScan struct {
	first   LSN
	lastLSN LSN
	end     int64 // offset just past the last good record
	ids     []dedupEntry
	err     error // the corruption that ended the scan, if any
}

// scanSegment reads a segment's records (without rows) up to its end or
// first corruption. With tolerateTail false a corruption is an error.
func scanSegment(dir string, seg segmentInfo, tolerateTail bool) (segmentScan, error) {
	f, err := os.Open(filepath.Join(dir, seg.Name))
	if err != nil {
		return segmentScan{}, fmt.Errorf("walwriter: open segment %s: %w", seg.Name, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return segmentScan{}, fmt.Errorf("walwriter: stat segment %s: %w", seg.Name, err)
	}
	br := bufio.NewReaderSize(f, 1<<20)
	hdr := make([]byte, segmentHeaderSize)
	if _, err := io.ReadFull(br, hdr); err != nil {
		return segmentScan{}, &CorruptError{Segment: seg.Name, Reason: fmt.Sprintf("header: %v", err)}
	}
	first, err := parseSegmentHeader(hdr)
	if err != nil {
		return segmentScan{}, &CorruptError{Segment: seg.Name, Reason: err.Error()}
	}
	if first != seg.First {
		return segmentScan{}, &CorruptError{Segment: seg.Name, Reason: fmt.Sprintf("header says first LSN %d", first)}
	}
	s := segmentScan{first: first, lastLSN: first - 1, end: segmentHeaderSize}
	fr := frameReader{r: br, name: seg.Name, off: segmentHeaderSize, maxBody: int(st.Size())}
	dec := newSegmentDecoder(first, nil, maxRowLimit)
	var rec Record
	for {
		start := fr.off
		body, _, err := fr.next()
		if err == io.EOF {
			break
		}
		if err == nil {
			var isRecord bool
			isRecord, err = dec.decode(body, &rec)
			if err != nil {
				err = &CorruptError{Segment: seg.Name, Offset: start, Reason: err.Error()}
			} else {
				s.end = fr.off
				if isRecord {
					s.lastLSN = rec.LSN
					if rec.EventID != "" {
						s.ids = append(s.ids, dedupEntry{id: rec.EventID, lsn: rec.LSN})
					}
				}
				continue
			}
		}
		if !errIsCorrupt(err) || !tolerateTail {
			return s, err
		}
		s.err = err
		break
	}
	return s, nil
}

// recoverSegment scans the last segment, moves any damaged tail to a
// .broken file and truncates the segment to its good records.
func (w *WAL) recoverSegment(seg segmentInfo) (segmentScan, error) {
	s, err := scanSegment(w.dir, seg, true)
	if err != nil {
		return s, err
	}
	path := filepath.Join(w.dir, seg.Name)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return s, fmt.Errorf("walwriter: open segment %s: %w", seg.Name, err)
	}
	defer f.Close()
	tail, err := damagedTail(f, s.end)
	if err != nil {
		return s, fmt.Errorf("walwriter: read tail of segment %s: %w", seg.Name, err)
	}
	if len(tail) > 0 {
		broken, err := saveBroken(w.dir, seg.Name, tail)
		if err != nil {
			return s, err
		}
		reason := "garbage after the last record"
		if s.err != nil {
			reason = s.err.Error()
		}
		w.log.Warn("damaged WAL tail cut off", "segment", seg.Name, "offset", s.end, "bytes", len(tail), "copy", broken, "reason", reason)
	}
	// Cut the segment at its last good record; appends continue in a new one.
	if err := f.Truncate(s.end); err != nil {
		return s, fmt.Errorf("walwriter: truncate segment %s to %d: %w", seg.Name, s.end, err)
	}
	if err := f.Sync(); err != nil {
		return s, fmt.Errorf("walwriter: sync segment %s: %w", seg.Name, err)
	}
	return s, nil
}

// damagedTail returns the bytes from end up to the last non-zero byte of f.
func damagedTail(f *os.File, end int64) ([]byte, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() <= end {
		return nil, nil
	}
	rest := make([]byte, st.Size()-end)
	if _, err := f.ReadAt(rest, end); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	last := len(rest) - 1
	for last >= 0 && rest[last] == 0 {
		last--
	}
	return bytes.Clone(rest[:last+1]), nil
}

// saveBroken writes tail to a new <segment>.broken file (numbered when one
// exists) and syncs it.
func saveBroken(dir, seg string, tail []byte) (string, error) {
	name := seg + brokenSuffix
	for i := 1; ; i++ {
		if _, err := os.Lstat(filepath.Join(dir, name)); errors.Is(err, os.ErrNotExist) {
			break
		}
		name = fmt.Sprintf("%s.%d%s", seg, i, brokenSuffix)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, tail, 0o644); err != nil {
		return "", fmt.Errorf("walwriter: save damaged tail to %s: %w", name, err)
	}
	f, err := os.Open(path)
	if err == nil {
		err = f.Sync()
		f.Close()
	}
	if err == nil {
		err = fsutil.SyncDir(dir)
	}
	if err != nil {
		return "", fmt.Errorf("walwriter: sync %s: %w", name, err)
	}
	return name, nil
}
