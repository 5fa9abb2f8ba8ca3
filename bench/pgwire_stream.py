"""The pgwire suite's client: psycopg 3 streams one query's rows (text
results, cursor.stream(): single-row mode) and prints one JSON line with
the time to the first row, to the last, and an order-independent checksum
of (k0, s, rn) rows, so that strata's and PostgreSQL's results can be
compared without sorting them.

usage: python3 pgwire_stream.py CONNINFO QUERY

Run with PYTHONHASHSEED=0 so that hash(str) is the same in every run.
"""

import json
import sys
import time

import psycopg


def main():
    conninfo, query = sys.argv[1], sys.argv[2]
    with psycopg.connect(conninfo, autocommit=True) as conn:
        cur = conn.cursor()
        n = sum_k0 = sum_rn = nulls = chars = h = 0
        first = None
        start = time.perf_counter()
        for k0, s, rn in cur.stream(query):
            if first is None:
                first = time.perf_counter() - start
            n += 1
            sum_k0 += k0
            sum_rn += rn
            if s is None:
                nulls += 1
            else:
                chars += len(s)
                h += hash(s)
        seconds = time.perf_counter() - start
    print(json.dumps({
        "seconds": seconds,
        "first_row": first or seconds,
        "rows": n,
        "sum_k0": sum_k0,
        "sum_rn": sum_rn,
        "nulls": nulls,
        "chars": chars,
        "hash": h % (1 << 64),
        "client": "psycopg %s, Python %s" % (psycopg.__version__, sys.version.split()[0]),
    }))


if __name__ == "__main__":
    main()
