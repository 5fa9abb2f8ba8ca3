package walwriter

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Delta encoding of a row against the previous image of the same key. See
// the package documentation (# Format, "Delta payload") for the layout.

const (
	colUnchanged = 0 // the value equals the old one
	colNull      = 1 // the value is NULL
	colEdit      = 2 // prefix/suffix of the old value plus copy/literal ops
	colFullBase  = 3 // h >= 3: the whole value, h-3 bytes, follows

	minCopy = 4 // shortest copy op worth emitting
)

// deltaEncoder holds scratch space reused from one delta to the next.
type deltaEncoder struct {
	hash []int32 // position+1 of a 4-byte window of the old value, by hash
	edit []byte
}

// appendDelta appends the delta that turns old into new to dst. Both rows
// have the same number of columns.
func (e *deltaEncoder) appendDelta(dst []byte, old, new Row) []byte {
	n := len(new)
	lead := 0
	for lead < n && equalValue(old[lead], new[lead]) {
		lead++
	}
	trail := 0
	for trail < n-lead && equalValue(old[n-1-trail], new[n-1-trail]) {
		trail++
	}
	dst = binary.AppendUvarint(dst, uint64(lead))
	dst = binary.AppendUvarint(dst, uint64(trail))
	for i := lead; i < n-trail; i++ {
		dst = e.appendColumn(dst, old[i], new[i])
	}
	return dst
}

func (e *deltaEncoder) appendColumn(dst []byte, old, new []byte) []byte {
	switch {
	case equalValue(old, new):
		return append(dst, colUnchanged)
	case new == nil:
		return append(dst, colNull)
	}
	fullLen := uvarintLen(uint64(len(new))+colFullBase) + len(new)
	if old != nil && len(old) > 0 {
		e.edit = e.appendEdit(e.edit[:0], old, new)
		if 1+len(e.edit) < fullLen {
			dst = append(dst, colEdit)
			return append(dst, e.edit...)
		}
	}
	dst = binary.AppendUvarint(dst, uint64(len(new))+colFullBase)
	return append(dst, new...)
}

// appendEdit encodes new as old[:p] + ops + old[len(old)-s:].
func (e *deltaEncoder) appendEdit(dst []byte, old, new []byte) []byte {
	maxAffix := min(len(old), len(new))
	p := 0
	for p < maxAffix && old[p] == new[p] {
		p++
	}
	s := 0
	for s < maxAffix-p && old[len(old)-1-s] == new[len(new)-1-s] {
		s++
	}
	mid := new[p : len(new)-s]
	dst = binary.AppendUvarint(dst, uint64(p))
	dst = binary.AppendUvarint(dst, uint64(s))
	dst = binary.AppendUvarint(dst, uint64(len(mid)))
	if len(mid) < 2*minCopy || len(old) < minCopy {
		return appendLiteral(dst, mid)
	}
	return e.appendOps(dst, old, mid)
}

func appendLiteral(dst, lit []byte) []byte {
	if len(lit) == 0 {
		return dst
	}
	dst = binary.AppendUvarint(dst, uint64(len(lit))<<1)
	return append(dst, lit...)
}

func hash4(b []byte) uint32 {
	return binary.LittleEndian.Uint32(b) * 2654435761
}

// indexStride is the step between the 4-byte windows of an old value that
// appendOps indexes. A common run of at least minCopy+indexStride-1 bytes
// always contains an indexed window; matches are extended both ways, so
// sparse indexing loses only the shortest copies and makes the index four
// times cheaper to build.
const indexStride = 4

// appendOps encodes mid as copies from old and literals, greedily. Like
// snappy, it probes mid more sparsely the longer it goes without a match,
// so a value unrelated to the old one costs little.
func (e *deltaEncoder) appendOps(dst, old, mid []byte) []byte {
	windows := (len(old)-minCopy)/indexStride + 1
	bits := 6
	for 1<<bits < 4*windows && bits < 16 {
		bits++
	}
	size := 1 << bits
	if cap(e.hash) < size {
		e.hash = make([]int32, size)
	}
	table := e.hash[:size]
	clear(table)
	shift := 32 - bits
	for i := 0; i+minCopy <= len(old); i += indexStride {
		table[hash4(old[i:])>>shift] = int32(i + 1)
	}
	litStart := 0
	misses := 0
	for i := 0; i+minCopy <= len(mid); {
		window := binary.LittleEndian.Uint32(mid[i:])
		cand := int(table[(window*2654435761)>>shift]) - 1
		if cand < 0 || binary.LittleEndian.Uint32(old[cand:]) != window {
			i += 1 + misses>>4
			misses++
			continue
		}
		misses = 0
		l := minCopy
		for i+l < len(mid) && cand+l < len(old) && old[cand+l] == mid[i+l] {
			l++
		}
		for i > litStart && cand > 0 && old[cand-1] == mid[i-1] {
			i--
			cand--
			l++
		}
		dst = appendLiteral(dst, mid[litStart:i])
		dst = binary.AppendUvarint(dst, uint64(l-minCopy)<<1|1)
		dst = binary.AppendUvarint(dst, uint64(cand))
		i += l
		litStart = i
	}
	return appendLiteral(dst, mid[litStart:])
}

