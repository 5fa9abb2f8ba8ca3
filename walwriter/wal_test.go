package walwriter

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/strata-db/strata/messages"
)

// accounts is a table shaped like pgbench's: id, four ints, three texts.
var accounts = Table{Name: "accounts", Columns: []messages.RowType{messages.RowInt64, messages.RowInt64, messages.RowInt64, messages.RowInt64, messages.RowInt64, messages.RowText, messages.RowText, messages.RowText}}

func int64Value(v int64) []byte {
	return binary.BigEndian.AppendUint64(nil, uint64(v)^1<<63)
}

func accountRow(id int64, rng *rand.Rand) Row {
	text := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte('a' + rng.IntN(26))
		}
		return b
	}
	return Row{int64Value(id), int64Value(id % 10), int64Value(rng.Int64N(1000)), int64Value(0), int64Value(1700000000), text(30), text(84), text(100)}
}

func key(id int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(id)) }

func openTest(t testing.TB, dir string, opts Options) *WAL {
	t.Helper()
	if opts.Tables == nil {
		opts.Tables = []Table{accounts}
	}
	w, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return w
}

// readAll reads every record of dir and fails the test on any error.
func readAll(t testing.TB, dir string, from LSN) []Record {
	t.Helper()
	r, err := NewReader(dir, from)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out []Record
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("read after %d records: %v", len(out), err)
		}
		out = append(out, rec)
	}
}

func sameRow(a, b Row) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !equalValue(a[i], b[i]) {
			return false
		}
	}
	return true
}

func TestAppendReadBack(t *testing.T) {
	dir := t.TempDir()
	w := openTest(t, dir, Options{SegmentSize: 128 << 10, MaxRowBytes: 4096})
	rng := rand.New(rand.NewPCG(1, 2))
	rows := map[int64]Row{}
	var want []Update
	var wg sync.WaitGroup
	for i := range 8000 {
		id := rng.Int64N(50)
		row := rows[id]
		if row == nil {
			row = accountRow(id, rng)
		} else {
			row = cloneRow(row)
			row[2] = int64Value(rng.Int64N(1e6))
			if i%7 == 0 {
				row[6] = []byte(fmt.Sprintf("changed %d", i))
			}
			if i%11 == 0 {
				row[7] = nil
			}
		}
		rows[id] = row
		u := Update{EventID: fmt.Sprintf("p%d-%d", i%4, i), Table: "accounts", Key: key(id), Row: row}
		wantLSN := LSN(i + 1)
		if i > 1500 {
			wantLSN++ // the checkpoint took one
		}
		wg.Add(1)
		err := w.AppendAsync(u, func(lsn LSN, err error) {
			defer wg.Done()
			if err != nil || lsn != wantLSN {
				t.Errorf("append %d: LSN %d, %v; want LSN %d", i, lsn, err, wantLSN)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, u)
		if i == 1500 {
			if _, err := w.Checkpoint(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	}
	wg.Wait()
	st := w.Stats()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if st.Segments < 2 || st.Deltas == 0 || st.FullImages == 0 {
		t.Errorf("stats %+v: want several segments, deltas and full images", st)
	}
	recs := readAll(t, dir, 0)
	i := 0
	for _, rec := range recs {
		if rec.Kind == KindCheckpoint {
			continue
		}
		u := want[i]
		if rec.EventID != u.EventID || string(rec.Key) != string(u.Key) || rec.Table != u.Table || !sameRow(rec.Row, u.Row) {
			t.Fatalf("record %d (LSN %d, %v): got %q %x %v, want %q %x %v", i, rec.LSN, rec.Kind, rec.EventID, rec.Key, rec.Row, u.EventID, u.Key, u.Row)
		}
		i++
	}
	if i != len(want) {
		t.Fatalf("read %d records, want %d", i, len(want))
	}
	rep, err := Verify(dir)
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	if rep.Records != uint64(len(want)) || rep.Checkpoints != 1 {
		t.Errorf("verify report %+v", rep)
	}
}

func TestConcurrentAppendAndDuplicates(t *testing.T) {
	dir := t.TempDir()
	w := openTest(t, dir, Options{})
	var wg sync.WaitGroup
	const producers, each = 16, 200
	lsns := make([][]LSN, producers)
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(p), 9))
			for i := range each {
				id := int64(p*1000 + i%10)
				// Every event is sent twice, as a redelivery would.
				u := Update{EventID: fmt.Sprintf("prod%d-%d", p, i), Table: "accounts", Key: key(id), Row: accountRow(id, rng)}
				a, err := w.Append(context.Background(), u)
				if err != nil {
					t.Error(err)
					return
				}
				b, err := w.Append(context.Background(), u)
				if err != nil || a != b {
					t.Errorf("duplicate: LSN %d then %d, %v", a, b, err)
					return
				}
				lsns[p] = append(lsns[p], a)
			}
		}()
	}
	wg.Wait()
	st := w.Stats()
	w.Close()
	if st.Records != producers*each || st.Duplicates != producers*each {
		t.Fatalf("records %d duplicates %d, want %d each", st.Records, st.Duplicates, producers*each)
	}
	if st.Batches >= st.Records {
		t.Errorf("%d batches for %d records: no group commit", st.Batches, st.Records)
	}
	// Reopen: the dedup window is rebuilt, so a redelivery is still dropped.
	w = openTest(t, dir, Options{})
	u := Update{EventID: "prod3-5", Table: "accounts", Key: key(3005), Row: accountRow(3005, rand.New(rand.NewPCG(1, 1)))}
	lsn, err := w.Append(context.Background(), u)
	if err != nil || lsn != lsns[3][5] {
		t.Fatalf("redelivery after reopen: LSN %d, %v; want %d", lsn, err, lsns[3][5])
	}
	w.Close()
	if n := len(readAll(t, dir, 0)); n != producers*each {
		t.Fatalf("%d records after reopen, want %d", n, producers*each)
	}
}

