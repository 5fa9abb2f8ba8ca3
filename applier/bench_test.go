package applier

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/strata-db/strata/columnar"
	"github.com/strata-db/strata/messages"
)

// BenchmarkBatchWrite writes a flush's batch of pgbench_accounts changes
// (50,000 distinct accounts of a million, the whole row each) as a
// container: what a walwriter does every half second at 100,000
// changes/s.
func BenchmarkBatchWrite(b *testing.B) {
	m := &columnar.Manifest{Version: columnar.ManifestVersion, Table: "pgbench_accounts", Projection: "p",
		PrimaryKey: []string{"aid"}, SortKey: columnar.SortKey{{Name: "aid"}}}
	schema := arrow.NewSchema(append([]arrow.Field{
		{Name: "aid", Type: arrow.PrimitiveTypes.Int64},
		{Name: "bid", Type: arrow.PrimitiveTypes.Int64},
		{Name: "abalance", Type: arrow.PrimitiveTypes.Int64},
		{Name: "filler", Type: arrow.BinaryTypes.String},
	}, columnar.ChangeFields()...), nil)
	cols, err := columnar.SchemaColumns(schema)
	if err != nil {
		b.Fatal(err)
	}
	m.Schema = cols
	tbl, err := NewTable(m)
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	batch := tbl.NewBatch()
	filler := strings.Repeat(" ", 84)
	for i, aid := range rng.Perm(1000000)[:50000] {
		row, err := messages.EncodeRow(tbl.Types(), []any{int64(aid + 1), int64(aid/100000 + 1), int64(rng.IntN(10000) - 5000), filler})
		if err != nil {
			b.Fatal(err)
		}
		key, _ := messages.EncodeRow(tbl.KeyTypes(), []any{int64(aid + 1)})
		c, err := tbl.Change(&messages.UpdateEvent{EventID: "e", Table: tbl.Name, Columns: tbl.Types(), Key: key, NewRow: row, Op: messages.OpUpdate})
		if err != nil {
			b.Fatal(err)
		}
		c.Version = uint64(1000 + i)
		batch.Add(c)
	}
	dir := b.TempDir()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		id := fmt.Sprintf("c%06d", i)
		if _, err := batch.Write(filepath.Join(dir, id), id, WriteOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(batch.Len()), "ns/change")
}