// errDelta is wrapped by every delta decoding error.
var errDelta = errors.New("bad delta")

// applyDelta decodes delta against old and returns the new row. Values of
// the new row are copied into one fresh buffer; nothing aliases delta or
// old. maxBytes bounds the total size of the new row's values.
func applyDelta(old Row, delta []byte, maxBytes int) (Row, error) {
	n := len(old)
	lead, k := binary.Uvarint(delta)
	if k <= 0 {
		return nil, fmt.Errorf("%w: leading column count", errDelta)
	}
	delta = delta[k:]
	trail, k := binary.Uvarint(delta)
	if k <= 0 {
		return nil, fmt.Errorf("%w: trailing column count", errDelta)
	}
	delta = delta[k:]
	if lead > uint64(n) || trail > uint64(n)-lead {
		return nil, fmt.Errorf("%w: %d leading and %d trailing columns of %d", errDelta, lead, trail, n)
	}
	type span struct {
		start, end int
		null       bool
	}
	spans := make([]span, n)
	buf := make([]byte, 0, 64)
	for i := 0; i < n; i++ {
		start := len(buf)
		v, null := old[i], old[i] == nil
		if uint64(i) >= lead && uint64(i) < uint64(n)-trail {
			h, k := binary.Uvarint(delta)
			if k <= 0 {
				return nil, fmt.Errorf("%w: column %d: header", errDelta, i)
			}
			delta = delta[k:]
			switch {
			case h == colUnchanged:
			case h == colNull:
				v, null = nil, true
			case h == colEdit:
				var err error
				buf, delta, err = applyEdit(buf, old[i], delta, maxBytes)
				if err != nil {
					return nil, fmt.Errorf("%w: column %d: %v", errDelta, i, err)
				}
				v, null = nil, false
			default:
				l := h - colFullBase
				if l > uint64(len(delta)) {
					return nil, fmt.Errorf("%w: column %d: %d bytes, only %d left", errDelta, i, l, len(delta))
				}
				v, null = delta[:l], false
				delta = delta[l:]
			}
		}
		buf = append(buf, v...)
		if len(buf) > maxBytes {
			return nil, fmt.Errorf("%w: row exceeds %d bytes", errDelta, maxBytes)
		}
		spans[i] = span{start, len(buf), null}
	}
	if len(delta) != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes", errDelta, len(delta))
	}
	row := make(Row, n)
	for i, s := range spans {
		if !s.null {
			row[i] = buf[s.start:s.end:s.end]
		}
	}
	return row, nil
}

// applyEdit appends the value an edit op list produces from old to buf.
func applyEdit(buf, old, delta []byte, maxBytes int) ([]byte, []byte, error) {
	var hdr [3]uint64
	for j := range hdr {
		x, k := binary.Uvarint(delta)
		if k <= 0 {
			return nil, nil, errors.New("edit header")
		}
		hdr[j] = x
		delta = delta[k:]
	}
	p, s, midLen := hdr[0], hdr[1], hdr[2]
	if old == nil || p > uint64(len(old)) || s > uint64(len(old))-p {
		return nil, nil, fmt.Errorf("prefix %d and suffix %d of a %d-byte old value", p, s, len(old))
	}
	if midLen > uint64(maxBytes) {
		return nil, nil, fmt.Errorf("%d new bytes exceed %d", midLen, maxBytes)
	}
	buf = append(buf, old[:p]...)
	want := len(buf) + int(midLen)
	for len(buf) < want {
		op, k := binary.Uvarint(delta)
		if k <= 0 {
			return nil, nil, errors.New("op")
		}
		delta = delta[k:]
		l := op >> 1
		if op&1 == 0 {
			if l == 0 || l > uint64(want-len(buf)) || l > uint64(len(delta)) {
				return nil, nil, fmt.Errorf("literal of %d bytes", l)
			}
			buf = append(buf, delta[:l]...)
			delta = delta[l:]
			continue
		}
		l += minCopy
		off, k := binary.Uvarint(delta)
		if k <= 0 {
			return nil, nil, errors.New("copy offset")
		}
		delta = delta[k:]
		if l > uint64(want-len(buf)) || off > uint64(len(old)) || l > uint64(len(old))-off {
			return nil, nil, fmt.Errorf("copy of %d bytes at %d from a %d-byte old value", l, off, len(old))
		}
		buf = append(buf, old[off:off+l]...)
	}
	buf = append(buf, old[uint64(len(old))-s:]...)
	return buf, delta, nil
}
