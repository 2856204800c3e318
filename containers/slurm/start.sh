#!/usr/bin/env bash
# Start the hpcbridge single-node Slurm test cluster (munge, MariaDB, slurmdbd,
# slurmctld, slurmd) with all state under $HPCBRIDGE_SLURM_STATE
# (default /tmp/hpcbridge-slurm). Needs root; no systemd used.
# See containers/slurm/README.md for the environment variables.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ACCOUNTING=${HPCBRIDGE_SLURM_ACCOUNTING:-1}
EXTRA_USERS=${HPCBRIDGE_SLURM_USERS:-}
CPUS=${HPCBRIDGE_SLURM_CPUS:-8}
# GPUs the node declares: character devices made in the state folder stand for them
# (copies of /dev/null: slurmd counts device files), so they schedule and are counted
# but nothing can use them - enough to test the requests.
GPUS=${HPCBRIDGE_SLURM_GPUS:-2}
MIN_JOB_AGE=${HPCBRIDGE_SLURM_MIN_JOB_AGE:-10}
MAX_ARRAY_SIZE=${HPCBRIDGE_SLURM_MAX_ARRAY_SIZE:-1001}
TIMEOUT=${HPCBRIDGE_SLURM_START_TIMEOUT:-60}
JWT=${HPCBRIDGE_SLURM_JWT:-0}

case $ACCOUNTING in 0 | 1) ;; *) die "HPCBRIDGE_SLURM_ACCOUNTING must be 0 or 1, got '$ACCOUNTING'" ;; esac
case $JWT in 0 | 1) ;; *) die "HPCBRIDGE_SLURM_JWT must be 0 or 1, got '$JWT'" ;; esac
case $CPUS in '' | *[!0-9]* | 0) die "HPCBRIDGE_SLURM_CPUS must be a positive integer, got '$CPUS'" ;; esac
case $GPUS in '' | *[!0-9]*) die "HPCBRIDGE_SLURM_GPUS must be a whole number, got '$GPUS'" ;; esac
[ "$(id -u)" = 0 ] || die "start.sh must run as root"
# the nodes' slurmd ports, SLURMD_PORT.. one each, must not take the others' ports
for port in "$CTLD_PORT" "$DBD_PORT"; do
    if [ "$port" -ge "$SLURMD_PORT" ] && [ "$port" -lt $((SLURMD_PORT + NODES)) ]; then
        die "port $port is one of the $NODES nodes' slurmd ports ($SLURMD_PORT-$((SLURMD_PORT + NODES - 1))): set HPCBRIDGE_SLURM_CTLD_PORT and HPCBRIDGE_SLURM_DBD_PORT outside them"
    fi
done

PACKAGES="munge slurmctld slurmd slurm-client slurmdbd mariadb-server-core mariadb-client-core"

