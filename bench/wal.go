package main

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// walSuite is the outcome of the WAL suite.
type walSuite struct {
	Rows, Updates  int
	StrataRowBytes int     // full row image in strata's encoding
	PGRowBytes     float64 // average heap tuple size (pg_column_size)
	Cases          []walCase
}

// walFigure is bytes of WAL per update for one system and configuration.
type walFigure struct {
	BytesPerUpdate float64
	Skipped, Err   string
	Note           string
	// ByRecordType is PostgreSQL's WAL per update by record type
	// (pg_waldump --stats), when pg_waldump could read it.
	ByRecordType map[string]float64 `json:",omitempty"`
}

func (f walFigure) ok() bool { return f.Skipped == "" && f.Err == "" }

// PostgreSQL configurations of the WAL suite.
const (
	pgPlain = "PostgreSQL fillfactor 100"
	pgHOT   = "PostgreSQL fillfactor 50 (HOT)"
	pgFPI   = "PostgreSQL fillfactor 100, full-page images"
)

var pgWALConfigs = []struct {
	name            string
	fillfactor      int
	fullPageWrites  bool
	checkpointFirst bool
}{
	{pgPlain, 100, false, true},
	{pgHOT, 50, false, true},
	{pgFPI, 100, true, true},
}

// walCase is one workload's figures.
type walCase struct {
	Workload        walWorkload
	Strata          walFigure // delta records as strata writes them
	StrataFullImage walFigure // the same updates, had every record carried the full row
	StrataRate      float64   // durable updates per second, in process, group commit
	StrataFsyncs    uint64
	PG              map[string]walFigure
}

