package main

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// A SCROLL cursor moves as PostgreSQL's: FETCH NEXT, PRIOR, FIRST, LAST,
// ABSOLUTE n (from the end for n < 0), RELATIVE n, FORWARD and BACKWARD n
// and ALL, FETCH 0 for the current row, and MOVE in each of them, across
// the result's blocks (of 100 rows) both ways, in either protocol; a
// cursor without SCROLL reads forward only (55000), FETCH ABSOLUTE ahead
// of it and FETCH 0 where it has no row included.
func TestScrollCursor(t *testing.T) {
	s := startServer(t, nil)
	c := s.connect(t)
	ctx := context.Background()
	query := testSQL + " ORDER BY k0"
	all, err := c.Query(ctx, query)
	if err != nil {
		t.Fatal(err)
	}
	want := rowsOf(t, all)
	if len(want) != 600 {
		t.Fatalf("%d rows", len(want))
	}
	// rows i..j (1-based) of the result, going down when i > j.
	span := func(i, j int) []string {
		var out []string
		for k := i; ; {
			out = append(out, want[k-1])
			if k == j {
				return out
			}
			if i < j {
				k++
			} else {
				k--
			}
		}
	}
	type step struct {
		sql  string
		rows []string
		tag  string
	}
	steps := []step{
		{"FETCH NEXT FROM sc", span(1, 1), "FETCH 1"},
		{"FETCH PRIOR FROM sc", nil, "FETCH 0"},
		{"FETCH PRIOR FROM sc", nil, "FETCH 0"},
		{"FETCH FORWARD 150 FROM sc", span(1, 150), "FETCH 150"},
		{"FETCH BACKWARD 120 FROM sc", span(149, 30), "FETCH 120"},
		{"FETCH 0 FROM sc", span(30, 30), "FETCH 1"},
		{"FETCH RELATIVE 0 FROM sc", span(30, 30), "FETCH 1"},
		{"MOVE 0 IN sc", nil, "MOVE 1"},
		{"FETCH LAST FROM sc", span(600, 600), "FETCH 1"},
		{"FETCH NEXT FROM sc", nil, "FETCH 0"},
		{"FETCH 0 FROM sc", nil, "FETCH 0"},
		{"FETCH PRIOR FROM sc", span(600, 600), "FETCH 1"},
		{"FETCH FIRST FROM sc", span(1, 1), "FETCH 1"},
		{"FETCH ABSOLUTE 333 FROM sc", span(333, 333), "FETCH 1"},
		{"FETCH ABSOLUTE 101 FROM sc", span(101, 101), "FETCH 1"},
		{"FETCH ABSOLUTE -2 FROM sc", span(599, 599), "FETCH 1"},
		{"FETCH ABSOLUTE -600 FROM sc", span(1, 1), "FETCH 1"},
		{"FETCH ABSOLUTE -601 FROM sc", nil, "FETCH 0"},
		{"FETCH NEXT FROM sc", span(1, 1), "FETCH 1"},
		{"FETCH ABSOLUTE 601 FROM sc", nil, "FETCH 0"},
		{"FETCH PRIOR FROM sc", span(600, 600), "FETCH 1"},
		{"FETCH ABSOLUTE 0 FROM sc", nil, "FETCH 0"},
		{"FETCH RELATIVE 250 FROM sc", span(250, 250), "FETCH 1"},
		{"FETCH RELATIVE -50 FROM sc", span(200, 200), "FETCH 1"},
		{"FETCH RELATIVE -500 FROM sc", nil, "FETCH 0"},
		{"FETCH RELATIVE 2 FROM sc", span(2, 2), "FETCH 1"},
		{"FETCH FORWARD -1 FROM sc", span(1, 1), "FETCH 1"},
		{"MOVE FORWARD 400 IN sc", nil, "MOVE 400"},
		{"FETCH 2 FROM sc", span(402, 403), "FETCH 2"},
		{"MOVE BACKWARD ALL IN sc", nil, "MOVE 402"},
		{"MOVE LAST IN sc", nil, "MOVE 1"},
		{"MOVE ABSOLUTE 10 IN sc", nil, "MOVE 1"},
		{"MOVE RELATIVE -3 IN sc", nil, "MOVE 1"},
		{"FETCH NEXT FROM sc", span(8, 8), "FETCH 1"},
		{"FETCH BACKWARD -3 FROM sc", span(9, 11), "FETCH 3"},
		{"FETCH ALL FROM sc", span(12, 600), "FETCH 589"},
		{"FETCH BACKWARD ALL FROM sc", span(600, 1), "FETCH 600"},
		{"MOVE FORWARD ALL IN sc", nil, "MOVE 600"},
		{"FETCH BACKWARD 3 FROM sc", span(600, 598), "FETCH 3"},
	}
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeCacheStatement} {
		t.Run(mode.String(), func(t *testing.T) {
			for _, sql := range []string{"BEGIN", "DECLARE sc SCROLL CURSOR FOR " + query} {
				if _, err := c.Exec(ctx, sql, mode); err != nil {
					t.Fatalf("%s: %v", sql, err)
				}
			}
			for _, st := range steps {
				rows, err := c.Query(ctx, st.sql, mode)
				if err != nil {
					t.Fatalf("%s: %v", st.sql, err)
				}
				got := rowsOf(t, rows)
				if tag := rows.CommandTag().String(); tag != st.tag || !slices.Equal(got, st.rows) {
					t.Fatalf("%s: %q and %d rows %.200q; want %q and %d rows %.200q", st.sql, tag, len(got), got, st.tag, len(st.rows), st.rows)
				}
			}
			if _, err := c.Exec(ctx, "COMMIT", mode); err != nil {
				t.Fatal(err)
			}
		})
	}

	// Without SCROLL: forward only, as PostgreSQL's cursors over a
	// window query.
	for _, tc := range []struct {
		before []string
		sql    string
		tag    string
		code   string
	}{
		{nil, "FETCH ABSOLUTE 5 FROM f", "FETCH 1", ""},
		{[]string{"FETCH 3 FROM f"}, "FETCH ABSOLUTE 10 FROM f", "FETCH 1", ""},
		{[]string{"FETCH 3 FROM f"}, "FETCH RELATIVE 4 FROM f", "FETCH 1", ""},
		{nil, "FETCH 0 FROM f", "FETCH 0", ""},
		{nil, "FETCH ABSOLUTE 0 FROM f", "FETCH 0", ""},
		{[]string{"FETCH 3 FROM f"}, "MOVE 0 IN f", "MOVE 1", ""},
		{[]string{"FETCH 3 FROM f"}, "FETCH 0 FROM f", "", "55000"},
		{[]string{"FETCH 3 FROM f"}, "FETCH ABSOLUTE 1 FROM f", "", "55000"},
		{[]string{"FETCH 3 FROM f"}, "FETCH ABSOLUTE 0 FROM f", "", "55000"},
		{[]string{"FETCH 10 FROM f"}, "FETCH ABSOLUTE 4 FROM f", "", "55000"},
		{nil, "FETCH BACKWARD 0 FROM f", "", "55000"},
		{[]string{"FETCH ALL FROM f"}, "FETCH ABSOLUTE 601 FROM f", "", "55000"},
		{[]string{"FETCH ALL FROM f"}, "FETCH 5 FROM f", "FETCH 0", ""},
	} {
		name := strings.Join(append(slices.Clone(tc.before), tc.sql), "; ")
		if _, err := c.Exec(ctx, "BEGIN; DECLARE f CURSOR FOR "+query); err != nil {
			t.Fatal(err)
		}
		for _, sql := range tc.before {
			if _, err := c.Exec(ctx, sql); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
		tag, err := c.Exec(ctx, tc.sql)
		if tc.code != "" {
			if err == nil {
				t.Fatalf("%s: %q, want %s", name, tag, tc.code)
			}
			wantCode(t, err, tc.code)
		} else if err != nil || tag.String() != tc.tag {
			t.Fatalf("%s: %q %v, want %q", name, tag, err, tc.tag)
		}
		if _, err := c.Exec(ctx, "ROLLBACK"); err != nil {
			t.Fatal(err)
		}
	}
}
