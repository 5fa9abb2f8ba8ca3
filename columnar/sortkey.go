package columnar

import (
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
)

// SortColumn is one column of a sort order. The zero value beyond Name is
// ASC NULLS LAST, the SQL default for ascending order.
type SortColumn struct {
	Name       string `json:"name"`
	Desc       bool   `json:"desc,omitempty"`
	NullsFirst bool   `json:"nulls_first,omitempty"`
}

// SortKey is a projection's sort order, most significant column first.
type SortKey []SortColumn

// String renders the key in SQL: "a ASC NULLS LAST, b DESC NULLS FIRST".
func (k SortKey) String() string {
	var b strings.Builder
	for i, c := range k {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(c.Name)
		if c.Desc {
			b.WriteString(" DESC")
		} else {
			b.WriteString(" ASC")
		}
		if c.NullsFirst {
			b.WriteString(" NULLS FIRST")
		} else {
			b.WriteString(" NULLS LAST")
		}
	}
	return b.String()
}

// Equal reports whether two sort keys are the same.
func (k SortKey) Equal(o SortKey) bool {
	if len(k) != len(o) {
		return false
	}
	for i := range k {
		if k[i] != o[i] {
			return false
		}
	}
	return true
}

// Indices resolves the key's columns in schema, in key order. It fails if a
// column is missing, repeated, or of an unsupported type.
func (k SortKey) Indices(schema *arrow.Schema) ([]int, error) {
	idx := make([]int, len(k))
	seen := make(map[int]bool, len(k))
	for i, c := range k {
		found := schema.FieldIndices(c.Name)
		if len(found) != 1 {
			return nil, fmt.Errorf("%w: sort column %q is not in the schema", ErrSchemaMismatch, c.Name)
		}
		if seen[found[0]] {
			return nil, fmt.Errorf("%w: sort column %q repeated", ErrSchemaMismatch, c.Name)
		}
		seen[found[0]] = true
		if _, err := TypeName(schema.Field(found[0]).Type); err != nil {
			return nil, fmt.Errorf("sort column %q: %w", c.Name, err)
		}
		idx[i] = found[0]
	}
	return idx, nil
}

// ParseSortKey parses a sort key written as in SQL's ORDER BY:
//
//	a, b DESC, "odd name" ASC NULLS FIRST
//
// Each column is a name, optionally followed by ASC or DESC and then by
// NULLS FIRST or NULLS LAST; keywords are case-insensitive. A name may be
// double-quoted (a doubled quote inside stands for one) to hold spaces,
// commas or a keyword. NULLS defaults as in SQL (PostgreSQL): LAST for ASC,
// FIRST for DESC. A column may appear only once.
func ParseSortKey(s string) (SortKey, error) {
	toks, err := sortKeyTokens(s)
	if err != nil {
		return nil, fmt.Errorf("sort key %q: %w", s, err)
	}
	var key SortKey
	seen := make(map[string]bool)
	for len(toks) > 0 {
		name := toks[0]
		if name.comma || (!name.quoted && isSortKeyword(name.text)) {
			return nil, fmt.Errorf("sort key %q: want a column name at %q", s, name.text)
		}
		col := SortColumn{Name: name.text}
		toks = toks[1:]
		word := func(i int) string {
			if i < len(toks) && !toks[i].quoted && !toks[i].comma {
				return strings.ToUpper(toks[i].text)
			}
			return ""
		}
		switch word(0) {
		case "DESC":
			col.Desc, col.NullsFirst = true, true
			toks = toks[1:]
		case "ASC":
			toks = toks[1:]
		}
		if word(0) == "NULLS" {
			switch word(1) {
			case "FIRST":
				col.NullsFirst = true
			case "LAST":
				col.NullsFirst = false
			default:
				return nil, fmt.Errorf("sort key %q: want FIRST or LAST after NULLS of column %s", s, col.Name)
			}
			toks = toks[2:]
		}
		if seen[col.Name] {
			return nil, fmt.Errorf("sort key %q: column %s repeated", s, col.Name)
		}
		seen[col.Name] = true
		key = append(key, col)
		switch {
		case len(toks) == 0:
		case !toks[0].comma:
			return nil, fmt.Errorf("sort key %q: cannot read %q after column %s", s, toks[0].text, col.Name)
		case len(toks) == 1:
			return nil, fmt.Errorf("sort key %q: empty column after the last comma", s)
		default:
			toks = toks[1:]
		}
	}
	if len(key) == 0 {
		return nil, fmt.Errorf("sort key %q: no columns", s)
	}
	return key, nil
}

type sortKeyToken struct {
	text          string
	quoted, comma bool
}

func isSortKeyword(w string) bool {
	switch strings.ToUpper(w) {
	case "ASC", "DESC", "NULLS", "FIRST", "LAST":
		return true
	}
	return false
}

// sortKeyTokens splits s into words, double-quoted names and commas.
func sortKeyTokens(s string) ([]sortKeyToken, error) {
	var toks []sortKeyToken
	for i := 0; i < len(s); {
		switch c := s[i]; {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == ',':
			toks = append(toks, sortKeyToken{text: ",", comma: true})
			i++
		case c == '"':
			name, j, err := QuotedName(s, i)
			if err != nil {
				return nil, err
			}
			toks = append(toks, sortKeyToken{text: name, quoted: true})
			i = j
		default:
			j := i
			for j < len(s) && !strings.ContainsRune(" \t\n\r,\"", rune(s[j])) {
				j++
			}
			toks = append(toks, sortKeyToken{text: s[i:j]})
			i = j
		}
	}
	return toks, nil
}

// QuotedName reads the SQL double-quoted name that starts at s[i] (a
// doubled quote inside stands for one) and returns it and the offset just
// past its closing quote. An unterminated or empty name is an error that
// gives the offset.
func QuotedName(s string, i int) (name string, next int, err error) {
	var b strings.Builder
	j := i + 1
	for {
		k := strings.IndexByte(s[j:], '"')
		if k < 0 {
			return "", 0, fmt.Errorf("unterminated quoted name at offset %d", i)
		}
		b.WriteString(s[j : j+k])
		j += k + 1
		if j < len(s) && s[j] == '"' {
			b.WriteByte('"')
			j++
			continue
		}
		break
	}
	if b.Len() == 0 {
		return "", 0, fmt.Errorf("empty name in quotes at offset %d", i)
	}
	return b.String(), j, nil
}
