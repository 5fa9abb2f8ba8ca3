package main

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
	pg "github.com/pganalyze/pg_query_go/v6"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-db/strata/applier"
	"github.com/strata-db/strata/internal/pgauth"
	"github.com/strata-db/strata/messages"
)

// serverVersion is what server_version says: psql and drivers read the
// major version to choose their catalog queries.
const serverVersion = "15.0 (strata)"

// maxMessage bounds a client message (a query text, a Bind).
const maxMessage = 16 << 20

func defaultSettings() map[string]string {
	return map[string]string{
		"server_version": serverVersion, "server_version_num": "150000", "server_encoding": "UTF8", "client_encoding": "UTF8",
		"datestyle": "ISO, MDY", "integer_datetimes": "on", "standard_conforming_strings": "on", "timezone": "UTC",
		"intervalstyle": "postgres", "application_name": "", "is_superuser": "off", "statement_timeout": "0",
		"search_path": "public", "transaction_isolation": "read committed", "extra_float_digits": "1",
	}
}

// reported are the settings sent as ParameterStatus at the start, with
// the names PostgreSQL gives them.
var reported = []struct{ key, name string }{
	{"server_version", "server_version"}, {"server_encoding", "server_encoding"}, {"client_encoding", "client_encoding"},
	{"datestyle", "DateStyle"}, {"integer_datetimes", "integer_datetimes"}, {"standard_conforming_strings", "standard_conforming_strings"},
	{"timezone", "TimeZone"}, {"intervalstyle", "IntervalStyle"}, {"application_name", "application_name"}, {"is_superuser", "is_superuser"},
}

// backend is what a session needs of strata: the tables with their
// columns, and window queries run to a result container (the scheduler,
// through schedulerClient; a test's own).
type backend interface {
	tables(ctx context.Context, only string) ([]tableInfo, error)
	// runWindow returns the result container's directory and a func to
	// call once it has been read.
	runWindow(ctx context.Context, q *messages.WindowQuery) (dir string, release func(), err error)
	// keyedTable describes a keyed table (a *pgError 42P01 if there is no
	// such table, 0A000 if it has no primary key).
	keyedTable(ctx context.Context, table string) (*applier.Table, error)
	// currentRows returns the current row of each of keys (row encodings
	// of the key columns) that has one, by key.
	currentRows(ctx context.Context, t *applier.Table, keys [][]byte) (map[string][]any, error)
	// applyChanges sends change events of one table and returns once
	// they are visible to queries.
	applyChanges(ctx context.Context, evs []*messages.UpdateEvent) error
}

type server struct {
	log     *slog.Logger
	sched   backend
	schemas schemaCache // the tables' columns queries are checked against
	dataDir string
	tls     *tls.Config
	secret  []byte // for the salts of users that do not exist

	maxSessions int // 0: no limit

	mu       sync.Mutex
	sessions map[uint32]*session
	nextPID  uint32
	conns    map[net.Conn]bool

	connections prometheus.Gauge
	queries     *prometheus.CounterVec
}

func newServer(log *slog.Logger, sched backend, dataDir string, tlsConf *tls.Config, reg prometheus.Registerer) *server {
	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	s := &server{log: log, sched: sched, dataDir: dataDir, tls: tlsConf, secret: secret,
		sessions: map[uint32]*session{}, conns: map[net.Conn]bool{}, nextPID: 1000,
		connections: prometheus.NewGauge(prometheus.GaugeOpts{Name: "strata_pgwire_connections", Help: "Open client connections.", ConstLabels: prometheus.Labels{"service": "pgwire"}}),
		queries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strata_pgwire_queries_total", Help: "Statements run, by outcome (ok or the SQLSTATE class).",
			ConstLabels: prometheus.Labels{"service": "pgwire"}}, []string{"outcome"}),
	}
	s.queries.WithLabelValues("ok")
	if reg != nil {
		reg.MustRegister(s.connections, s.queries)
	}
	return s
}

