#!/usr/bin/env bash
# Installs what the benchmarks and tests need besides Go on a Debian
# machine: the PostgreSQL 15 server (initdb, pg_ctl, postgres under
# /usr/lib/postgresql/15/bin) and psycopg 3 for /usr/bin/python3
# (python3-psycopg: integration's TestPgwirePsycopg, which fails without
# it when CI=true). DuckDB comes with the Go module. Needs root (or sudo).
# The bench runs its own throwaway cluster, so the service the package
# starts is not used; it is left as the package manager set it up.
set -euo pipefail

pg_bin=/usr/lib/postgresql/15/bin
packages=()
if [[ -x "$pg_bin/initdb" && -x "$pg_bin/pg_ctl" && -x "$pg_bin/postgres" ]]; then
	echo "PostgreSQL 15 server binaries already in $pg_bin"
else
	packages+=(postgresql-15)
fi
if /usr/bin/python3 -c 'import psycopg' >/dev/null 2>&1; then
	echo "psycopg already importable by /usr/bin/python3"
else
	packages+=(python3-psycopg)
fi
if [[ ${#packages[@]} -eq 0 ]]; then
	exit 0
fi

sudo=""
if [[ $(id -u) -ne 0 ]]; then
	if ! command -v sudo >/dev/null; then
		echo "bench-deps: run as root (or install sudo) to install ${packages[*]}" >&2
		exit 1
	fi
	sudo=sudo
fi

export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update
# Debian 12 (bookworm) ships PostgreSQL 15 as postgresql-15 and psycopg 3
# as python3-psycopg.
for p in "${packages[@]}"; do
	if ! apt-cache show "$p" >/dev/null 2>&1; then
		case $p in
		postgresql-15) echo "bench-deps: this distribution has no postgresql-15 package; install PostgreSQL 15 and pass --pg-bin DIR to the bench" >&2 ;;
		*) echo "bench-deps: this distribution has no $p package" >&2 ;;
		esac
		exit 1
	fi
done
$sudo apt-get install -y --no-install-recommends "${packages[@]}"

test -x "$pg_bin/initdb" || { echo "bench-deps: $pg_bin/initdb missing after install" >&2; exit 1; }
/usr/bin/python3 -c 'import psycopg' || { echo "bench-deps: /usr/bin/python3 cannot import psycopg after install" >&2; exit 1; }
echo "installed: ${packages[*]}"
