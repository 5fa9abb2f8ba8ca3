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
#
# S3=1 keeps the containers in a bucket instead: a local SeaweedFS
# (`weed mini`, data in $STRATA_DIR/s3, S3 on 127.0.0.1:$S3_PORT, default
# 8333) with bucket "strata", and every service started with --store
# s3://strata?endpoint=...; each merger and windower gets a data directory
# and a depot of its own ($STRATA_DIR/<worker>), so they share nothing but
# NATS and the bucket. Credentials are the AWS_* variables (default
# AWS_ACCESS_KEY_ID=strata, AWS_SECRET_ACCESS_KEY=strata-local-secret);
# they are written to $STRATA_DIR/s3.env for other shells. $BIN/weed is
# built from the seaweedfs module (SEAWEEDFS_VERSION) on the first run,
# which takes minutes; WEED=/path/to/weed uses a weed already installed.
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

S3=${S3:-}
STORE=()
if [ -n "$S3" ] && [ "$S3" != 0 ]; then
	S3_PORT=${S3_PORT:-8333}
	export AWS_ACCESS_KEY_ID=${AWS_ACCESS_KEY_ID:-strata}
	export AWS_SECRET_ACCESS_KEY=${AWS_SECRET_ACCESS_KEY:-strata-local-secret}
	export AWS_REGION=${AWS_REGION:-us-east-1}
	WEED=${WEED:-$BIN/weed}
	if [ ! -x "$WEED" ]; then
		# The module's go.mod has replace directives, which `go install
		# module@version` refuses: build inside the downloaded module.
		version=${SEAWEEDFS_VERSION:-v0.0.0-20261109003541-7506e5f91cd6}
		echo "building weed (SeaweedFS $version) into $WEED; the first build takes minutes"
		src=$(go mod download -json "github.com/seaweedfs/seaweedfs@$version" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
		out=$(cd "$(dirname "$WEED")" && pwd)/$(basename "$WEED")
		(cd "$src" && go build -o "$out" ./weed)
	fi
	STORE_URL="s3://strata?endpoint=http://127.0.0.1:$S3_PORT&region=$AWS_REGION"
	STORE=(--store "$STORE_URL")
	mkdir -p "$DIR/s3"
	(umask 077 && printf 'export AWS_ACCESS_KEY_ID=%s\nexport AWS_SECRET_ACCESS_KEY=%s\nexport AWS_REGION=%s\n' \
		"$AWS_ACCESS_KEY_ID" "$AWS_SECRET_ACCESS_KEY" "$AWS_REGION" >"$DIR/s3.env")
fi

(umask 077 && "$BIN/strata" auth server-config --data "$DATA" >"$DIR/nats-auth.conf")
trap 'stop_all' EXIT
trap 'echo; echo stopping; stop_all; exit 0' INT TERM

# worker_data ROLE NAME: the flags giving a worker its data directory. With
# S3=1 each worker has its own (and its depot in it), reading its NATS
# password from the shared one; otherwise all share DATA.
worker_data() {
	if [ ${#STORE[@]} -eq 0 ]; then
		echo --data "$DATA"
		return
	fi
	mkdir -p "$DIR/$2"
	echo --data "$DIR/$2" --nats-password-file "$DATA/nats-auth/$1.password"
}

start nats-server "$LOGS" "$BIN/nats-server" -c "$DIR/nats-auth.conf" --jetstream --store_dir "$DIR/nats" --addr 127.0.0.1 --port "$PORT"
if [ ${#STORE[@]} -gt 0 ]; then
	start seaweedfs "$LOGS" "$WEED" mini -dir="$DIR/s3" -bucket=strata -ip=127.0.0.1 -ip.bind=127.0.0.1 \
		-s3.port="$S3_PORT" -webdav=false -admin.ui=false -s3.port.iceberg=0 -s3.port.lance=0 -master.telemetry=false
	wait_port 127.0.0.1 "$S3_PORT" 60
fi
wait_port 127.0.0.1 "$PORT"
start scheduler "$LOGS" "$BIN/scheduler" --nats "$NATS" --data "$DATA" --http 127.0.0.1:9101 "${STORE[@]}"
for ((i = 1; i <= MERGERS; i++)); do
	# shellcheck disable=SC2046 # worker_data's words are flags
	start "merger-$i" "$LOGS" "$BIN/merger" --nats "$NATS" $(worker_data merger "merger-$i") --memory "$MEMORY" --http "127.0.0.1:$((9110 + i))" --worker "merger-$i" "${STORE[@]}"
done
for ((i = 1; i <= WINDOWERS; i++)); do
	# shellcheck disable=SC2046
	start "windower-$i" "$LOGS" "$BIN/windower" --nats "$NATS" $(worker_data windower "windower-$i") --memory "$MEMORY" --http "127.0.0.1:$((9130 + i))" --worker "windower-$i" "${STORE[@]}"
done
for ((i = 1; i <= WALWRITERS; i++)); do
	start "walwriter-$i" "$LOGS" "$BIN/walwriter" --nats "$NATS" --data "$DATA" --wal "$DATA/wal-$i" --http "127.0.0.1:$((9150 + i))" --worker "walwriter-$i"
done
echo
echo "strata is running on $NATS; data in $DATA, logs in $LOGS. Ctrl-C stops it."
if [ ${#STORE[@]} -gt 0 ]; then
	echo "containers in $STORE_URL (SeaweedFS, data in $DIR/s3); credentials: . $DIR/s3.env"
	echo "try: . $DIR/s3.env; $BIN/strata load --table t --columns 200 --containers 32 --data $DATA --nats $NATS --store '$STORE_URL'"
else
	echo "try: $BIN/strata load --table t --columns 200 --containers 32 --data $DATA --nats $NATS"
fi
wait -n "${PIDS[@]}" || true
echo "a process exited; stopping the rest" >&2