// serve accepts connections until ln is closed.
func (s *server) serve(ln net.Listener) error {
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			return err
		}
		s.mu.Lock()
		s.conns[c] = true
		s.mu.Unlock()
		s.connections.Inc()
		go func() {
			defer func() {
				if r := recover(); r != nil {
					s.log.Error("connection panicked", "panic", r)
				}
				c.Close()
				s.mu.Lock()
				delete(s.conns, c)
				s.mu.Unlock()
				s.connections.Dec()
			}()
			s.handle(c)
		}()
	}
}

// closeAll closes every client connection.
func (s *server) closeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		c.Close()
	}
}

// session is one authenticated client connection.
type session struct {
	srv      *server
	conn     net.Conn
	raw      net.Conn // the TCP connection under conn (TLS): watched for the client going away
	be       *pgproto3.Backend
	pid      uint32
	secret   []byte
	user     *pgauth.User
	database string
	settings map[string]string
	// txn is the transaction status ReadyForQuery reports: 'I' idle, 'T'
	// in a transaction block, 'E' in a block an error failed (every
	// statement but COMMIT and ROLLBACK refused until it ends).
	txn byte

	stmts   map[string]*prepared
	portals map[string]*portal
	cursors map[string]*namedCursor // DECLAREd (cursors.go)

	cancelMu sync.Mutex
	cancel   context.CancelCauseFunc // of the running statement

	row pgproto3.DataRow // sendDataRow's
}

func (s *session) resetSettings() {
	app := s.settings["application_name"]
	s.settings = defaultSettings()
	s.settings["application_name"] = app
}

var errCanceled = errors.New("canceling statement due to user request")
var errTimeout = errors.New("canceling statement due to statement timeout")
var errDisconnected = errors.New("canceling statement: the client disconnected")

// peerPoll is how often a session whose query's job runs looks whether
// its client went away.
const peerPoll = 250 * time.Millisecond

// watchPeer returns ctx, also ended (errDisconnected) when the client
// closes its connection, and the func that stops watching. While a
// query's job runs the session reads nothing, so only this finds a
// client gone, and its job is cancelled (schedulerClient.runWindow).
func (s *session) watchPeer(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	if s.raw == nil {
		return ctx, func() { cancel(nil) }
	}
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(peerPoll)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				if peerClosed(s.raw) {
					cancel(errDisconnected)
					return
				}
			}
		}
	}()
	return ctx, func() {
		close(done)
		cancel(nil)
	}
}

// startup is what the startup phase decided.
type startup struct {
	params map[string]string
	cancel *pgproto3.CancelRequest
	tls    bool
}

// readStartup reads the startup packets: an SSLRequest (answered S with
// TLS, N without; the TLS handshake then), a GSSEncRequest (answered N),
// and then a StartupMessage or a CancelRequest. upgrade makes the TLS
// connection; nil when TLS is not configured.
func readStartup(rw io.ReadWriter, upgrade func() (io.ReadWriter, error)) (*startup, io.ReadWriter, error) {
	st := &startup{}
	for range 3 {
		be := pgproto3.NewBackend(rw, rw)
		msg, err := be.ReceiveStartupMessage()
		if err != nil {
			return nil, rw, err
		}
		switch m := msg.(type) {
		case *pgproto3.SSLRequest:
			if upgrade == nil || st.tls {
				if _, err := rw.Write([]byte{'N'}); err != nil {
					return nil, rw, err
				}
				continue
			}
			if _, err := rw.Write([]byte{'S'}); err != nil {
				return nil, rw, err
			}
			if rw, err = upgrade(); err != nil {
				return nil, rw, fmt.Errorf("TLS handshake: %w", err)
			}
			st.tls = true
		case *pgproto3.GSSEncRequest:
			if _, err := rw.Write([]byte{'N'}); err != nil {
				return nil, rw, err
			}
		case *pgproto3.CancelRequest:
			st.cancel = &pgproto3.CancelRequest{ProcessID: m.ProcessID, SecretKey: append([]byte(nil), m.SecretKey...)}
			return st, rw, nil
		case *pgproto3.StartupMessage:
			if m.ProtocolVersion != pgproto3.ProtocolVersion30 && m.ProtocolVersion != pgproto3.ProtocolVersion32 {
				return nil, rw, fmt.Errorf("unsupported protocol version %d", m.ProtocolVersion)
			}
			st.params = map[string]string{}
			for k, v := range m.Parameters {
				st.params[k] = v
			}
			if st.params["user"] == "" {
				return nil, rw, errors.New("no user in the startup message")
			}
			return st, rw, nil
		default:
			return nil, rw, fmt.Errorf("unexpected startup message %T", msg)
		}
	}
	return nil, rw, errors.New("too many startup requests")
}

