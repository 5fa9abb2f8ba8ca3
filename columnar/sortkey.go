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
