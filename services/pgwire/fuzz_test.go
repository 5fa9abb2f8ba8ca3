package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/strata-db/strata/internal/pgauth"
	"github.com/strata-db/strata/messages"
)

// rawSession drives sessions of an authenticated user over loopback TCP
// with bytes as the client's messages: what a session does with a
// stream after its startup, whatever the stream holds.
type rawSession struct {
	s      *testServer
	ln     net.Listener
	user   *pgauth.User
	panics *panicLog
}

// panicLog is the server's log, keeping what it says of a panic (a
// statement's is recovered and logged, the session going on).
type panicLog struct {
	mu  sync.Mutex
	msg string
}

func (l *panicLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *panicLog) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *panicLog) WithGroup(string) slog.Handler            { return l }
func (l *panicLog) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, "panicked") {
		var b strings.Builder
		b.WriteString(r.Message)
		r.Attrs(func(a slog.Attr) bool { fmt.Fprintf(&b, " %s=%v", a.Key, a.Value); return true })
		l.mu.Lock()
		l.msg = b.String()
		l.mu.Unlock()
	}
	return nil
}

func (l *panicLog) take() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := l.msg
	l.msg = ""
	return m
}

// fuzzBackend is the keyed test backend without writing changes: a
// fuzzed INSERT would add a container per run, slowing every later one.
type fuzzBackend struct{ *localBackend }

func (fuzzBackend) applyChanges(context.Context, []*messages.UpdateEvent) error { return nil }

func newRawSession(t testing.TB) *rawSession {
	t.Helper()
	s := startKeyedServer(t)
	pl := &panicLog{}
	s.srv.log = slog.New(pl)
	s.srv.sched = fuzzBackend{s.be}
	user, err := pgauth.LoadUser(s.data, pgauth.DefaultUser)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return &rawSession{s: s, ln: ln, user: user, panics: pl}
}

// sessionDeadline bounds a session over a fuzzed stream: its end (the
// stream's) and the answers to what it held.
const sessionDeadline = 20 * time.Second

