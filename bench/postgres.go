package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// pgCluster is a throwaway PostgreSQL cluster: initdb into a temporary
// directory, listening only on a unix socket in that directory, stopped and
// removed by Stop. PostgreSQL refuses to run as root, so when the bench runs
// as root the server runs as the "postgres" user.
type pgCluster struct {
	bin     string // directory of initdb, pg_ctl, postgres
	dir     string // temporary directory: data/, the socket, server.log
	cred    *syscall.Credential
	log     *slog.Logger
	version string
	running bool
}

const pgPort = 5432 // the socket lives in a private directory, so the port never clashes

// pgSettings are appended to postgresql.conf. Memory is generous so PostgreSQL
// sorts in memory like the other systems; JIT is off because compiling costs
// more than it saves on these queries; checkpoints are pushed out so that the
// WAL figures measure the updates, not a checkpoint's page images.
var pgSettings = []string{
	"listen_addresses = ''",
	"shared_buffers = '1GB'",
	"work_mem = '1GB'",
	"maintenance_work_mem = '1GB'",
	"max_wal_size = '16GB'",
	"checkpoint_timeout = '1h'",
	"jit = off",
	"logging_collector = off",
}

// startPostgres creates and starts a cluster with the server binaries in bin.
func startPostgres(ctx context.Context, log *slog.Logger, bin string) (*pgCluster, error) {
	for _, b := range []string{"initdb", "pg_ctl", "postgres"} {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			return nil, fmt.Errorf("postgresql server binary %s not found in %s (run `make bench-deps`)", b, bin)
		}
	}
	c := &pgCluster{bin: bin, log: log}
	dir, err := os.MkdirTemp("", "strata-bench-pg-")
	if err != nil {
		return nil, fmt.Errorf("postgres temp dir: %w", err)
	}
	c.dir = dir
	if os.Geteuid() == 0 {
		cred, err := postgresCredential()
		if err != nil {
			c.remove()
			return nil, err
		}
		c.cred = cred
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			c.remove()
			return nil, fmt.Errorf("chown %s to the postgres user: %w", dir, err)
		}
	}
	if err := c.initdb(ctx); err != nil {
		c.remove()
		return nil, err
	}
	if err := c.start(ctx); err != nil {
		c.remove()
		return nil, err
	}
	conn, err := c.connect(ctx)
	if err != nil {
		c.Stop()
		return nil, err
	}
	defer conn.Close(ctx)
	if err := conn.QueryRow(ctx, "SHOW server_version").Scan(&c.version); err != nil {
		c.Stop()
		return nil, fmt.Errorf("postgres version: %w", err)
	}
	c.version = "PostgreSQL " + c.version
	return c, nil
}

// postgresCredential is the uid/gid of the "postgres" user, which Debian's
// packages create.
func postgresCredential() (*syscall.Credential, error) {
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root and there is no postgres user to run the server as: %w", err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("postgres uid %q: %w", u.Uid, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("postgres gid %q: %w", u.Gid, err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func (c *pgCluster) dataDir() string { return filepath.Join(c.dir, "data") }

// command runs one of the server binaries as the server's user.
func (c *pgCluster) command(ctx context.Context, name string, args ...string) error {
	_, err := c.output(ctx, name, args...)
	return err
}

// output runs one of the server binaries as the server's user and returns
// what it printed.
func (c *pgCluster) output(ctx context.Context, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(c.bin, name), args...)
	cmd.Dir = c.dir
	cmd.Env = []string{"PATH=" + c.bin + ":/usr/bin:/bin", "LC_ALL=C", "HOME=" + c.dir}
	// Its own process group: a Ctrl-C at the terminal reaches the bench, which
	// then stops the server in order, instead of reaching the server directly.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: c.cred}
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(lastLines(out.String(), 8)))
	}
	return out.String(), nil
}

// walRecordBytes breaks the WAL between two LSNs down by record type
// (pg_waldump --stats=record): combined bytes (record and page images) of
// each type, such as "Heap/HOT_UPDATE" or "Heap2/PRUNE".
func (c *pgCluster) walRecordBytes(ctx context.Context, from, to string) (map[string]float64, error) {
	out, err := c.output(ctx, "pg_waldump", "-p", filepath.Join(c.dataDir(), "pg_wal"), "-s", from, "-e", to, "--stats=record")
	if err != nil {
		return nil, err
	}
	return parseWALStats(out)
}

