#!/usr/bin/env bash
# Start slurmrestd for a running Slurm test cluster (25.11: containers/slurm/start.sh with
# HPCBRIDGE_SLURM_PREFIX), as an ordinary user: slurmrestd refuses root and SlurmUser.
# It listens on a Unix socket with rest_auth/local: only that user's processes are
# answered (the socket's peer must have the daemon's uid). Needs root (to switch user).
# See containers/slurmrestd/README.md for the environment variables.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../slurm/lib.sh"

[ -n "$PREFIX" ] || die "HPCBRIDGE_SLURM_PREFIX must name a Slurm with slurmrestd (e.g. /opt/slurm-25.11)"
RESTD=$PREFIX/sbin/slurmrestd
[ -x "$RESTD" ] || die "no slurmrestd in $PREFIX/sbin: build Slurm with libjson-c-dev and libhttp-parser-dev"
[ "$(id -u)" = 0 ] || die "start.sh must run as root (it starts slurmrestd as \$HPCBRIDGE_SLURMRESTD_USER)"
[ -r "$SLURM_CONF" ] || die "no cluster in $STATE ($SLURM_CONF missing): start containers/slurm/start.sh first"

REST_USER=${HPCBRIDGE_SLURMRESTD_USER:-hpcbtest}
REST_DIR=$STATE/restd
SOCKET=$REST_DIR/slurmrestd.socket
TIMEOUT=${HPCBRIDGE_SLURM_START_TIMEOUT:-60}
# the OpenAPI data parsers it loads (e.g. v0.0.41,v0.0.42); empty: all it has
PARSERS=${HPCBRIDGE_SLURMRESTD_DATA_PARSERS:-}
getent passwd "$REST_USER" >/dev/null || die "no unix user '$REST_USER' (HPCBRIDGE_SLURMRESTD_USER)"
[ "$REST_USER" != root ] || die "slurmrestd refuses to run as root: name another user"

exec 9>"$STATE/.restd.lock"
flock -w 120 9 || die "could not lock $STATE/.restd.lock (another start/stop running?)"

# probe: the daemon answers its user on the socket (any HTTP answer: /openapi/v3 is public)
probe() {
    runuser -u "$REST_USER" -- curl -sf -o /dev/null --max-time 5 --unix-socket "$SOCKET" http://localhost/openapi/v3
}

if is_running slurmrestd; then
    probe || die "slurmrestd runs (pid $(pid_of slurmrestd)) but does not answer on $SOCKET: run stop.sh" "$LOGDIR/slurmrestd.out"
    say "slurmrestd already running (pid $(pid_of slurmrestd)) on $SOCKET"
    exit 0
fi

mkdir -p "$REST_DIR" "$LOGDIR" "$RUN"
# its own folder: the daemon's user creates the socket there, others may not
chown "$REST_USER:" "$REST_DIR"
chmod 755 "$REST_DIR"
rm -f "$SOCKET"
# Logs to stderr (its .out file): without a terminal it would log to syslog.
launch slurmrestd env SLURM_CONF="$SLURM_CONF" SLURMRESTD_DEBUG_STDERR=info \
    setpriv --reuid="$REST_USER" --regid="$(id -g "$REST_USER")" --init-groups \
    "$RESTD" -a rest_auth/local ${PARSERS:+-d "$PARSERS"} "unix:$SOCKET"
echo "$LAUNCHED_PID" >"$RUN/slurmrestd.pid"
wait_for "$TIMEOUT" slurmrestd probe ||
    die "slurmrestd does not answer on $SOCKET" "$LOGDIR/slurmrestd.out"
printf '%s\n' "unix:$SOCKET" >"$REST_DIR/url"
say "slurmrestd (pid $(pid_of slurmrestd)) answers $REST_USER on unix:$SOCKET"
