# shellcheck shell=bash
# shellcheck disable=SC2034,SC2086  # variables are used by the sourcing scripts; word splitting of pid lists is intended
# Common definitions for the hpcbridge single-node Slurm test cluster.
# Sourced by start.sh / stop.sh / restart-ctld.sh / add-user.sh; not meant to be run.

HPCB_SLURM_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# A Slurm built from source under a prefix (e.g. /opt/slurm-25.11) runs as a second
# cluster beside Debian's: its commands first on PATH, its own state, ports, cluster
# name and accounting database (all still overridable below).
PREFIX=${HPCBRIDGE_SLURM_PREFIX:-}
PREFIX=${PREFIX%/}
if [ -n "$PREFIX" ]; then
    PREFIX_TAG=$(basename "$PREFIX" | tr -cd '0-9') # slurm-25.11 -> 2511
    export PATH="$PREFIX/bin:$PREFIX/sbin:$PATH"
    DEFAULT_STATE=/tmp/hpcbridge-slurm-$PREFIX_TAG
    DEFAULT_CLUSTER=hpcbridge$PREFIX_TAG
    DEFAULT_PORT_BASE=7817
    DB_NAME=slurm_acct_$PREFIX_TAG
else
    DEFAULT_STATE=/tmp/hpcbridge-slurm
    DEFAULT_CLUSTER=hpcbridge
    DEFAULT_PORT_BASE=6817
    DB_NAME=slurm_acct_db
fi

