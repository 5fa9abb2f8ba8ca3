"""psycopg 3 against strata's pgwire (run by TestPgwirePsycopg).

usage: pgwire_psycopg.py DSN OUTDIR

Runs the queries a Python client would, through every road psycopg has,
and writes what it got to OUTDIR for the Go test to compare with the
strata CLI's results on the same data:

  <name>.rows     one row a line, fields joined by "|", NULL as NULL
                  (text/int/float/bool/timestamp canonicalised as the
                  CLI's CSV writes them), for simple, extended, prepared,
                  client-side-bound, binary and named-cursor results;
  copy_out.csv    the bytes of COPY (SELECT ...) TO STDOUT (FORMAT csv, HEADER);
  copy_out.txt    the bytes of COPY ... TO STDOUT in the text format;
  summary.json    tags, row counts, the fetchmany pieces, the COPY FROM
                  results (text, CSV, binary), the rows of a binary COPY
                  TO and the SQLSTATE of the refused COPY.
"""

import datetime
import json
import os
import sys

import psycopg
from psycopg import sql

DSN, OUT = sys.argv[1], sys.argv[2]

# The typed query: every kind of column the generated table t has.
TYPED = (
    "SELECT k0, c001_utf8, c002_float64, c003_timestamp_us, c004_int32, c005_bool, "
    "row_number() OVER (PARTITION BY c005_bool ORDER BY k0) AS rn FROM t"
)
# The large result, for the named cursor.
BIG = "SELECT k0, c004_int32, rank() OVER (PARTITION BY c005_bool ORDER BY k0) AS r FROM big"


def canon(v):
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, datetime.datetime):
        zone = ""
        if v.tzinfo is not None:  # timestamptz: in UTC, as the CLI writes it
            v, zone = v.astimezone(datetime.timezone.utc), "Z"
        s = v.strftime("%Y-%m-%d %H:%M:%S")
        if v.microsecond:
            s += (".%06d" % v.microsecond).rstrip("0")
        return s + zone
    return str(v)


def write_rows(name, rows):
    with open(os.path.join(OUT, name + ".rows"), "w", encoding="utf-8") as f:
        for r in rows:
            f.write("|".join(canon(v) for v in r).replace("\n", "\\n") + "\n")


summary = {}

