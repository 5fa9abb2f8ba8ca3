package walwriter

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"testing"
)

// encodeSegmentBody encodes updates as one segment would hold them.
func encodeSegmentBody(first LSN, us []Update) []byte {
	enc := newSegmentEncoder(first)
	cache := newImageCache(1 << 20)
	var buf []byte
	for i := range us {
		u := &us[i]
		hash := cache.hash(&accounts, u.Key)
		e := cache.lookup(&accounts, u.Key, hash)
		var old Row
		if e != nil {
			old = e.row
		}
		buf, _ = enc.appendData(buf, first+LSN(i), u, parseEventID(u.EventID), &accounts, old, rowImageLen(u.Row))
		cache.store(e, hash, &accounts, u.Key, u.Row)
	}
	return buf
}

// decodeSegmentBody decodes records until the end or the first error.
func decodeSegmentBody(first LSN, data []byte) ([]Record, error) {
	fr := frameReader{r: bufio.NewReader(bytes.NewReader(data)), name: "test", off: segmentHeaderSize, maxBody: len(data)}
	dec := newSegmentDecoder(first, newImageStore(), 1<<20)
	var out []Record
	for {
		body, _, err := fr.next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		var rec Record
		ok, err := dec.decode(body, &rec)
		if err != nil {
			return out, err
		}
		if ok {
			out = append(out, rec)
		}
	}
}

func sampleUpdates() []Update {
	r1 := Row{int64Value(1), int64Value(2), int64Value(3), int64Value(4), int64Value(5), []byte("a"), []byte("bb"), nil}
	r2 := cloneRow(r1)
	r2[2] = int64Value(4)
	return []Update{
		{EventID: "p1-10", Table: "accounts", Key: key(1), Row: r1},
		{EventID: "p1-11", Table: "accounts", Key: key(1), Row: r2},
		{EventID: "uuid-like-id", Table: "accounts", Key: key(2), Row: r1},
		{EventID: "p1-12", Table: "accounts", Key: key(2), Row: r2},
	}
}

func TestRecordGolden(t *testing.T) {
	// The bytes of a small segment body: a table definition, a full image
	// with a raw event ID, and a one-column delta. A change here is a
	// format change.
	got := encodeSegmentBody(1, sampleUpdates()[:2])
	want, err := hex.DecodeString("" +
		"14354ed5ec" + "03" + "00" + "086163636f756e7473" + "08" + "0101010101040404" +
		"45cb29f622" + "01" + "00" + "0570312d3130" + "00" + "080000000000000001" +
		"09800000000000000109800000000000000209800000000000000309800000000000000409800000000000000502610362620" + "0" +
		"067a8c071d" + "04" + "00" + "0370312d" +
		"169f6f2b1a" + "12" + "00" + "00" + "16" + "00" + "080000000000000001" + "02" + "05" + "02" + "07" + "00" + "01" + "02" + "04")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("segment body\n got %x\nwant %x", got, want)
	}
	recs, err := decodeSegmentBody(1, got)
	if err != nil || len(recs) != 2 {
		t.Fatalf("decode: %d records, %v", len(recs), err)
	}
	if recs[1].Kind != KindDelta || recs[1].EventID != "p1-11" {
		t.Fatalf("second record %+v", recs[1])
	}
}

func TestRecordRoundTrip(t *testing.T) {
	us := sampleUpdates()
	recs, err := decodeSegmentBody(5, encodeSegmentBody(5, us))
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != len(us) {
		t.Fatalf("%d records, want %d", len(recs), len(us))
	}
	for i, rec := range recs {
		if rec.LSN != LSN(5+i) || rec.EventID != us[i].EventID || !sameRow(rec.Row, us[i].Row) || rec.Table != "accounts" {
			t.Errorf("record %d: %+v", i, rec)
		}
	}
	if recs[1].Kind != KindDelta || recs[3].Kind != KindDelta {
		t.Errorf("kinds %v %v, want deltas", recs[1].Kind, recs[3].Kind)
	}
}

