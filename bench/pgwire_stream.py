"""The pgwire suite's client: psycopg 3 streams one query's rows (text
results, cursor.stream(): single-row mode) and prints one JSON line with
the time to the first row, to the last, and an order-independent checksum
of (k0, s, rn) rows, so that strata's and PostgreSQL's results can be
compared without sorting them.

usage: python3 pgwire_stream.py CONNINFO QUERY [--server-cpu]

With --server-cpu (a PostgreSQL server on this machine) it also prints the
CPU seconds the connection's backend process spent from the query to the
last row, from /proc.

Run with PYTHONHASHSEED=0 so that hash(str) is the same in every run.
"""

import json
import os
import sys
import time

import psycopg


def cpu_seconds(pid):
    """utime + stime of process pid, from /proc/PID/stat."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main():
    conninfo, query = sys.argv[1], sys.argv[2]
    server_cpu = len(sys.argv) > 3 and sys.argv[3] == "--server-cpu"
    with psycopg.connect(conninfo, autocommit=True) as conn:
        cur = conn.cursor()
        cpu0 = cpu_seconds(conn.info.backend_pid) if server_cpu else 0
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
        cpu = cpu_seconds(conn.info.backend_pid) - cpu0 if server_cpu else 0
    print(json.dumps({
        "seconds": seconds,
        "first_row": first or seconds,
        "rows": n,
        "sum_k0": sum_k0,
        "sum_rn": sum_rn,
        "nulls": nulls,
        "chars": chars,
        "hash": h % (1 << 64),
        "server_cpu": cpu,
        "client_cpu": time.process_time(),
        "client_sys": os.times().system,
        "client": "psycopg %s, Python %s" % (psycopg.__version__, sys.version.split()[0]),
    }))


if __name__ == "__main__":
    main()
