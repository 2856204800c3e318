#!/usr/bin/env bash
# Stop the loopback test sshd started by start.sh.
#
#   bash containers/sshd/stop.sh                  # stop, keep state (host key stays stable)
#   bash containers/sshd/stop.sh --purge          # stop and delete the state folder
#   bash containers/sshd/stop.sh --keep-sessions  # stop only the listener; open
#                                                 # connections survive (like a real
#                                                 # "service ssh restart")
#
# By default the listener AND its per-connection sshd processes are terminated,
# so open SSH connections drop.  Uses HPCBRIDGE_SSHD_STATE like start.sh.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$HERE/lib.sh"

purge='' keep_sessions=''
for arg in "$@"; do
    case $arg in
        --purge) purge=1 ;;
        --keep-sessions) keep_sessions=1 ;;
        -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
        *) die "unknown argument '$arg' (use --purge, --keep-sessions)" ;;
    esac
done

# Wait up to $1 tenths of a second for all given pids to disappear.
wait_gone() {
    local tenths=$1 p alive; shift
    for _ in $(seq 1 "$tenths"); do
        alive=
        for p in "$@"; do [ -d "/proc/$p" ] && ! grep -q '^State:.*Z' "/proc/$p/status" 2>/dev/null && alive=1; done
        [ -n "$alive" ] || return 0
        sleep 0.1
    done
    return 1
}

if pid=$(running_pid); then
    sessions=
    [ -n "$keep_sessions" ] || sessions=$(sshd_descendants "$pid" | tr '\n' ' ')
    log "stopping sshd pid $pid${sessions:+ and session processes ${sessions% }} (state $HPCB_STATE)"
    # shellcheck disable=SC2086
    kill -TERM "$pid" $sessions 2>/dev/null || true
    # shellcheck disable=SC2086
    if ! wait_gone 50 "$pid" $sessions; then
        warn "sshd did not exit within 5 s after SIGTERM; sending SIGKILL"
        # shellcheck disable=SC2086
        kill -KILL "$pid" $sessions 2>/dev/null || true
        # shellcheck disable=SC2086
        wait_gone 30 "$pid" $sessions || die "sshd pid $pid still alive after SIGKILL"
    fi
    log "stopped"
else
    log "not running (state $HPCB_STATE)"
fi
rm -f "$HPCB_PIDFILE"

if [ -n "$purge" ]; then
    if [ -d "$HPCB_STATE" ]; then
        # Remove this instance's line from the test user's authorized_keys.
        home=$(getent passwd "$HPCB_USER" | cut -d: -f6 || true)
        ak=${home:+$home/.ssh/authorized_keys}
        if [ -n "$ak" ] && [ -f "$ak" ]; then
            tmp=$(mktemp)
            awk -v tag="hpcbridge-sshd:$HPCB_STATE" '$NF != tag' "$ak" > "$tmp"
            cat "$tmp" > "$ak"
            rm -f "$tmp"
        fi
        rm -rf -- "$HPCB_STATE"
        log "purged $HPCB_STATE (next start.sh generates new host and client keys)"
    fi
fi
