# Shared helpers for containers/sshd/{start,stop,restart}.sh.  Sourced, not run.
# shellcheck shell=bash
# shellcheck disable=SC2034  # variables are used by the sourcing scripts

SSHD_BIN=/usr/sbin/sshd
HPCB_STATE=${HPCBRIDGE_SSHD_STATE:-/tmp/hpcbridge-sshd}
HPCB_STATE=${HPCB_STATE%/}
HPCB_USER=${HPCBRIDGE_SSH_TEST_USER:-hpcbtest}
HPCB_PIDFILE=$HPCB_STATE/sshd.pid
HPCB_CONFIG=$HPCB_STATE/sshd_config
HPCB_LOG=$HPCB_STATE/sshd.log

log()  { printf '[hpcbridge-sshd] %s\n' "$*"; }
warn() { printf '[hpcbridge-sshd] WARNING: %s\n' "$*" >&2; }
die()  { printf '[hpcbridge-sshd] ERROR: %s\n' "$*" >&2; exit 1; }

# Print the tail of this instance's sshd log to stderr.
show_log_tail() {
    if [ -s "$HPCB_LOG" ]; then
        printf -- '----- last lines of %s -----\n' "$HPCB_LOG" >&2
        tail -n "${1:-30}" "$HPCB_LOG" >&2
        printf -- '-----\n' >&2
    else
        printf '(sshd log %s is empty or missing)\n' "$HPCB_LOG" >&2
    fi
}

# Is PID an sshd process belonging to this state folder?
is_our_sshd() {
    local pid=$1 exe cmd
    [ -n "$pid" ] && [ -d "/proc/$pid" ] || return 1
    exe=$(readlink "/proc/$pid/exe" 2>/dev/null) || return 1
    case $exe in */sshd|*/sshd\ \(deleted\)) ;; *) return 1 ;; esac
    cmd=$({ tr "\0" " " < "/proc/$pid/cmdline"; } 2>/dev/null) || return 1
    case "$cmd " in *" -f $HPCB_CONFIG "*) return 0 ;; esac
    return 1
}

# PID of the running listener for this state folder, or nothing (status 1).
# Uses the pid file; if that is missing or stale, looks for a listener started
# with "-f <state>/sshd_config" in /proc (so a clobbered pid file cannot leave
# an unmanageable daemon behind).
running_pid() {
    local pid d cmd
    if { read -r pid < "$HPCB_PIDFILE"; } 2>/dev/null; then
        case $pid in
            ''|*[!0-9]*) ;;
            *) if is_our_sshd "$pid"; then printf '%s\n' "$pid"; return 0; fi ;;
        esac
    fi
    for d in /proc/[0-9]*; do
        pid=${d#/proc/}
        is_our_sshd "$pid" || continue
        cmd=$({ tr "\0" " " < "$d/cmdline"; } 2>/dev/null) || continue
        case $cmd in *'[listener]'*) printf '%s\n' "$pid"; return 0 ;; esac
    done
    return 1
}

# Direct children of PID (reads /proc, so procps is not required).
children_of() {
    local parent=$1 f line rest
    for f in /proc/[0-9]*/stat; do
        { read -r line < "$f"; } 2>/dev/null || continue
        rest=${line##*) }            # "STATE PPID ..." (comm may contain spaces)
        # shellcheck disable=SC2086  # word splitting intended
        set -- $rest
        [ "${2:-}" = "$parent" ] || continue
        f=${f#/proc/}; printf '%s\n' "${f%/stat}"
    done
}

# All descendants of PID whose executable is sshd (per-connection processes).
sshd_descendants() {
    local c exe
    for c in $(children_of "$1"); do
        exe=$(readlink "/proc/$c/exe" 2>/dev/null || true)
        case $exe in */sshd|*/sshd\ \(deleted\)) printf '%s\n' "$c" ;; esac
        sshd_descendants "$c"
    done
}

# Is something listening on 127.0.0.1:PORT ?
port_in_use() {
    local port=$1
    if command -v ss >/dev/null 2>&1; then
        ss -Hltn "( sport = :$port )" 2>/dev/null | grep -q . && return 0
        return 1
    fi
    # Fallback without iproute2: try to connect.
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null
}
