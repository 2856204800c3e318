# Shared helpers for containers/sshd/{start,stop,restart}.sh and containers/sshd-totp/start.sh
# (which sets HPCB_TAG and its own state folder).  Sourced, not run.
# shellcheck shell=bash
# shellcheck disable=SC2034  # variables are used by the sourcing scripts

HPCB_LIB=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
HPCB_TAG=hpcbridge-sshd   # the messages' prefix
SSHD_BIN=/usr/sbin/sshd
HPCB_STATE=${HPCBRIDGE_SSHD_STATE:-/tmp/hpcbridge-sshd}
HPCB_STATE=${HPCB_STATE%/}
HPCB_USER=${HPCBRIDGE_SSH_TEST_USER:-hpcbtest}
HPCB_PIDFILE=$HPCB_STATE/sshd.pid
HPCB_CONFIG=$HPCB_STATE/sshd_config
HPCB_LOG=$HPCB_STATE/sshd.log

log()  { printf '[%s] %s\n' "$HPCB_TAG" "$*"; }
warn() { printf '[%s] WARNING: %s\n' "$HPCB_TAG" "$*" >&2; }
die()  { printf '[%s] ERROR: %s\n' "$HPCB_TAG" "$*" >&2; exit 1; }

# Print the tail of this instance's sshd log to stderr.
show_log_tail() {
    if [ -s "$HPCB_LOG" ]; then
        printf -- '----- last lines of %s -----\n' "$HPCB_LOG" >&2
        tail -n "${1:-30}" "$HPCB_LOG" >&2
        printf -- '-----\n' >&2
    else
        printf '(sshd log %s is empty or missing)\n' "$HPCB_LOG" >&2
    fi
}

# Is PID an sshd process belonging to this state folder?
is_our_sshd() {
    local pid=$1 exe cmd
    [ -n "$pid" ] && [ -d "/proc/$pid" ] || return 1
    exe=$(readlink "/proc/$pid/exe" 2>/dev/null) || return 1
    case $exe in */sshd|*/sshd\ \(deleted\)) ;; *) return 1 ;; esac
    cmd=$({ tr "\0" " " < "/proc/$pid/cmdline"; } 2>/dev/null) || return 1
    case "$cmd " in *" -f $HPCB_CONFIG "*) return 0 ;; esac
    return 1
}

# PID of the running listener for this state folder, or nothing (status 1).
# Uses the pid file; if that is missing or stale, looks for a listener started
# with "-f <state>/sshd_config" in /proc (so a clobbered pid file cannot leave
# an unmanageable daemon behind).
running_pid() {
    local pid d cmd
    if { read -r pid < "$HPCB_PIDFILE"; } 2>/dev/null; then
        case $pid in
            ''|*[!0-9]*) ;;
            *) if is_our_sshd "$pid"; then printf '%s\n' "$pid"; return 0; fi ;;
        esac
    fi
    for d in /proc/[0-9]*; do
        pid=${d#/proc/}
        is_our_sshd "$pid" || continue
        cmd=$({ tr "\0" " " < "$d/cmdline"; } 2>/dev/null) || continue
        case $cmd in *'[listener]'*) printf '%s\n' "$pid"; return 0 ;; esac
    done
    return 1
}

