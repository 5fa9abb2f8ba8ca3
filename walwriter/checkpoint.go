package walwriter

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/strata-db/strata/internal/fsutil"
)

// CheckpointFile is the name of the checkpoint file in a WAL directory.
const CheckpointFile = "CHECKPOINT"

const (
	checkpointMagic = "STRATACK"
	checkpointSize  = 24
)

// writeCheckpointFile atomically replaces the checkpoint file: written
// under a temporary name, synced, renamed, directory synced.
func writeCheckpointFile(dir string, lsn LSN) error {
	b := append([]byte(checkpointMagic), make([]byte, 8)...)
	binary.LittleEndian.PutUint32(b[8:], segmentVersion)
	b = binary.LittleEndian.AppendUint64(b, uint64(lsn))
	b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
	b = b[:checkpointSize+4]
	path := filepath.Join(dir, CheckpointFile)
	tmp := path + tmpSuffix
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("%w: write checkpoint file: %v", ErrFailed, err)
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil {
		err = fsutil.SyncDir(dir)
	}
	if err != nil {
		return fmt.Errorf("%w: write checkpoint file: %v", ErrFailed, err)
	}
	return nil
}

// ReadCheckpoint returns the LSN of the last checkpoint of the WAL in dir,
// or 0 when it has none.
func ReadCheckpoint(dir string) (LSN, error) {
	b, err := os.ReadFile(filepath.Join(dir, CheckpointFile))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("walwriter: read checkpoint file: %w", err)
	}
	return ParseCheckpointFile(b)
}

// ParseCheckpointFile returns the checkpoint LSN of the contents of a
// checkpoint file, or a *CorruptError naming CheckpointFile.
func ParseCheckpointFile(b []byte) (LSN, error) {
	if len(b) != checkpointSize+4 || string(b[:8]) != checkpointMagic ||
		binary.LittleEndian.Uint32(b[checkpointSize:]) != crc32.Checksum(b[:checkpointSize], castagnoli) {
		return 0, &CorruptError{Segment: CheckpointFile, Reason: "bad checkpoint file"}
	}
	if v := binary.LittleEndian.Uint32(b[8:]); v != segmentVersion {
		return 0, &CorruptError{Segment: CheckpointFile, Reason: fmt.Sprintf("checkpoint file version %d", v)}
	}
	return LSN(binary.LittleEndian.Uint64(b[16:])), nil
}

// RemoveObsoleteSegments deletes the segments whose records all precede the
// last checkpoint and returns their names, except those the guard set by
// SetRemoveGuard keeps (segments not yet archived). Replay from the
// checkpoint does not need them. The dedup window rebuilt on the next Open shrinks to what
// remains.
func (w *WAL) RemoveObsoleteSegments() ([]string, error) {
	return w.removeBefore(0)
}

// RemoveSegmentsNotNeededFrom is RemoveObsoleteSegments for a WAL that
// must still be read from LSN from (a reader of records not yet applied
// elsewhere): it removes nothing while the last checkpoint is after from,
// since such a reader starts at an earlier checkpoint, which the WAL does
// not track.
func (w *WAL) RemoveSegmentsNotNeededFrom(from LSN) ([]string, error) {
	return w.removeBefore(from)
}

// removeBefore removes the segments wholly before the last checkpoint,
// provided it is at or before from (0: any checkpoint).
func (w *WAL) removeBefore(from LSN) ([]string, error) {
	ckpt, err := ReadCheckpoint(w.dir)
	if err != nil || ckpt == 0 || (from != 0 && ckpt > from) {
		return nil, err
	}
	segs, err := listSegments(w.dir)
	if err != nil {
		return nil, err
	}
	var removed []string
	keep := func(string) bool { return false }
	if g := w.removeGuard.Load(); g != nil {
		keep = *g
	}
	for i := 0; i+1 < len(segs); i++ {
		if segs[i+1].First > ckpt {
			break
		}
		if keep(segs[i].Name) {
			w.log.Info("keeping segment before checkpoint: not archived yet", "segment", segs[i].Name)
			continue
		}
		if err := os.Remove(filepath.Join(w.dir, segs[i].Name)); err != nil {
			return removed, fmt.Errorf("walwriter: remove segment %s: %w", segs[i].Name, err)
		}
		removed = append(removed, segs[i].Name)
	}
	if len(removed) > 0 {
		if err := fsutil.SyncDir(w.dir); err != nil {
			return removed, fmt.Errorf("walwriter: %w", err)
		}
		w.log.Info("removed segments before checkpoint", "checkpoint", ckpt, "segments", len(removed))
	}
	return removed, nil
}
