#!/usr/bin/env bash
# Re-record the real Slurm outputs in this folder against the test cluster of
# containers/slurm. Run the main recording on a FRESH cluster so job ids start at 1,
# then the accounting-off recording:
#   bash containers/slurm/stop.sh; rm -rf /tmp/hpcbridge-slurm
#   bash containers/slurm/start.sh && bash tests/data/slurm/record.sh
#   bash containers/slurm/stop.sh
#   HPCBRIDGE_SLURM_ACCOUNTING=0 bash containers/slurm/start.sh && bash tests/data/slurm/record.sh noacct
# The main run takes ~2 minutes (waits for a TIMEOUT and for purged job records).
# For every recording NAME it writes NAME.cmd (exact command line, run with only
# SLURM_CONF set), NAME.txt (stdout), NAME.err (stderr) and NAME.rc (exit code);
# then jobs.json (role -> job id), index.json (name -> cmd, rc) and INDEX.md.
set -euo pipefail
OUT=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
STATE=${HPCBRIDGE_SLURM_STATE:-/tmp/hpcbridge-slurm}
# shellcheck disable=SC1091
. "$STATE/env.sh"
MODE=${1:-main}
WORK=/tmp/hpcb-record # job output files land here (WorkDir/StdOut in scontrol output)
mkdir -p "$WORK"
cd "$WORK"

SQ_FMT="'%i|%T|%r|%S|%e|%V|%j'"
SA_FMT="JobID,State,ExitCode,Start,End,Submit,Reason,JobName"

log() { echo "[record $(date +%T)] $*" >&2; }

# rec NAME COMMAND-STRING
rec() {
    local name=$1 cmd=$2 rc
    printf '%s\n' "$cmd" >"$OUT/$name.cmd"
    set +e
    bash -c "$cmd" >"$OUT/$name.txt" 2>"$OUT/$name.err"
    rc=$?
    set -e
    echo "$rc" >"$OUT/$name.rc"
    log "$name rc=$rc: $(head -c 120 "$OUT/$name.txt" | tr '\n' ' ')$(head -c 120 "$OUT/$name.err" | tr '\n' ' ')"
}

# sub VAR sbatch-args...: submit (not recorded), store job id in VAR
sub() {
    local var=$1 id
    shift
    id=$(sbatch --parsable "$@")
    id=${id%%;*}
    printf -v "$var" '%s' "$id"
    log "submitted $var=$id: $*"
}

state() { squeue --noheader --states=all --jobs="$1" --format='%T' 2>/dev/null | head -n1; }
wait_state() { # wait_state ID STATE TIMEOUT
    local i
    for ((i = 0; i < $3 * 5; i++)); do
        [ "$(state "$1")" = "$2" ] && return 0
        sleep 0.2
    done
    log "WARNING: job $1 did not reach $2 within $3 s (now: $(state "$1"))"
}

write_index() {
    python3 "$OUT/make_index.py" "$OUT"
}

# clean NAME-GLOB: remove recordings matching the glob
clean() {
    local f
    for f in "$OUT"/$1.cmd; do
        [ -e "$f" ] || continue
        f=${f%.cmd}
        rm -f "$f.cmd" "$f.txt" "$f.err" "$f.rc"
    done
}

# jobs_json SECTION KEY=VALUE...: merge roles into jobs.json[SECTION]
jobs_json() {
    python3 - "$OUT/jobs.json" "$@" <<'PY'
import json, os, sys
path, section, pairs = sys.argv[1], sys.argv[2], sys.argv[3:]
data = json.load(open(path)) if os.path.exists(path) else {}
data[section] = dict(p.split("=", 1) for p in pairs)
json.dump(data, open(path, "w"), indent=2)
open(path, "a").write("\n")
PY
}

