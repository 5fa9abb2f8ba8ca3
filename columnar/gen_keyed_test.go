package columnar

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
)

// TestGenerateKeyed: a keyed generated load is keyed on k0, unique over
// all its containers and never NULL, each container still spanning the
// whole key range and sorted; its rows are version 0 and not deleted, so
// resolving its versions drops nothing.
func TestGenerateKeyed(t *testing.T) {
	data := t.TempDir()
	const k, n = 5, 3000
	ms, err := Generate(data, GenOptions{Columns: 6, KeyColumns: 2, Containers: k, RowsPerContainer: n, BlockRows: 512, Seed: 3, Keyed: true})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int64]bool{}
	var cs []*Container
	for c, m := range ms {
		dir := ContainerDir(data, "t", "p", m.ID)
		if err := Verify(dir); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(m.PrimaryKey, []string{"k0"}) || len(m.Schema) != 8 || m.Schema[0].Nullable {
			t.Fatalf("container %s: key %v, %d columns, k0 nullable %v", m.ID, m.PrimaryKey, len(m.Schema), m.Schema[0].Nullable)
		}
		ct, err := Open(dir, OpenOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, ct)
		k0 := readColumn(t, ct, 0).(*array.Int64)
		vers, dels := readColumn(t, ct, 6).(*array.Int64), readColumn(t, ct, 7).(*array.Boolean)
		lo, hi := k0.Value(0), k0.Value(k0.Len()-1)
		if lo >= int64(k*n/4) || hi < int64(k*2*n*3/4) {
			t.Errorf("container %d spans %d..%d, not the key range 0..%d", c, lo, hi, 2*n*k)
		}
		for i := range k0.Len() {
			v := k0.Value(i)
			if k0.IsNull(i) || seen[v] || v%k != int64(c) {
				t.Fatalf("container %d row %d: k0 %d null %v, seen before %v", c, i, v, k0.IsNull(i), seen[v])
			}
			seen[v] = true
			if vers.Value(i) != 0 || dels.Value(i) {
				t.Fatalf("container %d row %d: version %d, deleted %v", c, i, vers.Value(i), dels.Value(i))
			}
		}
	}
	res, err := Superseded(context.Background(), cs, ResolveOptions{})
	if err != nil || res.Live != k*n || res.DroppedRows() != 0 {
		t.Fatalf("resolved: %+v, %v; want every row live", res, err)
	}
}

// TestGenerateAccounts: pgbench_accounts as pgbench -i writes it, in
// containers of consecutive aids.
func TestGenerateAccounts(t *testing.T) {
	data := t.TempDir()
	const accounts = 250_123
	ms, err := GenerateAccounts(data, AccountsOptions{Accounts: accounts, RowsPerContainer: 100_000, BlockRows: 4096, FirstID: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 3 || ms[0].ID != "c0003" || ms[2].Rows != 50_123 {
		t.Fatalf("%d containers, first %s, last of %d rows", len(ms), ms[0].ID, ms[len(ms)-1].Rows)
	}
	want := int64(1)
	for _, m := range ms {
		dir := ContainerDir(data, "pgbench_accounts", "p", m.ID)
		if err := Verify(dir); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(m.PrimaryKey, []string{"aid"}) || !m.SortKey.Equal(SortKey{{Name: "aid"}}) {
			t.Fatalf("container %s: primary key %v, sort key %s", m.ID, m.PrimaryKey, m.SortKey)
		}
		c, err := Open(dir, OpenOptions{})
		if err != nil {
			t.Fatal(err)
		}
		aid, bid := readColumn(t, c, 0).(*array.Int64), readColumn(t, c, 1).(*array.Int64)
		bal, filler := readColumn(t, c, 2).(*array.Int64), readColumn(t, c, 3).(*array.String)
		vers, dels := readColumn(t, c, 4).(*array.Int64), readColumn(t, c, 5).(*array.Boolean)
		for i := range aid.Len() {
			a := aid.Value(i)
			if a != want || bid.Value(i) != (a-1)/100000+1 || bal.Value(i) != 0 || filler.Value(i) != strings.Repeat(" ", 84) ||
				vers.Value(i) != 0 || dels.Value(i) {
				t.Fatalf("container %s row %d: aid %d bid %d abalance %d filler %q version %d deleted %v; want aid %d",
					m.ID, i, a, bid.Value(i), bal.Value(i), filler.Value(i), vers.Value(i), dels.Value(i), want)
			}
			want++
		}
	}
	if want != accounts+1 {
		t.Fatalf("aids up to %d, want %d", want-1, accounts)
	}
	if _, err := GenerateAccounts(data, AccountsOptions{}); err == nil {
		t.Fatal("no accounts: generated")
	}
}