with psycopg.connect(DSN, autocommit=True) as conn:
    summary["server_version"] = conn.info.server_version

    # Extended protocol, server-side binding (psycopg's default).
    cur = conn.cursor()
    cur.execute(TYPED + " WHERE c004_int32 > %s", (0,))
    write_rows("extended", cur.fetchall())
    summary["extended_status"] = cur.statusmessage
    summary["extended_types"] = [d.type_code for d in cur.description]

    # Prepared: the same statement three times, named after the second.
    for i in range(3):
        cur.execute(TYPED + " WHERE c004_int32 > %s", (0,), prepare=True)
        rows = cur.fetchall()
    write_rows("prepared", rows)

    # Binary results.
    bcur = conn.cursor(binary=True)
    bcur.execute(TYPED + " WHERE c004_int32 > %s", (0,))
    write_rows("binary", bcur.fetchall())
    summary["binary_formats"] = [int(bcur.pgresult.fformat(i)) for i in range(bcur.pgresult.nfields)]

    # Client-side binding: the simple query protocol.
    ccur = psycopg.ClientCursor(conn)
    ccur.execute(TYPED + " WHERE c004_int32 > %s AND c001_utf8 <> %s", (0, "it's not there"))
    write_rows("client", ccur.fetchall())

    # Without parameters: the simple protocol too.
    cur.execute(TYPED)
    write_rows("all", cur.fetchall())

    # COPY ... TO STDOUT, CSV with a header and text.
    with open(os.path.join(OUT, "copy_out.csv"), "wb") as f:
        with cur.copy(sql.SQL("COPY ({} ORDER BY k0) TO STDOUT WITH (FORMAT csv, HEADER)").format(sql.SQL(TYPED))) as cp:
            for data in cp:
                f.write(data)
    with open(os.path.join(OUT, "copy_out.txt"), "wb") as f:
        with cur.copy("COPY (" + TYPED + " ORDER BY k0) TO STDOUT") as cp:
            for data in cp:
                f.write(data)

    # COPY FROM STDIN: rows written by psycopg (the text format, None as
    # \N), into the keyed table acc.
    with cur.copy("COPY acc (id, g, v, s) FROM STDIN") as cp:
        for i in range(2001, 2201):
            cp.write_row((i, i % 4, i / 8, None if i % 10 == 0 else "row %d, tab\there" % i))
    summary["copy_in_status"] = cur.statusmessage
    # CSV written by hand, with a header.
    with cur.copy("COPY acc (id, g, v, s) FROM STDIN WITH (FORMAT csv, HEADER)") as cp:
        cp.write("id,g,v,s\n")
        for i in range(2201, 2211):
            cp.write('%d,%d,%s,"csv, %d"\n' % (i, i % 4, repr(i / 8), i))
    summary["copy_in_csv_status"] = cur.statusmessage
    # Binary COPY FROM: write_row with the columns' types set (psycopg
    # would otherwise send each Python int as the smallest integer type).
    with cur.copy("COPY acc (id, g, v, s) FROM STDIN (FORMAT binary)") as cp:
        cp.set_types(["bigint", "bigint", "double precision", "text"])
        for i in range(2301, 2321):
            cp.write_row((i, i % 4, i / 16, None if i % 7 == 0 else "binary \\x00-free, %d" % i))
    summary["copy_in_binary_status"] = cur.statusmessage
    # Binary COPY TO, read back as rows.
    with cur.copy("COPY (SELECT id, g, v, s FROM acc WHERE id > 2300 ORDER BY id) TO STDOUT (FORMAT binary)") as cp:
        cp.set_types(["bigint", "bigint", "double precision", "text"])
        summary["copy_out_binary"] = [list(r) for r in cp.rows()]
    # A bad row: nothing is loaded.
    try:
        with cur.copy("COPY acc (id, g, v, s) FROM STDIN") as cp:
            cp.write("3001\t1\t0.5\tfine\n3002\tnot a number\t0.5\tbad\n")
        summary["copy_bad"] = "no error"
    except psycopg.Error as e:
        summary["copy_bad"] = {"sqlstate": e.sqlstate, "message": str(e.diag.message_primary), "context": e.diag.context}
    cur.execute("SELECT id, g, v, s, count(*) OVER () AS n FROM acc WHERE id = %s", (3001,))
    summary["copy_bad_rows"] = len(cur.fetchall())

# A server-side cursor over a large result, read in pieces, in a
# transaction (psycopg's default without autocommit).
with psycopg.connect(DSN) as conn:
    with conn.cursor(name="big_cursor") as ncur:
        ncur.itersize = 10000
        ncur.execute(BIG)
        summary["named_description"] = [d.name for d in ncur.description]
        pieces = []
        rows = []
        while True:
            part = ncur.fetchmany(7919)
            if not part:
                break
            pieces.append(len(part))
            rows.extend(part)
        summary["named_pieces"] = len(pieces)
        summary["named_largest_piece"] = max(pieces)
    write_rows("named", rows)
    conn.commit()
    # WITH HOLD, iterated, after the transaction that declared it.
    with conn.cursor(name="held", withhold=True) as hcur:
        hcur.execute(TYPED + " WHERE c004_int32 > %s", (0,))
        conn.commit()
        write_rows("held", list(hcur))
    # Binary results through a named cursor.
    with conn.cursor(name="bin_cursor", binary=True) as bncur:
        bncur.execute(TYPED + " WHERE c004_int32 > %s", (0,))
        write_rows("named_binary", bncur.fetchmany(50) + bncur.fetchall())
    conn.commit()

with open(os.path.join(OUT, "summary.json"), "w") as f:
    json.dump(summary, f, indent=1)