func TestRejects(t *testing.T) {
	w := openTest(t, t.TempDir(), Options{MaxRowBytes: 1000})
	defer w.Close()
	rng := rand.New(rand.NewPCG(1, 1))
	good := accountRow(1, rng)
	big := cloneRow(good)
	big[7] = make([]byte, 2000)
	short := good[:7]
	badInt := cloneRow(good)
	badInt[1] = []byte{1, 2, 3}
	badText := cloneRow(good)
	badText[5] = []byte{0xff, 0xfe}
	cases := []struct {
		name   string
		u      Update
		reason string
	}{
		{"unknown table", Update{EventID: "e1", Table: "nope", Key: key(1), Row: good}, ReasonUnknownTable},
		{"too few columns", Update{EventID: "e2", Table: "accounts", Key: key(1), Row: short}, ReasonColumns},
		{"bad int width", Update{EventID: "e3", Table: "accounts", Key: key(1), Row: badInt}, ReasonColumns},
		{"bad utf8", Update{EventID: "e4", Table: "accounts", Key: key(1), Row: badText}, ReasonColumns},
		{"bad old row", Update{EventID: "e5", Table: "accounts", Key: key(1), Row: good, Old: short}, ReasonColumns},
		{"oversized row", Update{EventID: "e6", Table: "accounts", Key: key(1), Row: big}, ReasonOversized},
		{"empty event id", Update{Table: "accounts", Key: key(1), Row: good}, ReasonInvalid},
		{"empty key", Update{EventID: "e7", Table: "accounts", Row: good}, ReasonInvalid},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := w.Append(context.Background(), c.u)
			var re *RejectError
			if !errors.As(err, &re) || re.Reason != c.reason || !errors.Is(err, ErrRejected) {
				t.Fatalf("got %v, want a %s rejection", err, c.reason)
			}
		})
	}
	st := w.Stats()
	if st.Records != 0 || st.Rejected[ReasonColumns] != 4 || st.Rejected[ReasonUnknownTable] != 1 || st.Rejected[ReasonOversized] != 1 || st.Rejected[ReasonInvalid] != 2 {
		t.Fatalf("stats: %+v", st)
	}
}

