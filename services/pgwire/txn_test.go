package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// simpleExec runs sql as one simple Query and returns each statement's
// command tag (the error's SQLSTATE in its place) and the transaction
// status of the ReadyForQuery after it.
func simpleExec(t *testing.T, c *pgx.Conn, sql string) ([]string, byte) {
	t.Helper()
	res, err := c.PgConn().Exec(context.Background(), sql).ReadAll()
	var out []string
	for _, r := range res {
		if r.Err == nil {
			out = append(out, r.CommandTag.String())
		}
	}
	if err != nil {
		var pe *pgconn.PgError
		if !errors.As(err, &pe) {
			t.Fatalf("%s: %v", sql, err)
		}
		out = append(out, pe.Code)
	}
	return out, c.PgConn().TxStatus()
}

// An error inside a transaction block aborts it, as in PostgreSQL: every
// statement but ROLLBACK and COMMIT is refused with 25P02 until the block
// ends, ReadyForQuery says 'E', and COMMIT ends it as ROLLBACK (closing
// the block's cursors, WITH HOLD ones declared in it too). Outside a
// block an error leaves the session idle.
func TestFailedTransaction(t *testing.T) {
	s := startServer(t, nil)
	c := s.connect(t)
	query := testSQL + " ORDER BY k0"
	check := func(sql string, wantTags []string, wantStatus byte) {
		t.Helper()
		tags, status := simpleExec(t, c, sql)
		if !slices.Equal(tags, wantTags) || status != wantStatus {
			t.Fatalf("%s: %q, status %c; want %q, %c", sql, tags, status, wantTags, wantStatus)
		}
	}
	check("SELECT nope, rank() OVER (ORDER BY k0) AS r FROM t", []string{"42703"}, 'I')
	check("SELECT 1", []string{"SELECT 1"}, 'I')

	check("DECLARE held CURSOR WITH HOLD FOR "+query, []string{"DECLARE CURSOR"}, 'I')
	check("BEGIN", []string{"BEGIN"}, 'T')
	check("DECLARE c CURSOR FOR "+query, []string{"DECLARE CURSOR"}, 'T')
	check("DECLARE held2 CURSOR WITH HOLD FOR "+query, []string{"DECLARE CURSOR"}, 'T')
	check("SELECT nope, rank() OVER (ORDER BY k0) AS r FROM t", []string{"42703"}, 'E')
	for _, sql := range []string{"SELECT 1", "FETCH 1 FROM c", "SET application_name = 'x'", "SHOW application_name", "BEGIN",
		"SELECT nope FROM nowhere", query, "CLOSE c", "DECLARE d CURSOR FOR " + query} {
		check(sql, []string{"25P02"}, 'E')
	}
	// No savepoint can exist (SAVEPOINT is not supported): ROLLBACK TO
	// one is PostgreSQL's error for a name it does not know.
	check("ROLLBACK TO SAVEPOINT s", []string{"3B001"}, 'E')
	check("COMMIT", []string{"ROLLBACK"}, 'I')
	check("ROLLBACK TO SAVEPOINT s", []string{"25P01"}, 'I')
	// The block's cursors are gone, WITH HOLD ones declared in it too;
	// one held from before stays.
	check("FETCH 1 FROM c", []string{"34000"}, 'I')
	check("FETCH 1 FROM held2", []string{"34000"}, 'I')
	check("FETCH 1 FROM held", []string{"FETCH 1"}, 'I')
	check("CLOSE held", []string{"CLOSE CURSOR"}, 'I')

	// ROLLBACK ends it too; so does ROLLBACK within the same Query.
	check("BEGIN; SELECT 1/0 FROM t", []string{"BEGIN", "22012"}, 'E')
	check("ROLLBACK", []string{"ROLLBACK"}, 'I')
	check("BEGIN; SELECT nope FROM nowhere; SELECT 1", []string{"BEGIN", "42P01"}, 'E')
	check("SELECT 1; SELECT 2", []string{"25P02"}, 'E')
	check("ROLLBACK; SELECT 1", []string{"ROLLBACK", "SELECT 1"}, 'I')
	check("BEGIN; SELECT 1; COMMIT", []string{"BEGIN", "SELECT 1", "COMMIT"}, 'I')

	// pgx reads the status: a transaction whose statement failed does
	// not commit.
	ctx := context.Background()
	tx, err := c.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = tx.Exec(ctx, "SELECT nope, rank() OVER (ORDER BY k0) AS r FROM t")
	wantCode(t, err, "42703")
	_, err = tx.Exec(ctx, "SELECT 1")
	wantCode(t, err, "25P02")
	if err := tx.Commit(ctx); !errors.Is(err, pgx.ErrTxCommitRollback) {
		t.Fatalf("commit of a failed transaction: %v", err)
	}
	if st := c.PgConn().TxStatus(); st != 'I' {
		t.Fatalf("status %c after the commit", st)
	}

	// BEGIN in a block and COMMIT outside one warn, as PostgreSQL does.
	var notices []string
	nc, err := pgconn.Connect(ctx, s.url("strata", s.password, "disable"))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close(ctx)
	nc2, err := pgconn.ConnectConfig(ctx, func() *pgconn.Config {
		cfg, err := pgconn.ParseConfig(s.url("strata", s.password, "disable"))
		if err != nil {
			t.Fatal(err)
		}
		cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
			notices = append(notices, n.Severity+" "+n.Code+" "+n.Message)
		}
		return cfg
	}())
	if err != nil {
		t.Fatal(err)
	}
	defer nc2.Close(ctx)
	if _, err := nc2.Exec(ctx, "COMMIT; BEGIN; BEGIN; ROLLBACK; ROLLBACK").ReadAll(); err != nil {
		t.Fatal(err)
	}
	want := []string{"WARNING 25P01 there is no transaction in progress", "WARNING 25001 there is already a transaction in progress", "WARNING 25P01 there is no transaction in progress"}
	if !slices.Equal(notices, want) {
		t.Fatalf("notices %q, want %q", notices, want)
	}
}

