package columnar

import (
	"testing"
)

func TestParseSortKey(t *testing.T) {
	tests := []struct {
		in   string
		want SortKey
		bad  bool
	}{
		{in: "a", want: SortKey{{Name: "a"}}},
		{in: "a, b DESC NULLS FIRST", want: SortKey{{Name: "a"}, {Name: "b", Desc: true, NullsFirst: true}}},
		{in: "a, b desc", want: SortKey{{Name: "a"}, {Name: "b", Desc: true, NullsFirst: true}}},
		{in: "a ASC NULLS FIRST,b DESC NULLS LAST", want: SortKey{{Name: "a", NullsFirst: true}, {Name: "b", Desc: true}}},
		{in: "a nulls first", want: SortKey{{Name: "a", NullsFirst: true}}},
		{in: "  x\tASC ,\ny  ", want: SortKey{{Name: "x"}, {Name: "y"}}},
		{in: `"odd, name" DESC, "desc"`, want: SortKey{{Name: "odd, name", Desc: true, NullsFirst: true}, {Name: "desc"}}},
		{in: `"say ""hi"""`, want: SortKey{{Name: `say "hi"`}}},
		{in: "", bad: true},
		{in: "  ", bad: true},
		{in: "a,", bad: true},
		{in: ",a", bad: true},
		{in: "a,,b", bad: true},
		{in: "a sideways", bad: true},
		{in: "a b", bad: true},
		{in: "a DESC ASC", bad: true},
		{in: "a NULLS", bad: true},
		{in: "a NULLS MIDDLE", bad: true},
		{in: "DESC", bad: true},
		{in: "a, A, a", bad: true},
		{in: `"unterminated`, bad: true},
		{in: `""`, bad: true},
	}
	for _, tt := range tests {
		got, err := ParseSortKey(tt.in)
		if tt.bad {
			if err == nil {
				t.Errorf("ParseSortKey(%q) = %v, want an error", tt.in, got)
			}
			continue
		}
		if err != nil || !got.Equal(tt.want) {
			t.Errorf("ParseSortKey(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}

// TestParseSortKeyString checks that a key's String parses back to it.
func TestParseSortKeyString(t *testing.T) {
	for _, k := range []SortKey{
		{{Name: "a"}},
		{{Name: "a", Desc: true}, {Name: "b", NullsFirst: true}, {Name: "c", Desc: true, NullsFirst: true}},
	} {
		got, err := ParseSortKey(k.String())
		if err != nil || !got.Equal(k) {
			t.Errorf("ParseSortKey(%q) = %v, %v", k.String(), got, err)
		}
	}
}

func FuzzParseSortKey(f *testing.F) {
	for _, s := range []string{"a", "a, b DESC NULLS FIRST", `"x""y" asc nulls last`, "a,,", `"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, err := ParseSortKey(s)
		if err != nil {
			return
		}
		if len(k) == 0 {
			t.Fatalf("%q: empty key without an error", s)
		}
		for _, c := range k {
			if c.Name == "" {
				t.Fatalf("%q: empty column name", s)
			}
		}
	})
}
