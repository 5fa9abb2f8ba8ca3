package messages

import (
	"errors"
	"strings"
	"testing"
)

func TestValidName(t *testing.T) {
	for _, ok := range []string{"t", "T_1", "_x", "c0001", "m00000007", "a.b", "a-b", "t_window_3", strings.Repeat("a", MaxNameLen)} {
		if err := ValidName(ok); err != nil {
			t.Errorf("ValidName(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", ".", "..", ".hidden", "-rf", "--", "a/b", `a\b`, "../x", "a\x00b", "a b", "é", "a:b",
		"$G", "~", strings.Repeat("a", MaxNameLen+1), "/abs", "a/../b", "\n"} {
		err := ValidName(bad)
		if err == nil {
			t.Errorf("ValidName(%q) accepted", bad)
		} else if !errors.Is(err, ErrInvalidName) {
			t.Errorf("ValidName(%q) = %v, not ErrInvalidName", bad, err)
		}
	}
	if ValidTable("nats") == nil {
		t.Error("ValidTable accepts the NATS store's directory")
	}
}

func TestRequestsValidateNames(t *testing.T) {
	for name, m := range map[string]interface{ Validate() error }{
		"register -rf":          &RegisterRequest{Table: "-rf", Projection: "p", Containers: []ContainerRef{{Table: "-rf", Projection: "p", ID: "c"}}},
		"register container ..": &RegisterRequest{Table: "t", Projection: "p", Containers: []ContainerRef{{Table: "t", Projection: "p", ID: ".."}}},
		"mergeout traversal":    &MergeoutRequest{Table: "../t"},
		"mergeout projection":   &MergeoutRequest{Table: "t", Projection: "-p"},
		"window table":          &WindowRequest{Query: WindowQuery{Table: "../../x", Select: []SelectItem{{Alias: "a", Expr: &Expr{Column: "a"}}}}},
		"operations table":      &OperationsRequest{Table: "a/b"},
		"update table":          &UpdateEvent{EventID: "e", Table: "-rf", Columns: []RowType{"int64"}, Key: []byte{1}, NewRow: []byte{0}},
	} {
		if err := m.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
