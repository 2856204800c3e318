#!/usr/bin/env bash
# Start slurmrestd for a running Slurm test cluster (25.11: containers/slurm/start.sh with
# HPCBRIDGE_SLURM_PREFIX), as an ordinary user: slurmrestd refuses root and SlurmUser.
# One daemon listens on a Unix socket with rest_auth/local: only that user's processes are
# answered (the socket's peer must have the daemon's uid). With HPCBRIDGE_SLURMRESTD_LISTEN
# a second one listens there with rest_auth/jwt (a token per request); the two cannot be one
# daemon: its SLURM_JWT=daemon refuses rest_auth/local's requests ("Protocol authentication
# error"). Needs root (to switch user). See containers/slurmrestd/README.md.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

[ -x "$RESTD" ] || die "no slurmrestd in ${PREFIX:-HPCBRIDGE_SLURM_PREFIX}/sbin: set HPCBRIDGE_SLURM_PREFIX to a Slurm built with libjson-c-dev and libhttp-parser-dev"
[ "$(id -u)" = 0 ] || die "start.sh must run as root (it starts slurmrestd as \$HPCBRIDGE_SLURMRESTD_USER)"
[ -r "$SLURM_CONF" ] || die "no cluster in $STATE ($SLURM_CONF missing): start containers/slurm/start.sh first"
getent passwd "$REST_USER" >/dev/null || die "no unix user '$REST_USER' (HPCBRIDGE_SLURMRESTD_USER)"
[ "$REST_USER" != root ] || die "slurmrestd refuses to run as root: name another user"
if [ -n "$LISTEN" ]; then
    grep -q '^AuthAltTypes=.*auth/jwt' "$SLURM_CONF" ||
        die "HPCBRIDGE_SLURMRESTD_LISTEN needs auth/jwt in $SLURM_CONF: start the cluster with HPCBRIDGE_SLURM_JWT=1"
fi
TIMEOUT=${HPCBRIDGE_SLURM_START_TIMEOUT:-60}
# the OpenAPI data parsers it loads (e.g. v0.0.41,v0.0.42); empty: all it has
PARSERS=${HPCBRIDGE_SLURMRESTD_DATA_PARSERS:-}

exec 9>"$STATE/.restd.lock"
flock -w 120 9 || die "could not lock $STATE/.restd.lock (another start/stop running?)"

# the socket answers its user (/openapi/v3 is public); TCP asks for a token: 401
local_up() {
    runuser -u "$REST_USER" -- curl -sf -o /dev/null --max-time 5 --unix-socket "$SOCKET" http://localhost/openapi/v3
}
tcp_up() { [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "http://$LISTEN/openapi/v3")" = 401 ]; }

# start_restd NAME PROBE ENV... -- ARGS...: one daemon as $REST_USER, unless it answers
start_restd() {
    local name=$1 probe=$2 env=() i
    shift 2
    while [ "$1" != -- ]; do env+=("$1"); shift; done
    shift
    if restd_pid "$name" >/dev/null; then
        "$probe" || die "$name runs (pid $(restd_pid "$name")) but does not answer: run stop.sh" "$LOGDIR/$name.out"
        say "$name already running (pid $(restd_pid "$name"))"
        return 0
    fi
    # Logs to stderr (its .out file): without a terminal it would log to syslog.
    echo "=== $(date '+%F %T') starting: $RESTD $*" >>"$LOGDIR/$name.out"
    setsid env SLURM_CONF="$SLURM_CONF" SLURMRESTD_DEBUG_STDERR=info "${env[@]}" \
        setpriv --reuid="$REST_USER" --regid="$(id -g "$REST_USER")" --init-groups \
        "$RESTD" ${PARSERS:+-d "$PARSERS"} "$@" </dev/null >>"$LOGDIR/$name.out" 2>&1 9>&- &
    local pid=$!
    echo "$pid" >"$RUN/$name.pid"
    for ((i = 0; i < TIMEOUT * 5; i++)); do
        "$probe" && { say "$name (pid $pid) answers"; return 0; }
        # alive, not restd_pid: until setsid, env and setpriv have exec'd, the pid is theirs
        alive "$pid" || die "$name exited during start-up" "$LOGDIR/$name.out"
        sleep 0.2
    done
    die "$name does not answer after ${TIMEOUT}s" "$LOGDIR/$name.out"
}

mkdir -p "$REST_DIR" "$LOGDIR" "$RUN"
# its own folder: the daemon's user creates the socket there, others may not
chown "$REST_USER:" "$REST_DIR"
chmod 755 "$REST_DIR"
restd_pid slurmrestd >/dev/null || rm -f "$SOCKET"
start_restd slurmrestd local_up -- -a rest_auth/local "unix:$SOCKET"
printf '%s\n' "unix:$SOCKET" >"$REST_DIR/url"
if [ -n "$LISTEN" ]; then
    # SLURM_JWT=daemon: each request's token passed on to slurmctld and slurmdbd
    start_restd slurmrestd-jwt tcp_up SLURM_JWT=daemon -- -a rest_auth/jwt "$LISTEN"
    printf '%s\n' "http://$LISTEN" >"$REST_DIR/tcp_url"
fi
say "slurmrestd answers $REST_USER on unix:$SOCKET${LISTEN:+, and tokens on http://$LISTEN}"
