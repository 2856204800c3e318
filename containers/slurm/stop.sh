#!/usr/bin/env bash
# Stop the hpcbridge Slurm test cluster started by start.sh: SIGTERM each daemon
# by its pid file (reverse start order), wait, SIGKILL after a few seconds.
# Leftover job steps of this cluster (slurmstepd + job processes) are killed too.
# State (configs, database, job state) is kept; remove $HPCBRIDGE_SLURM_STATE to reset.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

if [ ! -d "$STATE" ]; then
    say "nothing to stop ($STATE does not exist)"
    exit 0
fi
exec 9>"$STATE/.lock"
flock -w 120 9 || die "could not lock $STATE/.lock (another start/stop running?)"

stop_all

wait_reaped 4
left=""
for d in $ALL_DAEMONS; do is_running "$d" && left="$left $d"; done
[ -z "$left" ] || die "still running after stop:$left"
rm -f "$STATE/env.sh"
# the prefix's default configuration, if start.sh made it this cluster's
if [ -n "$PREFIX" ] && [ -L "$PREFIX/etc" ] && [ "$(readlink "$PREFIX/etc")" = "$ETC" ]; then
    rm -f "$PREFIX/etc"
fi
say "stopped (state kept in $STATE)"
