# shellcheck shell=bash
# shellcheck disable=SC2034 # variables are used by the sourcing scripts
# What containers/slurmrestd/start.sh and stop.sh share (sourced, not run): the cluster's
# paths (containers/slurm/lib.sh), the daemon's user, socket and listener.
. "$(dirname "${BASH_SOURCE[0]}")/../slurm/lib.sh"

RESTD=${PREFIX:+$PREFIX/sbin/slurmrestd}
REST_USER=${HPCBRIDGE_SLURMRESTD_USER:-hpcbtest}
REST_DIR=$STATE/restd
SOCKET=$REST_DIR/slurmrestd.socket
# a TCP listener (e.g. 127.0.0.1:6820) with rest_auth/jwt; empty: none
LISTEN=${HPCBRIDGE_SLURMRESTD_LISTEN:-}

# restd_pid NAME: the live slurmrestd whose pid $RUN/NAME.pid holds
restd_pid() {
    local pid comm
    read -r pid 2>/dev/null <"$RUN/$1.pid" || return 1
    case $pid in '' | *[!0-9]*) return 1 ;; esac
    read -r comm 2>/dev/null <"/proc/$pid/comm" || return 1
    [ "$comm" = slurmrestd ] && alive "$pid" && echo "$pid"
}

# stop_restd NAME: SIGTERM, SIGKILL after 5 s
stop_restd() {
    local pid i
    if pid=$(restd_pid "$1"); then
        say "stopping $1 (pid $pid)"
        kill -TERM "$pid" 2>/dev/null || true
        for ((i = 0; i < 50; i++)); do alive "$pid" || break; sleep 0.1; done
        alive "$pid" && kill -KILL "$pid" 2>/dev/null || true
        for ((i = 0; i < 50; i++)); do alive "$pid" || break; sleep 0.1; done
        ! alive "$pid" || die "$1 (pid $pid) is still running"
    fi
    rm -f "$RUN/$1.pid"
}
