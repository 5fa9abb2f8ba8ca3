// Package natsembed runs a nats-server with JetStream inside this process:
// the scheduler's server when it is given no --nats, and the tests'.
//
// It is the only package that links the server (github.com/nats-io/
// nats-server/v2/server); the binaries that only connect to NATS (the
// workers and the CLI) import internal/natsutil and not this package, so
// they do not carry the server's code. The server's JetStream store is
// DATA/nats. With Options.Passwords it has one user per role of
// internal/natsutil (auth.go), with that role's permissions, given bcrypt
// hashes of the passwords only.
package natsembed

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/strata-db/strata/internal/natsutil"
)

// DefaultPort is the port an embedded server listens on unless told otherwise.
const DefaultPort = 4222

// RandomPort asks the embedded server to listen on a free port chosen by the
// kernel (for tests).
const RandomPort = -1

// Options configures an embedded nats-server.
type Options struct {
	// DataDir is the strata data directory; the JetStream store is kept
	// under DataDir/nats. Required.
	DataDir string
	// Host to listen on; default 127.0.0.1.
	Host string
	// Port to listen on; 0 means DefaultPort, RandomPort a free port.
	Port int
	// ServerName names the server in logs and monitoring; default "strata".
	ServerName string
	// MaxMemory and MaxStore bound JetStream's memory and file storage;
	// zero lets the server decide.
	MaxMemory, MaxStore int64
	// ReadyTimeout bounds the wait for the server to accept clients;
	// default 10s.
	ReadyTimeout time.Duration
	// Logger receives the server's log lines; nil silences them.
	Logger *slog.Logger

	// Passwords, when not nil, turns authentication on: one user per role
	// (role -> password, see natsutil.EnsureCredentials) with the role's
	// permissions (natsutil.RoleGrant). Nil leaves the server open, for
	// tests.
	Passwords map[string]string
	// TLSCert and TLSKey are the server's certificate and key (PEM); with
	// them clients must connect with TLS. TLSCA, when set, is the CA bundle
	// client certificates are verified against (mutual TLS).
	TLSCert, TLSKey, TLSCA string
}

// Server is a running in-process nats-server with JetStream enabled.
type Server struct {
	srv  *server.Server
	tls  bool
	host string // as given
}

// Start starts a nats-server inside this process and waits until it
// accepts clients. It refuses to listen beyond loopback without TLS and
// authentication.
func Start(opts Options) (*Server, error) {
	if opts.DataDir == "" {
		return nil, errors.New("natsembed: data directory is required")
	}
	if opts.Host == "" {
		opts.Host = "127.0.0.1"
	}
	if opts.Port == 0 {
		opts.Port = DefaultPort
	}
	if opts.ServerName == "" {
		opts.ServerName = "strata"
	}
	if opts.ReadyTimeout <= 0 {
		opts.ReadyTimeout = 10 * time.Second
	}
	if (opts.TLSCert == "") != (opts.TLSKey == "") {
		return nil, errors.New("natsembed: TLS needs both a certificate and a key")
	}
	if opts.TLSCert == "" && !natsutil.IsLoopback(opts.Host) {
		return nil, fmt.Errorf("natsembed: refusing to listen on %s without TLS: give a certificate and key, or listen on 127.0.0.1", opts.Host)
	}
	if opts.Passwords == nil && !natsutil.IsLoopback(opts.Host) {
		return nil, fmt.Errorf("natsembed: refusing to listen on %s without authentication", opts.Host)
	}
	sopts := &server.Options{
		ServerName:         opts.ServerName,
		Host:               opts.Host,
		Port:               opts.Port,
		JetStream:          true,
		StoreDir:           filepath.Join(opts.DataDir, "nats"),
		JetStreamMaxMemory: opts.MaxMemory,
		JetStreamMaxStore:  opts.MaxStore,
		NoSigs:             true,
		HTTPPort:           0,
	}
	if opts.Passwords != nil {
		users, err := Users(opts.Passwords)
		if err != nil {
			return nil, err
		}
		if len(users) == 0 {
			return nil, errors.New("natsembed: authentication on but no users")
		}
		sopts.Users = users
	}
	if opts.TLSCert != "" {
		tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: opts.TLSCert, KeyFile: opts.TLSKey, CaFile: opts.TLSCA, Verify: opts.TLSCA != ""})
		if err != nil {
			return nil, fmt.Errorf("natsembed: TLS: %w", err)
		}
		sopts.TLSConfig = tc
		sopts.TLS = true
		sopts.TLSVerify = opts.TLSCA != ""
		sopts.TLSTimeout = 2
	}
	srv, err := server.NewServer(sopts)
	if err != nil {
		return nil, fmt.Errorf("natsembed: server on %s:%d: %w", opts.Host, opts.Port, err)
	}
	if opts.Logger != nil {
		srv.SetLoggerV2(&serverLogger{log: opts.Logger.With("component", "nats-server")}, false, false, false)
	}
	go srv.Start()
	if !srv.ReadyForConnections(opts.ReadyTimeout) {
		srv.Shutdown()
		return nil, fmt.Errorf("natsembed: server on %s:%d not ready after %v (port in use?)", opts.Host, opts.Port, opts.ReadyTimeout)
	}
	return &Server{srv: srv, tls: opts.TLSCert != "", host: opts.Host}, nil
}

// ClientURL is the URL clients connect to, such as nats://127.0.0.1:4222
// (tls://... when the server has a certificate). A server listening on
// every address (0.0.0.0, ::) is given as its loopback address, which a
// certificate for this host names.
func (e *Server) ClientURL() string {
	u := e.srv.ClientURL()
	addr, ok := e.srv.Addr().(*net.TCPAddr)
	if !ok || !addr.IP.IsUnspecified() {
		return u
	}
	scheme := "nats"
	if e.tls {
		scheme = "tls"
	}
	host := "127.0.0.1"
	if ip := net.ParseIP(strings.Trim(e.host, "[]")); ip != nil && ip.To4() == nil {
		host = "[::1]"
	}
	return fmt.Sprintf("%s://%s:%d", scheme, host, addr.Port)
}

// Shutdown stops the server and waits until it has stopped.
func (e *Server) Shutdown() {
	e.srv.Shutdown()
	e.srv.WaitForShutdown()
}

// serverLogger adapts slog to nats-server's Logger interface.
type serverLogger struct{ log *slog.Logger }

func (l *serverLogger) Noticef(format string, v ...any) { l.log.Info(fmt.Sprintf(format, v...)) }
func (l *serverLogger) Warnf(format string, v ...any)   { l.log.Warn(fmt.Sprintf(format, v...)) }
func (l *serverLogger) Fatalf(format string, v ...any)  { l.log.Error(fmt.Sprintf(format, v...)) }
func (l *serverLogger) Errorf(format string, v ...any)  { l.log.Error(fmt.Sprintf(format, v...)) }
func (l *serverLogger) Debugf(format string, v ...any)  { l.log.Debug(fmt.Sprintf(format, v...)) }
func (l *serverLogger) Tracef(format string, v ...any)  {}