// parseWALStats reads pg_waldump's --stats table:
//
//	Type        N (%)   Record size (%)   FPI size (%)   Combined size (%)
//	Heap/HOT_UPDATE  20000 ( 60.22)  1469573 ( 64.89)  0 ( 0.00)  1469573 ( 64.89)
func parseWALStats(out string) (map[string]float64, error) {
	stats := map[string]float64{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(strings.NewReplacer("(", " ", ")", " ").Replace(line))
		if len(f) != 9 || !strings.Contains(f[0], "/") {
			continue
		}
		combined, err := strconv.ParseFloat(f[7], 64)
		if err != nil {
			continue
		}
		stats[f[0]] = combined
	}
	if len(stats) == 0 {
		return nil, fmt.Errorf("pg_waldump printed no record statistics: %s", lastLines(out, 4))
	}
	return stats, nil
}

func (c *pgCluster) initdb(ctx context.Context) error {
	if err := c.command(ctx, "initdb", "-D", c.dataDir(), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync"); err != nil {
		return err
	}
	conf := filepath.Join(c.dataDir(), "postgresql.conf")
	f, err := os.OpenFile(conf, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", conf, err)
	}
	lines := append([]string{"", "# strata bench"}, pgSettings...)
	lines = append(lines, fmt.Sprintf("unix_socket_directories = '%s'", c.dir), fmt.Sprintf("port = %d", pgPort))
	if _, err := f.WriteString(strings.Join(lines, "\n") + "\n"); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", conf, err)
	}
	return f.Close()
}

func (c *pgCluster) start(ctx context.Context) error {
	if err := c.command(ctx, "pg_ctl", "-D", c.dataDir(), "-l", filepath.Join(c.dir, "server.log"), "-w", "-t", "60", "start"); err != nil {
		if b, rerr := os.ReadFile(filepath.Join(c.dir, "server.log")); rerr == nil {
			err = fmt.Errorf("%w; server.log: %s", err, strings.TrimSpace(lastLines(string(b), 8)))
		}
		return err
	}
	c.running = true
	return nil
}

// connString is a libpq connection string for the cluster's unix socket.
func (c *pgCluster) connString() string {
	return fmt.Sprintf("host=%s port=%d user=postgres dbname=postgres sslmode=disable", c.dir, pgPort)
}

func (c *pgCluster) connect(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.Connect(ctx, c.connString())
	if err != nil {
		return nil, fmt.Errorf("connect to postgres at %s: %w", c.dir, err)
	}
	return conn, nil
}

// Stop stops the server and removes the cluster's directory.
func (c *pgCluster) Stop() error {
	var err error
	if c.running {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		err = c.command(ctx, "pg_ctl", "-D", c.dataDir(), "-m", "fast", "-w", "stop")
		c.running = false
	}
	if rerr := c.remove(); err == nil {
		err = rerr
	}
	return err
}

func (c *pgCluster) remove() error {
	if c.dir == "" {
		return nil
	}
	err := os.RemoveAll(c.dir)
	c.dir = ""
	return err
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// pgFetch runs a query and returns every row in canonical form.
func pgFetch(ctx context.Context, conn *pgx.Conn, query string) (*resultSet, error) {
	rows, err := conn.Query(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("postgres: %s: %w", firstLine(query), err)
	}
	defer rows.Close()
	rs := newResultSet(len(rows.FieldDescriptions()))
	row := make([]value, rs.cols)
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			return nil, fmt.Errorf("postgres: %s: %w", firstLine(query), err)
		}
		for i, v := range vals {
			cv, err := canonical(v)
			if err != nil {
				return nil, fmt.Errorf("postgres: column %s: %w", rows.FieldDescriptions()[i].Name, err)
			}
			row[i] = cv
		}
		rs.append(row)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: %s: %w", firstLine(query), err)
	}
	return rs, nil
}

// pgExecAll runs statements in order, stopping at the first error.
func pgExecAll(ctx context.Context, conn *pgx.Conn, stmts ...string) error {
	for _, s := range stmts {
		if _, err := conn.Exec(ctx, s); err != nil {
			var pgErr interface{ SQLState() string }
			if errors.As(err, &pgErr) {
				return fmt.Errorf("postgres: %s: %w (SQLSTATE %s)", firstLine(s), err, pgErr.SQLState())
			}
			return fmt.Errorf("postgres: %s: %w", firstLine(s), err)
		}
	}
	return nil
}

// isQueryCanceled reports whether err is PostgreSQL's query_canceled
// (57014), which statement_timeout raises.
func isQueryCanceled(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "57014"
}