// In the extended protocol an error inside a block is the same: the
// messages up to Sync are dropped, ReadyForQuery says 'E', and Parse,
// Bind and Execute of anything but ROLLBACK or COMMIT are refused with
// 25P02 until one ends the block.
func TestFailedTransactionExtended(t *testing.T) {
	s := startServer(t, nil)
	c := s.connect(t)
	ctx := context.Background()
	pc := c.PgConn()
	fe := pc.Frontend()
	// roundTrip sends msgs and a Sync and returns what came back, each
	// message as a word: its type, a command tag, an error's code.
	roundTrip := func(msgs ...pgproto3.FrontendMessage) []string {
		t.Helper()
		for _, m := range msgs {
			fe.Send(m)
		}
		fe.Send(&pgproto3.Sync{})
		if err := fe.Flush(); err != nil {
			t.Fatal(err)
		}
		var out []string
		for {
			msg, err := pc.ReceiveMessage(ctx)
			if err != nil {
				t.Fatal(err)
			}
			switch m := msg.(type) {
			case *pgproto3.ParseComplete:
				out = append(out, "parse")
			case *pgproto3.BindComplete:
				out = append(out, "bind")
			case *pgproto3.DataRow:
				out = append(out, "row")
			case *pgproto3.RowDescription:
				out = append(out, "desc")
			case *pgproto3.NoData:
				out = append(out, "nodata")
			case *pgproto3.CommandComplete:
				out = append(out, string(m.CommandTag))
			case *pgproto3.ErrorResponse:
				out = append(out, m.Code)
			case *pgproto3.ReadyForQuery:
				return append(out, "ready "+string(m.TxStatus))
			default:
				out = append(out, fmt.Sprintf("%T", msg))
			}
		}
	}
	stmt := func(sql string) []pgproto3.FrontendMessage {
		return []pgproto3.FrontendMessage{&pgproto3.Parse{Query: sql}, &pgproto3.Bind{}, &pgproto3.Execute{}}
	}
	check := func(got []string, want ...string) {
		t.Helper()
		if !slices.Equal(got, want) {
			t.Fatalf("%q, want %q", got, want)
		}
	}
	check(roundTrip(stmt("BEGIN")...), "parse", "bind", "BEGIN", "ready T")
	// The error, then a statement before Sync: dropped.
	check(roundTrip(append(stmt("SELECT 1/0 FROM t"), stmt("SELECT 1")...)...), "parse", "bind", "22012", "ready E")
	check(roundTrip(&pgproto3.Parse{Query: "SELECT 1"}), "25P02", "ready E")
	check(roundTrip(&pgproto3.Parse{Query: "SELECT 1"}, &pgproto3.Describe{ObjectType: 'S'}), "25P02", "ready E")
	// A statement prepared before the block: its Bind is refused.
	check(roundTrip(stmt("COMMIT")...), "parse", "bind", "ROLLBACK", "ready I")
	check(roundTrip(&pgproto3.Parse{Name: "one", Query: "SELECT 1"}), "parse", "ready I")
	check(roundTrip(stmt("BEGIN")...), "parse", "bind", "BEGIN", "ready T")
	if got := roundTrip(stmt("SELECT nope FROM nowhere")...); !slices.Contains(got, "42P01") || got[len(got)-1] != "ready E" {
		t.Fatalf("an unknown table in a block: %q", got)
	}
	check(roundTrip(&pgproto3.Bind{PreparedStatement: "one"}, &pgproto3.Execute{}), "25P02", "ready E")
	check(roundTrip(stmt("ROLLBACK")...), "parse", "bind", "ROLLBACK", "ready I")
	check(roundTrip(&pgproto3.Bind{PreparedStatement: "one"}, &pgproto3.Execute{}), "bind", "row", "SELECT 1", "ready I")
	// An error outside a block: idle after Sync.
	check(roundTrip(stmt("SELECT 1/0 FROM t")...), "parse", "bind", "22012", "ready I")
}