// run sends data as the client's messages after the start and closes
// the client's side for writing; it returns what the server sent after
// the start, decoded, once the server ended the session. It fails t if
// the server panics, sends what does not decode, or has not ended the
// session within sessionDeadline.
func (r *rawSession) run(t testing.TB, data []byte) []pgproto3.BackendMessage {
	t.Helper()
	client, err := net.Dial("tcp", r.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server, err := r.ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	ended := make(chan any, 1)
	go func() {
		defer func() { ended <- recover(); server.Close() }()
		be := pgproto3.NewBackend(server, server)
		be.SetMaxBodyLen(maxMessage)
		r.s.srv.runSession(server, server, be, r.user, map[string]string{"user": pgauth.DefaultUser, "database": "strata"})
	}()
	go func() {
		_, _ = client.Write(data)
		_ = client.(*net.TCPConn).CloseWrite()
	}()
	_ = client.SetReadDeadline(time.Now().Add(sessionDeadline))
	out, err := io.ReadAll(client)
	if err != nil {
		t.Fatalf("the session did not end within %v of the stream's end: %v; input %q", sessionDeadline, err, data)
	}
	select {
	case p := <-ended:
		if p != nil {
			t.Fatalf("the session panicked: %v; input %q", p, data)
		}
	case <-time.After(sessionDeadline):
		t.Fatalf("the session closed its connection but did not end; input %q", data)
	}
	if m := r.panics.take(); m != "" {
		t.Fatalf("%s; input %q", m, data)
	}
	var msgs []pgproto3.BackendMessage
	rd := bytes.NewReader(out)
	fe := pgproto3.NewFrontend(rd, io.Discard)
	for rd.Len() > 0 || fe.ReadBufferLen() > 0 {
		m, err := fe.Receive()
		if err != nil {
			t.Fatalf("the server sent what does not decode: %v; input %q", err, data)
		}
		msgs = append(msgs, m)
	}
	// The start's messages, then the session's answers.
	for i, m := range msgs {
		if _, ok := m.(*pgproto3.ReadyForQuery); ok {
			return msgs[i+1:]
		}
	}
	t.Fatalf("no ReadyForQuery at the start; input %q", data)
	return nil
}

// wire encodes frontend messages as a client sends them.
func wire(t testing.TB, msgs ...pgproto3.FrontendMessage) []byte {
	var b []byte
	for _, m := range msgs {
		var err error
		if b, err = m.Encode(b); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

// rawMessage is a message of type typ whose length field says length
// and whose body is body (whatever the length says).
func rawMessage(typ byte, length int32, body []byte) []byte {
	b := []byte{typ, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[1:], uint32(length))
	return append(b, body...)
}

func int8Param(v int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }

// sessionSeeds are streams of real messages of every kind, and some not.
func sessionSeeds(t testing.TB) [][]byte {
	q := func(sql string) pgproto3.FrontendMessage { return &pgproto3.Query{String: sql} }
	sync := &pgproto3.Sync{}
	extended := func(sql string, oids []uint32, pformats []int16, params [][]byte, rformats []int16, maxRows uint32) []byte {
		return wire(t, &pgproto3.Parse{Query: sql, ParameterOIDs: oids}, &pgproto3.Describe{ObjectType: 'S'},
			&pgproto3.Bind{ParameterFormatCodes: pformats, Parameters: params, ResultFormatCodes: rformats},
			&pgproto3.Describe{ObjectType: 'P'}, &pgproto3.Execute{MaxRows: maxRows}, &pgproto3.Execute{}, sync)
	}
	seeds := [][]byte{
		wire(t, q(testSQL+" LIMIT 3")),
		wire(t, q("SELECT 1; SHOW ALL; SET statement_timeout = '5s'; SELECT version(); BEGIN; COMMIT")),
		wire(t, q("SELECT c.relname FROM pg_catalog.pg_class c WHERE c.relkind IN ('r','p') ORDER BY 1")),
		wire(t, q(""), q("SELEC 1"), q("SELECT nope FROM t"), q("SELECT k0 FROM missing"), q("CREATE TABLE x (a int)")),
		wire(t, q("COPY k (k0, c001_utf8) FROM STDIN"), &pgproto3.CopyData{Data: []byte("900\tx\n901\t\\N\n")}, &pgproto3.CopyDone{}),
		wire(t, q("COPY k FROM STDIN CSV HEADER"), &pgproto3.CopyData{Data: []byte("k0\n1\n")}, &pgproto3.CopyFail{Message: "no"}),
		wire(t, q("COPY (SELECT k0, c001_utf8 FROM t ORDER BY k0 LIMIT 4) TO STDOUT CSV HEADER"), q("COPY t TO STDOUT")),
		wire(t, q("BEGIN; DECLARE c CURSOR FOR "+testSQL), q("FETCH 5 FROM c"), q("MOVE 10 IN c"), q("CLOSE c; COMMIT")),
		wire(t, q("INSERT INTO k (k0, c001_utf8) VALUES (1000, 'a'), (1001, 'b')"), q("UPDATE k SET c001_utf8 = 'z' WHERE k0 = 3"), q("DELETE FROM k WHERE k0 = 4")),
		extended("SELECT k0, c001_utf8 FROM t WHERE k0 < $1 ORDER BY k0", nil, nil, [][]byte{[]byte("5")}, nil, 2),
		extended("SELECT k0, c002_float64 FROM t WHERE k0 < $1 AND c001_utf8 <> $2 ORDER BY k0", []uint32{oidInt8, oidText}, []int16{1, 0},
			[][]byte{int8Param(9), []byte("x")}, []int16{1}, 0),
		extended("INSERT INTO k (k0, c001_utf8) VALUES ($1, $2)", []uint32{oidInt8, oidText}, []int16{1}, [][]byte{int8Param(77), []byte("y")}, nil, 0),
		extended("SELECT $1::int8 + 1", nil, nil, [][]byte{nil}, []int16{1}, 0),
		// A named statement and portal, closed; a portal and a statement that do not exist.
		wire(t, &pgproto3.Parse{Name: "s1", Query: "SELECT k0 FROM t ORDER BY k0 LIMIT 3"}, &pgproto3.Bind{DestinationPortal: "p1", PreparedStatement: "s1"},
			&pgproto3.Execute{Portal: "p1", MaxRows: 1}, &pgproto3.Flush{}, &pgproto3.Execute{Portal: "p1"}, &pgproto3.Close{ObjectType: 'P', Name: "p1"},
			&pgproto3.Close{ObjectType: 'S', Name: "s1"}, sync, &pgproto3.Execute{Portal: "nope"}, sync, &pgproto3.Bind{PreparedStatement: "nope"}, sync,
			&pgproto3.Describe{ObjectType: 'P', Name: "nope"}, sync, &pgproto3.Describe{ObjectType: 'S', Name: "nope"}, sync),
		// Bind with too many and too few parameters, and formats that do not fit.
		wire(t, &pgproto3.Parse{Query: "SELECT k0 FROM t WHERE k0 = $1"}, &pgproto3.Bind{Parameters: [][]byte{[]byte("1"), []byte("2")}}, sync,
			&pgproto3.Bind{}, sync, &pgproto3.Bind{ParameterFormatCodes: []int16{1, 1, 1}, Parameters: [][]byte{{1, 2, 3}}}, &pgproto3.Execute{}, sync,
			&pgproto3.Bind{ParameterFormatCodes: []int16{7}, Parameters: [][]byte{[]byte("1")}, ResultFormatCodes: []int16{3, 9}}, &pgproto3.Execute{}, sync),
		wire(t, &pgproto3.Parse{Query: "SELECT $70000"}, sync, &pgproto3.Parse{Query: "SELECT 1", ParameterOIDs: []uint32{0, 0, math.MaxUint32}}, &pgproto3.Describe{ObjectType: 'S'}, sync),
		wire(t, &pgproto3.FunctionCall{Function: 1, Arguments: [][]byte{{1}}}, sync, &pgproto3.CopyData{Data: []byte("x")}, &pgproto3.CopyDone{}, q("SELECT 1"), &pgproto3.Terminate{}),
		wire(t, &pgproto3.PasswordMessage{Password: "x"}, q("SELECT 1")),
		// Lengths too small, negative, too large; a message cut short; an unknown type.
		rawMessage('Q', 3, nil),
		rawMessage('Q', -1, []byte("SELECT 1\x00")),
		rawMessage('Q', math.MaxInt32, []byte("SELECT 1\x00")),
		rawMessage('Q', 100, []byte("SELECT 1\x00")),
		rawMessage('B', 6, []byte{0, 0}),
		rawMessage('Z', 4, nil),
		append(wire(t, q("COPY k FROM STDIN")), rawMessage('d', maxMessage+10, nil)...),
	}
	return seeds
}

// FuzzSession feeds arbitrary bytes as an authenticated client's
// messages: the session answers (an ErrorResponse for what it cannot
// do), or ends the connection, never panics, and ends once the stream
// has (bounded by sessionDeadline).
func FuzzSession(f *testing.F) {
	for _, s := range sessionSeeds(f) {
		f.Add(s)
	}
	r := newRawSession(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		r.run(t, data)
	})
}

func errorCodes(msgs []pgproto3.BackendMessage) []string {
	var out []string
	for _, m := range msgs {
		if e, ok := m.(*pgproto3.ErrorResponse); ok {
			out = append(out, e.Severity+" "+e.Code)
		}
	}
	return out
}

// A message of a type there is none of, or whose length is out of
// bounds, is answered FATAL 08P01 and the connection closed; the
// messages after it are not read.
func TestMalformedMessageIsFatal(t *testing.T) {
	r := newRawSession(t)
	sel := wire(t, &pgproto3.Query{String: "SELECT 1"})
	for name, data := range map[string][]byte{
		"unknown type":    rawMessage('Z', 4, nil),
		"length below 4":  rawMessage('Q', 3, nil),
		"negative length": rawMessage('Q', -1, nil),
		"too long":        rawMessage('Q', maxMessage+5, nil),
		"bad body":        rawMessage('B', 6, []byte{0, 0}),
	} {
		t.Run(name, func(t *testing.T) {
			msgs := r.run(t, append(append(append([]byte(nil), sel...), data...), sel...))
			if codes := errorCodes(msgs); len(codes) != 1 || codes[0] != "FATAL 08P01" {
				t.Fatalf("errors %v, want FATAL 08P01", codes)
			}
			rows := 0
			for _, m := range msgs {
				if _, ok := m.(*pgproto3.DataRow); ok {
					rows++
				}
			}
			if rows != 1 {
				t.Fatalf("%d rows: want the first SELECT's only", rows)
			}
		})
	}
}

// A message too long or malformed in COPY FROM STDIN's data ends the
// session with FATAL 08P01: the stream cannot be read on (a message
// over the limit left half read had its body read next as a message).
func TestCopyInMalformedMessageIsFatal(t *testing.T) {
	r := newRawSession(t)
	copyIn := wire(t, &pgproto3.Query{String: "COPY k (k0) FROM STDIN"})
	sel := wire(t, &pgproto3.Query{String: "SELECT 1"})
	for name, data := range map[string][]byte{
		"too long":     rawMessage('d', math.MaxInt32, nil),
		"unknown type": rawMessage('Z', 4, nil),
		"bad body":     rawMessage('f', 5, []byte("x")),
	} {
		t.Run(name, func(t *testing.T) {
			msgs := r.run(t, append(append(append([]byte(nil), copyIn...), data...), sel...))
			if codes := errorCodes(msgs); len(codes) != 1 || codes[0] != "FATAL 08P01" {
				t.Fatalf("errors %v, want FATAL 08P01", codes)
			}
			for _, m := range msgs {
				if _, ok := m.(*pgproto3.DataRow); ok {
					t.Fatal("a message after the bad one was answered")
				}
			}
		})
	}
}
