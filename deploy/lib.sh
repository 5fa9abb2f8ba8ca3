# Shared shell helpers of the deploy scripts: start a service in the
# background with its log in a file, wait for a TCP port, stop everything.
# shellcheck shell=bash

# Job control puts each service in its own process group, so a Ctrl-C
# reaches only the script, which then stops the services in order (workers
# first, NATS last) instead of all of them at once.
set -m

PIDS=()
NAMES=()

# start NAME LOGDIR CMD ARGS...: run CMD in the background, log to LOGDIR/NAME.log.
start() {
	local name=$1 logdir=$2
	shift 2
	"$@" >"$logdir/$name.log" 2>&1 &
	PIDS+=("$!")
	NAMES+=("$name")
	echo "started $name (pid $!, log $logdir/$name.log)"
}

# wait_port HOST PORT [SECONDS]: wait until a TCP port accepts connections.
wait_port() {
	local host=$1 port=$2 secs=${3:-30} i
	for ((i = 0; i < secs * 10; i++)); do
		if (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null; then
			return 0
		fi
		sleep 0.1
	done
	echo "timed out waiting for $host:$port" >&2
	return 1
}

# stop_all: SIGTERM every started process, newest first, and wait for each.
stop_all() {
	local i pid
	for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
		pid=${PIDS[$i]}
		if kill -0 "$pid" 2>/dev/null; then
			kill -TERM "$pid" 2>/dev/null || true
			if wait "$pid"; then
				echo "stopped ${NAMES[$i]}"
			else
				echo "stopped ${NAMES[$i]} (exit status $?)"
			fi
		fi
	done
	PIDS=()
	NAMES=()
}
