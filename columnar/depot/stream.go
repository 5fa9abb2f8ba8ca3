package depot

import (
	"context"
	"hash/crc32"
	"io"
	"sync"
)

// claim marks the segment being fetched from its first byte (its fill's
// mu held).
func (s *segment) claim() {
	s.state, s.written, s.sum = segmentFetching, 0, 0
}

// settle ends a fetch of segment sg of ff's fill (its mu held): present
// and counted, or absent again for a reader to fetch; its waiters go on
// either way.
func (ff *fillFile) settle(sg *segment, present bool) {
	if present {
		sg.state = segmentPresent
		ff.counts.Add(ff.f.fm, sg.start, sg.end)
	} else {
		sg.state = segmentAbsent
	}
	sg.wakeWaiters()
}

// wakeWaiters lets the readers waiting on the segment look again (its
// fill's mu held): at the end of a fetch, or once it has written what the
// one needing least needs.
func (s *segment) wakeWaiters() {
	if s.wake != nil {
		close(s.wake)
		s.wake = nil
	}
}

// copyBufferBytes is the size of the buffer a request streams through:
// large enough that a segment of 4MiB costs a few dozen reads and
// writes, not the hundred and more of io.Copy's 32KiB.
const copyBufferBytes = 256 << 10

var copyBuffers = sync.Pool{New: func() any { b := make([]byte, copyBufferBytes); return &b }}

// A streamWriter writes the bytes of one ranged GET into the files of the
// fills it was claimed for, back to back: one segment of a fill
// (segmentWriter), or every segment of a group of fills adjacent in the
// pack (groupWriter). It records each write in its segment (written),
// waking the segment's readers, and settles a segment present, with the
// CRC-32C it took of it, once its last byte is written.
type streamWriter struct {
	group []*fillFile
	cur   int    // the fill the next byte belongs to
	seg   int    // and its segment
	off   int64  // the next byte's offset in that fill's column file
	sum   uint32 // CRC-32C of the segment's bytes written so far
	one   bool   // claimed for segment seg of group[0] only
}

// segmentWriter writes segment seg of ff's fill, which its caller claimed.
func segmentWriter(ff *fillFile, seg int) *streamWriter {
	return &streamWriter{group: []*fillFile{ff}, seg: seg, off: ff.f.segs[seg].start, one: true}
}

// groupWriter writes every segment of the fills of group, which its
// caller claimed whole.
func groupWriter(group []*fillFile) *streamWriter {
	w := &streamWriter{group: group}
	w.skipEmpty()
	return w
}

// skipEmpty moves the writer past fills of no segments.
func (w *streamWriter) skipEmpty() {
	for w.cur < len(w.group) && len(w.group[w.cur].f.segs) == 0 {
		w.cur++
	}
}

// fetch makes the ranged GET of the n bytes at off of the store's object
// key and streams them into the fills; whatever it did not bring whole is
// settled absent (abandon). It returns the bytes written.
func (w *streamWriter) fetch(ctx context.Context, key string, off, n int64) (int64, error) {
	defer w.abandon()
	d := w.group[0].f.d
	r, err := d.st.NewRangeReader(ctx, key, off, n)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	buf := copyBuffers.Get().(*[]byte)
	defer copyBuffers.Put(buf)
	written, err := io.CopyBuffer(w, io.LimitReader(r, n), *buf)
	d.fetched.Add(written)
	return written, err
}

func (w *streamWriter) Write(p []byte) (int, error) {
	var n int
	for len(p) > 0 {
		if w.done() {
			return n, io.ErrShortWrite // more than it was claimed for: not what it asked
		}
		ff := w.group[w.cur]
		f := ff.f
		sg := &f.segs[w.seg]
		k := min(int64(len(p)), sg.end-w.off)
		m, err := f.w.WriteAt(p[:k], f.base+w.off)
		w.sum = crc32.Update(w.sum, castagnoli, p[:m])
		w.off += int64(m)
		n += m
		p = p[m:]
		f.mu.Lock()
		sg.written = w.off - sg.start
		ended := w.off == sg.end
		if ended {
			sg.sum = w.sum
			ff.settle(sg, true)
		} else if sg.written >= sg.wakeAt {
			sg.wakeWaiters()
		}
		f.mu.Unlock()
		if err != nil {
			return n, err
		}
		if ended {
			w.next()
		}
	}
	return n, nil
}

// done reports whether the writer has written every segment it was
// claimed for.
func (w *streamWriter) done() bool {
	return w.cur == len(w.group) || w.one && w.off == w.group[0].f.segs[w.seg].end
}

// next moves the writer to the next segment, the next fill's first after
// a fill's last; a segmentWriter stays at the end of its one.
func (w *streamWriter) next() {
	if w.one {
		return
	}
	w.seg++
	w.sum = 0
	if w.seg == len(w.group[w.cur].f.segs) {
		w.cur, w.seg = w.cur+1, 0
		w.skipEmpty()
	}
	if w.cur < len(w.group) {
		w.off = w.group[w.cur].f.segs[w.seg].start
	}
}

// abandon settles absent the segments the writer was claimed for and did
// not write whole (its request failed or was cut short), for readers to
// fetch again.
func (w *streamWriter) abandon() {
	for ; !w.done(); w.next() {
		ff := w.group[w.cur]
		ff.f.mu.Lock()
		ff.settle(&ff.f.segs[w.seg], false)
		ff.f.mu.Unlock()
		if w.one {
			return
		}
	}
}
