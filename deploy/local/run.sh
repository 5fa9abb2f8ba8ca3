#!/usr/bin/env bash
# Run strata as an operator would on one machine: a real nats-server
# (built from the nats-server module, JetStream on) and every service as its
# own process, with any number of workers. Ctrl-C (or SIGTERM) stops
# everything cleanly, workers first, NATS last; a process still running
# STOP_TIMEOUT seconds (default 90) after its SIGTERM is killed, as
# systemd kills one after TimeoutStopSec.
#
# A process that fails is restarted, as the systemd units of deploy/systemd
# restart theirs (Restart=on-failure): after a non-zero exit status or a
# signal (kill -9 PID, a crash), with a backoff of 1s, 2s, 4s, ... up to 30s
# (back to 1s once it ran a minute), each restart said on the terminal and
# in the process's log ("merger-1 exited (status 137, SIGKILL); restarting
# in 1s"). A clean exit (status 0, or SIGTERM: kill PID) stays stopped, as
# `systemctl stop` would leave it, and so does a merger or windower exiting
# with status 2, a usage error (their units' RestartPreventExitStatus=2).
# nats-server and weed are supervised the same way (compose.yaml's
# `restart: on-failure`): the services wait for NATS while it is down and
# reconnect by themselves. The script ends when every process has exited
# for good. Needs bash 5.1 or newer.
#
# Logs are appended, never overwritten: $STRATA_DIR/logs/NAME.log keeps
# every run and restart of NAME, each begun with a "=== TIME run.sh:" line.
#
# The server is authenticated like the scheduler's embedded one: a password
# per role in DATA/nats-auth (made on the first run, `strata auth init`),
# a nats-server configuration with those users and their permissions
# ($STRATA_DIR/nats-auth.conf, `strata auth server-config`), and every
# service and the CLI finding its password in the data directory.
#
# Environment: BIN (default ./bin), STRATA_DIR (data and logs, default
# ./local-run), MERGERS (default 2, at most 29), WINDOWERS (default 1, at
# most 29), WALWRITERS (default 1, at most 19), MEMORY (per worker, default
# 512MiB), BLOCK_CACHE (each windower's --block-cache, default 128MiB), and the ports: every port follows from PORT_BASE (default 4222),
# all on 127.0.0.1:
#
#   PORT_BASE       NATS clients (NATS_PORT overrides it)
#   PORT_BASE+1     scheduler /metrics, /healthz
#   PORT_BASE+2     S3 of SeaweedFS, with S3=1 (S3_PORT overrides it)
#   PORT_BASE+3..11 SeaweedFS's own: S3 gRPC, master, master gRPC, volume,
#                   volume gRPC, filer, filer gRPC, admin, admin gRPC
#   PORT_BASE+12    pgwire's PostgreSQL clients (when bin/pgwire is built)
#   PORT_BASE+13    pgwire /metrics, /healthz
#   PORT_BASE+20+N  merger-N /metrics, /healthz
#   PORT_BASE+50+N  windower-N
#   PORT_BASE+80+N  walwriter-N
#
# so a second run beside the first needs only another STRATA_DIR and
# PORT_BASE (PORT_BASE=4322 STRATA_DIR=local-run-2 make local).
#
# Then, in another shell: bin/strata load --table t --columns 200 --containers 32 --data local-run/data
#
# S3=1 keeps the containers in a bucket instead: a local SeaweedFS
# (`weed mini`, data in $STRATA_DIR/s3, S3 on 127.0.0.1:$S3_PORT) with
# bucket "strata", and every service started with
# --store s3://strata?endpoint=...; each merger and windower gets a data
# directory and a depot of its own ($STRATA_DIR/<worker>), so they share
# nothing but NATS and the bucket. Credentials are the AWS_* variables
# (default AWS_ACCESS_KEY_ID=strata,
# AWS_SECRET_ACCESS_KEY=strata-local-secret); they are written to
# $STRATA_DIR/s3.env for other shells. $BIN/weed is built from the
# seaweedfs module (SEAWEEDFS_VERSION) on the first run, which takes
# minutes; WEED=/path/to/weed uses a weed already installed.
#
# Everything the script writes is under $STRATA_DIR and $BIN, both in
# .gitignore at their defaults (deploy/local/local_test.go checks it).
set -euo pipefail
cd "$(dirname "$0")/../.."
. deploy/lib.sh