func (s *server) handle(c net.Conn) {
	raw := c
	_ = c.SetDeadline(time.Now().Add(time.Minute)) // the startup and authentication
	var upgrade func() (io.ReadWriter, error)
	var tlsConn *tls.Conn
	if s.tls != nil {
		upgrade = func() (io.ReadWriter, error) {
			tlsConn = tls.Server(c, s.tls)
			return tlsConn, tlsConn.Handshake()
		}
	}
	st, rw, err := readStartup(c, upgrade)
	if err != nil {
		s.log.Debug("startup refused", "remote", c.RemoteAddr().String(), "err", err)
		return
	}
	if st.cancel != nil {
		s.cancelSession(st.cancel)
		return
	}
	if tlsConn != nil {
		c = tlsConn
	}
	be := pgproto3.NewBackend(rw, rw)
	be.SetMaxBodyLen(maxMessage)
	fail := func(code, msg string) {
		be.Send(&pgproto3.ErrorResponse{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: code, Message: msg})
		_ = be.Flush()
	}
	if s.tls != nil && !st.tls {
		fail("28000", "TLS is required: connect with sslmode=require")
		return
	}
	s.mu.Lock()
	full := s.maxSessions > 0 && len(s.sessions) >= s.maxSessions
	s.mu.Unlock()
	if full {
		fail("53300", "sorry, too many clients already")
		return
	}
	name := st.params["user"]
	user, err := s.authenticate(be, name)
	if err != nil {
		s.log.Info("authentication failed", "user", name, "remote", c.RemoteAddr().String(), "err", err)
		fail("28P01", fmt.Sprintf("password authentication failed for user %q", name))
		return
	}
	_ = c.SetDeadline(time.Time{})
	s.runSession(c, raw, be, user, st.params)
}

// runSession runs the session of an authenticated user: the start's
// AuthenticationOk, settings and key, then its messages until it ends.
// c is the connection (TLS or not), raw the TCP connection under it.
func (s *server) runSession(c, raw net.Conn, be *pgproto3.Backend, user *pgauth.User, params map[string]string) {
	name := params["user"]
	sess := &session{srv: s, conn: c, raw: raw, be: be, user: user, database: params["database"], settings: defaultSettings(), txn: 'I',
		stmts: map[string]*prepared{}, portals: map[string]*portal{}}
	if sess.database == "" {
		sess.database = name
	}
	if app := params["application_name"]; app != "" {
		sess.settings["application_name"] = app
	}
	if opts := params["options"]; opts != "" {
		sess.applyOptions(opts)
	}
	sess.secret = make([]byte, 4)
	_, _ = rand.Read(sess.secret)
	s.mu.Lock()
	s.nextPID++
	sess.pid = s.nextPID
	s.sessions[sess.pid] = sess
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.sessions, sess.pid)
		s.mu.Unlock()
		for name := range sess.portals {
			sess.closePortal(name)
		}
		sess.closeCursors(func(*namedCursor) bool { return true })
	}()
	be.Send(&pgproto3.AuthenticationOk{})
	for _, r := range reported {
		be.Send(&pgproto3.ParameterStatus{Name: r.name, Value: sess.settings[r.key]})
	}
	be.Send(&pgproto3.BackendKeyData{ProcessID: sess.pid, SecretKey: sess.secret})
	be.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
	if err := be.Flush(); err != nil {
		return
	}
	s.log.Debug("session started", "user", name, "pid", sess.pid, "remote", c.RemoteAddr().String())
	if err := sess.loop(); err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
		s.log.Debug("session ended", "pid", sess.pid, "err", err)
	}
}