if [ "$MODE" = noacct ]; then
    [ "$HPCBRIDGE_SLURM_ACCOUNTING" = 0 ] || { echo "noacct mode needs a cluster started with HPCBRIDGE_SLURM_ACCOUNTING=0" >&2; exit 1; }
    clean 'noacct_*'
    rec noacct_sbatch_bad_account "sbatch --parsable --account=nosuchacct --qos=nosuchqos --job-name=noacct_exit4 --wrap='exit 4'"
    N_FAIL=$(cat "$OUT/noacct_sbatch_bad_account.txt")
    sub N_OK --job-name=noacct_ok --wrap='true'
    wait_state "$N_FAIL" FAILED 20
    wait_state "$N_OK" COMPLETED 20
    T_DONE=$(date +%s)
    rec noacct_squeue_finished "squeue --noheader --states=all --jobs=$N_FAIL,$N_OK --format=$SQ_FMT"
    rec noacct_scontrol_show_job_failed "scontrol -o show job $N_FAIL"
    rec noacct_sacct "sacct -X -P --noheader -j $N_FAIL,$N_OK --format=$SA_FMT"
    rec noacct_sacct_unknown "sacct -X -P --noheader -j 999999 --format=$SA_FMT"
    rec noacct_scontrol_show_config "scontrol show config | grep -i -E 'AccountingStorage(Type|Enforce)|JobAcctGatherType|MinJobAge'"
    for ((i = 0; i < 600; i++)); do
        squeue --noheader --jobs="$N_OK" >/dev/null 2>&1 || break
        sleep 0.5
    done
    log "job $N_OK purged $(($(date +%s) - T_DONE)) s after it was seen COMPLETED"
    rec noacct_squeue_purged "squeue --noheader --states=all --jobs=$N_FAIL,$N_OK --format=$SQ_FMT"
    jobs_json noacct "failed_exit4_bad_account_and_qos_accepted=$N_FAIL" "completed=$N_OK"
    write_index
    log "done (noacct); job output files in $WORK"
    exit 0
fi
[ "$HPCBRIDGE_SLURM_ACCOUNTING" = 1 ] || { echo "the main recording needs accounting (start without HPCBRIDGE_SLURM_ACCOUNTING=0)" >&2; exit 1; }

rm -f "$WORK"/slurm-*.out
for f in "$OUT"/*.cmd; do
    [ -e "$f" ] || continue
    case ${f##*/} in noacct_*) ;; *) clean "$(basename "$f" .cmd)" ;; esac
done

# ---------------------------------------------------------------- submissions
rec sbatch_parsable "sbatch --parsable --time=1 --job-name=timeout_job --wrap='sleep 300'"
J_TIMEOUT=$(cat "$OUT/sbatch_parsable.txt")
rec sbatch_parsable_cluster "sbatch --parsable --clusters=$HPCBRIDGE_SLURM_CLUSTER --job-name=cluster_job --wrap='true'"
J_CLUSTER=$(cut -d';' -f1 "$OUT/sbatch_parsable_cluster.txt")
rec sbatch_plain "sbatch --job-name=plain_job --wrap='true'"
J_PLAIN=$(awk '{print $NF}' "$OUT/sbatch_plain.txt")

rec sbatch_err_bad_partition "sbatch --parsable --partition=nosuchpart --wrap='true'"
rec sbatch_err_bad_account "sbatch --parsable --account=nosuchacct --wrap='true'"
rec sbatch_err_bad_qos "sbatch --parsable --qos=nosuchqos --wrap='true'"
rec sbatch_err_bad_time "sbatch --parsable --time=abc --wrap='true'"
rec sbatch_err_time_over_limit "sbatch --parsable --partition=short --time=10 --wrap='true'"
rec sbatch_dependency_unknown_job "sbatch --parsable --job-name=dep_unknown_job --dependency=afterok:999999 --wrap='true'"
J_DEP_UNKNOWN=$(cat "$OUT/sbatch_dependency_unknown_job.txt")
rec sbatch_ok_qos "sbatch --parsable --qos=$HPCBRIDGE_SLURM_QOS --account=$HPCBRIDGE_SLURM_ACCOUNT --partition=short --time=5 --job-name=qos_job --wrap='true'"
J_QOS=$(cat "$OUT/sbatch_ok_qos.txt")

