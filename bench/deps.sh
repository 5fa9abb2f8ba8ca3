#!/usr/bin/env bash
# Installs what the benchmarks need besides Go on a Debian machine: the
# PostgreSQL 15 server (initdb, pg_ctl, postgres under
# /usr/lib/postgresql/15/bin). DuckDB comes with the Go module. Needs root
# (or sudo). The bench runs its own throwaway cluster, so the service the
# package starts is not used; it is left as the package manager set it up.
set -euo pipefail

pg_bin=/usr/lib/postgresql/15/bin
if [[ -x "$pg_bin/initdb" && -x "$pg_bin/pg_ctl" && -x "$pg_bin/postgres" ]]; then
	echo "PostgreSQL 15 server binaries already in $pg_bin"
	exit 0
fi

sudo=""
if [[ $(id -u) -ne 0 ]]; then
	if ! command -v sudo >/dev/null; then
		echo "bench-deps: run as root (or install sudo) to install PostgreSQL 15" >&2
		exit 1
	fi
	sudo=sudo
fi

export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update
# Debian 12 (bookworm) ships PostgreSQL 15 as postgresql-15.
if apt-cache show postgresql-15 >/dev/null 2>&1; then
	$sudo apt-get install -y --no-install-recommends postgresql-15
else
	echo "bench-deps: this distribution has no postgresql-15 package; install PostgreSQL 15 and pass --pg-bin DIR to the bench" >&2
	exit 1
fi

test -x "$pg_bin/initdb" || { echo "bench-deps: $pg_bin/initdb missing after install" >&2; exit 1; }
echo "PostgreSQL 15 installed in $pg_bin"