// applyOptions takes the "-c name=value" settings of the startup's options.
func (s *session) applyOptions(opts string) {
	f := strings.Fields(opts)
	for i := 0; i < len(f); i++ {
		kv := f[i]
		if kv == "-c" && i+1 < len(f) {
			i++
			kv = f[i]
		} else if after, ok := strings.CutPrefix(kv, "--"); ok {
			kv = after
		} else {
			continue
		}
		if k, v, ok := strings.Cut(kv, "="); ok {
			s.settings[strings.ToLower(k)] = v
		}
	}
}

// authenticate runs SCRAM-SHA-256 for user name. An unknown user goes
// through the same exchange against a mock verifier and fails at the
// proof, so the answer does not tell which it was.
func (s *server) authenticate(be *pgproto3.Backend, name string) (*pgauth.User, error) {
	user, err := pgauth.LoadUser(s.dataDir, name)
	v := pgauth.MockVerifier(name, s.secret)
	switch {
	case err == nil:
		v = user.Verifier
	case errors.Is(err, pgauth.ErrNoUser):
		user = nil
	default:
		s.log.Warn("reading user", "user", name, "err", err)
		user = nil
	}
	sess, err := pgauth.NewSession(v, "")
	if err != nil {
		return nil, err
	}
	be.Send(&pgproto3.AuthenticationSASL{AuthMechanisms: []string{pgauth.Mechanism}})
	if err := be.Flush(); err != nil {
		return nil, err
	}
	if err := be.SetAuthType(pgproto3.AuthTypeSASL); err != nil {
		return nil, err
	}
	msg, err := be.Receive()
	if err != nil {
		return nil, err
	}
	init, ok := msg.(*pgproto3.SASLInitialResponse)
	if !ok || init.AuthMechanism != pgauth.Mechanism {
		return nil, fmt.Errorf("%w: expected SASLInitialResponse for %s", pgauth.ErrAuth, pgauth.Mechanism)
	}
	first, err := sess.First(init.Data)
	if err != nil {
		return nil, err
	}
	be.Send(&pgproto3.AuthenticationSASLContinue{Data: first})
	if err := be.Flush(); err != nil {
		return nil, err
	}
	if err := be.SetAuthType(pgproto3.AuthTypeSASLContinue); err != nil {
		return nil, err
	}
	msg, err = be.Receive()
	if err != nil {
		return nil, err
	}
	resp, ok := msg.(*pgproto3.SASLResponse)
	if !ok {
		return nil, fmt.Errorf("%w: expected SASLResponse", pgauth.ErrAuth)
	}
	final, err := sess.Final(resp.Data)
	if err != nil {
		return nil, err
	}
	if user == nil {
		return nil, pgauth.ErrAuth // unreachable: a mock verifier's proof never matches
	}
	be.Send(&pgproto3.AuthenticationSASLFinal{Data: final})
	return user, nil
}

// cancelSession cancels the running statement of the session the
// request names, if its key matches.
func (s *server) cancelSession(req *pgproto3.CancelRequest) {
	s.mu.Lock()
	sess := s.sessions[req.ProcessID]
	s.mu.Unlock()
	if sess == nil || len(req.SecretKey) != len(sess.secret) || binary.BigEndian.Uint32(req.SecretKey) != binary.BigEndian.Uint32(sess.secret) {
		return
	}
	sess.cancelMu.Lock()
	if sess.cancel != nil {
		sess.cancel(errCanceled)
	}
	sess.cancelMu.Unlock()
}

// ---- messages after the start ----

type prepared struct {
	sql     string
	oids    []uint32
	nparams int
}

type portal struct {
	stmt    *stmt // planned at Bind
	formats []int16
	done    bool
	// described is the result columns Describe sent, when it ran the query
	// early (a window query's types are known once its result is).
	cols []column
	cur  *cursor // a window query's result being sent (Execute with a row limit)
	// fetched counts the rows a FETCH portal has sent over Executes with
	// a row limit.
	fetched int64
}