sub J_OK --job-name=ok_job --wrap='echo ok'
sub J_FAIL3 --job-name=exit3_job --wrap='echo failing; exit 3'
sub J_SIGKILL --job-name=sigkill_job --wrap='kill -9 $$'
sub J_CANCEL_RUN --job-name=cancel_running_job --wrap='sleep 300'
sub J_CANCEL_PD --job-name=cancel_pending_job --begin=now+3600 --wrap='sleep 1'
sub J_RUN --job-name=running_job --wrap='sleep 300'
sub J_DEP --job-name=dependent_job --dependency=afterok:$J_RUN --wrap='sleep 1'
sub J_ARR_THR --job-name=array_throttled --array=1-6%2 --wrap='sleep 30'
sub J_ARR_RES --job-name=array_resources --array=1-5 --cpus-per-task=2 --wrap='sleep 30'

wait_state "$J_CANCEL_RUN" RUNNING 20
scancel "$J_CANCEL_PD"
scancel "$J_CANCEL_RUN"
wait_state "$J_RUN" RUNNING 20
wait_state "$J_OK" COMPLETED 20
wait_state "$J_FAIL3" FAILED 20
wait_state "$J_CANCEL_RUN" CANCELLED 20
sleep 1
T_DONE=$(date +%s)

ALL="$J_TIMEOUT,$J_CLUSTER,$J_PLAIN,$J_DEP_UNKNOWN,$J_QOS,$J_OK,$J_FAIL3,$J_SIGKILL,$J_CANCEL_RUN,$J_CANCEL_PD,$J_RUN,$J_DEP,$J_ARR_THR,$J_ARR_RES"

# ---------------------------------------------------------------- live snapshot
rec squeue_mixed "squeue --noheader --states=all --jobs=$ALL --format=$SQ_FMT"
rec squeue_mixed_header "squeue --states=all --jobs=$ALL --format=$SQ_FMT"
rec squeue_array "squeue --noheader --states=all --jobs=$J_ARR_THR,$J_ARR_RES --format=$SQ_FMT"
rec squeue_array_expanded "squeue --noheader --array --states=all --jobs=$J_ARR_THR,$J_ARR_RES --format=$SQ_FMT"
rec squeue_array_task "squeue --noheader --states=all --jobs=${J_ARR_THR}_1 --format=$SQ_FMT"
rec squeue_default "squeue --states=all --jobs=$ALL"
rec sacct_live "sacct -X -P --noheader -j $ALL --format=$SA_FMT"
rec scontrol_show_job_running "scontrol show job $J_RUN"
rec scontrol_show_job_running_oneliner "scontrol -o show job $J_RUN"
rec scontrol_show_job_completed "scontrol show job $J_FAIL3"
rec scontrol_show_job_array_oneliner "scontrol -o show job $J_ARR_THR"
rec scontrol_show_config "scontrol show config | grep -i -E 'MaxArraySize|MinJobAge'"
rec scancel_finished "scancel $J_FAIL3"
rec scancel_unknown "scancel 999999"
rec sbatch_version "sbatch --version"
rec squeue_version "squeue --version"
rec sacct_version "sacct --version"

sub J_ARR_EXIT --job-name=array_exitcodes --array=1-3 --wrap='exit $(( SLURM_ARRAY_TASK_ID == 2 ? 5 : 0 ))'

# ---------------------------------------------------------------- purge
log "waiting for job $J_OK to be purged from slurmctld memory"
for ((i = 0; i < 600; i++)); do
    squeue --noheader --jobs="$J_OK" >/dev/null 2>&1 || break
    sleep 0.5
done
T_PURGED=$(date +%s)
log "job $J_OK purged $((T_PURGED - T_DONE)) s after it was seen COMPLETED"
echo "$((T_PURGED - T_DONE))" >"$WORK/purge_seconds"
rec squeue_purged_plain "squeue -j $J_OK"
rec squeue_purged "squeue --noheader --states=all --jobs=$J_OK --format=$SQ_FMT"
rec squeue_partial "squeue --noheader --states=all --jobs=$J_OK,$J_RUN --format=$SQ_FMT"
rec squeue_unknown "squeue --noheader --states=all --jobs=999999 --format=$SQ_FMT"
rec squeue_purged_multi "squeue --noheader --states=all --jobs=$J_OK,$J_PLAIN --format=$SQ_FMT"
rec squeue_unknown_multi "squeue --noheader --states=all --jobs=999998,999999 --format=$SQ_FMT"
rec scancel_purged "scancel $J_OK"
rec scontrol_show_job_purged "scontrol show job $J_OK"

