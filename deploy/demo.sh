#!/usr/bin/env bash
# The strata demo (`make demo`): start a scheduler with an embedded NATS
# server, two mergers, a windower and a walwriter as separate processes;
# load a generated 200-column table as 32 containers; let mergeout run; run
# window queries; load pgbench_accounts keyed on aid, change an account's
# balance with strata changes and strata updates and query it again (the
# demo fails if the balance did not change); print the system tables; stop
# everything cleanly.
#
# Environment: BIN (binaries, default ./bin), DEMO_DIR (data and logs,
# default a new temporary directory), DEMO_PORT (NATS port, default 14222),
# DEMO_PG_PORT (pgwire's PostgreSQL clients, default 15433), DEMO_ROWS
# (rows per container, default 3000), DEMO_ACCOUNTS (pgbench_accounts rows,
# default 100000).
set -euo pipefail
cd "$(dirname "$0")/.."
. deploy/lib.sh

BIN=${BIN:-bin}
DEMO_DIR=${DEMO_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/strata-demo.XXXXXX")}
PORT=${DEMO_PORT:-14222}
PG_PORT=${DEMO_PG_PORT:-15433}
ROWS=${DEMO_ROWS:-3000}
ACCOUNTS=${DEMO_ACCOUNTS:-100000}
DATA=$DEMO_DIR/data
LOGS=$DEMO_DIR/logs
NATS=nats://127.0.0.1:$PORT
mkdir -p "$DATA" "$LOGS"
trap 'stop_all' EXIT

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
strata() { "$BIN/strata" "$@" --nats "$NATS" --data "$DATA"; }

step "starting the services (data and logs in $DEMO_DIR)"
start scheduler "$LOGS" "$BIN/scheduler" --data "$DATA" --listen "127.0.0.1:$PORT" --http 127.0.0.1:0
wait_port 127.0.0.1 "$PORT"
start merger-1 "$LOGS" "$BIN/merger" --nats "$NATS" --data "$DATA" --memory 256MiB --http 127.0.0.1:0 --worker merger-1
start merger-2 "$LOGS" "$BIN/merger" --nats "$NATS" --data "$DATA" --memory 256MiB --http 127.0.0.1:0 --worker merger-2
start windower "$LOGS" "$BIN/windower" --nats "$NATS" --data "$DATA" --memory 256MiB --block-cache 64MiB --http 127.0.0.1:0 --worker windower-1
start walwriter "$LOGS" "$BIN/walwriter" --nats "$NATS" --data "$DATA" --http 127.0.0.1:0 --worker walwriter-1
start pgwire "$LOGS" "$BIN/pgwire" --nats "$NATS" --data "$DATA" --http 127.0.0.1:0 --pg-listen "127.0.0.1:$PG_PORT"
sleep 1

step "loading a generated 200-column table as 32 containers of $ROWS rows"
strata load --table demo --columns 200 --key-columns 1 --containers 32 --rows "$ROWS" --block-rows 8192

step "mergeout: the scheduler merges the loaded strata; waiting for it"
# Loading registers the containers; the scheduler starts the mergeouts its
# strata call for. Ask for one more (it merges whatever is left), then wait
# until no operation on the table is queued or running.
strata mergeout demo || true
for ((i = 0; i < 600; i++)); do
	if ! strata ops --table demo --format csv | grep -Eq ',(queued|running),'; then
		break
	fi
	sleep 0.5
done

step "window query: top rows by a float column"
strata window "SELECT k0, c002_float64, row_number() OVER (ORDER BY c002_float64 DESC NULLS LAST) AS rn FROM demo" --rows 10 ||
	echo "(window query failed; see $LOGS/windower.log)"

step "window query: running sum per partition"
strata window "SELECT k0, c004_int32, sum(c002_float64) OVER (PARTITION BY c004_int32 % 10 ORDER BY k0 ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) AS s FROM demo" --rows 10 ||
	echo "(window query failed; see $LOGS/windower.log)"

step "the same table over the PostgreSQL protocol (pgwire on 127.0.0.1:$PG_PORT)"
if command -v psql >/dev/null; then
	PGPASSWORD=$(cat "$DATA/pg-auth/strata.password") PGCONNECT_TIMEOUT=10 psql "host=127.0.0.1 port=$PG_PORT user=strata dbname=strata" \
		-c "SELECT k0, c004_int32, rank() OVER (PARTITION BY c004_int32 % 10 ORDER BY k0) AS r FROM demo LIMIT 5" ||
		echo "(psql failed; see $LOGS/pgwire.log)"
else
	echo "psql is not installed; with it: PGPASSWORD=\$(cat $DATA/pg-auth/strata.password) psql \"host=127.0.0.1 port=$PG_PORT user=strata dbname=strata\""
fi

step "pgbench_accounts: $ACCOUNTS accounts keyed on aid, as pgbench -i loads them"
strata load --pgbench-accounts "$ACCOUNTS"

# balance prints account 42's balance, from a window query; the demo stops
# if there is none.
balance() {
	strata window "SELECT aid, abalance, sum(abalance) OVER () AS total FROM pgbench_accounts WHERE aid = 42" --format csv >"$DEMO_DIR/balance.csv"
	cat "$DEMO_DIR/balance.csv" >&2
	local b
	b=$(awk -F, 'NR == 2 { print $2 }' "$DEMO_DIR/balance.csv")
	if ! [[ "$b" =~ ^-?[0-9]+$ ]]; then
		echo "demo: no balance of account 42 in the query's result" >&2
		return 1
	fi
	echo "$b"
}
step "account 42 before"
before=$(balance)

step "strata changes: account 42 gets 1000 more; account 43 is deleted, account $((ACCOUNTS + 1)) opened"
# The header is op, then every column of the table; a delete needs only the
# key (an empty field is NULL, so the filler of 84 blanks is quoted).
filler=\"$(printf '%84s' '')\"
cat >"$DEMO_DIR/changes.csv" <<CSV
op,aid,bid,abalance,filler
update,42,1,$((before + 1000)),$filler
delete,43,,,
insert,$((ACCOUNTS + 1)),$(((ACCOUNTS) / 100000 + 1)),500,$filler
CSV
cat "$DEMO_DIR/changes.csv"
strata changes --table pgbench_accounts --csv "$DEMO_DIR/changes.csv"

step "account 42 after strata changes"
after=$(balance)
if [[ "$after" != "$((before + 1000))" ]]; then
	echo "demo: account 42's balance is $after after strata changes, want $((before + 1000))" >&2
	exit 1
fi

step "strata updates: 20000 of pgbench's account updates (abalance += delta on random accounts)"
strata updates --events 20000 --wait

step "accounts 40..44 after the updates (43 deleted); the whole table's accounts and total"
strata window "SELECT aid, abalance, count(*) OVER () AS accounts FROM pgbench_accounts WHERE aid >= 40 AND aid <= 44" --format csv >"$DEMO_DIR/accounts.csv"
cat "$DEMO_DIR/accounts.csv"
if grep -q '^43,' "$DEMO_DIR/accounts.csv"; then
	echo "demo: account 43 is still there after strata changes deleted it" >&2
	exit 1
fi
strata window "SELECT aid, abalance, sum(abalance) OVER () AS total, count(*) OVER () AS accounts FROM pgbench_accounts" --rows 3

step "operations"
strata ops
step "resource pools"
strata pools
step "resource acquisitions"
strata acquisitions

step "stopping"
stop_all
trap - EXIT

step "the WAL"
"$BIN/strata" wal verify "$DATA/wal" || true
echo
echo "demo data and logs kept in $DEMO_DIR"
