package columnar

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Take returns a new array of arr's rows idx[0], idx[1], ... in that order,
// allocated from mem. It supports the container column types.
func Take(mem memory.Allocator, arr arrow.Array, idx []int) (arrow.Array, error) {
	b := array.NewBuilder(mem, arr.DataType())
	defer b.Release()
	b.Reserve(len(idx))
	nulls := arr.NullN() > 0
	switch a := arr.(type) {
	case *array.Int8:
		takeFixed(b.(*array.Int8Builder), a.Int8Values(), a, idx, nulls)
	case *array.Int16:
		takeFixed(b.(*array.Int16Builder), a.Int16Values(), a, idx, nulls)
	case *array.Int32:
		takeFixed(b.(*array.Int32Builder), a.Int32Values(), a, idx, nulls)
	case *array.Int64:
		takeFixed(b.(*array.Int64Builder), a.Int64Values(), a, idx, nulls)
	case *array.Uint8:
		takeFixed(b.(*array.Uint8Builder), a.Uint8Values(), a, idx, nulls)
	case *array.Uint16:
		takeFixed(b.(*array.Uint16Builder), a.Uint16Values(), a, idx, nulls)
	case *array.Uint32:
		takeFixed(b.(*array.Uint32Builder), a.Uint32Values(), a, idx, nulls)
	case *array.Uint64:
		takeFixed(b.(*array.Uint64Builder), a.Uint64Values(), a, idx, nulls)
	case *array.Float32:
		takeFixed(b.(*array.Float32Builder), a.Float32Values(), a, idx, nulls)
	case *array.Float64:
		takeFixed(b.(*array.Float64Builder), a.Float64Values(), a, idx, nulls)
	case *array.Date32:
		takeFixed(b.(*array.Date32Builder), a.Date32Values(), a, idx, nulls)
	case *array.Timestamp:
		takeFixed(b.(*array.TimestampBuilder), a.TimestampValues(), a, idx, nulls)
	case *array.Boolean:
		bb := b.(*array.BooleanBuilder)
		for _, i := range idx {
			if nulls && a.IsNull(i) {
				bb.AppendNull()
			} else {
				bb.UnsafeAppend(a.Value(i))
			}
		}
	case *array.String:
		sb := b.(*array.StringBuilder)
		vo, data := bytesOffsets(a)
		var total int
		for _, i := range idx {
			total += int(vo[i+1] - vo[i])
		}
		sb.ReserveData(total)
		for _, i := range idx {
			if nulls && a.IsNull(i) {
				sb.AppendNull()
			} else {
				sb.BinaryBuilder.Append(data[vo[i]:vo[i+1]])
			}
		}
	case *array.Binary:
		bb := b.(*array.BinaryBuilder)
		vo, data := bytesOffsets(a)
		var total int
		for _, i := range idx {
			total += int(vo[i+1] - vo[i])
		}
		bb.ReserveData(total)
		for _, i := range idx {
			if nulls && a.IsNull(i) {
				bb.AppendNull()
			} else {
				bb.Append(data[vo[i]:vo[i+1]])
			}
		}
	default:
		return nil, fmt.Errorf("take: %w: %s", ErrUnsupportedType, arr.DataType())
	}
	return b.NewArray(), nil
}

type fixedBuilder[T any] interface {
	UnsafeAppend(T)
	AppendNull()
}

func takeFixed[T any](b fixedBuilder[T], vals []T, a arrow.Array, idx []int, nulls bool) {
	for _, i := range idx {
		if nulls && a.IsNull(i) {
			b.AppendNull()
		} else {
			b.UnsafeAppend(vals[i])
		}
	}
}
