// Command pgwire is strata's SQL front door: it speaks the PostgreSQL
// wire protocol (v3) to psql, drivers and BI tools and is a client of the
// scheduler like the strata CLI. A SELECT with window functions becomes a
// window job (windower/sqlparse, strata.api.window); pgwire waits for its
// done event and streams the result container's rows to the client block
// by block. INSERT, UPDATE and DELETE of a keyed table become change
// events on strata.updates.<table> (dml.go, changes.go); the statement
// returns once the walwriter has made them visible. It keeps no state a
// restart loses: start more of them to serve more clients.
//
// Clients authenticate with SCRAM-SHA-256 against the users of
// DATA/pg-auth (package internal/pgauth); the first start makes the user
// strata with a random password in DATA/pg-auth/strata.password.
// `strata auth pg-user NAME --role read|write` adds users.
//
// It listens on --pg-listen (default 127.0.0.1:5433); an address off
// loopback needs TLS (--pg-tls-cert and --pg-tls-key), and with TLS every
// client must use it. It connects to NATS as its own role, pgwire
// (DATA/nats-auth/pgwire.password, or --nats-user/--nats-password-file):
// window, operations and catalog requests, job events, change events and
// the walwriter's ack floor, and no admin request. A data directory made
// before that role has no pgwire.password until the scheduler starts
// again; meanwhile pgwire connects as cli-admin, as it used to, and logs
// a warning saying so. It reads result containers from the data
// directory (--data), or with --store URL from the store, each fetched
// into a temporary directory that is removed once its rows are sent.
//
// Usage:
//
//	pgwire [--nats URLS] [--data DIR] [--http 127.0.0.1:9105] [--pg-listen 127.0.0.1:5433]
//	       [--pg-tls-cert FILE --pg-tls-key FILE] [--pg-max-connections 100] [--pool general] [--store URL]
//
// Every flag has an environment variable: --pg-listen is STRATA_PG_LISTEN.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"time"

	"github.com/strata-db/strata/internal/apiclient"
	"github.com/strata-db/strata/internal/natsutil"
	"github.com/strata-db/strata/internal/pgauth"
	"github.com/strata-db/strata/internal/service"
	"github.com/strata-db/strata/internal/storeflags"
)

func main() { service.Main("pgwire", run) }

func run(args []string) error {
	b := service.NewBinary("pgwire", "127.0.0.1:9105")
	fs := b.Flags
	listen := fs.String("pg-listen", "127.0.0.1:5433", "listen address for PostgreSQL clients (off loopback only with --pg-tls-cert/--pg-tls-key)")
	certFile := fs.String("pg-tls-cert", "", "TLS certificate for clients (PEM); with it, clients must use TLS")
	keyFile := fs.String("pg-tls-key", "", "TLS key for clients (PEM)")
	pool := fs.String("pool", "", "resource pool window queries run in (default: the scheduler's, general)")
	maxConns := fs.Int("pg-max-connections", 100, "sessions at once; more are refused with SQLSTATE 53300 (0: no limit)")
	var sf storeflags.Flags
	sf.Register(fs, false)
	reqTimeout := fs.Duration("request-timeout", 30*time.Second, "how long to wait for one reply of the scheduler")
	changeTimeout := fs.Duration("change-timeout", 5*time.Minute, "how long an INSERT, UPDATE or DELETE waits until its changes are visible")
	settle := fs.Duration("settle-timeout", 5*time.Minute, "how long to keep asking the scheduler about a job request whose reply does not come")
	if err := b.Start(args); err != nil {
		return err
	}
	var tlsConf *tls.Config
	if *certFile != "" || *keyFile != "" {
		if *certFile == "" || *keyFile == "" {
			return fmt.Errorf("%w: --pg-tls-cert and --pg-tls-key go together", service.ErrUsage)
		}
		cert, err := tls.LoadX509KeyPair(*certFile, *keyFile)
		if err != nil {
			return fmt.Errorf("--pg-tls-cert/--pg-tls-key: %w", err)
		}
		tlsConf = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	if err := checkListen(*listen, tlsConf != nil); err != nil {
		return fmt.Errorf("%w: --pg-listen: %v", service.ErrUsage, err)
	}
	made, err := pgauth.EnsureDefault(b.DataDir)
	if err != nil {
		return err
	}
	if made {
		b.Log.Info("made user strata; its password is in the file", "file", pgauth.PasswordFile(b.DataDir, pgauth.DefaultUser))
	}
	if legacyRole(&b.Common) {
		b.Role = natsutil.RoleCLIAdmin
		b.Log.Warn("no password of the pgwire role in the data directory (made before it had one): connecting to NATS as cli-admin, as before; restart the scheduler to make it, then pgwire",
			"missing", natsutil.PasswordFile(b.DataDir, natsutil.RolePgwire))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := b.Connect(ctx); err != nil {
		return err
	}
	defer b.NC.Close()
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", *listen, err)
	}
	st, err := sf.OpenStore(ctx)
	if err != nil {
		return err
	}
	if st != nil {
		defer st.Close()
	}
	sched := &schedulerClient{nc: b.NC, api: &apiclient.Client{NC: b.NC, Timeout: *reqTimeout, Settle: *settle},
		dataDir: b.DataDir, pool: *pool, st: st, changeTimeout: *changeTimeout, log: b.Log}
	srv := newServer(b.Log, sched, b.DataDir, tlsConf, b.Runner.Registry())
	srv.maxSessions = *maxConns
	b.Log.Info("listening for PostgreSQL clients", "addr", ln.Addr().String(), "tls", tlsConf != nil)
	b.Runner.Add(func() error { return srv.serve(ln) }, func(error) {
		ln.Close()
		srv.closeAll()
	})
	return b.Run()
}

// legacyRole reports whether pgwire must connect as cli-admin: given no
// credentials of its own, it finds no pgwire.password in the data
// directory but a cli-admin.password (a data directory made before pgwire
// had a role, whose scheduler has not started since: the scheduler makes
// a missing role's password on every start, and its server knows the
// role only then).
func legacyRole(c *service.Common) bool {
	if c.Creds != "" || c.User != "" || c.Password != "" || c.PasswordFile != "" || c.DataDir == "" {
		return false
	}
	if _, err := os.Stat(natsutil.PasswordFile(c.DataDir, natsutil.RolePgwire)); !errors.Is(err, fs.ErrNotExist) {
		return false
	}
	_, err := os.Stat(natsutil.PasswordFile(c.DataDir, natsutil.RoleCLIAdmin))
	return err == nil
}

// checkListen refuses an address off loopback without TLS: passwords
// are never sent (SCRAM), but the rows would be in clear.
func checkListen(addr string, withTLS bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if withTLS {
		return nil
	}
	if host == "localhost" {
		return nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return errors.New(addr + " is not a loopback address: give --pg-tls-cert and --pg-tls-key to listen on it")
	}
	return nil
}