BIN=${BIN:-bin}
DIR=${STRATA_DIR:-local-run}
MERGERS=${MERGERS:-2}
WINDOWERS=${WINDOWERS:-1}
WALWRITERS=${WALWRITERS:-1}
MEMORY=${MEMORY:-512MiB}
BLOCK_CACHE=${BLOCK_CACHE:-128MiB}

# The ports (see above).
PORT_BASE=${PORT_BASE:-4222}
die() {
	echo "run.sh: $*" >&2
	exit 2
}
number() { [[ $2 =~ ^[0-9]+$ ]] || die "$1 must be a number, not '$2'"; }
for v in PORT_BASE MERGERS WINDOWERS WALWRITERS; do
	number "$v" "${!v}"
done
((PORT_BASE >= 1024 && PORT_BASE + 99 <= 65535)) || die "PORT_BASE must be from 1024 to 65436 (it uses PORT_BASE..PORT_BASE+99), not $PORT_BASE"
((MERGERS <= 29 && WINDOWERS <= 29 && WALWRITERS <= 19)) || die "at most 29 mergers, 29 windowers and 19 walwriters (each has a port of its own from PORT_BASE)"
NATS_PORT=${NATS_PORT:-$PORT_BASE}
SCHEDULER_HTTP=$((PORT_BASE + 1))
S3_PORT=${S3_PORT:-$((PORT_BASE + 2))}
PG_PORT=$((PORT_BASE + 12))
PGWIRE_HTTP=$((PORT_BASE + 13))
number NATS_PORT "$NATS_PORT"
number S3_PORT "$S3_PORT"
# Worker N of a role listens on ROLE_PORT[role] + N.
declare -A ROLE_PORT=([merger]=$((PORT_BASE + 20)) [windower]=$((PORT_BASE + 50)) [walwriter]=$((PORT_BASE + 80)))

# Exit statuses after which a role is not restarted: those of the systemd
# units' RestartPreventExitStatus= (deploy/systemd; a test compares them).
RESTART_PREVENT_EXIT_STATUS=([merger]=2 [windower]=2)

DATA=$DIR/data
LOGS=$DIR/logs
NATS=nats://127.0.0.1:$NATS_PORT
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
# From here on no command substitution ($(...)) runs in this shell: bash
# 5.2 fails to parse a trap that a signal runs while it expands one
# ("trap: unexpected EOF while looking for matching `)'"), and Ctrl-C
# would then skip the orderly stop.
trap 'stop_all' EXIT
trap 'echo; echo stopping; stop_all; exit 0' INT TERM

