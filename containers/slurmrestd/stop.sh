#!/usr/bin/env bash
# Stop the slurmrestd containers/slurmrestd/start.sh started for a test cluster (by its
# pid file; SIGKILL after 5 s). The cluster itself keeps running.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../slurm/lib.sh"

[ -d "$STATE" ] || { say "nothing to stop ($STATE does not exist)"; exit 0; }
exec 9>"$STATE/.restd.lock"
flock -w 120 9 || die "could not lock $STATE/.restd.lock (another start/stop running?)"
stop_daemon slurmrestd
rm -f "$STATE/restd/slurmrestd.socket" "$STATE/restd/url"
say "slurmrestd stopped ($STATE)"
