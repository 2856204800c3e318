#!/usr/bin/env bash
# Record one status round of many jobs with the CLI driver's exact command lines
# (hpcbridge/schedulers/slurm/queries.py: squeue_argv, sacct_argv) against a test cluster
# of containers/slurm, into this folder:
#   PYTHONPATH=$PWD bash tests/data/slurm/status_round/record.sh
# 120 jobs and an array of 8 tasks wait on a held job (reason Dependency) while squeue is
# asked about them; then all are cancelled and, once squeue has forgotten them
# (MinJobAge), sacct is. For every NAME: NAME.cmd (the argv, shell-quoted), NAME.txt
# (stdout), NAME.err, NAME.rc. Takes ~1 min; job ids differ between runs.
set -euo pipefail
OUT=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
STATE=${HPCBRIDGE_SLURM_STATE:-/tmp/hpcbridge-slurm}
# shellcheck disable=SC1091
. "$STATE/env.sh"
WORK=/tmp/hpcb-record-status-round
mkdir -p "$WORK"
cd "$WORK"

rec() { # rec NAME ARGV...
    local name=$1 rc
    shift
    printf '%q ' "$@" | sed 's/ $/\n/' >"$OUT/$name.cmd"
    set +e
    "$@" >"$OUT/$name.txt" 2>"$OUT/$name.err"
    rc=$?
    set -e
    echo "$rc" >"$OUT/$name.rc"
    echo "[record] $name rc=$rc: $(wc -l <"$OUT/$name.txt") line(s)" >&2
}
argv() { # argv squeue|sacct ID...: the driver's command line, one word per line
    python3 -c 'import sys; from hpcbridge.schedulers.slurm import queries as s
print("\n".join(getattr(s, sys.argv[1] + "_argv")(sys.argv[2:])))' "$@"
}
sub() { local id; id=$(sbatch --parsable -o /dev/null "$@"); echo "${id%%;*}"; }

anchor=$(sub -J anchor --hold --wrap true)
jobs=()
for _ in $(seq 120); do jobs+=("$(sub -J tracked --dependency="afterok:$anchor" --wrap true)"); done
array=$(sub -J tracked_array --array=0-7 --dependency="afterok:$anchor" --wrap true)
tasks=()
for index in $(seq 0 7); do tasks+=("${array}_$index"); done
mapfile -t squeue_pending < <(argv squeue "${jobs[@]}")
rec squeue_pending "${squeue_pending[@]}"
mapfile -t squeue_array < <(argv squeue "${tasks[@]}")
rec squeue_array "${squeue_array[@]}"
scancel "$anchor" "${jobs[@]}" "$array"
for _ in $(seq 120); do # until squeue has forgotten them: only sacct knows them
    [ -z "$(squeue --noheader --states=all --jobs="$(IFS=,; echo "${jobs[*]}")" --format=%i 2>/dev/null)" ] && break
    sleep 1
done
mapfile -t sacct_cancelled < <(argv sacct "${jobs[@]}")
rec sacct_cancelled "${sacct_cancelled[@]}"
rec version squeue --version
