package main

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
	pg "github.com/pganalyze/pg_query_go/v6"
	pgparser "github.com/pganalyze/pg_query_go/v6/parser"

	"github.com/strata-db/strata/internal/apiclient"
	"github.com/strata-db/strata/messages"
	"github.com/strata-db/strata/windower/sqlparse"
)

// pgError is an error sent to the client with its SQLSTATE.
type pgError struct {
	code string
	msg  string
	pos  int32 // 1-based character position in the query, 0 if none
	// where is the error's context (PostgreSQL's CONTEXT line): "COPY
	// t, line 3, column v: \"x\"".
	where string
	hint  string
}

func (e *pgError) Error() string { return e.msg }

func notSupported(what string) *pgError {
	return &pgError{code: "0A000", msg: what + " is not supported by strata"}
}

func syntaxError(err error) *pgError {
	e := &pgError{code: "42601", msg: err.Error()}
	var pe *pgparser.Error
	if errors.As(err, &pe) {
		e.msg, e.pos = pe.Message, int32(pe.Cursorpos)
	}
	return e
}

// column is one column of a result.
type column struct {
	name string
	oid  uint32
}

// stmt is one statement, planned: what it answers and how.
type stmt struct {
	tag   string // command tag: SELECT, SET, SHOW, BEGIN ...
	empty bool   // the empty query
	cols  []column
	rows  [][]any // a statement answered here: its rows
	// window is a window query for the scheduler; offset and limit apply
	// to its rows as they stream (limit -1: all).
	window        *messages.WindowQuery
	offset, limit int64
	apply         func(*session) // a statement's effect on the session, at execution
	// txnOp is a transaction statement: 'B' BEGIN, 'C' COMMIT, 'R'
	// ROLLBACK, 'S' ROLLBACK TO or RELEASE savepoint (runTransaction).
	txnOp     byte
	savepoint string
	// change is an INSERT, UPDATE or DELETE of a keyed table (dml.go),
	// run as change events (changes.go).
	change *changeStmt
	// copy is a COPY FROM STDIN or TO STDOUT (copy.go).
	copy *copyStmt
	// declare, fetch and closeCursor are the statements of SQL cursors
	// (cursors.go).
	declare     *declareStmt
	fetch       *fetchStmt
	closeCursor *closeStmt
}

