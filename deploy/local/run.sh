#!/usr/bin/env bash
# Run strata as an operator would on one machine: a real nats-server
# (built from the nats-server module, JetStream on) and every service as its
# own process, with any number of workers. Ctrl-C stops everything cleanly.
# The server is authenticated like the scheduler's embedded one: a password
# per role in DATA/nats-auth (made on the first run, `strata auth init`),
# a nats-server configuration with those users and their permissions
# ($STRATA_DIR/nats-auth.conf, `strata auth server-config`), and every
# service and the CLI finding its password in the data directory.
#
# Environment: BIN (default ./bin), STRATA_DIR (data and logs, default
# ./local-run), NATS_PORT (default 4222), MERGERS (default 2), WINDOWERS
# (default 1), WALWRITERS (default 1), MEMORY (per worker, default 512MiB).
#
# Then, in another shell: bin/strata load --table t --columns 200 --containers 32 --data local-run/data
set -euo pipefail
cd "$(dirname "$0")/../.."
. deploy/lib.sh

BIN=${BIN:-bin}
DIR=${STRATA_DIR:-local-run}
PORT=${NATS_PORT:-4222}
MERGERS=${MERGERS:-2}
WINDOWERS=${WINDOWERS:-1}
WALWRITERS=${WALWRITERS:-1}
MEMORY=${MEMORY:-512MiB}
DATA=$DIR/data
LOGS=$DIR/logs
NATS=nats://127.0.0.1:$PORT
mkdir -p "$DATA" "$LOGS" "$DIR/nats"

if [ ! -x "$BIN/nats-server" ]; then
	echo "building nats-server from the nats-server module"
	go build -o "$BIN/nats-server" github.com/nats-io/nats-server/v2
fi
if [ ! -x "$BIN/strata" ]; then
	echo "$BIN/strata is missing: run make build" >&2
	exit 1
fi
(umask 077 && "$BIN/strata" auth server-config --data "$DATA" >"$DIR/nats-auth.conf")
trap 'stop_all' EXIT
trap 'echo; echo stopping; stop_all; exit 0' INT TERM

start nats-server "$LOGS" "$BIN/nats-server" -c "$DIR/nats-auth.conf" --jetstream --store_dir "$DIR/nats" --addr 127.0.0.1 --port "$PORT"
wait_port 127.0.0.1 "$PORT"
start scheduler "$LOGS" "$BIN/scheduler" --nats "$NATS" --data "$DATA" --http 127.0.0.1:9101
for ((i = 1; i <= MERGERS; i++)); do
	start "merger-$i" "$LOGS" "$BIN/merger" --nats "$NATS" --data "$DATA" --memory "$MEMORY" --http "127.0.0.1:$((9110 + i))" --worker "merger-$i"
done
for ((i = 1; i <= WINDOWERS; i++)); do
	start "windower-$i" "$LOGS" "$BIN/windower" --nats "$NATS" --data "$DATA" --memory "$MEMORY" --http "127.0.0.1:$((9130 + i))" --worker "windower-$i"
done
for ((i = 1; i <= WALWRITERS; i++)); do
	start "walwriter-$i" "$LOGS" "$BIN/walwriter" --nats "$NATS" --data "$DATA" --wal "$DATA/wal-$i" --http "127.0.0.1:$((9150 + i))" --worker "walwriter-$i"
done
echo
echo "strata is running on $NATS; data in $DATA, logs in $LOGS. Ctrl-C stops it."
echo "try: $BIN/strata load --table t --columns 200 --containers 32 --data $DATA --nats $NATS"
wait -n "${PIDS[@]}" || true
echo "a process exited; stopping the rest" >&2