STATE=${HPCBRIDGE_SLURM_STATE:-$DEFAULT_STATE}
case $STATE in /*) ;; *) STATE=$(pwd)/$STATE ;; esac

ETC=$STATE/etc              # slurm.conf, slurmdbd.conf, my.cnf, munge.key
LOGDIR=$STATE/log           # daemon logs (+ *.out = daemon stdout/stderr)
RUN=$STATE/run              # pid files, mariadb socket
SPOOL=$STATE/spool          # slurmctld StateSaveLocation, slurmd spool dir
MUNGE_DIR=$STATE/munge      # munge socket folder (must be 0755)
MUNGE_SOCKET=$MUNGE_DIR/munge.socket
LIBDIR=$STATE/lib           # munge seed file
DBDATA=$STATE/mariadb       # MariaDB datadir
MYSQL_SOCKET=$RUN/mariadb.sock

CLUSTER=${HPCBRIDGE_SLURM_CLUSTER:-$DEFAULT_CLUSTER}
ACCOUNT=hpcb
EXTRA_QOS=fast
CTLD_PORT=${HPCBRIDGE_SLURM_CTLD_PORT:-$DEFAULT_PORT_BASE}
SLURMD_PORT=${HPCBRIDGE_SLURM_SLURMD_PORT:-$((DEFAULT_PORT_BASE + 1))}
DBD_PORT=${HPCBRIDGE_SLURM_DBD_PORT:-$((DEFAULT_PORT_BASE + 2))}

export SLURM_CONF=$ETC/slurm.conf

# Nodes of the cluster, each a slurmd of its own on this one host (more than one needs a
# Slurm configured with --enable-multiple-slurmd): one is named like the host and its
# slurmd's files "slurmd"; several are n1..nN, their files "slurmd-n1".., "slurmd/n1"..
NODES=${HPCBRIDGE_SLURM_NODES:-1}
case $NODES in '' | *[!0-9]* | 0) echo "[hpcbridge-slurm] HPCBRIDGE_SLURM_NODES must be a positive integer, got '$NODES'" >&2; exit 1 ;; esac
if [ "$NODES" = 1 ]; then
    SLURMDS=slurmd
else
    SLURMDS=$(for ((i = 1; i <= NODES; i++)); do printf 'slurmd-n%s ' "$i"; done)
    SLURMDS=${SLURMDS% }
fi

# Order matters: start in this order, stop in reverse.
ALL_DAEMONS="munged mariadbd slurmdbd slurmctld $SLURMDS"

say() { echo "[hpcbridge-slurm] $*"; }
warn() { echo "[hpcbridge-slurm] $*" >&2; }

# die MESSAGE [LOGFILE...]: print message and the tail of the given logs
# (30 lines of the first, 10 of the others), exit 1.
die() {
    local msg=$1 f n=30
    shift
    warn "ERROR: $msg"
    for f in "$@"; do
        if [ -s "$f" ]; then
            warn "----- last $n lines of $f -----"
            tail -n "$n" "$f" >&2
            warn "-----"
            n=10
        fi
    done
    exit 1
}

# pid_of NAME: print the pid of daemon NAME if its pid file points at a live
# process whose command name is NAME (slurmd for slurmd-n1); return 1 otherwise.
pid_of() {
    local name=$1 pid comm
    [ -r "$RUN/$name.pid" ] || return 1
    read -r pid 2>/dev/null <"$RUN/$name.pid" || return 1
    case $pid in '' | *[!0-9]*) return 1 ;; esac
    [ -r "/proc/$pid/comm" ] || return 1
    read -r comm 2>/dev/null <"/proc/$pid/comm" || return 1
    [ "$comm" = "${name%%-*}" ] || return 1
    alive "$pid" || return 1
    echo "$pid"
}

is_running() { pid_of "$1" >/dev/null; }

# alive PID: process exists and is not a zombie (a dead daemon re-parented to
# an init that reaps slowly stays a zombie for a while; kill -0 still succeeds).
alive() {
    local line st
    read -r line 2>/dev/null <"/proc/$1/stat" || return 1
    st=${line##*) } # state follows "(comm) "; comm may contain spaces
    st=${st%% *}
    [ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]
}

# pids in session SID other than SID itself (children left behind by a
# session-leader daemon, e.g. slurmstepd and job processes under slurmd).
session_members() {
    local sid=$1
    ps -e -o pid=,sid=,stat= | awk -v s="$sid" '$2 == s && $1 != s && $3 !~ /^Z/ { print $1 }'
}

# stop_daemon NAME [GRACE_SECONDS]: SIGTERM by pid file, wait, then SIGKILL.
# Also terminates any process left in the daemon's session (daemons are
# started with setsid, so slurmd's session holds slurmstepd + job processes).
stop_daemon() {
    local name=$1 grace=${2:-5} pid i left
    if ! pid=$(pid_of "$name"); then
        rm -f "$RUN/$name.pid"
        return 0
    fi
    say "stopping $name (pid $pid)"
    STOPPED_PIDS="${STOPPED_PIDS:-} $pid"
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < grace * 10; i++)); do
        alive "$pid" || break
        sleep 0.1
    done
    if alive "$pid"; then
        warn "$name (pid $pid) did not exit after ${grace}s, sending SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
        for ((i = 0; i < 50; i++)); do
            alive "$pid" || break
            sleep 0.1
        done
    fi
    left=$(session_members "$pid")
    if [ -n "$left" ]; then
        say "terminating leftover processes of $name's session: $(echo $left)"
        # shellcheck disable=SC2086
        kill -TERM $left 2>/dev/null || true
        for ((i = 0; i < 30; i++)); do
            [ -z "$(session_members "$pid")" ] && break
            sleep 0.1
        done
        left=$(session_members "$pid")
        # shellcheck disable=SC2086
        [ -n "$left" ] && kill -KILL $left 2>/dev/null || true
    fi
    rm -f "$RUN/$name.pid"
}

# launch NAME CMD...: start CMD in its own session, in the background, with
# stdin from /dev/null and stdout/stderr appended to $LOGDIR/NAME.out (so a
# caller capturing our output never waits for the daemon). The daemon must
# write its own pid file $RUN/NAME.pid; wait_pid waits for it.
launch() {
    local name=$1
    shift
    echo "=== $(date '+%F %T') starting: $*" >>"$LOGDIR/$name.out"
    setsid "$@" </dev/null >>"$LOGDIR/$name.out" 2>&1 9>&- &
    LAUNCHED_PID=$! # the daemon itself (setsid does not fork here) -- used to fail fast
}

# wait_pid NAME TIMEOUT LOG...: wait until the daemon's pid file names a live process.
wait_pid() {
    local name=$1 timeout=$2 i
    shift 2
    for ((i = 0; i < timeout * 10; i++)); do
        is_running "$name" && return 0
        if [ -n "${LAUNCHED_PID:-}" ] && ! alive "$LAUNCHED_PID"; then
            sleep 0.2
            is_running "$name" && return 0
            die "$name exited during start-up" "$@" "$LOGDIR/$name.out"
        fi
        sleep 0.1
    done
    die "$name did not start (no live pid in $RUN/$name.pid after ${timeout}s)" "$@" "$LOGDIR/$name.out"
}

# wait_for TIMEOUT DAEMON CMD...: poll CMD every 0.2 s until it succeeds (rc 0);
# give up after TIMEOUT s (rc 1) or as soon as DAEMON (a name, or - for none)
# is no longer running (rc 2).
wait_for() {
    local timeout=$1 daemon=$2 i
    shift 2
    for ((i = 0; i < timeout * 5; i++)); do
        "$@" >/dev/null 2>&1 && return 0
        if [ "$daemon" != - ] && ! is_running "$daemon"; then
            "$@" >/dev/null 2>&1 && return 0
            return 2
        fi
        sleep 0.2
    done
    return 1
}

# our_stepds: pids of slurmstepd processes belonging to this cluster, i.e.
# listening on a unix socket under our SlurmdSpoolDir, or having it as cwd
# (start.sh launches slurmd from there). slurmstepd daemonizes into its own
# session and wipes its environment, so neither slurmd's session nor an
# environment marker finds it.
our_stepds() {
    local spool=$SPOOL/slurmd inodes p comm fd link cwd # several nodes: slurmd/n1, ...
    inodes=$(awk -v d="$spool/" 'index($8, d) == 1 { print "socket:[" $7 "]" }' /proc/net/unix 2>/dev/null | sort -u)
    for p in /proc/[0-9]*; do
        read -r comm 2>/dev/null <"$p/comm" || continue
        [ "$comm" = slurmstepd ] || continue
        cwd=$(readlink "$p/cwd" 2>/dev/null || true)
        if [ "$cwd" = "$spool" ] || [ "${cwd#"$spool"/}" != "$cwd" ]; then
            echo "${p#/proc/}"
            continue
        fi
        [ -n "$inodes" ] || continue
        for fd in "$p"/fd/*; do
            link=$(readlink "$fd" 2>/dev/null) || continue
            case $link in socket:*) grep -qxF "$link" <<<"$inodes" && { echo "${p#/proc/}"; break; } ;; esac
        done
    done
}

# descendants PID...: the given pids plus all their live descendants (via ppid).
descendants() {
    ps -e -o pid=,ppid= | awk -v roots="$*" '
        BEGIN { n = split(roots, r, " "); for (i = 1; i <= n; i++) want[r[i]] = 1 }
        { parent[$1] = $2; pids[NR] = $1 }
        END {
            changed = 1
            while (changed) {
                changed = 0
                for (i in pids) { p = pids[i]; if (!(p in want) && (parent[p] in want)) { want[p] = 1; changed = 1 } }
            }
            for (p in want) print p
        }'
}

# kill_stepds: terminate leftover job steps of this cluster (slurmstepd, the
# job processes in their sessions, and their descendants).
kill_stepds() {
    local stepds sids victims i s p any
    stepds=$(our_stepds)
    [ -n "$stepds" ] || return 0
    sids=$(ps -o sid= -p "$(echo $stepds | tr ' ' ',')" 2>/dev/null | tr -d ' ' | sort -u)
    victims=$( {
        echo "$stepds"
        for s in $sids; do ps -e -o pid=,sid= | awk -v s="$s" '$2 == s { print $1 }'; done
    } | sort -u)
    victims=$(descendants $victims | sort -u)
    say "killing leftover job steps: $(echo $victims)"
    kill -TERM $victims 2>/dev/null || true
    for ((i = 0; i < 30; i++)); do
        any=0
        for p in $victims; do alive "$p" && any=1; done
        [ $any = 0 ] && break
        sleep 0.1
    done
    for p in $victims; do alive "$p" && kill -KILL "$p" 2>/dev/null; done
    STOPPED_PIDS="${STOPPED_PIDS:-} $victims"
    return 0
}

# stop_all: stop every daemon in reverse start order plus leftover job steps.
stop_all() {
    local f
    stop_daemon slurmd 5
    # every node's slurmd that left a pid file, whatever HPCBRIDGE_SLURM_NODES says now
    for f in "$RUN"/slurmd-*.pid; do
        [ -e "$f" ] && stop_daemon "$(basename "$f" .pid)" 5
    done
    kill_stepds
    stop_daemon slurmctld 5
    stop_daemon slurmdbd 5
    stop_daemon mariadbd 15
    stop_daemon munged 5
}

# wait_reaped [SECONDS]: wait (bounded, never fails) until the pids stopped by
# stop_daemon have disappeared completely; our init may leave them as zombies
# for ~2 s, which `pgrep` would still list.
wait_reaped() {
    local secs=${1:-4} i p any
    for ((i = 0; i < secs * 10; i++)); do
        any=0
        for p in ${STOPPED_PIDS:-}; do [ -e "/proc/$p" ] && any=1; done
        [ $any = 0 ] && return 0
        sleep 0.1
    done
    return 0
}

# now_ms: wall clock in milliseconds
now_ms() { date +%s%3N; }

# Byte size of the slurmctld log (mark it before starting slurmctld).
ctld_log_mark() { stat -c %s "$LOGDIR/slurmctld.log" 2>/dev/null || echo 0; }

# wait_ctld_scheduling MARK START_MS: a freshly started slurmctld does not
# schedule anything for ~4-5 s (it pings the nodes MIN_CHECKIN_TIME=3 s after
# start); jobs submitted earlier stay PENDING until then. Wait until the first
# scheduling pass is logged ("SchedulerParameters=..." after log offset MARK)
# or until slurmctld (launched at START_MS) has been up for 6 s -- the log line
# only appears if something triggers a pass, so it cannot be the only signal.
wait_ctld_scheduling() {
    local mark=$1 start_ms=$2
    while [ $(($(now_ms) - start_ms)) -lt 6000 ]; do
        tail -c +"$((mark + 1))" "$LOGDIR/slurmctld.log" 2>/dev/null | grep -q 'SchedulerParameters=' && return 0
        sleep 0.1
    done
    return 0
}

# ----- accounting helpers (need slurmdbd up) -----

acct_mode() { grep -q '^AccountingStorageType=accounting_storage/slurmdbd' "$SLURM_CONF" 2>/dev/null; }

# ensure_user USER: associate USER with $ACCOUNT (no-op if already there).
ensure_user() {
    local user=$1 have
    have=$(sacctmgr -n -P show assoc where cluster="$CLUSTER" account="$ACCOUNT" user="$user" format=user 2>&1) ||
        die "sacctmgr show assoc failed: $have" "$LOGDIR/slurmdbd.log"
    if [ -n "$have" ]; then
        return 0
    fi
    say "adding user $user to account $ACCOUNT"
    sacctmgr -i add user "$user" account="$ACCOUNT" cluster="$CLUSTER" >/dev/null ||
        die "sacctmgr add user $user account=$ACCOUNT failed" "$LOGDIR/slurmdbd.log"
}
