#!/usr/bin/env bash
# Record the exact squeue/sacct command lines of the CLI driver
# (hpcbridge/schedulers/slurm/queries.py: squeue_argv, sacct_argv) against the
# test cluster of containers/slurm, into this folder:
#   bash containers/slurm/start.sh && bash tests/data/slurm/driver/record.sh
# For every NAME: NAME.cmd (the argv, shell-quoted), NAME.txt (stdout),
# NAME.err (stderr), NAME.rc (exit code); jobs.txt maps role -> job id.
# Takes ~20 s. Job ids differ between runs: the tests read jobs.txt.
set -euo pipefail
OUT=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
STATE=${HPCBRIDGE_SLURM_STATE:-/tmp/hpcbridge-slurm}
# shellcheck disable=SC1091
. "$STATE/env.sh"
WORK=/tmp/hpcb-record-driver
mkdir -p "$WORK"
cd "$WORK"

SQ_FORMAT='JobArrayID:0|,JobID:0|,State:0|,Reason:0|,StartTime:0|,EndTime:0|,exit_code:0|'
SA_FORMAT='JobID,JobIDRaw,State,ExitCode,Start,End,Reason'

rec() { # rec NAME ARGV...
    local name=$1 rc
    shift
    printf '%q ' "$@" | sed 's/ $/\n/' >"$OUT/$name.cmd"
    set +e
    "$@" >"$OUT/$name.txt" 2>"$OUT/$name.err"
    rc=$?
    set -e
    echo "$rc" >"$OUT/$name.rc"
    echo "[record] $name rc=$rc" >&2
}

sub() { local id; id=$(sbatch --parsable -o "$WORK/slurm-%j.out" "$@"); echo "${id%%;*}"; }
state() { squeue --noheader --states=all --jobs="$1,$1" --format=%T | head -n1; }
wait_state() {
    local i
    for ((i = 0; i < 150; i++)); do
        [ "$(state "$1")" = "$2" ] && return 0
        sleep 0.2
    done
    echo "[record] WARNING: $1 never reached $2" >&2
}

ok=$(sub -J ok --wrap 'echo ok')
exit3=$(sub -J exit3 --wrap 'exit 3')
killed=$(sub -J killed --wrap 'kill -9 $$')
running=$(sub -J running --wrap 'sleep 60')
cancelled=$(sub -J cancelled --wrap 'sleep 60')
dependent=$(sub -J dependent --dependency="afterok:$running" --kill-on-invalid-dep=yes --wrap true)
array=$(sub -J array --array=0-5%2 -o "$WORK/slurm-%A_%a.out" --wrap 'sleep 30; exit $SLURM_ARRAY_TASK_ID')
wait_state "$ok" COMPLETED
wait_state "$exit3" FAILED
wait_state "$killed" FAILED
wait_state "$running" RUNNING
wait_state "$cancelled" RUNNING
scancel "$cancelled"
wait_state "$cancelled" CANCELLED
sleep 1
{
    echo "ok=$ok"
    echo "exit3=$exit3"
    echo "killed=$killed"
    echo "running=$running"
    echo "cancelled=$cancelled"
    echo "dependent=$dependent"
    echo "array=$array"
} >"$OUT/jobs.txt"

ids="$ok,$exit3,$killed,$running,$cancelled,$dependent,$array"
rec squeue_driver squeue --noheader --array --states=all --jobs="$ids" --Format="$SQ_FORMAT"
rec squeue_driver_grouped squeue --noheader --states=all --jobs="$ids" --Format="$SQ_FORMAT"
rec squeue_driver_unknown_twice squeue --noheader --array --states=all --jobs=999999,999999 --Format="$SQ_FORMAT"
rec sacct_driver sacct -X -P --noheader --jobs="$ids" --format="$SA_FORMAT"
rec sacct_driver_unknown sacct -X -P --noheader --jobs=999999 --format="$SA_FORMAT"
scancel "$running" "$array" "$dependent" || true
