#!/usr/bin/env bash
# Restart the loopback test sshd, keeping host key, client key and port.
# Options are passed to stop.sh (e.g. --keep-sessions to let open connections
# survive, as a real daemon restart would).  Uses the same environment as
# start.sh; HPCBRIDGE_SSHD_PORT may be set to move to another port.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
for arg in "$@"; do
    [ "$arg" != --purge ] || { echo "[hpcbridge-sshd] ERROR: restart.sh keeps keys; use stop.sh --purge && start.sh" >&2; exit 1; }
done
bash "$HERE/stop.sh" "$@"
exec bash "$HERE/start.sh"
