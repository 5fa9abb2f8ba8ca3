package walwriter

import (
	"testing"

	"github.com/strata-db/strata/messages"
)

// TestColumnCodes pins the segment byte of every column type (the package
// doc's list): a change here is a format change.
func TestColumnCodes(t *testing.T) {
	want := []messages.RowType{messages.RowInt64, messages.RowFloat64, messages.RowBool, messages.RowText, messages.RowBytes, messages.RowTimestamp, messages.RowDate}
	for i, rt := range want {
		code := byte(i + 1)
		if got := columnCode(rt); got != code {
			t.Errorf("columnCode(%s) = %d, want %d", rt, got, code)
		}
		if got, ok := columnType(code); !ok || got != rt {
			t.Errorf("columnType(%d) = %q, %v; want %s", code, got, ok, rt)
		}
	}
	for _, code := range []byte{0, 8, 255} {
		if got, ok := columnType(code); ok {
			t.Errorf("columnType(%d) = %q, want none", code, got)
		}
	}
	if got := columnCode("decimal"); got != 0 {
		t.Errorf("columnCode(decimal) = %d, want 0", got)
	}
}