# worker_args ROLE NAME: WORKER_ARGS becomes the flags giving a worker its
# data directory and HTTP port. With S3=1 each worker has its own data
# directory (and its depot in it), reading its NATS password from the
# shared one; otherwise all share DATA.
worker_args() {
	local role=$1 name=$2
	WORKER_ARGS=(--http "127.0.0.1:$((ROLE_PORT[$role] + ${name##*-}))" --worker "$name")
	if [ ${#STORE[@]} -eq 0 ]; then
		WORKER_ARGS+=(--data "$DATA")
		return
	fi
	mkdir -p "$DIR/$name"
	WORKER_ARGS+=(--data "$DIR/$name" --nats-password-file "$DATA/nats-auth/$role.password" "${STORE[@]}")
}

start nats-server "$LOGS" "$BIN/nats-server" -c "$DIR/nats-auth.conf" --jetstream --store_dir "$DIR/nats" --addr 127.0.0.1 --port "$NATS_PORT"
if [ ${#STORE[@]} -gt 0 ]; then
	# Every port of weed mini given, from PORT_BASE: one it would pick by
	# itself (its defaults, or the next free one) could be another run's.
	start seaweedfs "$LOGS" "$WEED" mini -dir="$DIR/s3" -bucket=strata -ip=127.0.0.1 -ip.bind=127.0.0.1 \
		-s3.port="$S3_PORT" -s3.port.grpc=$((PORT_BASE + 3)) \
		-master.port=$((PORT_BASE + 4)) -master.port.grpc=$((PORT_BASE + 5)) \
		-volume.port=$((PORT_BASE + 6)) -volume.port.grpc=$((PORT_BASE + 7)) \
		-filer.port=$((PORT_BASE + 8)) -filer.port.grpc=$((PORT_BASE + 9)) \
		-admin.port=$((PORT_BASE + 10)) -admin.port.grpc=$((PORT_BASE + 11)) -admin.port.legacy=0 \
		-webdav=false -admin.ui=false -s3.port.iceberg=0 -s3.port.lance=0 -master.telemetry=false
	wait_port 127.0.0.1 "$S3_PORT" 60
fi
wait_port 127.0.0.1 "$NATS_PORT"
start scheduler "$LOGS" "$BIN/scheduler" --nats "$NATS" --data "$DATA" --http "127.0.0.1:$SCHEDULER_HTTP" "${STORE[@]}"
for ((i = 1; i <= MERGERS; i++)); do
	worker_args merger "merger-$i"
	start "merger-$i" "$LOGS" "$BIN/merger" --nats "$NATS" "${WORKER_ARGS[@]}" --memory "$MEMORY"
done
for ((i = 1; i <= WINDOWERS; i++)); do
	worker_args windower "windower-$i"
	start "windower-$i" "$LOGS" "$BIN/windower" --nats "$NATS" "${WORKER_ARGS[@]}" --memory "$MEMORY" --block-cache "$BLOCK_CACHE"
done
for ((i = 1; i <= WALWRITERS; i++)); do
	start "walwriter-$i" "$LOGS" "$BIN/walwriter" --nats "$NATS" --data "$DATA" --wal "$DATA/wal-$i" \
		--http "127.0.0.1:$((ROLE_PORT[walwriter] + i))" --worker "walwriter-$i"
done
# The PostgreSQL front door, when built (make build builds it).
if [ -x "$BIN/pgwire" ]; then
	start pgwire "$LOGS" "$BIN/pgwire" --nats "$NATS" --data "$DATA" --http "127.0.0.1:$PGWIRE_HTTP" \
		--pg-listen "127.0.0.1:$PG_PORT" "${STORE[@]}"
fi
echo
echo "strata is running on $NATS; data in $DATA, logs in $LOGS. Ctrl-C stops it."
ports="NATS $NATS_PORT, scheduler $SCHEDULER_HTTP"
for role in merger windower walwriter; do
	# "merger-1 4243" or "merger-1..4 4243..4246"
	count=${role^^}S # MERGERS, ...
	n=${!count} first=$((ROLE_PORT[$role] + 1))
	case $n in
	0) ;;
	1) ports+=", $role-1 $first" ;;
	*) ports+=", $role-1..$n $first..$((first + n - 1))" ;;
	esac
done
[ ${#STORE[@]} -eq 0 ] || ports+=", S3 $S3_PORT"
[ ! -x "$BIN/pgwire" ] || ports+=", pgwire $PGWIRE_HTTP, PostgreSQL clients $PG_PORT"
echo "ports on 127.0.0.1 (/metrics, /healthz): $ports"
echo "a process that fails is restarted (kill -9 one to see it); one stopped cleanly (kill PID) stays stopped"
if [ ${#STORE[@]} -gt 0 ]; then
	echo "containers in $STORE_URL (SeaweedFS, data in $DIR/s3); credentials: . $DIR/s3.env"
	echo "try: . $DIR/s3.env; $BIN/strata load --table t --columns 200 --containers 32 --data $DATA --nats $NATS --store '$STORE_URL'"
	echo "     $BIN/strata containers --store '$STORE_URL'"
else
	echo "try: $BIN/strata load --table t --columns 200 --containers 32 --data $DATA --nats $NATS"
fi
if [ -x "$BIN/pgwire" ]; then
	echo "psql: PGPASSWORD=\$(cat $DATA/pg-auth/strata.password) psql \"host=127.0.0.1 port=$PG_PORT user=strata dbname=strata\""
fi
supervise
