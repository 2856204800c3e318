#!/usr/bin/env bash
# Stop and restart only slurmctld (fault-injection helper). Job state survives
# via StateSaveLocation=$HPCBRIDGE_SLURM_STATE/spool/slurmctld.
#   restart-ctld.sh          stop, then start again and wait until it answers
#   restart-ctld.sh stop     only stop it
#   restart-ctld.sh start    only start it (if not running)
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

action=${1:-restart}
TIMEOUT=${HPCBRIDGE_SLURM_START_TIMEOUT:-60}
[ -s "$SLURM_CONF" ] || die "$SLURM_CONF missing; run start.sh first"

exec 9>"$STATE/.lock"
flock -w 120 9 || die "could not lock $STATE/.lock"

case $action in
    restart | stop) stop_daemon slurmctld 5 ;;
    start) ;;
    *) die "usage: $0 [restart|stop|start]" ;;
esac
if [ "$action" = stop ]; then wait_reaped; exit 0; fi

CTLD_MARK=$(ctld_log_mark)
CTLD_START_MS=$(now_ms)
started=0
if ! is_running slurmctld; then
    started=1
    launch slurmctld slurmctld -D -i
    wait_pid slurmctld 20 "$LOGDIR/slurmctld.log"
fi
wait_for "$TIMEOUT" slurmctld sh -c 'scontrol ping | grep -q "is UP"' ||
    die "slurmctld does not answer (scontrol ping)" "$LOGDIR/slurmctld.log" "$LOGDIR/slurmctld.out"
[ $started = 1 ] && wait_ctld_scheduling "$CTLD_MARK" "$CTLD_START_MS"
say "slurmctld running (pid $(pid_of slurmctld))"
