package messages

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math"
	"reflect"
	"sort"
	"testing"
)

var allTypes = []RowType{RowInt64, RowFloat64, RowBool, RowText, RowBytes, RowTimestamp, RowDate}

func TestEncodeRowGolden(t *testing.T) {
	cases := []struct {
		name   string
		types  []RowType
		values []any
		hex    string
	}{
		{"int64 -1, 0, 1", []RowType{RowInt64, RowInt64, RowInt64}, []any{int64(-1), int64(0), int64(1)},
			"097fffffffffffffff" + "098000000000000000" + "098000000000000001"},
		{"nulls and empties", []RowType{RowText, RowText, RowBytes}, []any{nil, "", []byte{}}, "00" + "01" + "01"},
		{"float64 -1.5 and 2", []RowType{RowFloat64, RowFloat64}, []any{-1.5, 2.0}, "09" + "4007ffffffffffff" + "09" + "c000000000000000"},
		{"bool, text, date", []RowType{RowBool, RowText, RowDate}, []any{true, "hé", int32(-2)}, "0201" + "0468c3a9" + "057ffffffe"},
		{"timestamp", []RowType{RowTimestamp}, []any{int64(1)}, "098000000000000001"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := EncodeRow(c.types, c.values)
			if err != nil {
				t.Fatal(err)
			}
			if h := hex.EncodeToString(got); h != c.hex {
				t.Fatalf("encoded %s, want %s", h, c.hex)
			}
			back, err := DecodeRow(c.types, got)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(back, c.values) {
				t.Fatalf("decoded %#v, want %#v", back, c.values)
			}
		})
	}
}

func TestEncodeRowOrderPreserving(t *testing.T) {
	ints := []int64{math.MinInt64, -5, -1, 0, 1, 7, math.MaxInt64}
	floats := []float64{math.Inf(-1), -2.5, -0.0001, 0, 0.5, 3, math.Inf(1)}
	var encInts, encFloats [][]byte
	for i := range ints {
		a, _ := EncodeRow([]RowType{RowInt64}, []any{ints[i]})
		b, _ := EncodeRow([]RowType{RowFloat64}, []any{floats[i]})
		encInts, encFloats = append(encInts, a), append(encFloats, b)
	}
	for _, enc := range [][][]byte{encInts, encFloats} {
		if !sort.SliceIsSorted(enc, func(i, j int) bool { return bytes.Compare(enc[i], enc[j]) < 0 }) {
			t.Errorf("encodings not in value order: %x", enc)
		}
	}
}

func TestRowErrors(t *testing.T) {
	cases := []struct {
		name  string
		types []RowType
		data  string
	}{
		{"too short", []RowType{RowInt64}, "0900"},
		{"wrong int width", []RowType{RowInt64}, "0400000000"},
		{"bad bool", []RowType{RowBool}, "0202"},
		{"bad utf8", []RowType{RowText}, "03fffe"},
		{"trailing bytes", []RowType{RowText}, "0161"},
		{"missing column", []RowType{RowText, RowText}, "00"},
		{"unknown type", []RowType{"decimal"}, "0161"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			data, _ := hex.DecodeString(c.data)
			if _, err := SplitRow(c.types, data); !errors.Is(err, ErrBadRow) {
				t.Fatalf("got %v, want ErrBadRow", err)
			}
		})
	}
	if _, err := EncodeRow([]RowType{RowInt64}, []any{"x"}); !errors.Is(err, ErrBadRow) {
		t.Errorf("encoding a string as int64: %v", err)
	}
	if _, err := EncodeRow([]RowType{RowInt64}, nil); !errors.Is(err, ErrBadRow) {
		t.Errorf("encoding too few values: %v", err)
	}
}

func FuzzRow(f *testing.F) {
	f.Add([]byte{0, 1, 2}, []byte("\x09\x80\x00\x00\x00\x00\x00\x00\x01\x00\x02a"))
	f.Add([]byte{3, 6}, []byte("\x02\x01\x05\x7f\xff\xff\xfe"))
	f.Fuzz(func(t *testing.T, typeIdx, data []byte) {
		if len(typeIdx) > 64 {
			return
		}
		types := make([]RowType, len(typeIdx))
		for i, b := range typeIdx {
			types[i] = allTypes[int(b)%len(allTypes)]
		}
		vals, err := DecodeRow(types, data)
		if err != nil {
			return
		}
		// A row that decodes re-encodes to the same bytes.
		again, err := EncodeRow(types, vals)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		if !bytes.Equal(again, data) {
			t.Fatalf("re-encoded %x, want %x", again, data)
		}
	})
}
