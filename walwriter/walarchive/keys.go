package walarchive

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/strata-db/strata/walwriter"
)

// The keys of an archive under its prefix (see "Format" in the package
// doc). A store deletes whole prefixes only (store.Store.DeletePrefix), so
// each object retention may delete has a prefix of its own.
const (
	segmentsDir    = "segments/"
	checkpointsDir = "checkpoints/"
)

// segmentDir is the prefix of the object of the segment file named name:
// segments/<first LSN>/.
func segmentDir(name string) string {
	return segmentsDir + strings.TrimSuffix(name, ".wal") + "/"
}

// segmentKey is the key of the segment file named name.
func segmentKey(name string) string { return segmentDir(name) + name }

// checkpointDir is the prefix of the copy of the checkpoint at lsn:
// checkpoints/<LSN>/.
func checkpointDir(lsn walwriter.LSN) string {
	return fmt.Sprintf("%s%020d/", checkpointsDir, uint64(lsn))
}

// checkpointKey is the key of the copy of the checkpoint at lsn.
func checkpointKey(lsn walwriter.LSN) string { return checkpointDir(lsn) + walwriter.CheckpointFile }

type keyKind int

const (
	otherKey       keyKind = iota
	latestKey              // CHECKPOINT: the newest checkpoint file
	segmentObj             // segments/<first LSN>/<segment name>
	flatSegmentObj         // <segment name>: the first layout's
	checkpointObj          // checkpoints/<LSN>/CHECKPOINT
)

// archiveKey is what a key of an archive holds.
type archiveKey struct {
	kind    keyKind
	segment string        // segmentObj, flatSegmentObj: the segment's file name
	lsn     walwriter.LSN // its first LSN; checkpointObj: the checkpoint's LSN
}

// parseKey tells what name, a key relative to an archive's prefix, holds.
func parseKey(name string) archiveKey {
	if name == walwriter.CheckpointFile {
		return archiveKey{kind: latestKey}
	}
	if first, ok := walwriter.ParseSegmentName(name); ok {
		return archiveKey{kind: flatSegmentObj, segment: name, lsn: first}
	}
	if rest, ok := strings.CutPrefix(name, segmentsDir); ok {
		if dir, file, ok := strings.Cut(rest, "/"); ok && dir+".wal" == file {
			if first, ok := walwriter.ParseSegmentName(file); ok {
				return archiveKey{kind: segmentObj, segment: file, lsn: first}
			}
		}
	}
	if rest, ok := strings.CutPrefix(name, checkpointsDir); ok {
		if dir, file, ok := strings.Cut(rest, "/"); ok && file == walwriter.CheckpointFile && len(dir) == 20 {
			if n, err := strconv.ParseUint(dir, 10, 64); err == nil {
				return archiveKey{kind: checkpointObj, lsn: walwriter.LSN(n)}
			}
		}
	}
	return archiveKey{}
}

// archiveRoot returns the prefix of the archive that the key name (relative
// to some prefix) is a segment of, "" when it is none or the archive is at
// that prefix itself.
func archiveRoot(name string) string {
	elems := strings.Split(name, "/")
	n := len(elems)
	if n < 2 {
		return ""
	}
	if _, ok := walwriter.ParseSegmentName(elems[n-1]); !ok {
		return ""
	}
	root := elems[:n-1]
	if n >= 3 && elems[n-3] == strings.TrimSuffix(segmentsDir, "/") && elems[n-2]+".wal" == elems[n-1] {
		root = elems[:n-3]
	}
	if len(root) == 0 {
		return ""
	}
	return strings.Join(root, "/") + "/"
}
