#!/usr/bin/env bash
# Start a private OpenSSH server on 127.0.0.1 for hpcbridge's SSH transport tests.
#
#   bash containers/sshd/start.sh            # default instance
#   HPCBRIDGE_SSHD_STATE=/tmp/other HPCBRIDGE_SSHD_PORT=2223 bash containers/sshd/start.sh
#
# Environment:
#   HPCBRIDGE_SSHD_STATE     state folder (default /tmp/hpcbridge-sshd)
#   HPCBRIDGE_SSHD_PORT      port (default: port saved in the state folder,
#                            else the first free port from 2222 upward)
#   HPCBRIDGE_SSH_TEST_USER  unprivileged login user (default hpcbtest)
#
# Afterwards:  . "$HPCBRIDGE_SSHD_STATE/env.sh"   (see README.md)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$HERE/lib.sh"

[ "$(id -u)" -eq 0 ] || die "must run as root (it installs packages, creates a user and runs sshd)"
case $HPCB_STATE in /*) ;; *) die "HPCBRIDGE_SSHD_STATE must be an absolute path (got '$HPCB_STATE')" ;; esac
case $HPCB_USER in ''|*[!a-z0-9_-]*|[!a-z_]*) die "HPCBRIDGE_SSH_TEST_USER '$HPCB_USER' is not a simple user name" ;; esac
[ "$HPCB_USER" != root ] || die "HPCBRIDGE_SSH_TEST_USER must not be root"

T0=$(date +%s.%N)

# ---------------------------------------------------------------- running?
if pid=$(running_pid); then
    port=$(cat "$HPCB_STATE/port" 2>/dev/null || echo '?')
    log "already running (pid $pid, 127.0.0.1:$port, state $HPCB_STATE)"
    if [ -n "${HPCBRIDGE_SSHD_PORT:-}" ] && [ "$HPCBRIDGE_SSHD_PORT" != "$port" ]; then
        warn "HPCBRIDGE_SSHD_PORT=$HPCBRIDGE_SSHD_PORT differs from the running port $port; run restart.sh to change it"
    fi
    log "environment: . $HPCB_STATE/env.sh"
    exit 0
fi

# ---------------------------------------------------------------- port (checked before any other change)
saved_port=$(cat "$HPCB_STATE/port" 2>/dev/null || true)
if [ -n "${HPCBRIDGE_SSHD_PORT:-}" ]; then
    PORT=$HPCBRIDGE_SSHD_PORT
    case $PORT in ''|*[!0-9]*) die "HPCBRIDGE_SSHD_PORT='$PORT' is not a number" ;; esac
    if port_in_use "$PORT"; then
        die "port 127.0.0.1:$PORT (HPCBRIDGE_SSHD_PORT) is already in use; pick another one"
    fi
else
    PORT=
    if [ -n "$saved_port" ] && ! port_in_use "$saved_port"; then
        PORT=$saved_port
    else
        for p in $(seq 2222 2299); do
            if ! port_in_use "$p"; then PORT=$p; break; fi
        done
        [ -n "$PORT" ] || die "no free port in 2222-2299; set HPCBRIDGE_SSHD_PORT"
        if [ -n "$saved_port" ]; then
            warn "saved port $saved_port is busy; using $PORT instead"
        elif [ "$PORT" != 2222 ]; then
            warn "port 2222 is busy; using $PORT"
        fi
    fi
fi

# ---------------------------------------------------------------- packages
need_install=
[ -x "$SSHD_BIN" ] || need_install=1
# sshfs: the tests mount the test user's folders twice, as two login nodes sharing a home.
for tool in ssh sftp ssh-keygen ssh-keyscan sshfs; do
    command -v "$tool" >/dev/null 2>&1 || need_install=1
done
if [ -n "$need_install" ]; then
    log "installing openssh-server openssh-client sshfs"
    export DEBIAN_FRONTEND=noninteractive
    # Without systemd, the package's postinst would start a system-wide sshd
    # on 0.0.0.0:22 through invoke-rc.d.  Deny that with a temporary
    # policy-rc.d unless one already exists (Docker images ship one).
    made_policy=
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
        chmod 0755 /usr/sbin/policy-rc.d
        made_policy=1
        trap 'rm -f /usr/sbin/policy-rc.d' EXIT
    fi
    # Wait (up to 10 min) for the dpkg lock instead of failing at once when
    # another apt-get runs concurrently (e.g. a Slurm setup script).
    apt_opts=(-o DPkg::Lock::Timeout=600)
    apt_install() {
        apt-get "${apt_opts[@]}" install -y --no-install-recommends openssh-server openssh-client \
            sshfs
    }
    if ! apt_install; then
        log "apt-get install failed; running apt-get update and retrying"
        if ! { apt-get "${apt_opts[@]}" update && apt_install; }; then
            die "could not install openssh-server/openssh-client"
        fi
    fi
    [ -z "$made_policy" ] || { rm -f /usr/sbin/policy-rc.d; trap - EXIT; }
    [ -x "$SSHD_BIN" ] || die "$SSHD_BIN still missing after installation"
fi

# ---------------------------------------------------------------- test user
if ! getent passwd "$HPCB_USER" >/dev/null; then
    log "creating user $HPCB_USER"
    useradd --create-home --shell /bin/bash --user-group "$HPCB_USER"
fi
# useradd leaves the password field as '!' (locked); sshd without PAM then
# refuses even public-key logins ("User ... not allowed because account is
# locked").  '*' = no usable password, but not locked.
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

# ---------------------------------------------------------------- state
mkdir -p "$HPCB_STATE"
chmod 0755 "$HPCB_STATE"

HOST_KEY=$HPCB_STATE/ssh_host_ed25519_key
if [ ! -s "$HOST_KEY" ] || [ ! -s "$HOST_KEY.pub" ]; then
    log "generating host key $HOST_KEY"
    rm -f "$HOST_KEY" "$HOST_KEY.pub"
    ssh-keygen -q -t ed25519 -N '' -C "hpcbridge-test-host:$HPCB_STATE" -f "$HOST_KEY"
fi
chmod 0600 "$HOST_KEY"

CLIENT_KEY=$HPCB_STATE/id_ed25519
if [ ! -s "$CLIENT_KEY" ] || [ ! -s "$CLIENT_KEY.pub" ]; then
    log "generating client key $CLIENT_KEY"
    rm -f "$CLIENT_KEY" "$CLIENT_KEY.pub"
    ssh-keygen -q -t ed25519 -N '' -C "hpcbridge-sshd:$HPCB_STATE" -f "$CLIENT_KEY"
fi
chmod 0600 "$CLIENT_KEY"

# Install the client key.  Several instances (state folders) share the one
# test user, so replace only this instance's line, identified by its comment.
KEY_TAG="hpcbridge-sshd:$HPCB_STATE"
SSH_DIR=$USER_HOME/.ssh
AUTH_KEYS=$SSH_DIR/authorized_keys
mkdir -p "$SSH_DIR"
touch "$AUTH_KEYS"
tmp_keys=$(mktemp)
awk -v tag="$KEY_TAG" '$NF != tag' "$AUTH_KEYS" > "$tmp_keys"
# Re-tag the key line explicitly (keeps the comment exact even if the .pub
# file was edited).
awk -v tag="$KEY_TAG" '{print $1, $2, tag}' "$CLIENT_KEY.pub" >> "$tmp_keys"
cat "$tmp_keys" > "$AUTH_KEYS"
rm -f "$tmp_keys"
chown -R "$HPCB_USER:$USER_GROUP" "$SSH_DIR"
chmod 0700 "$SSH_DIR"
chmod 0600 "$AUTH_KEYS"

# ---------------------------------------------------------------- config files
echo "$PORT" > "$HPCB_STATE/port"

sed -e "s|@STATE@|$HPCB_STATE|g" -e "s|@PORT@|$PORT|g" -e "s|@USER@|$HPCB_USER|g" \
    "$HERE/sshd_config.in" > "$HPCB_CONFIG.tmp"
mv -f "$HPCB_CONFIG.tmp" "$HPCB_CONFIG"
chmod 0644 "$HPCB_CONFIG"

KNOWN_HOSTS=$HPCB_STATE/known_hosts
read -r hk_type hk_blob _ < "$HOST_KEY.pub"
printf '[127.0.0.1]:%s %s %s\n' "$PORT" "$hk_type" "$hk_blob" > "$KNOWN_HOSTS"
chmod 0644 "$KNOWN_HOSTS"

SSH_CONFIG=$HPCB_STATE/ssh_config
cat > "$SSH_CONFIG" <<CFG
# ssh client config for the hpcbridge test sshd (state $HPCB_STATE).
#   ssh -F $SSH_CONFIG hpcb-test 'id'
Host hpcb-test
    HostName 127.0.0.1
    Port $PORT
    User $HPCB_USER
    IdentityFile $CLIENT_KEY
    IdentitiesOnly yes
    UserKnownHostsFile $KNOWN_HOSTS
    GlobalKnownHostsFile /dev/null
    StrictHostKeyChecking yes
    HostKeyAlgorithms ssh-ed25519
    BatchMode yes
    PasswordAuthentication no
    ConnectTimeout 5
    LogLevel ERROR
CFG
chmod 0644 "$SSH_CONFIG"

ENV_SH=$HPCB_STATE/env.sh
cat > "$ENV_SH.tmp" <<ENV
# Source me: . $ENV_SH
export HPCBRIDGE_TEST_SSH_HOST=127.0.0.1
export HPCBRIDGE_TEST_SSH_PORT=$PORT
export HPCBRIDGE_TEST_SSH_USER=$HPCB_USER
export HPCBRIDGE_TEST_SSH_KEY=$CLIENT_KEY
export HPCBRIDGE_TEST_SSH_KNOWN_HOSTS=$KNOWN_HOSTS
export HPCBRIDGE_TEST_SSH_CONFIG=$SSH_CONFIG
export HPCBRIDGE_SSHD_STATE=$HPCB_STATE
ENV
mv -f "$ENV_SH.tmp" "$ENV_SH"
chmod 0644 "$ENV_SH"

# ---------------------------------------------------------------- start sshd
if ! cfg_err=$("$SSHD_BIN" -t -f "$HPCB_CONFIG" 2>&1); then
    die "sshd rejected $HPCB_CONFIG: $cfg_err"
fi
rm -f "$HPCB_PIDFILE"
printf '\n=== %s start.sh: starting sshd on 127.0.0.1:%s ===\n' "$(date '+%F %T')" "$PORT" >> "$HPCB_LOG"
log "starting sshd on 127.0.0.1:$PORT (state $HPCB_STATE)"
if ! "$SSHD_BIN" -f "$HPCB_CONFIG" -E "$HPCB_LOG"; then
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

# Anything below that fails must not leave a half-working daemon behind.
abort() {
    show_log_tail
    HPCBRIDGE_SSHD_STATE=$HPCB_STATE "$HERE/stop.sh" >/dev/null 2>&1 || true
    die "$*"
}

# ---------------------------------------------------------------- readiness
ssh_t() { ssh -F "$SSH_CONFIG" "$@"; }
ready=
last_err=
for _ in $(seq 1 50); do
    if last_err=$(ssh_t hpcb-test true 2>&1 </dev/null); then ready=1; break; fi
    running_pid >/dev/null || abort "sshd (pid $pid) exited while waiting for readiness"
    sleep 0.2
done
[ -n "$ready" ] || abort "sshd not accepting logins as $HPCB_USER after ~10 s; last ssh error: $last_err"

# The host key sshd actually presents must match known_hosts.
scanned=$(ssh-keyscan -T 5 -p "$PORT" -t ed25519 127.0.0.1 2>/dev/null | awk '!/^#/ {print $2, $3}')
[ "$scanned" = "$hk_type $hk_blob" ] \
    || abort "ssh-keyscan host key ('$scanned') differs from $HOST_KEY.pub"

# ---------------------------------------------------------------- verify exec
who=$(ssh_t hpcb-test 'id -un' 2>&1 </dev/null) \
    || abort "ssh command execution failed: $who"
[ "$who" = "$HPCB_USER" ] || abort "ssh 'id -un' returned '$who', expected '$HPCB_USER'"

# ---------------------------------------------------------------- verify sftp
tmpd=$(mktemp -d)
trap 'rm -rf "$tmpd"' EXIT
probe=.hpcbridge-sftp-probe.$$
head -c 4096 /dev/urandom > "$tmpd/up"
cat > "$tmpd/batch" <<BATCH
put $tmpd/up $probe
get $probe $tmpd/down
rm $probe
BATCH
if ! sftp_out=$(sftp -F "$SSH_CONFIG" -b "$tmpd/batch" hpcb-test 2>&1 </dev/null); then
    abort "sftp put/get failed: $sftp_out"
fi
cmp -s "$tmpd/up" "$tmpd/down" || abort "sftp round trip corrupted the file"

T1=$(date +%s.%N)
log "ready: pid $pid, ssh + sftp verified as $HPCB_USER on 127.0.0.1:$PORT ($(awk -v a="$T0" -v b="$T1" 'BEGIN{printf "%.1f", b-a}') s)"
log "environment: . $ENV_SH"
