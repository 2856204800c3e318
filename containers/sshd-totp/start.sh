#!/usr/bin/env bash
# Start a second loopback OpenSSH server that asks for the user's key THEN a one-time
# code (TOTP, through PAM's pam_google_authenticator), as sites with a second factor do.
# hpcbridge's OpenSSH backend is tested against it (hpcbridge login, then commands that
# ride the master connection).
#
#   bash containers/sshd-totp/start.sh
#   . /tmp/hpcbridge-sshd-totp/env.sh      # HPCBRIDGE_TEST_TOTP_* for the tests
#   bash containers/sshd-totp/stop.sh [--purge]
#
# Environment:
#   HPCBRIDGE_SSHD_TOTP_STATE  state folder (default /tmp/hpcbridge-sshd-totp)
#   HPCBRIDGE_SSHD_TOTP_PORT   port (default: the saved one, else the first free from 2322)
#   HPCBRIDGE_SSH_TEST_USER    the login user (default hpcbtest, shared with containers/sshd)
#
# sshd names its PAM service after the name it is started by: it runs as the symlink
# <state>/hpcbridge-sshd-totp, so /etc/pam.d/hpcbridge-sshd-totp is its own and the
# first instance (and any system sshd) keeps /etc/pam.d/sshd.  The secret of each user
# is /etc/hpcbridge-sshd-totp/USER (root's, 0600; its first line is the base32 secret:
# oathtool --totp -b SECRET gives the code of the moment).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
HPCBRIDGE_SSHD_STATE=${HPCBRIDGE_SSHD_TOTP_STATE:-/tmp/hpcbridge-sshd-totp}
# shellcheck source=../sshd/lib.sh
. "$HERE/../sshd/lib.sh"
log()  { printf '[hpcbridge-sshd-totp] %s\n' "$*"; }
die()  { printf '[hpcbridge-sshd-totp] ERROR: %s\n' "$*" >&2; exit 1; }

PAM_SERVICE=hpcbridge-sshd-totp
SECRETS=/etc/hpcbridge-sshd-totp
SSHD_NAMED=$HPCB_STATE/$PAM_SERVICE