install_packages() {
    local missing="" p policy_created=0
    # A Slurm under a prefix brings its own daemons and commands.
    [ -z "$PREFIX" ] || PACKAGES="munge mariadb-server-core mariadb-client-core"
    for p in $PACKAGES; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q ' installed$' || missing="$missing $p"
    done
    [ -z "$missing" ] && return 0
    say "installing missing packages:$missing"
    # Keep maintainer scripts from starting system-wide daemons (e.g. munge).
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
        chmod 755 /usr/sbin/policy-rc.d
        policy_created=1
    fi
    export DEBIAN_FRONTEND=noninteractive
    if ! ls /var/lib/apt/lists/*_Packages* >/dev/null 2>&1; then
        apt-get update -q
    fi
    local apt_opts="-y -q --no-install-recommends -o DPkg::Lock::Timeout=300"
    # shellcheck disable=SC2086
    if ! apt-get install $apt_opts $missing; then
        apt-get update -q && apt-get install $apt_opts $missing || {
            [ $policy_created = 1 ] && rm -f /usr/sbin/policy-rc.d
            die "apt-get install failed"
        }
    fi
    [ $policy_created = 1 ] && rm -f /usr/sbin/policy-rc.d
    return 0
}

# render TEMPLATE OUTPUT: substitute @TOKENS@ and the @ACCT@/@NOACCT@ line prefixes.
render() {
    local in=$1 out=$2 line tmp
    tmp=$out.tmp.$$
    : >"$tmp"
    while IFS= read -r line || [ -n "$line" ]; do
        case $line in
            @ACCT@*) [ "$ACCOUNTING" = 1 ] || continue; line=${line#@ACCT@} ;;
            @NOACCT@*) [ "$ACCOUNTING" = 0 ] || continue; line=${line#@NOACCT@} ;;
        esac
        line=${line//@STATE@/$STATE}
        line=${line//@CLUSTER@/$CLUSTER}
        line=${line//@HOST@/$HOST}
        line=${line//@NODE@/$NODE}
        line=${line//@NODE_SHAPE@/$NODE_SHAPE}
        line=${line//@CTLD_PORT@/$CTLD_PORT}
        line=${line//@SLURMD_PORT@/$SLURMD_PORT}
        line=${line//@DBD_PORT@/$DBD_PORT}
        line=${line//@MUNGE_SOCKET@/$MUNGE_SOCKET}
        line=${line//@MYSQL_SOCKET@/$MYSQL_SOCKET}
        line=${line//@DBDATA@/$DBDATA}
        line=${line//@MIN_JOB_AGE@/$MIN_JOB_AGE}
        line=${line//@MAX_ARRAY_SIZE@/$MAX_ARRAY_SIZE}
        line=${line//@DB_NAME@/$DB_NAME}
        line=${line//@TASK_PLUGIN@/$TASK_PLUGIN}
        line=${line//@NODE_TAG@/$NODE_TAG}
        line=${line//@SPOOL_TAG@/$SPOOL_TAG}
        printf '%s\n' "$line" >>"$tmp"
    done <"$in"
    mv -f "$tmp" "$out"
}

write_env_file() {
    local tmp=$STATE/env.sh.tmp.$$
    {
        echo "# hpcbridge Slurm test cluster -- written by containers/slurm/start.sh"
        printf 'export SLURM_CONF=%q\n' "$SLURM_CONF"
        printf 'export HPCBRIDGE_SLURM_STATE=%q\n' "$STATE"
        printf 'export HPCBRIDGE_SLURM_ACCOUNTING=%q\n' "$ACCOUNTING"
        printf 'export HPCBRIDGE_SLURM_CLUSTER=%q\n' "$CLUSTER"
        printf 'export HPCBRIDGE_SLURM_NODE=%q\n' "$NODE"
        printf 'export HPCBRIDGE_SLURM_NODES=%q\n' "$NODES"
        printf 'export HPCBRIDGE_SLURM_ACCOUNT=%q\n' "$ACCOUNT"
        printf 'export HPCBRIDGE_SLURM_QOS=%q\n' "$EXTRA_QOS"
        if [ -n "$PREFIX" ]; then
            printf 'export HPCBRIDGE_SLURM_PREFIX=%q\n' "$PREFIX"
            printf 'export HPCBRIDGE_SLURM_BIN=%q\n' "$PREFIX/bin"
            # shellcheck disable=SC2016 # expanded where env.sh is sourced
            printf 'export PATH="$HPCBRIDGE_SLURM_BIN:$PATH"\n'
        fi
    } >"$tmp"
    mv -f "$tmp" "$STATE/env.sh"
}

setup_accounting() {
    local out
    out=$(sacctmgr -n -P show cluster format=cluster 2>&1) || die "sacctmgr show cluster failed: $out" "$LOGDIR/slurmdbd.log"
    if ! grep -qx "$CLUSTER" <<<"$out"; then
        say "sacctmgr: adding cluster $CLUSTER"
        sacctmgr -i add cluster "$CLUSTER" >/dev/null || die "sacctmgr add cluster failed" "$LOGDIR/slurmdbd.log"
    fi
    out=$(sacctmgr -n -P show qos format=name 2>&1) || die "sacctmgr show qos failed: $out"
    if ! grep -qx "$EXTRA_QOS" <<<"$out"; then
        say "sacctmgr: adding qos $EXTRA_QOS"
        sacctmgr -i add qos "$EXTRA_QOS" >/dev/null || die "sacctmgr add qos failed" "$LOGDIR/slurmdbd.log"
    fi
    out=$(sacctmgr -n -P show account "$ACCOUNT" format=account 2>&1) || die "sacctmgr show account failed: $out"
    if [ -z "$out" ]; then
        say "sacctmgr: adding account $ACCOUNT (qos normal,$EXTRA_QOS)"
        sacctmgr -i add account "$ACCOUNT" cluster="$CLUSTER" description="hpcbridge tests" \
            organization=hpcbridge qos="normal,$EXTRA_QOS" defaultqos=normal >/dev/null ||
            die "sacctmgr add account failed" "$LOGDIR/slurmdbd.log"
    fi
    ensure_user root
    out=$(sacctmgr -n -P show user root format=defaultaccount 2>&1) || die "sacctmgr show user failed: $out"
    if [ "$out" != "$ACCOUNT" ]; then
        sacctmgr -i modify user root set defaultaccount="$ACCOUNT" >/dev/null ||
            die "sacctmgr modify user root failed" "$LOGDIR/slurmdbd.log"
    fi
    local u
    for u in $EXTRA_USERS; do
        ensure_user "$u"
    done
}

# ---------------------------------------------------------------------------

mkdir -p "$STATE"
exec 9>"$STATE/.lock"
flock -w 300 9 || die "could not lock $STATE/.lock (another start/stop running?)"

install_packages

mkdir -p "$ETC" "$LOGDIR" "$RUN" "$SPOOL/slurmctld" "$SPOOL/slurmd" "$LIBDIR" "$MUNGE_DIR"
chmod 755 "$STATE" "$MUNGE_DIR"
chmod 700 "$LIBDIR"
chmod 755 "$ETC" # clients (also unprivileged users) must read slurm.conf

T0=$(date +%s%N)

if [ "$ACCOUNTING" = 1 ]; then
    WANTED="munged mariadbd slurmdbd slurmctld slurmd"
else
    WANTED="munged slurmctld slurmd"
fi

running="" notrunning=""
for d in $ALL_DAEMONS; do
    if is_running "$d"; then running="$running $d"; else notrunning="$notrunning $d"; fi
done
if [ -n "$running" ]; then
    prev_mode=$(cat "$STATE/accounting" 2>/dev/null || echo "?")
    if [ "$prev_mode" != "$ACCOUNTING" ]; then
        die "cluster in $STATE is running with HPCBRIDGE_SLURM_ACCOUNTING=$prev_mode (daemons:$running); run stop.sh first"
    fi
    all=1
    for d in $WANTED; do is_running "$d" || all=0; done
    if [ $all = 1 ] && scontrol ping 2>/dev/null | grep -q 'is UP'; then
        say "already running (state $STATE, daemons:$running)"
        if [ "$ACCOUNTING" = 1 ]; then
            for u in $EXTRA_USERS; do ensure_user "$u"; done
        fi
        [ -e "$STATE/env.sh" ] || { NODE=$(cat "$STATE/node"); write_env_file; }
        say "env file: $STATE/env.sh"
        exit 0
    fi
    say "partially running (running:$running; missing:$notrunning) -- restarting everything"
    stop_all
fi

for c in munged mungekey slurmctld slurmd slurmdbd sbatch sacctmgr; do
    command -v "$c" >/dev/null || die "$c not found after package installation"
done

HOST=$(hostname -s)
# Slurm 23.02 dropped task/none: without a task plugin line there is none.
if [ -z "$PREFIX" ] || [ -e "$PREFIX/lib/slurm/task_none.so" ]; then
    TASK_PLUGIN="TaskPlugin=task/none"
else
    TASK_PLUGIN="# TaskPlugin: none (this Slurm has no task/none plugin)"
fi
NODE=${HPCBRIDGE_SLURM_NODENAME:-$HOST}
NODE_TAG="" SPOOL_TAG="" PORTS=""
if [ "$NODES" != 1 ]; then
    # Several slurmd on this host: n1..nN, each its own port, log, pid file and spool
    # (%n: the node's name), all reached at this host.
    NODE="n[1-$NODES]" NODE_TAG=-%n SPOOL_TAG=/%n
    PORTS=" Port=[$SLURMD_PORT-$((SLURMD_PORT + NODES - 1))]"
fi
# Real memory as reported by slurmd -C (needs no config).
MEM=$(env -u SLURM_CONF slurmd -C 2>/dev/null | sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p' | head -n1)
[ -n "$MEM" ] || MEM=$(awk '/MemTotal/ {print int($2/1024)}' /proc/meminfo)
NODE_SHAPE="CPUs=$CPUS Boards=1 SocketsPerBoard=1 CoresPerSocket=$CPUS ThreadsPerCore=1 RealMemory=$MEM$PORTS"
[ "$GPUS" = 0 ] || NODE_SHAPE="$NODE_SHAPE Gres=gpu:$GPUS"

# ----- configuration -----
if [ ! -s "$ETC/munge.key" ]; then
    mungekey -c -b 1024 -k "$ETC/munge.key" || dd if=/dev/urandom of="$ETC/munge.key" bs=128 count=1 status=none
fi
chmod 600 "$ETC/munge.key"
render "$HPCB_SLURM_DIR/slurm.conf.in" "$ETC/slurm.conf"
: >"$ETC/gres.conf"
if [ "$GPUS" != 0 ]; then
    mkdir -p "$STATE/dev"
    for ((i = 0; i < GPUS; i++)); do
        [ -c "$STATE/dev/gpu$i" ] || mknod -m 666 "$STATE/dev/gpu$i" c 1 3
    done
    printf 'NodeName=%s Name=gpu File=%s/dev/gpu[0-%s]\n' "$NODE" "$STATE" "$((GPUS - 1))" >"$ETC/gres.conf"
fi
chmod 644 "$ETC/gres.conf"
# auth/jwt beside munge: tokens (scontrol token) for slurmrestd's rest_auth/jwt
JWT_CONF="AuthAltTypes=auth/jwt
AuthAltParameters=jwt_key=$ETC/jwt_hs256.key"
if [ "$JWT" = 1 ]; then
    [ -s "$ETC/jwt_hs256.key" ] || dd if=/dev/urandom of="$ETC/jwt_hs256.key" bs=32 count=1 status=none
    chmod 600 "$ETC/jwt_hs256.key"
    printf '\n%s\n' "$JWT_CONF" >>"$ETC/slurm.conf"
fi
if [ -n "${HPCBRIDGE_SLURM_EXTRA_CONF:-}" ]; then
    # Later lines override earlier ones ("specified more than once, latest value used").
    printf '\n# from HPCBRIDGE_SLURM_EXTRA_CONF\n%s\n' "$HPCBRIDGE_SLURM_EXTRA_CONF" >>"$ETC/slurm.conf"
fi
chmod 644 "$ETC/slurm.conf"
if [ "$ACCOUNTING" = 1 ]; then
    render "$HPCB_SLURM_DIR/slurmdbd.conf.in" "$ETC/slurmdbd.conf"
    [ "$JWT" = 0 ] || printf '%s\n' "$JWT_CONF" >>"$ETC/slurmdbd.conf"
    chmod 600 "$ETC/slurmdbd.conf"
    render "$HPCB_SLURM_DIR/my.cnf.in" "$ETC/my.cnf"
    chmod 644 "$ETC/my.cnf"
else
    rm -f "$ETC/slurmdbd.conf"
fi
# slurmctld refuses a slurmdbd after running without one (CLUSTER ID MISMATCH) until
# the cluster name it saved is forgotten.
if [ "$(cat "$STATE/accounting" 2>/dev/null || echo "$ACCOUNTING")" != "$ACCOUNTING" ]; then
    rm -f "$SPOOL/slurmctld/clustername"
fi
echo "$ACCOUNTING" >"$STATE/accounting"
echo "$NODE" >"$STATE/node"
rm -f "$STATE/env.sh"

# ----- munge -----
trap 'rc=$?; [ $rc = 0 ] || warn "start failed (rc $rc); daemons started so far are left running for inspection -- run stop.sh to clean up"' EXIT
rm -f "$MUNGE_SOCKET" "$MUNGE_SOCKET.lock"
launch munged munged -F --key-file="$ETC/munge.key" --socket="$MUNGE_SOCKET" \
    --pid-file="$RUN/munged.pid" --seed-file="$LIBDIR/munged.seed"
wait_pid munged 10
wait_for 10 munged test -S "$MUNGE_SOCKET" || die "munged socket $MUNGE_SOCKET did not appear" "$LOGDIR/munged.out"

# ----- MariaDB + slurmdbd -----
if [ "$ACCOUNTING" = 1 ]; then
    if [ ! -d "$DBDATA/mysql" ]; then
        say "initialising MariaDB datadir $DBDATA"
        rm -rf "$DBDATA"
        mariadb-install-db --defaults-file="$ETC/my.cnf" --skip-test-db \
            --auth-root-authentication-method=socket >"$LOGDIR/mariadb-install-db.log" 2>&1 ||
            die "mariadb-install-db failed" "$LOGDIR/mariadb-install-db.log"
    fi
    rm -f "$MYSQL_SOCKET"
    launch mariadbd mariadbd --defaults-file="$ETC/my.cnf"
    wait_pid mariadbd 20 "$LOGDIR/mariadbd.log"
    wait_for "$TIMEOUT" mariadbd mariadb --defaults-file="$ETC/my.cnf" -e 'SELECT 1' ||
        die "MariaDB did not come up" "$LOGDIR/mariadbd.log" "$LOGDIR/mariadbd.out"

    launch slurmdbd env MYSQL_UNIX_PORT="$MYSQL_SOCKET" slurmdbd -D
    wait_pid slurmdbd 20 "$LOGDIR/slurmdbd.log"
    wait_for "$TIMEOUT" slurmdbd sacctmgr -n show cluster ||
        die "slurmdbd does not answer (sacctmgr show cluster fails)" "$LOGDIR/slurmdbd.log" "$LOGDIR/slurmdbd.out"
    setup_accounting
fi

# ----- slurmctld -----
CTLD_MARK=$(ctld_log_mark)
CTLD_START_MS=$(now_ms)
launch slurmctld slurmctld -D -i
wait_pid slurmctld 20 "$LOGDIR/slurmctld.log"
wait_for "$TIMEOUT" slurmctld sh -c 'scontrol ping | grep -q "is UP"' ||
    die "slurmctld does not answer (scontrol ping)" "$LOGDIR/slurmctld.log" "$LOGDIR/slurmctld.out"

# ----- slurmd -----
# Launched from the spool dir so its slurmstepds can be recognised by cwd (stop.sh).
cd "$SPOOL/slurmd"
for d in $SLURMDS; do
    # slurmd: the node named like the host; slurmd-n1: node n1
    if [ "$d" = slurmd ]; then name=$NODE; else name=${d#slurmd-}; fi
    [ "$d" = slurmd ] || mkdir -p "$SPOOL/slurmd/$name"
    launch "$d" slurmd -D -N "$name"
    wait_pid "$d" 20 "$LOGDIR/$d.log"
done
# every node registered and idle (or its drain/down state recorded in .node_state)
node_idle() {
    local states st
    states=$(sinfo -h -N -n "$NODE" -o '%T' 2>/dev/null) || return 1
    [ "$(wc -l <<<"$states")" -ge "$NODES" ] || return 1
    for st in $states; do
        case $st in
            *'*') return 1 ;; # slurmd has not registered yet
            idle | mixed | allocated | completing) ;;
            *drain* | down | fail*) echo "$st" >"$RUN/.node_state" ;;
            *) return 1 ;;
        esac
    done
    return 0
}
rm -f "$RUN/.node_state"
wait_for "$TIMEOUT" slurmd node_idle ||
    die "node $NODE did not become idle: $(sinfo -h -N -n "$NODE" -o '%T %E' 2>&1 | sort -u)" "$LOGDIR/${SLURMDS%% *}.log" "$LOGDIR/slurmctld.log"
# slurmctld keeps a node's drain across restarts (its state file): one an earlier run
# left drained (e.g. "Kill task failed" under a paused controller) is resumed, once.
if grep -q drain "$RUN/.node_state" 2>/dev/null; then
    say "resuming node $NODE, left $(sinfo -h -N -n "$NODE" -o '%T reason=%E' 2>&1 | sort -u) by an earlier run"
    rm -f "$RUN/.node_state"
    scontrol update NodeName="$NODE" State=RESUME ||
        die "could not resume node $NODE" "$LOGDIR/slurmctld.log"
    wait_for "$TIMEOUT" slurmd node_idle ||
        die "node $NODE did not become idle after its resume" "$LOGDIR/${SLURMDS%% *}.log" "$LOGDIR/slurmctld.log"
fi
if [ -e "$RUN/.node_state" ]; then
    rm -f "$RUN/.node_state"
    die "node $NODE is not usable: $(sinfo -h -N -n "$NODE" -o '%T reason=%E' 2>&1 | sort -u)" "$LOGDIR/${SLURMDS%% *}.log" "$LOGDIR/slurmctld.log"
fi

# slurmctld registered with slurmdbd (sacct records need it)?
if [ "$ACCOUNTING" = 1 ]; then
    ctld_registered() { [ -n "$(sacctmgr -n -P show cluster "$CLUSTER" format=controlhost 2>/dev/null)" ]; }
    wait_for "$TIMEOUT" slurmctld ctld_registered ||
        die "slurmctld did not register with slurmdbd" "$LOGDIR/slurmctld.log" "$LOGDIR/slurmdbd.log"
fi

wait_ctld_scheduling "$CTLD_MARK" "$CTLD_START_MS"

# A prefix's own default configuration ($PREFIX/etc/slurm.conf) is its default cluster's,
# as a site's is: commands run without SLURM_CONF reach it - as Flux 0.88's
# slurm-expiration-sync runs squeue, with every SLURM_* variable dropped.
if [ -n "$PREFIX" ] && [ "$STATE" = "$DEFAULT_STATE" ]; then
    if [ ! -e "$PREFIX/etc" ] || [ -L "$PREFIX/etc" ]; then
        ln -sfn "$ETC" "$PREFIX/etc"
    else
        say "$PREFIX/etc is not ours: commands without SLURM_CONF will not find this cluster"
    fi
fi

write_env_file
T1=$(date +%s%N)
say "up in $(((T1 - T0) / 1000000)) ms: cluster=$CLUSTER node=$NODE accounting=$ACCOUNTING state=$STATE"
say "env file: $STATE/env.sh  (source it, or set SLURM_CONF=$SLURM_CONF)"