// closePortal drops a portal, closing a result it holds open.
func (s *session) closePortal(name string) {
	if pt, ok := s.portals[name]; ok {
		if pt.cur != nil {
			pt.cur.close()
		}
		delete(s.portals, name)
	}
}

// loop reads and answers messages until the client goes. After an error
// in the extended protocol, messages are skipped until Sync.
func (s *session) loop() error {
	skipping := false
	for {
		msg, err := s.be.Receive()
		if err != nil {
			return s.receiveFailed(err)
		}
		if _, ok := msg.(*pgproto3.Sync); ok {
			skipping = false
		} else if skipping {
			continue
		}
		qerr := s.dispatch(msg)
		if qerr == errTerminate {
			return nil
		}
		var ce *connError
		if errors.As(qerr, &ce) {
			return s.receiveFailed(ce.err)
		}
		if qerr != nil {
			s.sendError(qerr)
			if _, ok := msg.(*pgproto3.Query); ok {
				s.ready()
			} else {
				skipping = true
			}
		}
		if err := s.be.Flush(); err != nil {
			return err
		}
	}
}

// errTerminate ends the session (a Terminate message).
var errTerminate = errors.New("terminate")

// connError is a failure to read the client's next message inside a
// statement (COPY FROM STDIN's data): the session ends, as when the
// loop's own read fails.
type connError struct{ err error }

func (e *connError) Error() string { return e.err.Error() }
func (e *connError) Unwrap() error { return e.err }

// receiveFailed ends the session whose client's stream could not be read
// on. A stream that ended or failed has no one to answer; one that holds
// what is not a message (an unknown type, a length out of bounds, a body
// that does not decode) is answered FATAL 08P01 before the connection is
// closed, as PostgreSQL does: the messages after it cannot be found.
func (s *session) receiveFailed(err error) error {
	var ne net.Error
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) || errors.As(err, &ne) {
		return err
	}
	s.be.Send(&pgproto3.ErrorResponse{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: "08P01", Message: "invalid frontend message: " + err.Error()})
	_ = s.be.Flush()
	return err
}

// dispatch answers one message. A panic while answering is the
// statement's error (XX000), not the session's end.
func (s *session) dispatch(msg pgproto3.FrontendMessage) (qerr error) {
	defer func() {
		if r := recover(); r != nil {
			s.srv.log.Error("statement panicked", "pid", s.pid, "panic", r, "stack", string(debug.Stack()))
			qerr = &pgError{code: "XX000", msg: fmt.Sprintf("internal error: %v", r)}
		}
	}()
	switch m := msg.(type) {
	case *pgproto3.Query:
		if err := s.simpleQuery(m.String); err != nil {
			return err // the session ends
		}
		s.ready()
	case *pgproto3.Parse:
		qerr = s.parse(m)
	case *pgproto3.Bind:
		qerr = s.bind(m)
	case *pgproto3.Describe:
		qerr = s.describe(m)
	case *pgproto3.Execute:
		qerr = s.execute(m)
	case *pgproto3.Close:
		if m.ObjectType == 'S' {
			delete(s.stmts, m.Name)
		} else {
			s.closePortal(m.Name)
		}
		s.be.Send(&pgproto3.CloseComplete{})
	case *pgproto3.Sync:
		s.closePortal("")
		s.ready()
	case *pgproto3.Flush:
		qerr = s.be.Flush()
	case *pgproto3.Terminate:
		return errTerminate
	case *pgproto3.CopyData, *pgproto3.CopyDone, *pgproto3.CopyFail:
		// What a client still sends of a COPY FROM STDIN that failed:
		// dropped, as PostgreSQL does.
	default:
		s.sendError(&pgError{code: "08P01", msg: fmt.Sprintf("unexpected message %T", msg)})
		s.ready()
	}
	return qerr
}

func (s *session) ready() {
	s.be.Send(&pgproto3.ReadyForQuery{TxStatus: s.txn})
}