[ "$(id -u)" -eq 0 ] || die "must run as root (it installs packages, writes a PAM service and runs sshd)"
case $HPCB_STATE in /*) ;; *) die "HPCBRIDGE_SSHD_TOTP_STATE must be an absolute path (got '$HPCB_STATE')" ;; esac
case $HPCB_USER in ''|*[!a-z0-9_-]*|[!a-z_]*|root) die "HPCBRIDGE_SSH_TEST_USER '$HPCB_USER' is not a simple unprivileged user name" ;; esac

if pid=$(running_pid); then
    log "already running (pid $pid, 127.0.0.1:$(cat "$HPCB_STATE/port" 2>/dev/null || echo '?'), state $HPCB_STATE)"
    log "environment: . $HPCB_STATE/env.sh"
    exit 0
fi

# ---------------------------------------------------------------- port
PORT=${HPCBRIDGE_SSHD_TOTP_PORT:-}
if [ -n "$PORT" ]; then
    case $PORT in *[!0-9]*) die "HPCBRIDGE_SSHD_TOTP_PORT='$PORT' is not a number" ;; esac
    ! port_in_use "$PORT" || die "port 127.0.0.1:$PORT is already in use; pick another one"
else
    saved=$(cat "$HPCB_STATE/port" 2>/dev/null || true)
    if [ -n "$saved" ] && ! port_in_use "$saved"; then
        PORT=$saved
    else
        for p in $(seq 2322 2399); do
            if ! port_in_use "$p"; then PORT=$p; break; fi
        done
        [ -n "$PORT" ] || die "no free port in 2322-2399; set HPCBRIDGE_SSHD_TOTP_PORT"
    fi
fi

# ---------------------------------------------------------------- packages
# The one-time codes: pam_google_authenticator checks them, oathtool (the tests) makes them.
need=()
[ -x "$SSHD_BIN" ] || need+=(openssh-server)
command -v ssh >/dev/null 2>&1 || need+=(openssh-client)
command -v oathtool >/dev/null 2>&1 || need+=(oathtool)
for dir in /lib/x86_64-linux-gnu/security /usr/lib/x86_64-linux-gnu/security /lib/security \
    /usr/lib/security /usr/lib/aarch64-linux-gnu/security; do
    [ -e "$dir/pam_google_authenticator.so" ] && found_pam=1
done
[ -n "${found_pam:-}" ] || need+=(libpam-google-authenticator)
if [ "${#need[@]}" -gt 0 ]; then
    log "installing ${need[*]}"
    export DEBIAN_FRONTEND=noninteractive
    made_policy=
    if [ ! -e /usr/sbin/policy-rc.d ]; then  # no system-wide sshd started by a postinst
        printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
        chmod 0755 /usr/sbin/policy-rc.d
        made_policy=1
    fi
    apt_opts=(-o DPkg::Lock::Timeout=600)
    if ! apt-get "${apt_opts[@]}" install -y --no-install-recommends "${need[@]}"; then
        apt-get "${apt_opts[@]}" update && apt-get "${apt_opts[@]}" install -y \
            --no-install-recommends "${need[@]}" || { [ -z "$made_policy" ] || rm -f /usr/sbin/policy-rc.d; die "could not install ${need[*]}"; }
    fi
    [ -z "$made_policy" ] || rm -f /usr/sbin/policy-rc.d
fi

# ---------------------------------------------------------------- the user (shared with containers/sshd)
if ! getent passwd "$HPCB_USER" >/dev/null; then
    log "creating user $HPCB_USER"
    useradd --create-home --shell /bin/bash --user-group "$HPCB_USER"
fi
case $(getent shadow "$HPCB_USER" | cut -d: -f2) in '!'*) usermod -p '*' "$HPCB_USER" ;; esac
USER_HOME=$(getent passwd "$HPCB_USER" | cut -d: -f6)
USER_GROUP=$(id -gn "$HPCB_USER")
mkdir -p "$USER_HOME" && chmod go-w "$USER_HOME"
mkdir -p /run/sshd && chmod 0755 /run/sshd

# ---------------------------------------------------------------- state, keys, secret
mkdir -p "$HPCB_STATE" && chmod 0755 "$HPCB_STATE"
HOST_KEY=$HPCB_STATE/ssh_host_ed25519_key
[ -s "$HOST_KEY" ] || ssh-keygen -q -t ed25519 -N '' -C "hpcbridge-test-host:$HPCB_STATE" -f "$HOST_KEY"
CLIENT_KEY=$HPCB_STATE/id_ed25519
[ -s "$CLIENT_KEY" ] || ssh-keygen -q -t ed25519 -N '' -C "hpcbridge-sshd:$HPCB_STATE" -f "$CLIENT_KEY"
chmod 0600 "$HOST_KEY" "$CLIENT_KEY"
# This instance's line in authorized_keys, tagged as containers/sshd tags its own (so that
# its stop.sh --purge removes it).
KEY_TAG="hpcbridge-sshd:$HPCB_STATE"
mkdir -p "$USER_HOME/.ssh"
touch "$USER_HOME/.ssh/authorized_keys"
tmp_keys=$(mktemp)
awk -v tag="$KEY_TAG" '$NF != tag' "$USER_HOME/.ssh/authorized_keys" > "$tmp_keys"
awk -v tag="$KEY_TAG" '{print $1, $2, tag}' "$CLIENT_KEY.pub" >> "$tmp_keys"
cat "$tmp_keys" > "$USER_HOME/.ssh/authorized_keys"
rm -f "$tmp_keys"
chown -R "$HPCB_USER:$USER_GROUP" "$USER_HOME/.ssh"
chmod 0700 "$USER_HOME/.ssh" && chmod 0600 "$USER_HOME/.ssh/authorized_keys"

mkdir -p "$SECRETS" && chmod 0700 "$SECRETS"
SECRET_FILE=$SECRETS/$HPCB_USER
if [ ! -s "$SECRET_FILE" ]; then
    log "making the TOTP secret $SECRET_FILE"
    secret=$(head -c 20 /dev/urandom | base32 | tr -d '=')
    # pam_google_authenticator's file: the secret, then its options (no DISALLOW_REUSE,
    # no RATE_LIMIT: tests log in again within one step).
    printf '%s\n" WINDOW_SIZE 3\n" TOTP_AUTH\n' "$secret" > "$SECRET_FILE"
fi
chmod 0600 "$SECRET_FILE"

sed -e "s|@SECRETS@|$SECRETS|g" "$HERE/pam.in" > "/etc/pam.d/$PAM_SERVICE"
echo "$PORT" > "$HPCB_STATE/port"
sed -e "s|@STATE@|$HPCB_STATE|g" -e "s|@PORT@|$PORT|g" -e "s|@USER@|$HPCB_USER|g" \
    "$HERE/sshd_config.in" > "$HPCB_CONFIG"
ln -sfn "$SSHD_BIN" "$SSHD_NAMED"

KNOWN_HOSTS=$HPCB_STATE/known_hosts
read -r hk_type hk_blob _ < "$HOST_KEY.pub"
printf '[127.0.0.1]:%s %s %s\n' "$PORT" "$hk_type" "$hk_blob" > "$KNOWN_HOSTS"
SSH_CONFIG=$HPCB_STATE/ssh_config
cat > "$SSH_CONFIG" <<CFG
# ssh client config for the hpcbridge test sshd with a second factor (state $HPCB_STATE).
Host hpcb-totp
    HostName 127.0.0.1
    Port $PORT
    User $HPCB_USER
    IdentityFile $CLIENT_KEY
    IdentitiesOnly yes
    UserKnownHostsFile $KNOWN_HOSTS
    GlobalKnownHostsFile /dev/null
    StrictHostKeyChecking yes
    PasswordAuthentication no
    ConnectTimeout 5
    LogLevel ERROR
CFG
chmod 0644 "$KNOWN_HOSTS" "$SSH_CONFIG" "$HPCB_CONFIG"
cat > "$HPCB_STATE/env.sh" <<ENV
# Source me: . $HPCB_STATE/env.sh
export HPCBRIDGE_TEST_TOTP_HOST=127.0.0.1
export HPCBRIDGE_TEST_TOTP_PORT=$PORT
export HPCBRIDGE_TEST_TOTP_USER=$HPCB_USER
export HPCBRIDGE_TEST_TOTP_KEY=$CLIENT_KEY
export HPCBRIDGE_TEST_TOTP_KNOWN_HOSTS=$KNOWN_HOSTS
export HPCBRIDGE_TEST_TOTP_CONFIG=$SSH_CONFIG
export HPCBRIDGE_TEST_TOTP_SECRET=$SECRET_FILE
export HPCBRIDGE_TEST_TOTP_ASKPASS=$HERE/askpass.sh
export HPCBRIDGE_SSHD_TOTP_STATE=$HPCB_STATE
ENV

# ---------------------------------------------------------------- start
cfg_err=$("$SSHD_NAMED" -t -f "$HPCB_CONFIG" 2>&1) || die "sshd rejected $HPCB_CONFIG: $cfg_err"
rm -f "$HPCB_PIDFILE"
log "starting sshd (as $PAM_SERVICE) on 127.0.0.1:$PORT (state $HPCB_STATE)"
"$SSHD_NAMED" -f "$HPCB_CONFIG" -E "$HPCB_LOG" || { show_log_tail; die "sshd failed to start"; }
pid=
for _ in $(seq 1 50); do
    if pid=$(running_pid); then break; fi
    pid=
    sleep 0.1
done
[ -n "$pid" ] || { show_log_tail; die "sshd did not write its pid file within 5 s"; }
abort() {
    show_log_tail
    HPCBRIDGE_SSHD_TOTP_STATE=$HPCB_STATE bash "$HERE/stop.sh" >/dev/null 2>&1 || true
    die "$*"
}

# ---------------------------------------------------------------- the second factor is real
# The key alone is refused (BatchMode: no code can be typed) ...
out=$(ssh -F "$SSH_CONFIG" -o BatchMode=yes hpcb-totp true 2>&1 </dev/null) \
    && abort "a login with the key alone was accepted: no second factor"
case $out in *keyboard-interactive*|*"Permission denied"*) ;; *) abort "unexpected refusal: $out" ;; esac
# ... the key and the code of the moment are accepted.
who=
for _ in $(seq 1 25); do
    if who=$(SSH_ASKPASS=$HERE/askpass.sh SSH_ASKPASS_REQUIRE=force HPCBRIDGE_TEST_TOTP_SECRET=$SECRET_FILE \
        ssh -F "$SSH_CONFIG" hpcb-totp 'id -un' 2>&1 </dev/null); then break; fi
    running_pid >/dev/null || abort "sshd (pid $pid) exited: $who"
    sleep 0.2
done
[ "$who" = "$HPCB_USER" ] || abort "the login with key and code failed: $who"
log "ready: pid $pid, 127.0.0.1:$PORT asks for the key, then a TOTP code (as $HPCB_USER)"
log "environment: . $HPCB_STATE/env.sh"
