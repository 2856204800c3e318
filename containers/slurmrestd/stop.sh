#!/usr/bin/env bash
# Stop the slurmrestd daemons containers/slurmrestd/start.sh started for a test cluster (by
# their pid files; SIGKILL after 5 s). The cluster itself keeps running.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

[ -d "$STATE" ] || { say "nothing to stop ($STATE does not exist)"; exit 0; }
exec 9>"$STATE/.restd.lock"
flock -w 120 9 || die "could not lock $STATE/.restd.lock (another start/stop running?)"
stop_restd slurmrestd-jwt
stop_restd slurmrestd
rm -f "$SOCKET" "$REST_DIR/url" "$REST_DIR/tcp_url"
say "slurmrestd stopped ($STATE)"