// sendError sends err as an ErrorResponse; an error inside a
// transaction block fails the block, as in PostgreSQL.
func (s *session) sendError(err error) {
	var pe *pgError
	if !errors.As(err, &pe) {
		pe = &pgError{code: "XX000", msg: err.Error()}
	}
	if s.txn == 'T' {
		s.txn = 'E'
	}
	s.srv.queries.WithLabelValues(pe.code[:2]).Inc()
	s.be.Send(&pgproto3.ErrorResponse{Severity: "ERROR", SeverityUnlocalized: "ERROR", Code: pe.code, Message: pe.msg, Position: pe.pos, Where: pe.where, Hint: pe.hint})
}

// notice sends a WARNING, as PostgreSQL warns of a BEGIN in a block.
func (s *session) notice(code, msg string) {
	s.be.Send(&pgproto3.NoticeResponse{Severity: "WARNING", SeverityUnlocalized: "WARNING", Code: code, Message: msg})
}

// statementContext is the context of one statement: cancelled by a
// cancel request or statement_timeout.
func (s *session) statementContext() (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	stop := func() {}
	if d, err := parseTimeout(s.settings["statement_timeout"]); err == nil && d > 0 {
		t := time.AfterFunc(d, func() { cancel(errTimeout) })
		stop = func() { t.Stop() }
	}
	s.cancelMu.Lock()
	s.cancel = cancel
	s.cancelMu.Unlock()
	return ctx, func() {
		stop()
		s.cancelMu.Lock()
		s.cancel = nil
		s.cancelMu.Unlock()
		cancel(nil)
	}
}

// ctxError turns a statement context's end into 57014.
func ctxError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		cause := context.Cause(ctx)
		if errors.Is(cause, errTimeout) || errors.Is(cause, errCanceled) {
			return &pgError{code: "57014", msg: cause.Error()}
		}
	}
	return err
}

// simpleQuery runs a Query's statements one after the other, each
// planned just before it runs (as PostgreSQL analyses each when it comes
// to it: a BEGIN runs before the next statement's error fails its
// block), sending their errors; the first error ends the Query. It
// returns only a *connError, which ends the session.
func (s *session) simpleQuery(sql string) error {
	ctx, done := s.statementContext()
	defer done()
	tree, err := parseSQL(sql)
	if err != nil {
		s.sendError(ctxError(ctx, err))
		return nil
	}
	if tree == nil {
		s.be.Send(&pgproto3.EmptyQueryResponse{})
		return nil
	}
	for _, raw := range tree.Stmts {
		var st *stmt
		if s.txn == 'E' && !endsTransaction(raw.Stmt) {
			err = errAborted
		} else {
			st, err = s.planOne(ctx, sql, raw, tree.Version)
		}
		if err == nil {
			err = s.run(ctx, st, &portal{stmt: st}, nil, 0, true)
		}
		if err != nil {
			var ce *connError
			if errors.As(err, &ce) {
				return ce
			}
			s.sendError(ctxError(ctx, err))
			return nil
		}
	}
	return nil
}

func (s *session) parse(m *pgproto3.Parse) error {
	if err := s.abortedCheck(m.Query); err != nil {
		return err
	}
	n, err := paramCount(m.Query)
	if err != nil {
		return err
	}
	n = max(n, len(m.ParameterOIDs))
	if m.Name != "" {
		if _, ok := s.stmts[m.Name]; ok {
			return &pgError{code: "42P05", msg: fmt.Sprintf("prepared statement %q already exists", m.Name)}
		}
	}
	p := &prepared{sql: m.Query, oids: make([]uint32, n), nparams: n}
	copy(p.oids, m.ParameterOIDs)
	if slices.Contains(p.oids, 0) {
		// Types the client left open: from where each $n stands.
		cols := s.tableColumnTypes(m.Query)
		inferred := inferParams(m.Query, n, cols)
		inferInsertParams(m.Query, inferred, cols)
		for i, oid := range p.oids {
			if oid == 0 {
				p.oids[i] = inferred[i]
			}
		}
	}
	s.stmts[m.Name] = p
	s.be.Send(&pgproto3.ParseComplete{})
	return nil
}

