# Shared shell helpers of the deploy scripts: start a service in the
# background with its log in a file, wait for a TCP port, restart a
# process that fails (supervise), stop everything.
# shellcheck shell=bash

# Job control puts each service in its own process group, so a Ctrl-C
# reaches only the script, which then stops the services in order (workers
# first, NATS last) instead of all of them at once.
set -m

# Per process, by the index start gave it: its pid (empty while it waits
# to be restarted), name, log file, when it was started ($SECONDS), the
# delay of its last restart (seconds), and when its pending restart is due
# (now_ms). Its command line is the array CMD_<index>.
PIDS=()
NAMES=()
LOGFILES=()
STARTED=()
DELAYS=()
DUE=()
TIMER= # a `sleep` that wakes supervise while a restart is pending

# No command substitution ($(...)) runs in the shell in these functions
# once processes run (start, supervise, stop_all): bash 5.2 fails to parse
# a trap that a signal runs while it expands one, and Ctrl-C would then
# skip the orderly stop. They set variables instead.

# now_ms: NOW_MS becomes the time in milliseconds (bash 5's
# EPOCHREALTIME, whatever the locale's decimal separator).
now_ms() {
	local us=${EPOCHREALTIME//[!0-9]/}
	NOW_MS=$((us / 1000))
}

# log_line I TEXT: append "=== TIME SCRIPT: TEXT" to process I's log.
log_line() {
	local stamp
	TZ=UTC0 printf -v stamp '%(%Y-%m-%dT%H:%M:%SZ)T' -1
	printf '=== %s %s: %s\n' "$stamp" "${0##*/}" "$2" >>"${LOGFILES[$1]}"
}

# RESTART_PREVENT_EXIT_STATUS[role]: an exit status after which a process
# of that role (its name without -N) is not restarted, as the systemd
# units' RestartPreventExitStatus= (set by the script that supervises).
declare -A RESTART_PREVENT_EXIT_STATUS=()

# Restart backoff: the first restart after RESTART_DELAY_MIN seconds, each
# further one after twice the last, at most RESTART_DELAY_MAX; a process
# that ran RESTART_RESET seconds before it failed starts over at the
# minimum.
RESTART_DELAY_MIN=${RESTART_DELAY_MIN:-1}
RESTART_DELAY_MAX=${RESTART_DELAY_MAX:-30}
RESTART_RESET=${RESTART_RESET:-60}

# start NAME LOGDIR CMD ARGS...: run CMD in the background, its output
# appended to LOGDIR/NAME.log (a log is never overwritten: a restart, and
# a new run of the script, add to it).
start() {
	local name=$1 logdir=$2 i=${#NAMES[@]}
	shift 2
	NAMES[i]=$name
	LOGFILES[i]=$logdir/$name.log
	DELAYS[i]=0
	DUE[i]=
	declare -ga "CMD_$i"
	# shellcheck disable=SC2178 # a nameref to the array CMD_$i
	local -n cmd="CMD_$i"
	cmd=("$@")
	launch "$i"
}

# launch I: start process I from its command line.
launch() {
	local i=$1 log=${LOGFILES[$1]}
	# shellcheck disable=SC2178 # a nameref to the array CMD_$i
	local -n cmd="CMD_$i"
	log_line "$i" "starting ${NAMES[i]}"
	"${cmd[@]}" >>"$log" 2>&1 &
	PIDS[i]=$!
	STARTED[i]=$SECONDS
	echo "started ${NAMES[i]} (pid $!, log $log)"
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

# restart_wanted NAME STATUS: whether a process that exited with STATUS is
# restarted, as systemd's Restart=on-failure decides: after a non-zero
# exit status or a signal, but not after a clean exit (status 0, or
# SIGHUP, SIGINT, SIGTERM or SIGPIPE: bash's 129, 130, 143, 141) nor
# after the role's RestartPreventExitStatus=. WHY becomes why not.
restart_wanted() {
	local name=$1 status=$2 role=${1%-[0-9]*}
	WHY=
	case $status in
	0 | 129 | 130 | 141 | 143)
		WHY="a clean exit"
		return 1
		;;
	esac
	if [ "${RESTART_PREVENT_EXIT_STATUS[$role]:-}" = "$status" ]; then
		WHY="RestartPreventExitStatus=$status, as the systemd unit of $role"
		return 1
	fi
	return 0
}

# describe_status STATUS: STATUS_TEXT becomes "status 137, SIGKILL" for a
# process a signal ended (the signals numbered alike everywhere), else
# "status N".
describe_status() {
	local status=$1 sigs=([1]=HUP [2]=INT [3]=QUIT [6]=ABRT [9]=KILL [11]=SEGV [13]=PIPE [14]=ALRM [15]=TERM)
	STATUS_TEXT="status $status"
	if ((status > 128)) && [ -n "${sigs[status - 128]:-}" ]; then
		STATUS_TEXT+=", SIG${sigs[status - 128]}"
	fi
}

# supervise: wait for the started processes, restarting one that fails
# (see restart_wanted) after a backoff, as systemd would, and telling the
# terminal and the process's log: "merger-1 exited (status 137, SIGKILL);
# restarting in 1s". A process that exits cleanly stays stopped. Returns
# when every process has exited for good; a signal's trap ends it sooner.
supervise() {
	if ((BASH_VERSINFO[0] < 5 || (BASH_VERSINFO[0] == 5 && BASH_VERSINFO[1] < 1))); then
		echo "supervise needs bash 5.1 or newer (wait -n -p); this is $BASH_VERSION" >&2
		return 1
	fi
	local i dead status pending delay msg live
	while :; do
		# Start the restarts that are due; see what remains.
		pending=0
		live=()
		for i in "${!NAMES[@]}"; do
			if [ -n "${DUE[i]}" ]; then
				now_ms
				if ((DUE[i] <= NOW_MS)); then
					DUE[i]=
					launch "$i"
				else
					pending=1
				fi
			fi
			[ -z "${PIDS[i]}" ] || live+=("${PIDS[i]}")
		done
		if [ ${#live[@]} -eq 0 ] && [ $pending -eq 0 ]; then
			echo "every process has exited"
			return 0
		fi
		if [ $pending -eq 1 ] && [ -z "$TIMER" ]; then
			sleep 0.1 &
			TIMER=$!
		fi
		status=0
		dead=
		wait -n -p dead "${live[@]}" ${TIMER:+"$TIMER"} || status=$?
		if [ -z "$dead" ]; then
			continue # a signal whose trap returned
		fi
		if [ "$dead" = "$TIMER" ]; then
			TIMER=
			continue
		fi
		for i in "${!NAMES[@]}"; do
			[ "${PIDS[i]}" = "$dead" ] || continue
			PIDS[i]=
			describe_status "$status"
			if restart_wanted "${NAMES[i]}" "$status"; then
				delay=$RESTART_DELAY_MIN
				if ((DELAYS[i] > 0 && SECONDS - STARTED[i] < RESTART_RESET)); then
					delay=$((DELAYS[i] * 2 < RESTART_DELAY_MAX ? DELAYS[i] * 2 : RESTART_DELAY_MAX))
				fi
				DELAYS[i]=$delay
				now_ms
				DUE[i]=$((NOW_MS + delay * 1000))
				msg="${NAMES[i]} exited ($STATUS_TEXT); restarting in ${delay}s"
			else
				msg="${NAMES[i]} exited ($STATUS_TEXT); not restarting it ($WHY)"
			fi
			echo "$msg" >&2
			log_line "$i" "$msg"
		done
	done
}

# STOP_TIMEOUT: the seconds stop_all gives a process after SIGTERM
# before SIGKILL, as systemd's TimeoutStopSec= (60s and 90s in the units).
STOP_TIMEOUT=${STOP_TIMEOUT:-90}

# terminate I: SIGTERM process I and wait, up to STOP_TIMEOUT seconds,
# until it has exited, sending SIGTERM again each second: a process the
# shell has forked but that does not yet run its program still has the
# shell's signal handlers, and a signal it takes then is lost when the
# program starts. Then SIGKILL, as systemd sends after TimeoutStopSec.
terminate() {
	local i=$1 pid=${PIDS[$1]} tick
	kill -TERM "$pid" 2>/dev/null || return 0
	for ((tick = 1; tick <= STOP_TIMEOUT * 10; tick++)); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.1
		if ((tick % 10 == 0)); then
			kill -TERM "$pid" 2>/dev/null || true
		fi
	done
	echo "${NAMES[i]} still running ${STOP_TIMEOUT}s after SIGTERM; sending SIGKILL"
	log_line "$i" "still running ${STOP_TIMEOUT}s after SIGTERM; sending SIGKILL"
	kill -KILL "$pid" 2>/dev/null || true
}

# stop_all: SIGTERM every started process, newest first, and wait for each
# (terminate); forget the restarts pending.
stop_all() {
	local i pid
	if [ -n "$TIMER" ]; then
		kill "$TIMER" 2>/dev/null || true
		wait "$TIMER" 2>/dev/null || true
		TIMER=
	fi
	for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
		pid=${PIDS[$i]}
		if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
			terminate "$i"
			if wait "$pid"; then
				echo "stopped ${NAMES[$i]}"
			else
				echo "stopped ${NAMES[$i]} (exit status $?)"
			fi
		fi
	done
	PIDS=()
	NAMES=()
	DUE=()
}
