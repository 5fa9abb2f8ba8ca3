package columnar

import (
	"encoding/binary"
	"fmt"
	"io"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	flatbuffers "github.com/google/flatbuffers/go"
)

// The writer lays out each column file itself (the layout, and why not
// arrow's ipc.FileWriter, are in the package doc). A Writer has one
// blockCompressor, shared by all its column files. Arrow's IPC encoder
// still lays out the uncompressed buffers of each block; the writer
// compresses them and writes the message, and at the end the footer, as
// arrow would.

const (
	arrowMagic    = "ARROW1"
	bodyAlignment = 64 // body buffers are padded to this, as arrow does
	metadataV5    = 4  // MetadataVersion.V5
	// MessageHeader and Type union tags (Arrow's Message.fbs, Schema.fbs).
	fbHeaderRecordBatchTag = 3
	fbTypeInt              = 2
	fbTypeFloatingPoint    = 3
	fbTypeBinary           = 4
	fbTypeUtf8             = 5
	fbTypeBool             = 6
	fbTypeDate             = 8
	fbTypeTimestamp        = 10
)

// blockCompressor compresses block buffers for every column file of a
// Writer with the Writer's codec. It is safe for concurrent use
// (WriteColumn may run concurrently for different columns): so are
// compressors, and scratch buffers come from a pool.
type blockCompressor struct {
	codec   codec      // nil: CompressionNone
	comp    compressor // the codec's, nil without one
	scratch sync.Pool  // *blockScratch
}

// blockScratch holds one block's bytes while it is written.
type blockScratch struct {
	raw  appendWriter // the uncompressed message arrow lays out
	body []byte       // the compressed body
	fb   *flatbuffers.Builder
}

func newBlockCompressor(c Compression) (*blockCompressor, error) {
	cd, err := c.codec()
	if err != nil {
		return nil, err
	}
	bc := &blockCompressor{codec: cd}
	bc.scratch.New = func() any { return &blockScratch{fb: flatbuffers.NewBuilder(256)} }
	if cd != nil {
		if bc.comp, err = cd.newCompressor(); err != nil {
			return nil, err
		}
	}
	return bc, nil
}

// close releases the codec's compressor.
func (bc *blockCompressor) close() {
	if bc.comp != nil {
		bc.comp.close()
	}
}

// appendTo appends buffer src to dst as the body holds it: compressed with
// its 8-byte uncompressed length in front, or as it is without compression;
// an empty buffer stays empty.
func (bc *blockCompressor) appendTo(dst, src []byte) ([]byte, error) {
	if len(src) == 0 || bc.comp == nil {
		return append(dst, src...), nil
	}
	dst = binary.LittleEndian.AppendUint64(dst, uint64(len(src)))
	return bc.comp.appendCompressed(dst, src)
}

// arrowCodec returns the Arrow codec id of the blocks' BodyCompression, and
// false when they have none.
func (bc *blockCompressor) arrowCodec() (byte, bool) {
	if bc.codec == nil {
		return 0, false
	}
	return bc.codec.arrowID(), true
}

type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) { w.b = append(w.b, p...); return len(p), nil }

// ipcBlock is a footer entry: where a record batch message is.
type ipcBlock struct {
	offset  int64
	metaLen int32 // prefix, metadata and its padding
	bodyLen int64
}

// writeMessage writes one encapsulated IPC message: continuation marker,
// metadata length (padded so the body starts 8-aligned), metadata,
// padding, body. It returns the bytes of the prefix and metadata.
func writeMessage(w io.Writer, meta, body []byte) (int32, error) {
	padded := (len(meta) + 8 + 7) &^ 7
	hdr := make([]byte, 8, padded)
	binary.LittleEndian.PutUint32(hdr, continuationMarker)
	binary.LittleEndian.PutUint32(hdr[4:], uint32(padded-8))
	hdr = append(hdr, meta...)
	hdr = hdr[:padded] // zero padding (make zeroed the capacity)
	if _, err := w.Write(hdr); err != nil {
		return 0, err
	}
	if _, err := w.Write(body); err != nil {
		return 0, err
	}
	return int32(padded), nil
}

// recordBatchMeta builds the flatbuffer Message of a one-field record
// batch of rows rows whose buffers are at bufs in a body of bodyLen bytes.
func recordBatchMeta(b *flatbuffers.Builder, rows, nulls int64, bufs [][2]int64, bodyLen int64, codec byte, compressed bool) []byte {
	b.Reset()
	var comp flatbuffers.UOffsetT
	if compressed {
		b.StartObject(2)                           // BodyCompression
		b.PrependByteSlot(0, codec, arrowLZ4Frame) // the default: absent when LZ4
		b.PrependByteSlot(1, 0, 0)                 // method BUFFER
		comp = b.EndObject()
	}
	b.StartVector(16, len(bufs), 8) // [Buffer]
	for i := len(bufs) - 1; i >= 0; i-- {
		b.Prep(8, 16)
		b.PrependInt64(bufs[i][1])
		b.PrependInt64(bufs[i][0])
	}
	buffers := b.EndVector(len(bufs))
	b.StartVector(16, 1, 8) // [FieldNode]
	b.Prep(8, 16)
	b.PrependInt64(nulls)
	b.PrependInt64(rows)
	nodes := b.EndVector(1)
	b.StartObject(5) // RecordBatch
	b.PrependInt64Slot(0, rows, 0)
	b.PrependUOffsetTSlot(1, nodes, 0)
	b.PrependUOffsetTSlot(2, buffers, 0)
	if compressed {
		b.PrependUOffsetTSlot(3, comp, 0)
	}
	rb := b.EndObject()
	return finishMessage(b, fbHeaderRecordBatchTag, rb, bodyLen)
}

