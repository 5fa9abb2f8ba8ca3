package walwriter

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/strata-db/strata/internal/fsutil"
)

// RepairCut is one cut Repair made, or would make in a dry run.
type RepairCut struct {
	Segment string `json:"segment"`
	// Offset is where the segment now ends: just past its last good
	// record, or 0 when its header is damaged and the whole file was set
	// aside.
	Offset int64 `json:"offset"`
	// Bytes were cut off (up to the last non-zero byte), kept in Broken.
	Bytes  int64  `json:"bytes"`
	Broken string `json:"broken"` // the .broken file holding them; empty in a dry run
	Reason string `json:"reason"` // the damage found at Offset
	// LostKnown is set when the next segment tells which LSNs were lost:
	// FirstLostLSN..LastLostLSN, RecordsLost of them. For the last segment
	// the number of records in the damaged tail is unknown.
	LostKnown    bool   `json:"lost_known"`
	FirstLostLSN LSN    `json:"first_lost_lsn"`
	LastLostLSN  LSN    `json:"last_lost_lsn"`
	RecordsLost  uint64 `json:"records_lost"`
}

// RepairReport is what Repair did.
type RepairReport struct {
	Segments int         `json:"segments"`
	Cuts     []RepairCut `json:"cuts"`
}

// Repair makes a damaged WAL directory readable and openable again, at the
// cost of the damaged records: every segment is read up to its first record
// that is torn or fails its checks; from there on it is copied to
// <segment>.broken (numbered if one exists) and the segment is cut off
// there and synced. A segment whose header is damaged is moved whole to its
// .broken file. Nothing is removed: the .broken files keep every byte cut.
// With dryRun nothing changes and the report says what would be cut.
//
// The records after a cut are lost. Readers step over the gap this leaves
// in the LSNs (they accept a gap only where a .broken file shows a repair);
// deltas after the gap whose base image is lost cannot be resolved until the
// next checkpoint (ErrNoBase). The WAL must not be open while Repair runs.
func Repair(dir string, dryRun bool) (RepairReport, error) {
	var rep RepairReport
	segs, err := listSegments(dir)
	if err != nil {
		return rep, err
	}
	rep.Segments = len(segs)
	for i, seg := range segs {
		s, err := scanSegment(dir, seg, true)
		var cut RepairCut
		switch {
		case err != nil && !errIsCorrupt(err):
			return rep, err
		case err != nil: // the header
			path := filepath.Join(dir, seg.Name)
			st, serr := os.Stat(path)
			if serr != nil {
				return rep, fmt.Errorf("walwriter: repair: %w", serr)
			}
			cut = RepairCut{Segment: seg.Name, Bytes: st.Size(), Reason: err.Error(), FirstLostLSN: seg.First}
			if !dryRun {
				if cut.Broken, err = setAsideSegment(dir, seg.Name); err != nil {
					return rep, err
				}
			}
		default:
			tail, terr := segmentTail(dir, seg.Name, s.end)
			if terr != nil {
				return rep, terr
			}
			if len(tail) == 0 && s.err == nil {
				continue
			}
			reason := "garbage after the last record"
			if s.err != nil {
				reason = s.err.Error()
			}
			cut = RepairCut{Segment: seg.Name, Offset: s.end, Bytes: int64(len(tail)), Reason: reason, FirstLostLSN: s.lastLSN + 1}
			if !dryRun {
				if cut.Broken, err = cutSegment(dir, seg.Name, s.end, tail); err != nil {
					return rep, err
				}
			}
		}
		if i+1 < len(segs) && segs[i+1].First >= cut.FirstLostLSN {
			cut.LostKnown = true
			cut.LastLostLSN = segs[i+1].First - 1
			cut.RecordsLost = uint64(segs[i+1].First - cut.FirstLostLSN)
		}
		rep.Cuts = append(rep.Cuts, cut)
	}
	return rep, nil
}

func segmentTail(dir, name string, end int64) ([]byte, error) {
	f, err := os.Open(filepath.Join(dir, name))
	if err != nil {
		return nil, fmt.Errorf("walwriter: repair: %w", err)
	}
	defer f.Close()
	tail, err := damagedTail(f, end)
	if err != nil {
		return nil, fmt.Errorf("walwriter: repair: read tail of segment %s: %w", name, err)
	}
	return tail, nil
}

// cutSegment saves tail to a .broken file, then truncates the segment at end.
func cutSegment(dir, name string, end int64, tail []byte) (string, error) {
	broken := ""
	if len(tail) > 0 {
		var err error
		if broken, err = saveBroken(dir, name, tail); err != nil {
			return "", err
		}
	}
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_RDWR, 0)
	if err != nil {
		return broken, fmt.Errorf("walwriter: repair: %w", err)
	}
	err = f.Truncate(end)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return broken, fmt.Errorf("walwriter: repair: cut segment %s at %d: %w", name, end, err)
	}
	return broken, nil
}

// setAsideSegment renames a segment to a new .broken name.
func setAsideSegment(dir, name string) (string, error) {
	broken := name + brokenSuffix
	for i := 1; ; i++ {
		if _, err := os.Lstat(filepath.Join(dir, broken)); errors.Is(err, os.ErrNotExist) {
			break
		}
		broken = fmt.Sprintf("%s.%d%s", name, i, brokenSuffix)
	}
	if err := os.Rename(filepath.Join(dir, name), filepath.Join(dir, broken)); err != nil {
		return "", fmt.Errorf("walwriter: repair: set aside segment %s: %w", name, err)
	}
	if err := fsutil.SyncDir(dir); err != nil {
		return "", fmt.Errorf("walwriter: repair: %w", err)
	}
	return broken, nil
}

// repairedBetween reports whether a .broken file of dir names a segment
// whose first LSN is in [from, to): evidence that a gap of LSNs there was
// left by a repair (or a recovery), not by a missing segment.
func repairedBetween(dir string, from, to LSN) bool {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range entries {
		n, ok := strings.CutSuffix(e.Name(), brokenSuffix)
		if !ok {
			continue
		}
		if i := strings.Index(n, segmentSuffix); i >= 0 {
			n = n[:i+len(segmentSuffix)]
		}
		if first, ok := parseSegmentName(n); ok && first >= from && first < to {
			return true
		}
	}
	return false
}
