package integration

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/strata-db/strata/columnar"
)

// tableRows is a container's rows as strings (one per row, every column's
// value joined), with each row's normalized sort key.
type tableRows struct {
	keys [][]byte
	rows []string
}

// readRows reads every row of the container in dir.
func readRows(t *testing.T, dir string) tableRows {
	t.Helper()
	c, err := columnar.Open(dir, columnar.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var enc *columnar.KeyEncoder // nil for an unsorted container (a window result)
	if len(c.SortKey()) > 0 {
		if enc, err = columnar.NewKeyEncoder(c.Schema(), c.SortKey()); err != nil {
			t.Fatal(err)
		}
	}
	all := make([]int, c.Schema().NumFields())
	for i := range all {
		all[i] = i
	}
	br, err := c.OpenColumns(all)
	if err != nil {
		t.Fatal(err)
	}
	defer br.Close()
	var out tableRows
	var sb strings.Builder
	for {
		rec, err := br.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("read %s: %v", dir, err)
		}
		keyCols := make([]arrow.Array, len(c.KeyColumns()))
		for i, k := range c.KeyColumns() {
			keyCols[i] = rec.Column(k)
		}
		for r := 0; r < int(rec.NumRows()); r++ {
			if enc != nil {
				out.keys = append(out.keys, enc.AppendRow(nil, keyCols, r))
			}
			sb.Reset()
			for col := 0; col < int(rec.NumCols()); col++ {
				if col > 0 {
					sb.WriteByte('|')
				}
				if rec.Column(col).IsNull(r) {
					sb.WriteString("NULL")
				} else {
					sb.WriteString(rec.Column(col).ValueStr(r))
				}
			}
			out.rows = append(out.rows, sb.String())
		}
		rec.Release()
	}
	if int64(len(out.rows)) != c.Rows() {
		t.Fatalf("%s: read %d rows, manifest says %d", dir, len(out.rows), c.Rows())
	}
	return out
}

// referenceMerge is what merging dirs must give: every row of every
// input, stably sorted by sort key (rows with equal keys keep input order).
func referenceMerge(t *testing.T, dirs []string) []string {
	t.Helper()
	type row struct {
		key []byte
		row string
	}
	var all []row
	for _, d := range dirs {
		tr := readRows(t, d)
		for i := range tr.rows {
			all = append(all, row{tr.keys[i], tr.rows[i]})
		}
	}
	sort.SliceStable(all, func(i, j int) bool { return bytes.Compare(all[i].key, all[j].key) < 0 })
	out := make([]string, len(all))
	for i, r := range all {
		out[i] = r.row
	}
	return out
}

// checksum is a digest of rows in order.
func checksum(rows []string) string {
	h := sha256.New()
	for _, r := range rows {
		h.Write([]byte(r))
		h.Write([]byte{'\n'})
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// compareRows fails the test at the first row where got differs from want.
func compareRows(t *testing.T, what string, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d rows, want %d", what, len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s: row %d differs:\n got %.200s\nwant %.200s", what, i, got[i], want[i])
		}
	}
}

// containers lists the committed containers of a projection and any other
// entries (temporary directories) beside them.
func containers(t *testing.T, dataDir, table, projection string) (committed, other []string) {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(dataDir, table, projection))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if _, err := columnar.ReadManifest(filepath.Join(dataDir, table, projection, e.Name())); err == nil {
			committed = append(committed, e.Name())
		} else {
			other = append(other, e.Name())
		}
	}
	return committed, other
}

// generate writes a deterministic table of k containers.
func generate(t *testing.T, dataDir string, opts columnar.GenOptions) []*columnar.Manifest {
	t.Helper()
	ms, err := columnar.Generate(dataDir, opts)
	if err != nil {
		t.Fatal(err)
	}
	return ms
}