# ---------------------------------------------------------------- cancel running, dependency never satisfied
scancel "$J_RUN"
wait_state "$J_RUN" CANCELLED 20
sleep 1
rec squeue_dependency_never "squeue --noheader --states=all --jobs=$J_RUN,$J_DEP --format=$SQ_FMT"
scancel "$J_DEP"

# ---------------------------------------------------------------- timeout
log "waiting for job $J_TIMEOUT to hit its 1 minute limit"
for ((i = 0; i < 1200; i++)); do
    st=$(state "$J_TIMEOUT")
    [ "$st" = TIMEOUT ] && break
    sleep 0.25
done
rec squeue_timeout "squeue --noheader --states=all --jobs=$J_TIMEOUT --format=$SQ_FMT"
log "waiting for array jobs to finish"
for ((i = 0; i < 600; i++)); do
    [ -z "$(squeue --noheader --jobs=$J_ARR_THR,$J_ARR_RES,$J_ARR_EXIT --states=PENDING,RUNNING,COMPLETING,CONFIGURING 2>/dev/null)" ] && break
    sleep 1
done
sleep 2

ALL2="$ALL,$J_ARR_EXIT"
rec sacct_mixed "sacct -X -P --noheader -j $ALL2 --format=$SA_FMT"
rec sacct_mixed_n "sacct -X -P -n -j $ALL2 --format=$SA_FMT"
rec sacct_mixed_header "sacct -X -P -j $ALL2 --format=$SA_FMT"
rec sacct_timeout "sacct -X -P --noheader -j $J_TIMEOUT --format=$SA_FMT"
rec sacct_signal "sacct -X -P --noheader -j $J_SIGKILL --format=$SA_FMT"
rec sacct_cancelled "sacct -X -P --noheader -j $J_CANCEL_RUN,$J_CANCEL_PD,$J_RUN,$J_DEP --format=$SA_FMT"
rec sacct_array "sacct -X -P --noheader -j $J_ARR_THR,$J_ARR_RES,$J_ARR_EXIT --format=$SA_FMT"
rec sacct_array_task "sacct -X -P --noheader -j ${J_ARR_EXIT}_2 --format=$SA_FMT"
rec sacct_unknown "sacct -X -P --noheader -j 999999 --format=$SA_FMT"
rec sacct_steps "sacct -P --noheader -j $J_FAIL3,$J_SIGKILL,$J_TIMEOUT --format=$SA_FMT"
rec sacct_steps_header "sacct -P -j $J_OK --format=$SA_FMT"

# ---------------------------------------------------------------- index
jobs_json main "timeout=$J_TIMEOUT" "completed_parsable_clusters=$J_CLUSTER" "completed_plain_sbatch=$J_PLAIN" \
    "completed_dependency_on_unknown_job=$J_DEP_UNKNOWN" "completed_qos_fast_partition_short=$J_QOS" \
    "completed=$J_OK" "failed_exit3=$J_FAIL3" "failed_sigkill=$J_SIGKILL" \
    "cancelled_while_running=$J_CANCEL_RUN" "cancelled_while_pending_begin=$J_CANCEL_PD" \
    "running_then_cancelled=$J_RUN" "pending_dependency_then_never_satisfied_then_cancelled=$J_DEP" \
    "array_1-6%2_throttled=$J_ARR_THR" "array_1-5_cpus2_resources=$J_ARR_RES" \
    "array_1-3_task2_exit5=$J_ARR_EXIT" "unknown=999999" \
    "purged_seconds_after_seen_completed=$(cat "$WORK/purge_seconds")"
write_index
log "done; job output files in $WORK"