func TestRecoverTornTail(t *testing.T) {
	for _, tc := range []struct {
		name    string
		damage  func(t *testing.T, path string, end int64)
		broken  bool
		records int
	}{
		{"clean", func(t *testing.T, path string, end int64) {}, false, 100},
		{"torn last record", func(t *testing.T, path string, end int64) { truncateAt(t, path, end-3) }, true, 99},
		{"flipped bit in last record", func(t *testing.T, path string, end int64) { flipByte(t, path, end-2) }, true, 99},
		{"garbage after the end", func(t *testing.T, path string, end int64) { writeAt(t, path, end+100, []byte("garbage")) }, true, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			w := openTest(t, dir, Options{})
			rng := rand.New(rand.NewPCG(7, 7))
			for i := range 100 {
				if _, err := w.Append(context.Background(), Update{EventID: fmt.Sprint("e", i), Table: "accounts", Key: key(int64(i)), Row: accountRow(int64(i), rng)}); err != nil {
					t.Fatal(err)
				}
			}
			w.Close()
			path := filepath.Join(dir, segmentName(1))
			recs := readAll(t, dir, 0)
			last := recs[len(recs)-1]
			tc.damage(t, path, last.Offset+int64(last.Size))

			w = openTest(t, dir, Options{})
			// Appends continue after the last good record.
			lsn, err := w.Append(context.Background(), Update{EventID: "after", Table: "accounts", Key: key(1), Row: accountRow(1, rng)})
			if err != nil {
				t.Fatal(err)
			}
			w.Close()
			if lsn != LSN(tc.records+1) {
				t.Errorf("LSN after recovery %d, want %d", lsn, tc.records+1)
			}
			if n := len(readAll(t, dir, 0)); n != tc.records+1 {
				t.Errorf("%d records after recovery, want %d", n, tc.records+1)
			}
			rep, err := Verify(dir)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(rep.Broken) > 0; got != tc.broken {
				t.Errorf("broken files %v, want some: %v", rep.Broken, tc.broken)
			}
		})
	}
}

func truncateAt(t *testing.T, path string, n int64) {
	t.Helper()
	if err := os.Truncate(path, n); err != nil {
		t.Fatal(err)
	}
}

func flipByte(t *testing.T, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	f.ReadAt(b, off)
	b[0] ^= 0x10
	f.WriteAt(b, off)
}

func writeAt(t *testing.T, path string, off int64, data []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(data, off); err != nil {
		t.Fatal(err)
	}
}

func TestRecoverEmptySegmentAfterTornOne(t *testing.T) {
	// A crash after the next segment was created but before the previous
	// one's last batch was synced: an empty segment follows a torn one.
	dir := t.TempDir()
	w := openTest(t, dir, Options{})
	rng := rand.New(rand.NewPCG(9, 9))
	for i := range 20 {
		if _, err := w.Append(context.Background(), Update{EventID: fmt.Sprint("e", i), Table: "accounts", Key: key(int64(i)), Row: accountRow(int64(i), rng)}); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	recs := readAll(t, dir, 0)
	last := recs[len(recs)-1]
	truncateAt(t, filepath.Join(dir, segmentName(1)), last.Offset+int64(last.Size)-5)
	f, err := createSegment(dir, 21, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()

	w = openTest(t, dir, Options{})
	lsn, err := w.Append(context.Background(), Update{EventID: "after", Table: "accounts", Key: key(1), Row: accountRow(1, rng)})
	w.Close()
	if err != nil || lsn != 20 {
		t.Fatalf("append after recovery: LSN %d, %v; want 20", lsn, err)
	}
	if _, err := Verify(dir); err != nil {
		t.Fatal(err)
	}
	if n := len(readAll(t, dir, 0)); n != 20 {
		t.Fatalf("%d records, want 20", n)
	}
}

// OnSync is told every group commit: together they hold every update once,
// one call per fdatasync.
func TestOnSync(t *testing.T) {
	var mu sync.Mutex
	var syncs []SyncStats
	w := openTest(t, t.TempDir(), Options{OnSync: func(s SyncStats) {
		mu.Lock()
		syncs = append(syncs, s)
		mu.Unlock()
	}})
	var wg sync.WaitGroup
	const producers, each = 8, 100
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(p), 3))
			for i := range each {
				id := int64(p*1000 + i)
				if _, err := w.Append(context.Background(), Update{EventID: fmt.Sprintf("p%d-%d", p, i), Table: "accounts", Key: key(id), Row: accountRow(id, rng)}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	st := w.Stats()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	records, bytes := 0, 0
	for _, s := range syncs {
		if s.Records < 0 || s.Bytes <= 0 || s.Sync < 0 {
			t.Errorf("sync %+v", s)
		}
		records += s.Records
		bytes += s.Bytes
	}
	if records != producers*each {
		t.Errorf("OnSync counted %d updates; want %d", records, producers*each)
	}
	if uint64(len(syncs)) < st.Fsyncs || uint64(bytes) < st.Bytes {
		t.Errorf("%d calls for %d fsyncs, %d bytes for %d record bytes", len(syncs), st.Fsyncs, bytes, st.Bytes)
	}
}
