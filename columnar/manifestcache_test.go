package columnar

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// writeCacheTestContainer commits a container of rows random rows in
// blocks of 64 and returns its directory.
func writeCacheTestContainer(t testing.TB, rows int) string {
	t.Helper()
	schema := allTypesSchema()
	rec := randomRecord(memory.NewGoAllocator(), schema, rand.New(rand.NewPCG(3, 4)), rows)
	defer rec.Release()
	dir := filepath.Join(t.TempDir(), "t", "p", "c1")
	w, err := Create(dir, WriterOptions{Table: "t", Projection: "p", ID: "c1", Schema: schema, BlockRows: 64})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Opening a container again decodes its manifest from the cache: the
// same manifest, as its own copy.
func TestManifestCacheCopies(t *testing.T) {
	dir := writeCacheTestContainer(t, 1000)
	data, err := DirSource(dir).ReadManifest()
	if err != nil {
		t.Fatal(err)
	}
	want, err := DecodeManifest(data)
	if err != nil {
		t.Fatal(err)
	}
	c := newManifestCache(1 << 20)
	first, err := c.decode(data)
	if err != nil {
		t.Fatal(err)
	}
	// Change everything a caller could reach in the first copy.
	first.Rows++
	first.Schema[0].Name = "changed"
	first.SortKey = append(first.SortKey, SortColumn{Name: "x"})
	first.Blocks[0].Rows = -1
	first.Files[0].Blocks[0].Offset = -1
	first.Files[0].Name = "changed"
	for k := 0; k < 2; k++ {
		again, err := c.decode(data)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(again, want) {
			t.Fatalf("decode %d from the cache differs from DecodeManifest", k+2)
		}
		if again == first || &again.Files[0].Blocks[0] == &first.Files[0].Blocks[0] {
			t.Fatalf("decode %d shares memory with an earlier copy", k+2)
		}
	}
	if len(c.entries) != 1 {
		t.Errorf("%d entries, want 1", len(c.entries))
	}
}

// The cache keeps at most its bound of manifest bytes, dropping the least
// recently used, and never keeps what failed to decode.
func TestManifestCacheBound(t *testing.T) {
	dir := writeCacheTestContainer(t, 200)
	data, err := DirSource(dir).ReadManifest()
	if err != nil {
		t.Fatal(err)
	}
	c := newManifestCache(int64(3 * (len(data) + 10)))
	variants := make([][]byte, 5)
	for i := range variants {
		variants[i] = append(append([]byte{}, data...), []byte(fmt.Sprintf("%*s", i+1, ""))...) // trailing spaces: the same manifest, other bytes
		if _, err := c.decode(variants[i]); err != nil {
			t.Fatal(err)
		}
	}
	if c.bytes > c.max || len(c.entries) != 3 {
		t.Errorf("%d entries of %d bytes, bound %d bytes", len(c.entries), c.bytes, c.max)
	}
	if _, ok := c.entries[string(variants[0])]; ok {
		t.Errorf("the least recently used manifest is still held")
	}
	if _, ok := c.entries[string(variants[4])]; !ok {
		t.Errorf("the most recent manifest is not held")
	}
	bad := append([]byte{}, data[:len(data)/2]...)
	for k := 0; k < 2; k++ {
		if _, err := c.decode(bad); err == nil {
			t.Fatalf("decode %d of a cut manifest: no error", k+1)
		}
	}
	if _, ok := c.entries[string(bad)]; ok {
		t.Errorf("a manifest that failed to decode is held")
	}
}

// BenchmarkOpenManifest decodes a manifest of 250 blocks of 11 columns
// with DecodeManifest and from the cache.
func BenchmarkOpenManifest(b *testing.B) {
	dir := writeCacheTestContainer(b, 250*64)
	data, err := DirSource(dir).ReadManifest()
	if err != nil {
		b.Fatal(err)
	}
	b.Run("decode", func(b *testing.B) {
		for b.Loop() {
			if _, err := DecodeManifest(data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cached", func(b *testing.B) {
		c := newManifestCache(1 << 20)
		for b.Loop() {
			if _, err := c.decode(data); err != nil {
				b.Fatal(err)
			}
		}
	})
}
