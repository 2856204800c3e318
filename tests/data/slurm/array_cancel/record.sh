#!/usr/bin/env bash
# Record what sacct says of the tasks of a Slurm array cancelled before they started,
# with the CLI driver's exact command line (hpcbridge/schedulers/slurm/queries.py:
# sacct_argv), against a test cluster of containers/slurm, into this folder:
#   bash tests/data/slurm/array_cancel/record.sh 2205                  # Debian's 22.05
#   HPCBRIDGE_SLURM_STATE=/tmp/hpcbridge-slurm-2511 \
#       bash tests/data/slurm/array_cancel/record.sh 2511              # /opt/slurm-25.11
# For every NAME (prefixed with the label): NAME.cmd (the argv, shell-quoted),
# NAME.txt (stdout), NAME.err, NAME.rc; LABEL_jobs.txt maps role -> job id.
# Takes ~30 s; job ids differ between runs (the tests read the jobs file).
set -euo pipefail
LABEL=${1:?give a label: 2205 or 2511}
OUT=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
STATE=${HPCBRIDGE_SLURM_STATE:-/tmp/hpcbridge-slurm}
# shellcheck disable=SC1091
. "$STATE/env.sh"
if [ -n "${HPCBRIDGE_SLURM_BIN:-}" ]; then PATH="$HPCBRIDGE_SLURM_BIN:$PATH"; fi
WORK=/tmp/hpcb-record-array-cancel
mkdir -p "$WORK"
cd "$WORK"

SA_FORMAT='JobID,JobIDRaw,State,ExitCode,Start,End,Reason'

rec() { # rec NAME ARGV...
    local name=${LABEL}_$1 rc
    shift
    printf '%q ' "$@" | sed 's/ $/\n/' >"$OUT/$name.cmd"
    set +e
    "$@" >"$OUT/$name.txt" 2>"$OUT/$name.err"
    rc=$?
    set -e
    echo "$rc" >"$OUT/$name.rc"
    echo "[record] $name rc=$rc: $(tr '\n' ' ' <"$OUT/$name.txt")" >&2
}
sacct_jobs() { rec "$1" sacct -X -P --noheader --jobs="$2" --format="$SA_FORMAT"; }
sub() { local id; id=$(sbatch --parsable -o "$WORK/slurm-%A_%a.out" "$@"); echo "${id%%;*}"; }
running() { # running ID N: wait until N tasks of array ID run
    local i
    for ((i = 0; i < 100; i++)); do
        [ "$(squeue --noheader --array --states=RUNNING --jobs="$1" --format=%i | wc -l)" -ge "$2" ] && return 0
        sleep 0.2
    done
    echo "[record] WARNING: $1 never had $2 running task(s)" >&2
}

# 0. Cancelled as soon as submitted: the record carries no task range yet.
at_once=$(sub -J at_once --array=0-1 --wrap 'sleep 60')
scancel "$at_once"
sacct_jobs at_once_base_now "$at_once"
# 1. Both tasks pending (a begin time an hour away), cancelled: never started.
pending=$(sub -J pending --array=0-1 --begin=now+3600 --wrap 'sleep 60')
scancel "$pending"
sleep 1
sacct_jobs pending_tasks_now "${pending}_0,${pending}_1"
sacct_jobs pending_base_now "$pending"
# 2. Half the tasks running, the rest pending behind a throttle (%2), cancelled.
half=$(sub -J half --array=0-3%2 --wrap 'sleep 60')
running "$half" 2
scancel "$half"
# 3. Two of three running, the third pending behind the throttle, cancelled.
third=$(sub -J third --array=0-2%2 --wrap 'sleep 60')
running "$third" 2
scancel "$third"
# 4. Two of three running, the third pending for CPUs (3 each on the 8 of node vm).
cpus=$(sub -J cpus --array=0-2 -c 3 --wrap 'sleep 60')
running "$cpus" 2
scancel "$cpus"
sleep 12 # past MinJobAge=10: squeue no longer has them; slurmdbd has the final records
{
    echo "pending=$pending"
    echo "half=$half"
    echo "third=$third"
    echo "at_once=$at_once"
    echo "cpus=$cpus"
} >"$OUT/${LABEL}_jobs.txt"
sacct_jobs pending_tasks "${pending}_0,${pending}_1"
sacct_jobs pending_base "$pending"
sacct_jobs half_tasks "${half}_0,${half}_1,${half}_2,${half}_3"
sacct_jobs half_base "$half"
sacct_jobs third_tasks "${third}_0,${third}_1,${third}_2"
sacct_jobs third_base "$third"
sacct_jobs at_once_tasks "${at_once}_0,${at_once}_1"
sacct_jobs at_once_base "$at_once"
sacct_jobs cpus_tasks "${cpus}_0,${cpus}_1,${cpus}_2"
sacct_jobs cpus_base "$cpus"
rec version sacct --version