func finishMessage(b *flatbuffers.Builder, headerType byte, header flatbuffers.UOffsetT, bodyLen int64) []byte {
	b.StartObject(5) // Message
	b.PrependInt16Slot(0, metadataV5, 0)
	b.PrependByteSlot(1, headerType, 0)
	b.PrependUOffsetTSlot(2, header, 0)
	b.PrependInt64Slot(3, bodyLen, 0)
	b.Finish(b.EndObject())
	return b.FinishedBytes()
}

// fileFooter builds the flatbuffer Footer of a file of schema whose record
// batches are blocks.
func fileFooter(schema *arrow.Schema, blocks []ipcBlock) ([]byte, error) {
	b := flatbuffers.NewBuilder(512)
	sch, err := schemaFB(b, schema)
	if err != nil {
		return nil, err
	}
	recs := blockVector(b, blocks)
	dicts := blockVector(b, nil)
	b.StartObject(5) // Footer
	b.PrependInt16Slot(0, metadataV5, 0)
	b.PrependUOffsetTSlot(1, sch, 0)
	b.PrependUOffsetTSlot(2, dicts, 0)
	b.PrependUOffsetTSlot(3, recs, 0)
	b.Finish(b.EndObject())
	return b.FinishedBytes(), nil
}

func blockVector(b *flatbuffers.Builder, blocks []ipcBlock) flatbuffers.UOffsetT {
	b.StartVector(24, len(blocks), 8)
	for i := len(blocks) - 1; i >= 0; i-- {
		b.Prep(8, 24)
		b.PrependInt64(blocks[i].bodyLen)
		b.Pad(4)
		b.PrependInt32(blocks[i].metaLen)
		b.PrependInt64(blocks[i].offset)
	}
	return b.EndVector(len(blocks))
}

// schemaFB builds a Schema table of the types containers hold.
func schemaFB(b *flatbuffers.Builder, schema *arrow.Schema) (flatbuffers.UOffsetT, error) {
	fields := make([]flatbuffers.UOffsetT, schema.NumFields())
	for i, f := range schema.Fields() {
		name := b.CreateString(f.Name)
		typTag, typ, err := typeFB(b, f.Type)
		if err != nil {
			return 0, fmt.Errorf("column %q: %w", f.Name, err)
		}
		b.StartVector(4, 0, 4)
		children := b.EndVector(0)
		b.StartObject(7) // Field
		b.PrependUOffsetTSlot(0, name, 0)
		b.PrependBoolSlot(1, f.Nullable, false)
		b.PrependByteSlot(2, typTag, 0)
		b.PrependUOffsetTSlot(3, typ, 0)
		b.PrependUOffsetTSlot(5, children, 0)
		fields[i] = b.EndObject()
	}
	b.StartVector(4, len(fields), 4)
	for i := len(fields) - 1; i >= 0; i-- {
		b.PrependUOffsetT(fields[i])
	}
	vec := b.EndVector(len(fields))
	b.StartObject(4)            // Schema
	b.PrependInt16Slot(0, 0, 0) // little-endian
	b.PrependUOffsetTSlot(1, vec, 0)
	return b.EndObject(), nil
}

// typeFB builds the Type union member of a container column type.
func typeFB(b *flatbuffers.Builder, t arrow.DataType) (byte, flatbuffers.UOffsetT, error) {
	switch t.ID() {
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64, arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64:
		signed := t.ID() == arrow.INT8 || t.ID() == arrow.INT16 || t.ID() == arrow.INT32 || t.ID() == arrow.INT64
		b.StartObject(2) // Int
		b.PrependInt32Slot(0, int32(t.(arrow.FixedWidthDataType).BitWidth()), 0)
		b.PrependBoolSlot(1, signed, false)
		return fbTypeInt, b.EndObject(), nil
	case arrow.FLOAT32, arrow.FLOAT64:
		precision := int16(1) // SINGLE
		if t.ID() == arrow.FLOAT64 {
			precision = 2 // DOUBLE
		}
		b.StartObject(1) // FloatingPoint
		b.PrependInt16Slot(0, precision, 0)
		return fbTypeFloatingPoint, b.EndObject(), nil
	case arrow.BOOL:
		b.StartObject(0)
		return fbTypeBool, b.EndObject(), nil
	case arrow.STRING:
		b.StartObject(0)
		return fbTypeUtf8, b.EndObject(), nil
	case arrow.BINARY:
		b.StartObject(0)
		return fbTypeBinary, b.EndObject(), nil
	case arrow.DATE32:
		b.StartObject(1)            // Date
		b.PrependInt16Slot(0, 0, 1) // DAY; the default is MILLISECOND
		return fbTypeDate, b.EndObject(), nil
	case arrow.TIMESTAMP:
		ts := t.(*arrow.TimestampType)
		var tz flatbuffers.UOffsetT
		if ts.TimeZone != "" {
			tz = b.CreateString(ts.TimeZone)
		}
		b.StartObject(2) // Timestamp
		b.PrependInt16Slot(0, int16(ts.Unit), 0)
		if tz != 0 {
			b.PrependUOffsetTSlot(1, tz, 0)
		}
		return fbTypeTimestamp, b.EndObject(), nil
	}
	return 0, 0, fmt.Errorf("%w: %s", ErrUnsupportedType, t)
}
