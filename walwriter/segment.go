package walwriter

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/strata-db/strata/internal/fsutil"
)

const (
	segmentMagic      = "STRATAWL"
	segmentVersion    = 1
	segmentHeaderSize = 32
	segmentSuffix     = ".wal"
	brokenSuffix      = ".broken"
	tmpSuffix         = ".tmp"
)

// segmentName is the file name of the segment whose first LSN is first.
func segmentName(first LSN) string { return fmt.Sprintf("%020d%s", uint64(first), segmentSuffix) }

func parseSegmentName(name string) (LSN, bool) {
	digits, ok := strings.CutSuffix(name, segmentSuffix)
	if !ok || len(digits) != 20 {
		return 0, false
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	return LSN(n), err == nil
}

func appendSegmentHeader(dst []byte, first LSN) []byte {
	start := len(dst)
	dst = append(dst, segmentMagic...)
	dst = binary.LittleEndian.AppendUint32(dst, segmentVersion)
	dst = binary.LittleEndian.AppendUint32(dst, 0)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(first))
	dst = binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
	return binary.LittleEndian.AppendUint32(dst, 0)
}

func parseSegmentHeader(b []byte) (LSN, error) {
	if len(b) < segmentHeaderSize {
		return 0, fmt.Errorf("header: %d bytes, want %d", len(b), segmentHeaderSize)
	}
	if string(b[:8]) != segmentMagic {
		return 0, fmt.Errorf("header: bad magic %q", b[:8])
	}
	if crc := binary.LittleEndian.Uint32(b[24:]); crc != crc32.Checksum(b[:24], castagnoli) {
		return 0, fmt.Errorf("header: checksum mismatch")
	}
	if v := binary.LittleEndian.Uint32(b[8:]); v != segmentVersion {
		return 0, fmt.Errorf("header: version %d, this build reads %d", v, segmentVersion)
	}
	return LSN(binary.LittleEndian.Uint64(b[16:])), nil
}

// segmentInfo names one segment file of a WAL directory.
type segmentInfo struct {
	First LSN
	Name  string
}

// listSegments returns the segments of dir in LSN order.
func listSegments(dir string) ([]segmentInfo, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("walwriter: list %s: %w", dir, err)
	}
	var segs []segmentInfo
	for _, e := range entries {
		if first, ok := parseSegmentName(e.Name()); ok && e.Type().IsRegular() {
			segs = append(segs, segmentInfo{First: first, Name: e.Name()})
		}
	}
	sort.Slice(segs, func(i, j int) bool { return segs[i].First < segs[j].First })
	return segs, nil
}

// createSegment makes a durable, preallocated segment starting at first:
// written under a temporary name, synced, renamed, and the directory synced,
// so a segment with its final name always has a valid header.
func createSegment(dir string, first LSN, size int64) (*os.File, error) {
	name := segmentName(first)
	final := filepath.Join(dir, name)
	tmp := final + tmpSuffix
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("walwriter: create segment %s: %w", name, err)
	}
	fail := func(what string, err error) (*os.File, error) {
		f.Close()
		os.Remove(tmp)
		return nil, fmt.Errorf("walwriter: create segment %s: %s: %w", name, what, err)
	}
	if err := preallocate(f, size); err != nil {
		return fail("preallocate", err)
	}
	if _, err := f.WriteAt(appendSegmentHeader(nil, first), 0); err != nil {
		return fail("write header", err)
	}
	if err := f.Sync(); err != nil {
		return fail("sync", err)
	}
	if err := os.Rename(tmp, final); err != nil {
		return fail("rename", err)
	}
	if err := fsutil.SyncDir(dir); err != nil {
		f.Close()
		return nil, fmt.Errorf("walwriter: create segment %s: %w", name, err)
	}
	return f, nil
}