func (s *session) bind(m *pgproto3.Bind) error {
	p, ok := s.stmts[m.PreparedStatement]
	if !ok {
		return &pgError{code: "26000", msg: fmt.Sprintf("prepared statement %q does not exist", m.PreparedStatement)}
	}
	if len(m.Parameters) != p.nparams {
		return &pgError{code: "08P01", msg: fmt.Sprintf("bind message supplies %d parameters, but prepared statement requires %d", len(m.Parameters), p.nparams)}
	}
	if err := s.abortedCheck(p.sql); err != nil {
		return err
	}
	sql, err := bindParams(p.sql, p.oids, m.ParameterFormatCodes, m.Parameters)
	if err != nil {
		return err
	}
	ctx, done := s.statementContext()
	defer done()
	stmts, err := s.plan(ctx, sql)
	if err != nil {
		return ctxError(ctx, err)
	}
	if len(stmts) != 1 {
		return &pgError{code: "42601", msg: "cannot insert multiple commands into a prepared statement"}
	}
	if stmts[0].copy != nil {
		return notSupported("COPY in the extended query protocol (send it as a simple query, as psql, psycopg and pgx's CopyFrom do)")
	}
	s.closePortal(m.DestinationPortal)
	s.portals[m.DestinationPortal] = &portal{stmt: stmts[0], formats: append([]int16(nil), m.ResultFormatCodes...)}
	s.be.Send(&pgproto3.BindComplete{})
	return nil
}

func (s *session) describe(m *pgproto3.Describe) error {
	if m.ObjectType == 'S' {
		p, ok := s.stmts[m.Name]
		if !ok {
			return &pgError{code: "26000", msg: fmt.Sprintf("prepared statement %q does not exist", m.Name)}
		}
		oids := make([]uint32, p.nparams)
		for i := range oids {
			oids[i] = oidText
			if i < len(p.oids) && p.oids[i] != 0 {
				oids[i] = p.oids[i]
			}
		}
		s.be.Send(&pgproto3.ParameterDescription{ParameterOIDs: oids})
		if s.txn == 'E' {
			// A failed block describes no result (PostgreSQL looks in
			// the catalog for one): an error for a statement with rows.
			if tree, err := parseSQL(p.sql); err == nil && tree != nil && !endsTransaction(tree.Stmts[0].Stmt) {
				if returnsRows(tree.Stmts[0].Stmt) {
					return errAborted
				}
				s.be.Send(&pgproto3.NoData{})
				return nil
			}
		}
		// The result's columns: plan with placeholders for the parameters.
		vals := make([][]byte, p.nparams)
		for i := range vals {
			vals[i] = placeholder(p.oids[i])
		}
		sql, err := bindParams(p.sql, p.oids, nil, vals)
		if err != nil {
			return err
		}
		ctx, done := s.statementContext()
		defer done()
		stmts, err := s.plan(ctx, sql)
		if err != nil {
			return ctxError(ctx, err)
		}
		cols, err := s.columns(ctx, stmts[0], &portal{stmt: stmts[0]})
		if err != nil {
			return ctxError(ctx, err)
		}
		s.sendRowDescription(cols, nil)
		return nil
	}
	pt, ok := s.portals[m.Name]
	if !ok {
		if c, ok := s.cursors[m.Name]; ok {
			// A DECLAREd cursor is a portal too (psycopg describes it).
			s.sendRowDescription(c.cols, nil)
			return nil
		}
		return &pgError{code: "34000", msg: fmt.Sprintf("portal %q does not exist", m.Name)}
	}
	if s.txn == 'E' && (pt.stmt.window != nil || pt.stmt.cols != nil || (pt.stmt.fetch != nil && !pt.stmt.fetch.move)) {
		return errAborted
	}
	ctx, done := s.statementContext()
	defer done()
	cols, err := s.columns(ctx, pt.stmt, pt)
	if err != nil {
		return ctxError(ctx, err)
	}
	s.sendRowDescription(cols, pt.formats)
	return nil
}

