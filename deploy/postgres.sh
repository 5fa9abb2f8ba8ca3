#!/usr/bin/env bash
# A throwaway PostgreSQL 15 cluster for the tests that compare strata with
# PostgreSQL (windower's TestAgainstPostgres; `make test-postgres`, .ci/run).
# The cluster lives in one directory: data/, server.log and the unix socket
# it listens on (no TCP). Nothing outside that directory is touched, so it
# never clashes with a PostgreSQL the machine already runs.
#
#   deploy/postgres.sh run CMD ARGS...   start a cluster in a new temporary
#                                        directory, run CMD with the libpq
#                                        variables and STRATA_TEST_POSTGRES=1
#                                        set, stop and remove the cluster
#   eval "$(deploy/postgres.sh start [DIR])"
#                                        start a cluster in DIR (default: a new
#                                        temporary directory) and print the
#                                        variables to export
#   deploy/postgres.sh stop DIR          stop the cluster in DIR and remove DIR
#
# PostgreSQL refuses to run as root: under root the server runs as the
# postgres user the Debian packages create, and DIR is made its own (so it
# must be reachable by that user: the default, under ${TMPDIR:-/tmp}, is).
# `make bench-deps` installs the server.
#
# Environment: PG_BIN (server binaries, default /usr/lib/postgresql/15/bin),
# PG_PORT (the number in the socket's name, default 5432).
set -euo pipefail

PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}
PG_PORT=${PG_PORT:-5432}

usage() {
	cat >&2 <<-'EOF'
		usage: deploy/postgres.sh run CMD ARGS...
		       deploy/postgres.sh start [DIR]   (prints the variables to export)
		       deploy/postgres.sh stop DIR
	EOF
	exit 2
}

die() {
	echo "postgres.sh: $*" >&2
	exit 1
}

# as_server CMD ARGS...: run CMD as the user the server runs as.
as_server() {
	if [[ $(id -u) -eq 0 ]]; then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

pg_start() {
	local dir=$1 b
	for b in initdb pg_ctl postgres; do
		[[ -x $PG_BIN/$b ]] || die "$PG_BIN/$b not found (run \`make bench-deps\`, or set PG_BIN)"
	done
	if [[ $(id -u) -eq 0 ]]; then
		id postgres >/dev/null 2>&1 || die "running as root and there is no postgres user to run the server as"
		chown postgres: "$dir"
		as_server test -w "$dir" || die "the postgres user cannot write to $dir (choose a directory it can reach)"
	fi
	as_server "$PG_BIN/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 --locale=C --no-sync >"$dir/initdb.log" 2>&1 ||
		die "initdb failed: $(tail -n 5 "$dir/initdb.log")"
	# A test cluster: no TCP, no durability, nothing the tests do not need.
	cat >>"$dir/data/postgresql.conf" <<-EOF

		# strata test cluster (deploy/postgres.sh)
		listen_addresses = ''
		unix_socket_directories = '$dir'
		port = $PG_PORT
		fsync = off
		synchronous_commit = off
		full_page_writes = off
		jit = off
	EOF
	if ! as_server "$PG_BIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start >&2; then
		tail -n 20 "$dir/server.log" >&2 || true
		die "the server did not start (log: $dir/server.log)"
	fi
}

pg_stop() {
	local dir=$1
	if [[ -f $dir/data/postmaster.pid ]]; then
		as_server "$PG_BIN/pg_ctl" -D "$dir/data" -m fast -w -t 60 stop >&2 || echo "postgres.sh: pg_ctl stop failed" >&2
	fi
	rm -rf "$dir"
}

# env_of DIR: the variables that point libpq (psql, pgx) at the cluster.
env_of() {
	printf 'export PGHOST=%q PGPORT=%q PGUSER=postgres PGDATABASE=postgres STRATA_TEST_POSTGRES=1\n' "$1" "$PG_PORT"
}

new_dir() {
	mktemp -d "${TMPDIR:-/tmp}/strata-pg.XXXXXX"
}

[[ $# -ge 1 ]] || usage
cmd=$1
shift
case $cmd in
run)
	[[ $# -ge 1 ]] || usage
	dir=$(new_dir)
	trap 'pg_stop "$dir"' EXIT
	trap 'exit 130' INT TERM
	pg_start "$dir"
	eval "$(env_of "$dir")"
	export PATH="$PG_BIN:$PATH" # psql of the same version as the server
	echo "postgres.sh: PostgreSQL $("$PG_BIN/postgres" --version | awk '{print $3}') on the socket in $dir" >&2
	status=0
	"$@" || status=$?
	if [[ $status -ne 0 ]]; then
		echo "postgres.sh: $1 exited with status $status; the end of server.log:" >&2
		tail -n 20 "$dir/server.log" >&2 || true
	fi
	exit "$status"
	;;
start)
	[[ $# -le 1 ]] || usage
	if [[ $# -eq 1 ]]; then
		dir=$(cd "$1" && pwd) || die "$1: no such directory"
		[[ -z $(ls -A "$dir") ]] || die "$dir is not empty"
	else
		dir=$(new_dir)
	fi
	pg_start "$dir"
	env_of "$dir"
	echo "postgres.sh: started; stop with: deploy/postgres.sh stop $dir" >&2
	;;
stop)
	[[ $# -eq 1 ]] || usage
	[[ -d $1/data ]] || die "$1 holds no cluster"
	pg_stop "$1"
	;;
*)
	usage
	;;
esac