func TestRecordCorruption(t *testing.T) {
	data := encodeSegmentBody(1, sampleUpdates())
	for _, cut := range []int{1, 5, len(data) / 2, len(data) - 1} {
		_, err := decodeSegmentBody(1, data[:cut])
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("cut at %d: %v, want a corruption", cut, err)
		}
	}
	bad := bytes.Clone(data)
	bad[len(bad)-1] ^= 1
	if _, err := decodeSegmentBody(1, bad); !errors.Is(err, ErrCorrupt) {
		t.Errorf("flipped bit: %v", err)
	}
}

func TestOneIntColumnCost(t *testing.T) {
	// The budget: one int column of a ~260-byte row changed costs at
	// most 40 bytes on disk, everything included.
	us := sampleUpdates()[:1]
	row := Row{int64Value(1), int64Value(1), int64Value(1), int64Value(1), int64Value(1), bytes.Repeat([]byte("a"), 30), bytes.Repeat([]byte("b"), 84), bytes.Repeat([]byte("c"), 100)}
	us[0].Row = row
	for i := range 10 {
		next := cloneRow(row)
		next[2] = int64Value(int64(1000 + i*37))
		us = append(us, Update{Table: "accounts", Key: key(1), Row: next})
		row = next
	}
	for i := range us {
		us[i].EventID = fmt.Sprint("producer-7-", i)
	}
	data := encodeSegmentBody(1, us)
	recs, err := decodeSegmentBody(1, data)
	if err != nil {
		t.Fatal(err)
	}
	fr := frameReader{r: bufio.NewReader(bytes.NewReader(data)), off: 0, maxBody: len(data)}
	var sizes []int
	for {
		_, n, err := fr.next()
		if err != nil {
			break
		}
		sizes = append(sizes, n)
	}
	last := sizes[len(sizes)-1]
	if last > 30 || recs[len(recs)-1].Kind != KindDelta {
		t.Fatalf("one-int update costs %d bytes (%v), want <= 30; sizes %v", last, recs[len(recs)-1].Kind, sizes)
	}
	t.Logf("one int column changed in a %d-byte row: %d bytes on disk", rowImageLen(row), last)
}

func FuzzRecord(f *testing.F) {
	f.Add(encodeSegmentBody(1, sampleUpdates()))
	f.Add([]byte{0x03, 0, 0, 0, 0, 0x01, 0x00})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		recs, _ := decodeSegmentBody(1, data)
		var prev LSN
		for _, r := range recs {
			if r.LSN <= prev {
				t.Fatalf("LSN %d after %d", r.LSN, prev)
			}
			prev = r.LSN
			if r.Kind != KindCheckpoint && r.Row == nil {
				t.Fatalf("data record without a row: %+v", r)
			}
		}
	})
}

// FuzzRecordBody feeds record bodies to the decoder directly, past the
// checksum that keeps random bytes out of FuzzRecord's decoder: data is a
// sequence of uvarint-length-prefixed bodies.
func FuzzRecordBody(f *testing.F) {
	seed := encodeSegmentBody(1, sampleUpdates())
	var bodies []byte
	fr := frameReader{r: bufio.NewReader(bytes.NewReader(seed)), maxBody: len(seed)}
	for {
		body, _, err := fr.next()
		if err != nil {
			break
		}
		bodies = binary.AppendUvarint(bodies, uint64(len(body)))
		bodies = append(bodies, body...)
	}
	f.Add(bodies)
	f.Fuzz(func(t *testing.T, data []byte) {
		dec := newSegmentDecoder(1, newImageStore(), 1<<16)
		for len(data) > 0 {
			n, k := binary.Uvarint(data)
			if k <= 0 || n > uint64(len(data)-k) {
				return
			}
			body := data[k : k+int(n)]
			data = data[k+int(n):]
			var rec Record
			ok, err := dec.decode(body, &rec)
			if err != nil {
				return
			}
			if ok && rec.Kind != KindCheckpoint {
				tbl := Table{Name: rec.Table, Columns: rec.Columns}
				if err := tbl.checkRow(rec.Row); err != nil {
					t.Fatalf("decoded row does not fit its table: %v", err)
				}
			}
		}
	})
}