# Direct children of PID (reads /proc, so procps is not required).
children_of() {
    local parent=$1 f line rest
    for f in /proc/[0-9]*/stat; do
        { read -r line < "$f"; } 2>/dev/null || continue
        rest=${line##*) }            # "STATE PPID ..." (comm may contain spaces)
        # shellcheck disable=SC2086  # word splitting intended
        set -- $rest
        [ "${2:-}" = "$parent" ] || continue
        f=${f#/proc/}; printf '%s\n' "${f%/stat}"
    done
}

# All descendants of PID whose executable is sshd (per-connection processes).
sshd_descendants() {
    local c exe
    for c in $(children_of "$1"); do
        exe=$(readlink "/proc/$c/exe" 2>/dev/null || true)
        case $exe in */sshd|*/sshd\ \(deleted\)) printf '%s\n' "$c" ;; esac
        sshd_descendants "$c"
    done
}

# Is something listening on 127.0.0.1:PORT ?
port_in_use() {
    local port=$1
    if command -v ss >/dev/null 2>&1; then
        ss -Hltn "( sport = :$port )" 2>/dev/null | grep -q . && return 0
        return 1
    fi
    # Fallback without iproute2: try to connect.
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null
}

# ================================================================ the steps of a start.sh
# They read HPCB_STATE and HPCB_USER and set the globals named in each comment.

# Refuse a state folder that is not absolute (STATE_VARIABLE names it in the message) or a
# login user that is not a simple unprivileged name.
check_names() {
    case $HPCB_STATE in /*) ;; *) die "$1 must be an absolute path (got '$HPCB_STATE')" ;; esac
    case $HPCB_USER in ''|*[!a-z0-9_-]*|[!a-z_]*) die "HPCBRIDGE_SSH_TEST_USER '$HPCB_USER' is not a simple user name" ;; esac
    [ "$HPCB_USER" != root ] || die "HPCBRIDGE_SSH_TEST_USER must not be root"
}

# Exit 0 when this instance already runs, warning when PORT_VARIABLE asks for another port
# (HOW_TO_MOVE: what to run to change it).
exit_if_running() {
    local pid port asked=${!1:-}
    pid=$(running_pid) || return 0
    port=$(cat "$HPCB_STATE/port" 2>/dev/null || echo '?')
    log "already running (pid $pid, 127.0.0.1:$port, state $HPCB_STATE)"
    if [ -n "$asked" ] && [ "$asked" != "$port" ]; then
        warn "$1=$asked differs from the running port $port; run $2 to change it"
    fi
    log "environment: . $HPCB_STATE/env.sh"
    exit 0
}

# PORT: the one PORT_VARIABLE names (refused when taken), else the saved one, else the
# first free one from FIRST to LAST.  Chosen before anything else changes.
choose_port() {
    local variable=$1 first=$2 last=$3 saved p
    saved=$(cat "$HPCB_STATE/port" 2>/dev/null || true)
    PORT=${!variable:-}
    if [ -n "$PORT" ]; then
        case $PORT in *[!0-9]*) die "$variable='$PORT' is not a number" ;; esac
        if port_in_use "$PORT"; then
            die "port 127.0.0.1:$PORT ($variable) is already in use; pick another one"
        fi
    elif [ -n "$saved" ] && ! port_in_use "$saved"; then
        PORT=$saved
    else
        for p in $(seq "$first" "$last"); do
            if ! port_in_use "$p"; then PORT=$p; break; fi
        done
        [ -n "$PORT" ] || die "no free port in $first-$last; set $variable"
        if [ -n "$saved" ]; then
            warn "saved port $saved is busy; using $PORT instead"
        elif [ "$PORT" != "$first" ]; then
            warn "port $first is busy; using $PORT"
        fi
    fi
}

# apt-get install PACKAGES.
install_packages() {
    log "installing $*"
    export DEBIAN_FRONTEND=noninteractive
    # Without systemd, the package's postinst would start a system-wide sshd
    # on 0.0.0.0:22 through invoke-rc.d.  Deny that with a temporary
    # policy-rc.d unless one already exists (Docker images ship one).
    local made_policy=
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
        chmod 0755 /usr/sbin/policy-rc.d
        made_policy=1
        trap 'rm -f /usr/sbin/policy-rc.d' EXIT
    fi
    # Wait (up to 10 min) for the dpkg lock instead of failing at once when
    # another apt-get runs concurrently (e.g. a Slurm setup script).
    local apt_opts=(-o DPkg::Lock::Timeout=600)
    if ! apt-get "${apt_opts[@]}" install -y --no-install-recommends "$@"; then
        log "apt-get install failed; running apt-get update and retrying"
        if ! { apt-get "${apt_opts[@]}" update \
            && apt-get "${apt_opts[@]}" install -y --no-install-recommends "$@"; }; then
            die "could not install $*"
        fi
    fi
    [ -z "$made_policy" ] || { rm -f /usr/sbin/policy-rc.d; trap - EXIT; }
}

# The login user, made if missing and unlocked; /run/sshd.  Sets USER_HOME, USER_GROUP.
prepare_user() {
    if ! getent passwd "$HPCB_USER" >/dev/null; then
        log "creating user $HPCB_USER"
        useradd --create-home --shell /bin/bash --user-group "$HPCB_USER"
    fi
    # useradd leaves the password field as '!' (locked); sshd without PAM then
    # refuses even public-key logins ("User ... not allowed because account is
    # locked").  '*' = no usable password, but not locked.
    local shadow_pw
    shadow_pw=$(getent shadow "$HPCB_USER" | cut -d: -f2)
    case $shadow_pw in
        '!'*) log "unlocking $HPCB_USER (password field '$shadow_pw' -> '*')"
              usermod -p '*' "$HPCB_USER" ;;
    esac
    USER_HOME=$(getent passwd "$HPCB_USER" | cut -d: -f6)
    USER_GROUP=$(id -gn "$HPCB_USER")
    [ -n "$USER_HOME" ] || die "user $HPCB_USER has no home directory"
    if [ ! -d "$USER_HOME" ]; then
        mkdir -p "$USER_HOME"
        chown "$HPCB_USER:$USER_GROUP" "$USER_HOME"
        chmod 0755 "$USER_HOME"
    fi
    # StrictModes: home must not be group/world-writable.
    chmod go-w "$USER_HOME"

    # Privilege-separation directory (normally created by the init script).
    mkdir -p /run/sshd
    chmod 0755 /run/sshd
}

# An ed25519 key pair at PATH with COMMENT, made when either half is missing.
ensure_key() {
    local path=$1 comment=$2 what=$3
    if [ ! -s "$path" ] || [ ! -s "$path.pub" ]; then
        log "generating $what $path"
        rm -f "$path" "$path.pub"
        ssh-keygen -q -t ed25519 -N '' -C "$comment" -f "$path"
    fi
    chmod 0600 "$path"
}

# The state folder and its keys, the client key authorized for the user.  Sets HOST_KEY,
# CLIENT_KEY.
prepare_state() {
    mkdir -p "$HPCB_STATE"
    chmod 0755 "$HPCB_STATE"
    HOST_KEY=$HPCB_STATE/ssh_host_ed25519_key
    ensure_key "$HOST_KEY" "hpcbridge-test-host:$HPCB_STATE" "host key"
    CLIENT_KEY=$HPCB_STATE/id_ed25519
    ensure_key "$CLIENT_KEY" "hpcbridge-sshd:$HPCB_STATE" "client key"

    # Install the client key.  Several instances (state folders) share the one
    # test user, so replace only this instance's line, identified by its comment
    # (stop.sh --purge removes it by that comment).
    local key_tag="hpcbridge-sshd:$HPCB_STATE" ssh_dir=$USER_HOME/.ssh tmp_keys
    local auth_keys=$ssh_dir/authorized_keys
    mkdir -p "$ssh_dir"
    touch "$auth_keys"
    tmp_keys=$(mktemp)
    awk -v tag="$key_tag" '$NF != tag' "$auth_keys" > "$tmp_keys"
    # Re-tag the key line explicitly (keeps the comment exact even if the .pub
    # file was edited).
    awk -v tag="$key_tag" '{print $1, $2, tag}' "$CLIENT_KEY.pub" >> "$tmp_keys"
    cat "$tmp_keys" > "$auth_keys"
    rm -f "$tmp_keys"
    chown -R "$HPCB_USER:$USER_GROUP" "$ssh_dir"
    chmod 0700 "$ssh_dir"
    chmod 0600 "$auth_keys"
}

# The state's sshd_config (from TEMPLATE), port, known_hosts and ssh_config: a client config
# whose Host is ALIAS, under the COMMENT lines, with the extra OPTIONS lines.  Sets
# KNOWN_HOSTS, SSH_CONFIG, hk_type, hk_blob (the host key as known_hosts holds it).
write_configs() {
    local template=$1 alias=$2 comment=$3
    shift 3
    echo "$PORT" > "$HPCB_STATE/port"

    sed -e "s|@STATE@|$HPCB_STATE|g" -e "s|@PORT@|$PORT|g" -e "s|@USER@|$HPCB_USER|g" \
        "$template" > "$HPCB_CONFIG.tmp"
    mv -f "$HPCB_CONFIG.tmp" "$HPCB_CONFIG"
    chmod 0644 "$HPCB_CONFIG"

    KNOWN_HOSTS=$HPCB_STATE/known_hosts
    read -r hk_type hk_blob _ < "$HOST_KEY.pub"
    printf '[127.0.0.1]:%s %s %s\n' "$PORT" "$hk_type" "$hk_blob" > "$KNOWN_HOSTS"
    chmod 0644 "$KNOWN_HOSTS"

    SSH_CONFIG=$HPCB_STATE/ssh_config
    {
        printf '%s\n' "$comment" "Host $alias"
        printf '    %s\n' "HostName 127.0.0.1" "Port $PORT" "User $HPCB_USER" \
            "IdentityFile $CLIENT_KEY" "IdentitiesOnly yes" "UserKnownHostsFile $KNOWN_HOSTS" \
            "GlobalKnownHostsFile /dev/null" "StrictHostKeyChecking yes" "$@" \
            "PasswordAuthentication no" "ConnectTimeout 5" "LogLevel ERROR"
    } > "$SSH_CONFIG"
    chmod 0644 "$SSH_CONFIG"
}

# <state>/env.sh, which the tests source: PREFIX{HOST,PORT,USER,KEY,KNOWN_HOSTS,CONFIG}, the
# extra NAME=VALUE words, then STATE_VARIABLE.  Sets ENV_SH.
write_env() {
    local prefix=$1 state_variable=$2
    shift 2
    ENV_SH=$HPCB_STATE/env.sh
    {
        printf '# Source me: . %s\n' "$ENV_SH"
        printf 'export %s\n' "${prefix}HOST=127.0.0.1" "${prefix}PORT=$PORT" \
            "${prefix}USER=$HPCB_USER" "${prefix}KEY=$CLIENT_KEY" \
            "${prefix}KNOWN_HOSTS=$KNOWN_HOSTS" "${prefix}CONFIG=$SSH_CONFIG" "$@" \
            "$state_variable=$HPCB_STATE"
    } > "$ENV_SH.tmp"
    mv -f "$ENV_SH.tmp" "$ENV_SH"
    chmod 0644 "$ENV_SH"
}

# Check the config with sshd (run as BINARY, named NAME in the log), start it and wait for
# its pid file.  Sets pid.
start_sshd() {
    local binary=$1 name=$2 cfg_err
    if ! cfg_err=$("$binary" -t -f "$HPCB_CONFIG" 2>&1); then
        die "sshd rejected $HPCB_CONFIG: $cfg_err"
    fi
    rm -f "$HPCB_PIDFILE"
    printf '\n=== %s start.sh: starting %s on 127.0.0.1:%s ===\n' "$(date '+%F %T')" "$name" "$PORT" >> "$HPCB_LOG"
    log "starting $name on 127.0.0.1:$PORT (state $HPCB_STATE)"
    if ! "$binary" -f "$HPCB_CONFIG" -E "$HPCB_LOG"; then
        show_log_tail
        die "sshd failed to start (see $HPCB_LOG)"
    fi

    # sshd forks into the background; wait for its pid file.
    pid=
    for _ in $(seq 1 50); do
        if pid=$(running_pid); then break; fi
        pid=
        sleep 0.1
    done
    if [ -z "$pid" ]; then
        show_log_tail
        die "sshd did not write a valid pid file $HPCB_PIDFILE within 5 s"
    fi
}

# Once sshd runs, a failing check must not leave a half-working daemon behind: show its
# log, stop it, and die with MESSAGE.
abort() {
    show_log_tail
    HPCBRIDGE_SSHD_STATE=$HPCB_STATE bash "$HPCB_LIB/stop.sh" >/dev/null 2>&1 || true
    die "$*"
}
