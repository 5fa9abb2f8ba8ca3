package main

import (
	"math/rand/v2"
)

// The WAL suite's table, the same on both systems:
//
//	u (id bigint PRIMARY KEY, i1..i4 bigint, s1 text (30 chars), s2, s3 text (90 chars))
//
// about 260 bytes a row. The four int columns are bigint on both sides so
// that the rows carry the same bytes.
const (
	walShortText = 30
	walLongText  = 90
)

// walColumns are u's columns after id, in order.
var walColumns = []string{"i1", "i2", "i3", "i4", "s1", "s2", "s3"}

// walRow is one version of a row of u.
type walRow struct {
	id     int64
	ints   [4]int64
	s1     string
	s2, s3 string
}

// walWorkload is one kind of update: which columns of u an update sets.
type walWorkload struct {
	Name    string
	Title   string
	Columns []int // indexes into walColumns; nil for the mix
}

func walWorkloads() []walWorkload {
	return []walWorkload{
		{Name: "int1", Title: "one int column", Columns: []int{0}},
		{Name: "text1", Title: "one 30-character text column", Columns: []int{4}},
		{Name: "half", Title: "half the columns (i1, i2, s1, s2)", Columns: []int{0, 1, 4, 5}},
		{Name: "all", Title: "every column but the key", Columns: []int{0, 1, 2, 3, 4, 5, 6}},
		{Name: "mix", Title: "a mix: 50% int1, 30% text1, 15% half, 5% all"},
	}
}

// walUpdate is one update: the key and the columns it sets to new values.
type walUpdate struct {
	key     int
	columns []int
	row     walRow // the row after the update
}

// walData is the generated table and one workload's update list.
type walData struct {
	rows    []walRow
	updates []walUpdate
}

const walAlphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 "

func randomText(r *rand.Rand, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = walAlphabet[r.IntN(len(walAlphabet))]
	}
	return string(b)
}

func generateWALRows(n int, seed uint64) []walRow {
	r := rand.New(rand.NewPCG(seed, 1))
	rows := make([]walRow, n)
	for i := range rows {
		rows[i] = walRow{
			id:   int64(i),
			ints: [4]int64{r.Int64N(1 << 31), r.Int64N(1 << 31), r.Int64N(1 << 31), r.Int64N(1 << 31)},
			s1:   randomText(r, walShortText),
			s2:   randomText(r, walLongText),
			s3:   randomText(r, walLongText),
		}
	}
	return rows
}

// generateWALUpdates draws updates of uniformly random keys; each carries
// the full row after it, computed from the rows before it.
func generateWALUpdates(rows []walRow, w walWorkload, n int, seed uint64) []walUpdate {
	r := rand.New(rand.NewPCG(seed, 2))
	cur := make([]walRow, len(rows))
	copy(cur, rows)
	all := walWorkloads()
	out := make([]walUpdate, n)
	for i := range out {
		cols := w.Columns
		if cols == nil { // the mix
			switch p := r.IntN(100); {
			case p < 50:
				cols = all[0].Columns
			case p < 80:
				cols = all[1].Columns
			case p < 95:
				cols = all[2].Columns
			default:
				cols = all[3].Columns
			}
		}
		k := r.IntN(len(rows))
		row := cur[k]
		for _, c := range cols {
			switch c {
			case 0, 1, 2, 3:
				row.ints[c] = r.Int64N(1 << 31)
			case 4:
				row.s1 = randomText(r, walShortText)
			case 5:
				row.s2 = randomText(r, walLongText)
			case 6:
				row.s3 = randomText(r, walLongText)
			}
		}
		cur[k] = row
		out[i] = walUpdate{key: k, columns: cols, row: row}
	}
	return out
}

// values returns the new values of the updated columns, in column order.
func (u walUpdate) values() []any {
	v := make([]any, 0, len(u.columns)+1)
	v = append(v, u.row.id)
	for _, c := range u.columns {
		switch c {
		case 0, 1, 2, 3:
			v = append(v, u.row.ints[c])
		case 4:
			v = append(v, u.row.s1)
		case 5:
			v = append(v, u.row.s2)
		case 6:
			v = append(v, u.row.s3)
		}
	}
	return v
}