func (s *session) execute(m *pgproto3.Execute) error {
	pt, ok := s.portals[m.Portal]
	if !ok {
		return &pgError{code: "34000", msg: fmt.Sprintf("portal %q does not exist", m.Portal)}
	}
	if s.txn == 'E' && (pt.stmt.txnOp == 0 || pt.stmt.txnOp == 'B') {
		return errAborted
	}
	if pt.done {
		s.be.Send(&pgproto3.CommandComplete{CommandTag: []byte(pt.stmt.tag + " 0")})
		return nil
	}
	ctx, done := s.statementContext()
	defer done()
	if pt.stmt.window == nil && pt.stmt.fetch == nil { // a FETCH says when it is done
		pt.done = true
	}
	return ctxError(ctx, s.run(ctx, pt.stmt, pt, pt.formats, int64(m.MaxRows), false))
}

func (s *session) sendRowDescription(cols []column, formats []int16) {
	if cols == nil {
		s.be.Send(&pgproto3.NoData{})
		return
	}
	rd := &pgproto3.RowDescription{}
	for i, c := range cols {
		rd.Fields = append(rd.Fields, pgproto3.FieldDescription{Name: []byte(c.name), DataTypeOID: c.oid, DataTypeSize: typeSize(c.oid), TypeModifier: -1, Format: formatOf(formats, i)})
	}
	s.be.Send(rd)
}

func formatOf(formats []int16, i int) int16 {
	switch {
	case len(formats) == 1:
		return formats[0]
	case i < len(formats):
		return formats[i]
	}
	return 0
}

// tableColumnTypes returns the column types of the table a SELECT reads
// (nil when it reads none or it cannot be found), by column name.
func (s *session) tableColumnTypes(sql string) map[string]uint32 {
	tree, err := pg.Parse(sql)
	if err != nil || len(tree.Stmts) != 1 {
		return nil
	}
	table := ""
	n := tree.Stmts[0].Stmt
	switch {
	case n.GetInsertStmt() != nil && n.GetInsertStmt().Relation != nil:
		table = n.GetInsertStmt().Relation.Relname
	case n.GetUpdateStmt() != nil && n.GetUpdateStmt().Relation != nil:
		table = n.GetUpdateStmt().Relation.Relname
	case n.GetDeleteStmt() != nil && n.GetDeleteStmt().Relation != nil:
		table = n.GetDeleteStmt().Relation.Relname
	default:
		sel := n.GetSelectStmt()
		if d := n.GetDeclareCursorStmt(); d != nil {
			sel = d.Query.GetSelectStmt() // DECLARE c CURSOR FOR SELECT ... $1
		}
		if sel == nil || len(sel.FromClause) != 1 || sel.FromClause[0].GetRangeVar() == nil || isCatalogQuery(sel) {
			return nil
		}
		table = sel.FromClause[0].GetRangeVar().Relname
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tables, err := s.srv.sched.tables(ctx, table)
	if err != nil {
		return nil
	}
	out := map[string]uint32{}
	for _, t := range tables {
		if t.name == table {
			for i, c := range t.columns {
				out[strings.ToLower(c.Name)] = columnType(c.Type, c.TimeZone)
				// An INSERT without a column list: VALUES in table order.
				out["\x00"+strconv.Itoa(i)] = columnType(c.Type, c.TimeZone)
			}
		}
	}
	return out
}

// inferInsertParams gives a $n that is a whole VALUES item of an INSERT
// the type of its column.
func inferInsertParams(sql string, oids []uint32, cols map[string]uint32) {
	tree, err := pg.Parse(sql)
	if err != nil || len(tree.Stmts) != 1 || tree.Stmts[0].Stmt.GetInsertStmt() == nil {
		return
	}
	in := tree.Stmts[0].Stmt.GetInsertStmt()
	sel := in.SelectStmt.GetSelectStmt()
	if sel == nil {
		return
	}
	for _, l := range sel.ValuesLists {
		for j, item := range l.GetList().Items {
			pr := item.GetParamRef()
			if pr == nil || pr.Number < 1 || int(pr.Number) > len(oids) || oids[pr.Number-1] != 0 {
				continue
			}
			name := "\x00" + strconv.Itoa(j)
			if in.Cols != nil {
				if j >= len(in.Cols) {
					continue
				}
				name = strings.ToLower(in.Cols[j].GetResTarget().Name)
			}
			oids[pr.Number-1] = cols[name]
		}
	}
}