// plan parses sql into its statements.
func (s *session) plan(ctx context.Context, sql string) ([]*stmt, error) {
	tree, err := parseSQL(sql)
	if err != nil {
		return nil, err
	}
	if tree == nil {
		return []*stmt{{empty: true}}, nil
	}
	var out []*stmt
	for _, raw := range tree.Stmts {
		st, err := s.planOne(ctx, sql, raw, tree.Version)
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}

// parseSQL parses sql; nil for the empty query (no statements).
func parseSQL(sql string) (*pg.ParseResult, error) {
	if strings.TrimSpace(strings.Trim(sql, ";\n\t ")) == "" {
		return nil, nil
	}
	tree, err := pg.Parse(sql)
	if err != nil {
		return nil, syntaxError(err)
	}
	if len(tree.Stmts) == 0 {
		return nil, nil
	}
	return tree, nil
}

// errAborted is PostgreSQL's answer to a statement in a failed
// transaction block.
var errAborted = &pgError{code: "25P02", msg: "current transaction is aborted, commands ignored until end of transaction block"}

// endsTransaction says whether n may run in a failed transaction block
// (PostgreSQL's IsTransactionExitStmt): COMMIT, ROLLBACK, ROLLBACK TO
// SAVEPOINT, PREPARE TRANSACTION.
func endsTransaction(n *pg.Node) bool {
	t := n.GetTransactionStmt()
	if t == nil {
		return false
	}
	switch t.Kind {
	case pg.TransactionStmtKind_TRANS_STMT_COMMIT, pg.TransactionStmtKind_TRANS_STMT_ROLLBACK,
		pg.TransactionStmtKind_TRANS_STMT_ROLLBACK_TO, pg.TransactionStmtKind_TRANS_STMT_PREPARE:
		return true
	}
	return false
}

// abortedCheck is errAborted when the session's transaction block has
// failed and sql is not a statement that may end it.
func (s *session) abortedCheck(sql string) error {
	if s.txn != 'E' {
		return nil
	}
	tree, err := parseSQL(sql)
	if err != nil || tree == nil {
		return err
	}
	if !endsTransaction(tree.Stmts[0].Stmt) {
		return errAborted
	}
	return nil
}

// returnsRows says whether a statement answers with rows (what a
// Describe in a failed transaction block may not describe).
func returnsRows(n *pg.Node) bool {
	switch {
	case n.GetSelectStmt() != nil, n.GetVariableShowStmt() != nil, n.GetExplainStmt() != nil:
		return true
	case n.GetFetchStmt() != nil:
		return !n.GetFetchStmt().Ismove
	case n.GetInsertStmt() != nil:
		return len(n.GetInsertStmt().ReturningList) > 0
	case n.GetUpdateStmt() != nil:
		return len(n.GetUpdateStmt().ReturningList) > 0
	case n.GetDeleteStmt() != nil:
		return len(n.GetDeleteStmt().ReturningList) > 0
	}
	return false
}

func stmtText(sql string, raw *pg.RawStmt) string {
	start, end := int(raw.StmtLocation), int(raw.StmtLocation+raw.StmtLen)
	if raw.StmtLen == 0 || end > len(sql) {
		end = len(sql)
	}
	if start < 0 || start > end {
		return sql
	}
	return sql[start:end]
}

// statementName names a statement kind for an error: "INSERT", "CREATE TABLE".
func statementName(n *pg.Node) string {
	name := fmt.Sprintf("%T", n.GetNode())
	name = strings.TrimSuffix(strings.TrimPrefix(name, "*pg_query.Node_"), "Stmt")
	var b strings.Builder
	for i, r := range name {
		if i > 0 && r >= 'A' && r <= 'Z' {
			b.WriteByte(' ')
		}
		b.WriteRune(r)
	}
	return strings.ToUpper(b.String())
}

func (s *session) planOne(ctx context.Context, sql string, raw *pg.RawStmt, version int32) (*stmt, error) {
	n := raw.Stmt
	switch {
	case n.GetVariableSetStmt() != nil:
		return s.planSet(n.GetVariableSetStmt())
	case n.GetVariableShowStmt() != nil:
		name := strings.ToLower(n.GetVariableShowStmt().Name)
		if name == "all" {
			st := &stmt{tag: "SHOW", cols: []column{{"name", oidText}, {"setting", oidText}}}
			keys := make([]string, 0, len(s.settings))
			for k := range s.settings {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				st.rows = append(st.rows, []any{k, s.settings[k]})
			}
			return st, nil
		}
		v, ok := s.settings[name]
		if !ok {
			return nil, &pgError{code: "42704", msg: fmt.Sprintf("unrecognized configuration parameter %q", name)}
		}
		return &stmt{tag: "SHOW", cols: []column{{name, oidText}}, rows: [][]any{{v}}}, nil
	case n.GetTransactionStmt() != nil:
		return planTransaction(n.GetTransactionStmt())
	case n.GetSelectStmt() != nil:
		return s.planSelect(ctx, stmtText(sql, raw), n.GetSelectStmt(), version)
	case n.GetInsertStmt() != nil:
		return planInsert(n.GetInsertStmt())
	case n.GetUpdateStmt() != nil:
		return planUpdate(n.GetUpdateStmt())
	case n.GetDeleteStmt() != nil:
		return planDelete(n.GetDeleteStmt())
	case n.GetCopyStmt() != nil:
		return s.planCopy(ctx, stmtText(sql, raw), n.GetCopyStmt(), version)
	case n.GetDeclareCursorStmt() != nil:
		return s.planDeclare(ctx, stmtText(sql, raw), n.GetDeclareCursorStmt(), version)
	case n.GetFetchStmt() != nil:
		return planFetch(n.GetFetchStmt())
	case n.GetClosePortalStmt() != nil:
		return &stmt{tag: "CLOSE CURSOR", closeCursor: &closeStmt{name: n.GetClosePortalStmt().Portalname}}, nil
	}
	return nil, notSupported(statementName(n))
}

func planTransaction(t *pg.TransactionStmt) (*stmt, error) {
	switch t.Kind {
	case pg.TransactionStmtKind_TRANS_STMT_BEGIN, pg.TransactionStmtKind_TRANS_STMT_START:
		return &stmt{tag: "BEGIN", txnOp: 'B'}, nil
	case pg.TransactionStmtKind_TRANS_STMT_COMMIT:
		if t.Chain {
			return nil, notSupported("COMMIT AND CHAIN")
		}
		return &stmt{tag: "COMMIT", txnOp: 'C'}, nil
	case pg.TransactionStmtKind_TRANS_STMT_ROLLBACK:
		if t.Chain {
			return nil, notSupported("ROLLBACK AND CHAIN")
		}
		return &stmt{tag: "ROLLBACK", txnOp: 'R'}, nil
	case pg.TransactionStmtKind_TRANS_STMT_ROLLBACK_TO, pg.TransactionStmtKind_TRANS_STMT_RELEASE:
		// SAVEPOINT is refused, so there is none to roll back to or
		// release: PostgreSQL's errors for a savepoint it does not know.
		what := "ROLLBACK TO SAVEPOINT"
		if t.Kind == pg.TransactionStmtKind_TRANS_STMT_RELEASE {
			what = "RELEASE SAVEPOINT"
		}
		return &stmt{tag: what, txnOp: 'S', savepoint: t.SavepointName}, nil
	}
	return nil, notSupported("this transaction statement (savepoints, two-phase commit)")
}

// runTransaction runs BEGIN, COMMIT, ROLLBACK as PostgreSQL does: BEGIN
// in a block and COMMIT or ROLLBACK outside one warn; COMMIT of a failed
// block rolls it back (its tag says so). Nothing but the session's
// cursors is transactional: a change statement is durable when it
// completes, block or not.
func (s *session) runTransaction(st *stmt) error {
	tag := st.tag
	switch st.txnOp {
	case 'B':
		if s.txn != 'I' {
			s.notice("25001", "there is already a transaction in progress")
		}
		s.txn = 'T'
	case 'C', 'R':
		if s.txn == 'I' {
			s.notice("25P01", "there is no transaction in progress")
		}
		if s.txn == 'E' {
			tag = "ROLLBACK"
		}
		s.endTransaction(st.txnOp == 'C' && s.txn == 'T')
	case 'S':
		if s.txn == 'I' {
			return &pgError{code: "25P01", msg: st.tag + " can only be used in transaction blocks"}
		}
		return &pgError{code: "3B001", msg: fmt.Sprintf("savepoint %q does not exist", st.savepoint)}
	}
	s.be.Send(&pgproto3.CommandComplete{CommandTag: []byte(tag)})
	s.srv.queries.WithLabelValues("ok").Inc()
	return nil
}

func constText(n *pg.Node) (string, bool) {
	if tc := n.GetTypeCast(); tc != nil {
		return constText(tc.Arg)
	}
	c := n.GetAConst()
	if c == nil {
		return "", false
	}
	switch v := c.Val.(type) {
	case *pg.A_Const_Sval:
		return v.Sval.Sval, true
	case *pg.A_Const_Ival:
		return strconv.Itoa(int(v.Ival.Ival)), true
	case *pg.A_Const_Fval:
		return v.Fval.Fval, true
	case *pg.A_Const_Boolval:
		if v.Boolval.Boolval {
			return "on", true
		}
		return "off", true
	}
	return "", false
}

func (s *session) planSet(v *pg.VariableSetStmt) (*stmt, error) {
	name := strings.ToLower(v.Name)
	switch v.Kind {
	case pg.VariableSetKind_VAR_SET_VALUE:
		var parts []string
		for _, a := range v.Args {
			t, ok := constText(a)
			if !ok {
				return nil, notSupported("SET " + name + " to an expression")
			}
			parts = append(parts, t)
		}
		value := strings.Join(parts, ", ")
		if name == "statement_timeout" {
			if _, err := parseTimeout(value); err != nil {
				return nil, &pgError{code: "22023", msg: err.Error()}
			}
		}
		return &stmt{tag: "SET", apply: func(s *session) { s.settings[name] = value }}, nil
	case pg.VariableSetKind_VAR_SET_DEFAULT, pg.VariableSetKind_VAR_RESET:
		return &stmt{tag: "SET", apply: func(s *session) { s.settings[name] = defaultSettings()[name] }}, nil
	case pg.VariableSetKind_VAR_RESET_ALL:
		return &stmt{tag: "RESET", apply: func(s *session) { s.resetSettings() }}, nil
	case pg.VariableSetKind_VAR_SET_MULTI:
		// SET TRANSACTION ..., SET SESSION CHARACTERISTICS: nothing to keep.
		return &stmt{tag: "SET"}, nil
	}
	return nil, notSupported("this SET")
}

// parseTimeout reads statement_timeout: milliseconds, or a number with a
// unit (ms, s, min, h, d).
func parseTimeout(v string) (time.Duration, error) {
	v = strings.TrimSpace(strings.ToLower(v))
	if ms, err := strconv.ParseInt(v, 10, 64); err == nil && ms >= 0 {
		return time.Duration(ms) * time.Millisecond, nil
	}
	i := strings.IndexFunc(v, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	if i > 0 {
		num, err := strconv.ParseFloat(v[:i], 64)
		unit := map[string]time.Duration{"us": time.Microsecond, "ms": time.Millisecond, "s": time.Second, "min": time.Minute, "h": time.Hour, "d": 24 * time.Hour}[strings.TrimSpace(v[i:])]
		if err == nil && unit > 0 && num >= 0 {
			return time.Duration(num * float64(unit)), nil
		}
	}
	return 0, fmt.Errorf("invalid value for parameter \"statement_timeout\": %q", v)
}

// planSelect plans a SELECT: without FROM, answered here; over the
// system catalogs, answered from strata's catalog; otherwise a window
// query for the scheduler.
func (s *session) planSelect(ctx context.Context, text string, sel *pg.SelectStmt, version int32) (*stmt, error) {
	if len(sel.FromClause) == 0 && sel.Op == pg.SetOperation_SETOP_NONE && len(sel.ValuesLists) == 0 {
		return s.planConstSelect(sel)
	}
	if isCatalogQuery(sel) {
		return s.planCatalog(ctx, sel)
	}
	st := &stmt{tag: "SELECT", limit: -1}
	// OFFSET is not in sqlparse's form: take it (and LIMIT) off here and
	// apply them to the rows as they stream; LIMIT goes on to the windower
	// as LIMIT + OFFSET, so it never makes more rows than needed.
	if sel.LimitOffset != nil || sel.LimitCount != nil {
		if sel.LimitOffset != nil {
			off, ok, err := intConst(sel.LimitOffset, "OFFSET")
			if err != nil {
				return nil, err
			}
			if ok {
				st.offset = off
			}
		}
		if sel.LimitCount != nil {
			lim, ok, err := intConst(sel.LimitCount, "LIMIT")
			if err != nil {
				return nil, err
			}
			if ok {
				st.limit = lim
			}
		}
		sel.LimitOffset, sel.LimitCount = nil, nil
		if st.limit > 0 {
			sel.LimitCount = &pg.Node{Node: &pg.Node_AConst{AConst: &pg.A_Const{Val: &pg.A_Const_Ival{Ival: &pg.Integer{Ival: int32(min(st.limit+st.offset, 1<<31-1))}}}}}
		}
		deparsed, err := pg.Deparse(&pg.ParseResult{Version: version, Stmts: []*pg.RawStmt{{Stmt: &pg.Node{Node: &pg.Node_SelectStmt{SelectStmt: sel}}}}})
		if err != nil {
			return nil, &pgError{code: "XX000", msg: "rewriting LIMIT/OFFSET: " + err.Error()}
		}
		text = deparsed
	}
	q, err := sqlparse.Parse(text)
	if err != nil {
		return nil, parseError(err)
	}
	st.window = q
	return st, nil
}

// intConst reads LIMIT or OFFSET: an integer constant, or NULL (ok false).
func intConst(n *pg.Node, clause string) (int64, bool, error) {
	c := n.GetAConst()
	if c == nil {
		return 0, false, notSupported(clause + " that is not an integer constant")
	}
	if c.Isnull {
		return 0, false, nil
	}
	iv, ok := c.Val.(*pg.A_Const_Ival)
	if !ok || iv.Ival.Ival < 0 {
		return 0, false, &pgError{code: "2201W", msg: clause + " must be a non-negative integer"}
	}
	return int64(iv.Ival.Ival), true, nil
}

// parseError classes a sqlparse error.
func parseError(err error) *pgError {
	var pe *sqlparse.Error
	e := &pgError{code: "42601", msg: err.Error()}
	if errors.As(err, &pe) {
		e.msg = pe.Msg
		if pe.Offset >= 0 {
			e.pos = int32(pe.Offset + 1)
		}
		switch {
		case errors.Is(pe.Kind, sqlparse.ErrUnsupported):
			e.code = "0A000"
			e.msg += " (strata's SQL is one table's window query: SELECT items [WHERE] [WINDOW] [ORDER BY] [LIMIT] [OFFSET])"
		case errors.Is(pe.Kind, sqlparse.ErrInvalid):
			e.code = "42P20" // windowing_error
		}
	}
	return e
}

// jobError classes the reason a window job or request failed.
func jobError(err error) *pgError {
	var ae *messages.APIError
	if errors.As(err, &ae) {
		switch {
		case ae.Code == "not_found" && strings.Contains(ae.Message, "table"):
			return &pgError{code: "42P01", msg: ae.Message}
		case ae.Code == "not_found":
			return &pgError{code: "42704", msg: ae.Message}
		case strings.Contains(ae.Message, "never fit"), strings.Contains(ae.Message, "grant"):
			return &pgError{code: "53200", msg: ae.Message}
		case ae.Code == "invalid":
			return &pgError{code: "22023", msg: ae.Message}
		}
		return &pgError{code: "XX000", msg: ae.Message}
	}
	var jf *jobFailedError
	if !errors.As(err, &jf) {
		if errors.Is(err, apiclient.ErrNotReceived) {
			return &pgError{code: "08006", msg: err.Error()}
		}
		return &pgError{code: "XX000", msg: err.Error()}
	}
	r := jf.reason
	code := "XX000"
	switch {
	case strings.Contains(r, "division by zero"):
		code = "22012"
	case strings.Contains(r, "integer out of range"), strings.Contains(r, "value out of range"):
		code = "22003"
	case strings.Contains(r, "column") && strings.Contains(r, "does not exist"):
		code = "42703"
	case strings.Contains(r, "function") && strings.Contains(r, "does not exist"):
		code = "42883"
	case strings.Contains(r, "grant too small"):
		code = "53200"
	case strings.Contains(r, "windower: unsupported"):
		code = "0A000"
	case strings.Contains(r, "invalid query"):
		code = "42P20"
	}
	return &pgError{code: code, msg: r}
}

// planConstSelect answers a SELECT without FROM: constants and the few
// functions clients ask on connect.
func (s *session) planConstSelect(sel *pg.SelectStmt) (*stmt, error) {
	if sel.WhereClause != nil || len(sel.GroupClause) > 0 || sel.WithClause != nil {
		return nil, notSupported("this SELECT without FROM")
	}
	st := &stmt{tag: "SELECT"}
	var row []any
	for _, n := range sel.TargetList {
		rt := n.GetResTarget()
		v, oid, name, err := s.constValue(rt.Val)
		if err != nil {
			return nil, err
		}
		if rt.Name != "" {
			name = rt.Name
		}
		st.cols = append(st.cols, column{name, oid})
		row = append(row, v)
	}
	st.rows = [][]any{row}
	return st, nil
}

func (s *session) constValue(n *pg.Node) (any, uint32, string, error) {
	switch {
	case n.GetAConst() != nil:
		c := n.GetAConst()
		if c.Isnull {
			return nil, oidText, "?column?", nil
		}
		switch v := c.Val.(type) {
		case *pg.A_Const_Ival:
			return int64(v.Ival.Ival), oidInt4, "?column?", nil
		case *pg.A_Const_Fval:
			f, err := strconv.ParseFloat(v.Fval.Fval, 64)
			if err != nil {
				return nil, 0, "", &pgError{code: "22P02", msg: err.Error()}
			}
			if i, err := strconv.ParseInt(v.Fval.Fval, 10, 64); err == nil {
				return i, oidInt8, "?column?", nil
			}
			return f, oidFloat8, "?column?", nil
		case *pg.A_Const_Sval:
			return v.Sval.Sval, oidText, "?column?", nil
		case *pg.A_Const_Boolval:
			return v.Boolval.Boolval, oidBool, "bool", nil
		}
	case n.GetTypeCast() != nil:
		v, oid, _, err := s.constValue(n.GetTypeCast().Arg)
		if err != nil {
			return nil, 0, "", err
		}
		tn := n.GetTypeCast().TypeName
		name := ""
		if tn != nil && len(tn.Names) > 0 {
			name = tn.Names[len(tn.Names)-1].GetString_().Sval
		}
		return v, oid, name, nil
	case n.GetSqlvalueFunction() != nil:
		switch n.GetSqlvalueFunction().Op {
		case pg.SQLValueFunctionOp_SVFOP_CURRENT_USER, pg.SQLValueFunctionOp_SVFOP_SESSION_USER, pg.SQLValueFunctionOp_SVFOP_USER:
			return s.user.Name, oidText, "current_user", nil
		case pg.SQLValueFunctionOp_SVFOP_CURRENT_CATALOG:
			return s.database, oidText, "current_catalog", nil
		case pg.SQLValueFunctionOp_SVFOP_CURRENT_SCHEMA:
			return "public", oidText, "current_schema", nil
		}
	case n.GetFuncCall() != nil:
		fc := n.GetFuncCall()
		name := funcName(fc)
		switch name {
		case "version":
			return "PostgreSQL " + serverVersion + " on strata, compiled by Go", oidText, name, nil
		case "current_database":
			return s.database, oidText, name, nil
		case "current_schema":
			return "public", oidText, name, nil
		case "current_user", "session_user":
			return s.user.Name, oidText, name, nil
		case "pg_backend_pid":
			return int64(s.pid), oidInt4, name, nil
		case "current_setting":
			if len(fc.Args) >= 1 {
				if k, ok := constText(fc.Args[0]); ok {
					v, ok := s.settings[strings.ToLower(k)]
					if !ok {
						return nil, 0, "", &pgError{code: "42704", msg: fmt.Sprintf("unrecognized configuration parameter %q", k)}
					}
					return v, oidText, name, nil
				}
			}
		}
		return nil, 0, "", notSupported("function " + name + "() outside a window query")
	}
	return nil, 0, "", notSupported("this expression in a SELECT without FROM")
}

func funcName(fc *pg.FuncCall) string {
	if len(fc.Funcname) == 0 {
		return ""
	}
	return strings.ToLower(fc.Funcname[len(fc.Funcname)-1].GetString_().Sval)
}

// ---- the system catalogs ----

// catalogRelations are the system relations the front door models, with
// their columns; a query that reads others (indexes, constraints,
// policies ...) inner-joined gets no rows: strata has none of them.
var catalogRelations = map[string][]column{
	"pg_class": {{"oid", oidOid}, {"relname", oidText}, {"relnamespace", oidOid}, {"relkind", oidText}, {"relowner", oidOid},
		{"relchecks", oidInt2}, {"relhasindex", oidBool}, {"relhasrules", oidBool}, {"relhastriggers", oidBool},
		{"relrowsecurity", oidBool}, {"relforcerowsecurity", oidBool}, {"relispartition", oidBool}, {"reltablespace", oidOid},
		{"reloftype", oidOid}, {"relpersistence", oidText}, {"relreplident", oidText}, {"relam", oidOid}, {"reltoastrelid", oidOid},
		{"nspname", oidText}, {"amname", oidText}},
	"pg_namespace": {{"oid", oidOid}, {"nspname", oidText}},
	"pg_attribute": {{"attrelid", oidOid}, {"attname", oidText}, {"atttypid", oidOid}, {"attnum", oidInt2}, {"attnotnull", oidBool},
		{"atttypmod", oidInt4}, {"attisdropped", oidBool}, {"atthasdef", oidBool}, {"attidentity", oidText}, {"attgenerated", oidText},
		{"attcollation", oidOid}},
	"pg_type":  {{"oid", oidOid}, {"typname", oidText}, {"typnamespace", oidOid}, {"typlen", oidInt2}},
	"tables":   {{"table_catalog", oidText}, {"table_schema", oidText}, {"table_name", oidText}, {"table_type", oidText}},
	"columns":  {{"table_catalog", oidText}, {"table_schema", oidText}, {"table_name", oidText}, {"column_name", oidText}, {"ordinal_position", oidInt4}, {"data_type", oidText}, {"is_nullable", oidText}},
	"pg_am":    nil,
	"pg_roles": nil,
}

const (
	nsPublic  = 2200
	nsCatalog = 11
)

// tableOID is a table's stable OID: the same from every pgwire process.
func tableOID(name string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(name); i++ {
		h = (h ^ uint32(name[i])) * 16777619
	}
	return 16384 + h%(1<<30)
}

// rangeVars lists the relations of a FROM clause; inner tells whether
// each is inner-joined (a comma or INNER JOIN) rather than LEFT-joined.
func rangeVars(n *pg.Node, inner bool, out *[]*pg.RangeVar, innerOf map[*pg.RangeVar]bool) {
	switch {
	case n.GetRangeVar() != nil:
		*out = append(*out, n.GetRangeVar())
		innerOf[n.GetRangeVar()] = inner
	case n.GetJoinExpr() != nil:
		j := n.GetJoinExpr()
		rangeVars(j.Larg, inner, out, innerOf)
		rangeVars(j.Rarg, inner && j.Jointype == pg.JoinType_JOIN_INNER, out, innerOf)
	}
}

func isCatalogQuery(sel *pg.SelectStmt) bool {
	if sel.Larg != nil {
		return isCatalogQuery(sel.Larg) || isCatalogQuery(sel.Rarg)
	}
	var rvs []*pg.RangeVar
	innerOf := map[*pg.RangeVar]bool{}
	for _, f := range sel.FromClause {
		rangeVars(f, true, &rvs, innerOf)
	}
	for _, rv := range rvs {
		if rv.Schemaname == "pg_catalog" || rv.Schemaname == "information_schema" || strings.HasPrefix(rv.Relname, "pg_") {
			return true
		}
	}
	return false
}

// planCatalog answers a query over the system catalogs from strata's
// catalog: the rows of its first relation (pg_class joined with its
// namespace, pg_attribute, information_schema.tables or columns ...),
// filtered by the WHERE conditions it understands (=, <>, ~, IN, NOT;
// others are taken as true), with its select list evaluated over them.
// Enough for psql's \dt, \d and \d TABLE; other queries get no rows.
func (s *session) planCatalog(ctx context.Context, sel *pg.SelectStmt) (*stmt, error) {
	if sel.Op != pg.SetOperation_SETOP_NONE {
		// psql's \d asks for publications with a UNION: strata has none.
		first := sel
		for first.Larg != nil {
			first = first.Larg
		}
		st := &stmt{tag: "SELECT"}
		for _, n := range first.TargetList {
			rt := n.GetResTarget()
			name := rt.Name
			if name == "" {
				name = exprName(rt.Val)
			}
			st.cols = append(st.cols, column{name, oidText})
		}
		return st, nil
	}
	var rvs []*pg.RangeVar
	innerOf := map[*pg.RangeVar]bool{}
	for _, f := range sel.FromClause {
		rangeVars(f, true, &rvs, innerOf)
	}
	st := &stmt{tag: "SELECT"}
	rows, err := s.catalogRows(ctx, rvs, innerOf)
	if err != nil {
		return nil, err
	}
	var kept []map[string]any
	for _, r := range rows {
		if sel.WhereClause == nil || truthy(evalExpr(sel.WhereClause, r)) {
			kept = append(kept, r)
		}
	}
	for _, n := range sel.TargetList {
		rt := n.GetResTarget()
		if cr := rt.Val.GetColumnRef(); cr != nil && len(cr.Fields) > 0 && cr.Fields[len(cr.Fields)-1].GetAStar() != nil {
			return nil, notSupported("SELECT * over the system catalogs")
		}
		name := rt.Name
		if name == "" {
			name = exprName(rt.Val)
		}
		oid := uint32(oidText)
		for _, r := range kept {
			if v := evalExpr(rt.Val, r); v != nil && !isUnknown(v) {
				oid = goOID(v)
				break
			}
		}
		st.cols = append(st.cols, column{name, oid})
	}
	for _, r := range kept {
		row := make([]any, len(sel.TargetList))
		for i, n := range sel.TargetList {
			row[i] = evalExpr(n.GetResTarget().Val, r)
			if isUnknown(row[i]) {
				row[i] = nil // what the evaluator cannot work out is NULL
			}
			if row[i] != nil && goOID(row[i]) != st.cols[i].oid {
				row[i] = fmt.Sprint(row[i])
				st.cols[i].oid = oidText
			}
		}
		st.rows = append(st.rows, row)
	}
	sortCatalogRows(st, sel.SortClause)
	return st, nil
}

func goOID(v any) uint32 {
	switch v.(type) {
	case bool:
		return oidBool
	case int64:
		return oidInt8
	case uint32:
		return oidOid
	}
	return oidText
}

// catalogRows returns the rows of the first relation, as maps from
// column name to value (pg_class rows carry their namespace's nspname).
func (s *session) catalogRows(ctx context.Context, rvs []*pg.RangeVar, innerOf map[*pg.RangeVar]bool) ([]map[string]any, error) {
	if len(rvs) == 0 {
		return nil, nil
	}
	for _, rv := range rvs[1:] {
		if _, ok := catalogRelations[rv.Relname]; !ok && innerOf[rv] {
			return nil, nil // joined with what strata has none of
		}
	}
	first := rvs[0].Relname
	if _, ok := catalogRelations[first]; !ok {
		return nil, nil
	}
	var rows []map[string]any
	switch first {
	case "pg_namespace":
		return []map[string]any{{"oid": uint32(nsPublic), "nspname": "public"}, {"oid": uint32(nsCatalog), "nspname": "pg_catalog"}}, nil
	case "pg_type":
		for oid, name := range typeName {
			rows = append(rows, map[string]any{"oid": oid, "typname": name, "typnamespace": uint32(nsCatalog), "typlen": int64(typeSize(oid))})
		}
		return rows, nil
	case "pg_am", "pg_roles":
		return nil, nil
	}
	tables, err := s.srv.sched.tables(ctx, "")
	if err != nil {
		return nil, &pgError{code: "08006", msg: "reading strata's catalog: " + err.Error()}
	}
	for _, t := range tables {
		oid := tableOID(t.name)
		switch first {
		case "pg_class":
			rows = append(rows, map[string]any{"oid": oid, "relname": t.name, "relnamespace": uint32(nsPublic), "relkind": "r", "relowner": uint32(10),
				"relchecks": int64(0), "relhasindex": false, "relhasrules": false, "relhastriggers": false, "relrowsecurity": false,
				"relforcerowsecurity": false, "relispartition": false, "reltablespace": uint32(0), "reloftype": uint32(0),
				"relpersistence": "p", "relreplident": "d", "relam": uint32(2), "reltoastrelid": uint32(0), "nspname": "public", "amname": "columnar"})
		case "tables":
			rows = append(rows, map[string]any{"table_catalog": s.database, "table_schema": "public", "table_name": t.name, "table_type": "BASE TABLE"})
		case "pg_attribute", "columns":
			for i, c := range t.columns {
				typ, nullable := columnType(c.Type, c.TimeZone), c.Nullable
				if first == "columns" {
					rows = append(rows, map[string]any{"table_catalog": s.database, "table_schema": "public", "table_name": t.name, "column_name": c.Name,
						"ordinal_position": int64(i + 1), "data_type": typeName[typ], "is_nullable": map[bool]string{true: "YES", false: "NO"}[nullable]})
					continue
				}
				rows = append(rows, map[string]any{"attrelid": oid, "attname": c.Name, "atttypid": typ, "attnum": int64(i + 1), "attnotnull": !nullable,
					"atttypmod": int64(-1), "attisdropped": false, "atthasdef": false, "attidentity": "", "attgenerated": "", "attcollation": uint32(0)})
			}
		}
	}
	return rows, nil
}

// columnType is the PostgreSQL type of a manifest column type.
func columnType(t, tz string) uint32 {
	switch t {
	case "int8", "int16", "uint8":
		return oidInt2
	case "int32", "uint16":
		return oidInt4
	case "int64", "uint32":
		return oidInt8
	case "uint64":
		return oidNumeric
	case "float32":
		return oidFloat4
	case "float64":
		return oidFloat8
	case "bool":
		return oidBool
	case "utf8":
		return oidText
	case "binary":
		return oidBytea
	case "date32":
		return oidDate
	case "timestamp_us":
		if tz != "" {
			return oidTimestamptz
		}
		return oidTimestamp
	}
	return oidText
}

func exprName(n *pg.Node) string {
	switch {
	case n.GetColumnRef() != nil:
		f := n.GetColumnRef().Fields
		if s := f[len(f)-1].GetString_(); s != nil {
			return s.Sval
		}
	case n.GetFuncCall() != nil:
		return funcName(n.GetFuncCall())
	case n.GetTypeCast() != nil:
		return exprName(n.GetTypeCast().Arg)
	case n.GetCaseExpr() != nil:
		return "case"
	}
	return "?column?"
}

func truthy(v any) bool { b, ok := v.(bool); return ok && b }

func textOf(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case bool:
		if x {
			return "t"
		}
		return "f"
	}
	return fmt.Sprint(v)
}

// unknown stands for what the evaluator cannot work out: a condition on
// it is taken as true.
type unknown struct{}

// evalExpr evaluates n over a catalog row.
func evalExpr(n *pg.Node, row map[string]any) any {
	switch {
	case n == nil:
		return nil
	case n.GetColumnRef() != nil:
		f := n.GetColumnRef().Fields
		if s := f[len(f)-1].GetString_(); s != nil {
			if v, ok := row[s.Sval]; ok {
				return v
			}
		}
		return nil
	case n.GetAConst() != nil:
		v, _ := constText(n)
		if n.GetAConst().Isnull {
			return nil
		}
		if _, ok := n.GetAConst().Val.(*pg.A_Const_Boolval); ok {
			return v == "on"
		}
		return v
	case n.GetTypeCast() != nil:
		return evalExpr(n.GetTypeCast().Arg, row)
	case n.GetCollateClause() != nil:
		return evalExpr(n.GetCollateClause().Arg, row)
	case n.GetBoolExpr() != nil:
		b := n.GetBoolExpr()
		switch b.Boolop {
		case pg.BoolExprType_AND_EXPR:
			for _, a := range b.Args {
				if v := evalExpr(a, row); !truthy(v) && !isUnknown(v) {
					return false
				}
			}
			return true
		case pg.BoolExprType_OR_EXPR:
			for _, a := range b.Args {
				if v := evalExpr(a, row); truthy(v) || isUnknown(v) {
					return true
				}
			}
			return false
		case pg.BoolExprType_NOT_EXPR:
			v := evalExpr(b.Args[0], row)
			if isUnknown(v) {
				return true
			}
			return !truthy(v)
		}
	case n.GetAExpr() != nil:
		return evalAExpr(n.GetAExpr(), row)
	case n.GetCaseExpr() != nil:
		c := n.GetCaseExpr()
		arg := evalExpr(c.Arg, row)
		for _, w := range c.Args {
			cw := w.GetCaseWhen()
			if c.Arg != nil {
				if textOf(arg) == textOf(evalExpr(cw.Expr, row)) {
					return evalExpr(cw.Result, row)
				}
			} else if truthy(evalExpr(cw.Expr, row)) {
				return evalExpr(cw.Result, row)
			}
		}
		return evalExpr(c.Defresult, row)
	case n.GetFuncCall() != nil:
		fc := n.GetFuncCall()
		switch funcName(fc) {
		case "pg_table_is_visible":
			return true
		case "pg_get_userbyid":
			return "strata"
		case "format_type":
			if len(fc.Args) > 0 {
				if oid, ok := evalExpr(fc.Args[0], row).(uint32); ok {
					return typeName[oid]
				}
			}
			return nil
		case "quote_ident", "lower", "upper":
			if len(fc.Args) == 1 {
				v := evalExpr(fc.Args[0], row)
				str, ok := v.(string)
				if !ok {
					return v
				}
				switch funcName(fc) {
				case "lower":
					return strings.ToLower(str)
				case "upper":
					return strings.ToUpper(str)
				}
				if regexp.MustCompile(`^[a-z_][a-z0-9_]*$`).MatchString(str) {
					return str
				}
				return `"` + strings.ReplaceAll(str, `"`, `""`) + `"`
			}
			return unknown{}
		case "obj_description", "col_description", "pg_get_expr", "array_to_string":
			return nil
		}
		return unknown{}
	case n.GetNullTest() != nil:
		v := evalExpr(n.GetNullTest().Arg, row)
		if isUnknown(v) {
			return unknown{}
		}
		return (v == nil) == (n.GetNullTest().Nulltesttype == pg.NullTestType_IS_NULL)
	case n.GetSubLink() != nil:
		return nil
	}
	return unknown{}
}

func isUnknown(v any) bool { _, ok := v.(unknown); return ok }

func evalAExpr(a *pg.A_Expr, row map[string]any) any {
	op := ""
	if len(a.Name) > 0 {
		op = a.Name[len(a.Name)-1].GetString_().Sval
	}
	l := evalExpr(a.Lexpr, row)
	switch a.Kind {
	case pg.A_Expr_Kind_AEXPR_IN:
		if isUnknown(l) {
			return unknown{}
		}
		list := a.Rexpr.GetList()
		if list == nil {
			return unknown{}
		}
		in := false
		for _, item := range list.Items {
			if textOf(evalExpr(item, row)) == textOf(l) {
				in = true
			}
		}
		return in == (op == "=")
	case pg.A_Expr_Kind_AEXPR_OP:
	default:
		return unknown{}
	}
	r := evalExpr(a.Rexpr, row)
	if isUnknown(l) || isUnknown(r) {
		return unknown{}
	}
	if l == nil || r == nil {
		return nil
	}
	ls, rs := textOf(l), textOf(r)
	switch op {
	case "=":
		return ls == rs
	case "<>", "!=":
		return ls != rs
	case "~", "!~", "~*", "!~*":
		pat := rs
		if strings.HasSuffix(op, "*") {
			pat = "(?i)" + pat
		}
		re, err := regexp.Compile(pat)
		if err != nil {
			return unknown{}
		}
		return re.MatchString(ls) == !strings.HasPrefix(op, "!")
	case "<", ">", "<=", ">=":
		li, err1 := strconv.ParseInt(ls, 10, 64)
		ri, err2 := strconv.ParseInt(rs, 10, 64)
		if err1 != nil || err2 != nil {
			return unknown{}
		}
		return map[string]bool{"<": li < ri, ">": li > ri, "<=": li <= ri, ">=": li >= ri}[op]
	}
	return unknown{}
}

// sortCatalogRows applies ORDER BY positions and column names.
func sortCatalogRows(st *stmt, sortBy []*pg.Node) {
	var keys []int
	for _, n := range sortBy {
		sb := n.GetSortBy()
		if c := sb.Node.GetAConst(); c != nil {
			if iv, ok := c.Val.(*pg.A_Const_Ival); ok && int(iv.Ival.Ival) >= 1 && int(iv.Ival.Ival) <= len(st.cols) {
				keys = append(keys, int(iv.Ival.Ival)-1)
			}
			continue
		}
		name := exprName(sb.Node)
		for i, c := range st.cols {
			if c.name == name {
				keys = append(keys, i)
				break
			}
		}
	}
	slices.SortStableFunc(st.rows, func(a, b []any) int {
		for _, k := range keys {
			if c := compareAny(a[k], b[k]); c != 0 {
				return c
			}
		}
		return 0
	})
}

func compareAny(a, b any) int {
	ai, aok := a.(int64)
	bi, bok := b.(int64)
	if aok && bok {
		return map[bool]int{true: -1, false: 1}[ai < bi] * map[bool]int{true: 0, false: 1}[ai == bi]
	}
	return strings.Compare(textOf(a), textOf(b))
}