func runWALSuite(ctx context.Context, log *slog.Logger, sz sizes, dir string, p *peers) (*walSuite, error) {
	rows := generateWALRows(sz.WALRows, 7)
	suite := &walSuite{Rows: sz.WALRows, Updates: sz.WALUpdates, StrataRowBytes: strataRowBytes(rows[0])}

	var conn *pgx.Conn
	if p.pgOK() {
		var err error
		if conn, err = p.pg.connect(ctx); err != nil {
			return nil, err
		}
		defer conn.Close(context.Background())
	}

	for wi, w := range walWorkloads() {
		updates := generateWALUpdates(rows, w, sz.WALUpdates, uint64(100+wi))
		c := walCase{Workload: w, PG: map[string]walFigure{}}

		sf, err := strataWAL(ctx, log, filepath.Join(dir, "strata-"+w.Name), rows, updates)
		if err != nil {
			c.Strata = walFigure{Err: err.Error()}
			c.StrataFullImage = c.Strata
		} else {
			c.Strata = walFigure{BytesPerUpdate: sf.bytesPerUpdate}
			c.StrataFullImage = walFigure{BytesPerUpdate: sf.fullImageBytesPerUpdate}
			c.StrataRate = sf.updatesPerSecond
			c.StrataFsyncs = sf.fsyncs
		}
		log.Info("wal", "workload", w.Name, "system", sysStrata, "bytes_per_update", c.Strata.BytesPerUpdate, "err", c.Strata.Err)

		for _, cfg := range pgWALConfigs {
			if conn == nil {
				c.PG[cfg.name] = walFigure{Skipped: p.pgSkip}
				continue
			}
			f, rowBytes, err := postgresWAL(ctx, p.pg, conn, rows, updates, cfg.fillfactor, cfg.fullPageWrites)
			if err != nil {
				f = walFigure{Err: err.Error()}
			}
			if cfg.name == pgPlain && rowBytes > 0 {
				suite.PGRowBytes = rowBytes
			}
			c.PG[cfg.name] = f
			log.Info("wal", "workload", w.Name, "system", cfg.name, "bytes_per_update", f.BytesPerUpdate, "note", f.Note, "err", f.Err)
		}
		suite.Cases = append(suite.Cases, c)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	return suite, nil
}

// postgresWAL loads the rows into a fresh table u, runs the updates in
// transactions of 1000, and returns the WAL bytes per update measured with
// pg_current_wal_lsn before and after. Autovacuum is off for the table so
// that only the updates write WAL.
func postgresWAL(ctx context.Context, pg *pgCluster, conn *pgx.Conn, rows []walRow, updates []walUpdate, fillfactor int, fullPageWrites bool) (walFigure, float64, error) {
	fpw := "off"
	if fullPageWrites {
		fpw = "on"
	}
	err := pgExecAll(ctx, conn,
		"ALTER SYSTEM SET full_page_writes = "+fpw,
		"SELECT pg_reload_conf()",
		"DROP TABLE IF EXISTS u",
		fmt.Sprintf("CREATE TABLE u (id bigint PRIMARY KEY, i1 bigint, i2 bigint, i3 bigint, i4 bigint, s1 text, s2 text, s3 text) "+
			"WITH (fillfactor = %d, autovacuum_enabled = off)", fillfactor),
	)
	if err != nil {
		return walFigure{}, 0, err
	}
	n, err := conn.CopyFrom(ctx, pgx.Identifier{"u"}, append([]string{"id"}, walColumns...), pgx.CopyFromSlice(len(rows), func(i int) ([]any, error) {
		r := rows[i]
		return []any{r.id, r.ints[0], r.ints[1], r.ints[2], r.ints[3], r.s1, r.s2, r.s3}, nil
	}))
	if err != nil {
		return walFigure{}, 0, fmt.Errorf("copy into u: %w", err)
	}
	if int(n) != len(rows) {
		return walFigure{}, 0, fmt.Errorf("copy into u: %d rows, want %d", n, len(rows))
	}
	// The checkpoint also makes the checkpointer apply full_page_writes.
	if err := pgExecAll(ctx, conn, "VACUUM (FREEZE, ANALYZE) u", "CHECKPOINT"); err != nil {
		return walFigure{}, 0, err
	}
	var got string
	if err := conn.QueryRow(ctx, "SHOW full_page_writes").Scan(&got); err != nil || got != fpw {
		return walFigure{}, 0, fmt.Errorf("full_page_writes is %q, want %q (%v)", got, fpw, err)
	}
	var rowBytes float64
	if err := conn.QueryRow(ctx, "SELECT avg(pg_column_size(u.*))::float8 FROM u").Scan(&rowBytes); err != nil {
		return walFigure{}, 0, fmt.Errorf("row size: %w", err)
	}

	var before string
	if err := conn.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&before); err != nil {
		return walFigure{}, 0, fmt.Errorf("wal lsn: %w", err)
	}
	start := time.Now()
	const perTx = 1000
	for lo := 0; lo < len(updates); lo += perTx {
		if err := pgUpdateBatch(ctx, conn, updates[lo:min(lo+perTx, len(updates))]); err != nil {
			return walFigure{}, 0, err
		}
	}
	elapsed := time.Since(start)
	var bytes float64
	var after string
	if err := conn.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&after); err != nil {
		return walFigure{}, 0, fmt.Errorf("wal lsn: %w", err)
	}
	if err := conn.QueryRow(ctx, "SELECT pg_wal_lsn_diff($1::pg_lsn, $2::pg_lsn)::float8", after, before).Scan(&bytes); err != nil {
		return walFigure{}, 0, fmt.Errorf("wal lsn diff: %w", err)
	}
	f := walFigure{BytesPerUpdate: bytes / float64(len(updates))}
	if byType, err := pg.walRecordBytes(ctx, before, after); err == nil {
		f.ByRecordType = map[string]float64{}
		for t, b := range byType {
			f.ByRecordType[t] = b / float64(len(updates))
		}
	}
	f.Note = fmt.Sprintf("%.0f updates/s in transactions of %d", float64(len(updates))/elapsed.Seconds(), perTx)
	if hot, err := pgHOTShare(ctx, conn); err == nil {
		f.Note += fmt.Sprintf(", %.0f%% HOT", hot*100)
	}
	return f, rowBytes, nil
}

func pgUpdateBatch(ctx context.Context, conn *pgx.Conn, updates []walUpdate) error {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback(context.Background())
	b := &pgx.Batch{}
	for _, u := range updates {
		b.Queue(updateStatement(u.columns), u.values()...)
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("update batch: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// updateStatement is the UPDATE that sets the given columns of u; $1 is the key.
func updateStatement(cols []int) string {
	sets := make([]string, len(cols))
	for i, c := range cols {
		sets[i] = fmt.Sprintf("%s = $%d", walColumns[c], i+2)
	}
	return "UPDATE u SET " + strings.Join(sets, ", ") + " WHERE id = $1"
}

// pgHOTShare is the share of u's updates that were heap-only tuple updates.
func pgHOTShare(ctx context.Context, conn *pgx.Conn) (float64, error) {
	if _, err := conn.Exec(ctx, "SELECT pg_stat_force_next_flush()"); err != nil {
		return 0, err
	}
	if _, err := conn.Exec(ctx, "SELECT 1"); err != nil {
		return 0, err
	}
	var upd, hot int64
	if err := conn.QueryRow(ctx, "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'u'").Scan(&upd, &hot); err != nil {
		return 0, err
	}
	if upd == 0 {
		return 0, fmt.Errorf("no updates counted")
	}
	return float64(hot) / float64(upd), nil
}
