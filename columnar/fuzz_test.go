package columnar

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

func FuzzManifest(f *testing.F) {
	_, m := genOne(f)
	good, err := m.Encode()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"version":1,"schema":[{"name":"a","type":"int64","nullable":true}],"block_rows":10,"compression":"lz4","files":[]}`))
	f.Add(good[:len(good)/2])
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := DecodeManifest(data)
		if err != nil {
			return
		}
		if _, err := m.ArrowSchema(); err != nil {
			t.Fatalf("valid manifest with a bad schema: %v", err)
		}
		again, err := m.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := DecodeManifest(again); err != nil {
			t.Fatalf("re-encoded manifest does not decode: %v", err)
		}
	})
}

// schemaMessage returns the encapsulated schema message of a one-column file.
func schemaMessage(t testing.TB, typ arrow.DataType) (*arrow.Schema, []byte) {
	s := arrow.NewSchema([]arrow.Field{{Name: "v", Type: typ, Nullable: true}}, nil)
	p := ipc.GetSchemaPayload(s, memory.DefaultAllocator)
	defer p.Release()
	var buf bytes.Buffer
	if _, err := p.WritePayload(&buf); err != nil {
		t.Fatal(err)
	}
	return s, buf.Bytes()
}

func FuzzBlock(f *testing.F) {
	// Seeds: real blocks of every type, each compression.
	for _, comp := range []Compression{CompressionLZ4, CompressionZstd, CompressionNone} {
		dir := filepath.Join(f.TempDir(), "c")
		schema := allTypesSchema()
		w, err := Create(dir, WriterOptions{Schema: schema, BlockRows: 50, Compression: comp})
		if err != nil {
			f.Fatal(err)
		}
		rec := randomRecord(memory.DefaultAllocator, schema, newTestRand(), 50)
		if err := w.Write(rec); err != nil {
			f.Fatal(err)
		}
		rec.Release()
		m, err := w.Commit()
		if err != nil {
			f.Fatal(err)
		}
		for i, fm := range m.Files {
			data, err := os.ReadFile(filepath.Join(dir, fm.Name))
			if err != nil {
				f.Fatal(err)
			}
			b := fm.Blocks[0]
			f.Add(uint8(i), uint16(m.Blocks[0].Rows), data[b.Offset:b.Offset+b.Length])
		}
	}
	f.Fuzz(func(t *testing.T, typ uint8, rows uint16, block []byte) {
		dt := genTypes[int(typ)%len(genTypes)]
		schema, header := schemaMessage(t, dt)
		dec := newBlockDecoder(dt, memory.NewGoAllocator(), newTestDecompressors())
		arr, err := dec.decode(memory.NewBufferBytes(block), int(rows), 1<<20, typ&0x80 != 0)
		ref := newArrowDecoder(schema, header, memory.NewGoAllocator())
		defer ref.close()
		want, refErr := ref.decode(memory.NewBufferBytes(block), int(rows), 1<<20)
		if refErr == nil {
			defer want.Release()
		}
		if err != nil {
			return
		}
		defer arr.Release()
		if arr.Len() != int(rows) {
			t.Fatalf("decoded %d rows, want %d", arr.Len(), rows)
		}
		if refErr == nil && !array.Equal(arr, want) {
			t.Fatalf("decoder and arrow's reader disagree:\n%v\n%v", arr, want)
		}
		// Every value of a decoded block must be readable without panic.
		enc, err := NewKeyEncoder(schema, SortKey{{Name: "v"}})
		if err != nil {
			t.Fatal(err)
		}
		var kb KeyBatch
		if err := enc.EncodeBatch(&kb, []arrow.Array{arr}, 0, arr.Len()); err != nil {
			t.Fatal(err)
		}
		_ = arr.String()
	})
}
