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
# shellcheck source-path=SCRIPTDIR source=../sshd/lib.sh
. "$HERE/../sshd/lib.sh"
HPCB_TAG=hpcbridge-sshd-totp

PAM_SERVICE=hpcbridge-sshd-totp
SECRETS=/etc/hpcbridge-sshd-totp
SSHD_NAMED=$HPCB_STATE/$PAM_SERVICE

[ "$(id -u)" -eq 0 ] || die "must run as root (it installs packages, writes a PAM service and runs sshd)"
check_names HPCBRIDGE_SSHD_TOTP_STATE
exit_if_running HPCBRIDGE_SSHD_TOTP_PORT "stop.sh, then start.sh,"

# ---------------------------------------------------------------- port
choose_port HPCBRIDGE_SSHD_TOTP_PORT 2322 2399

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
[ "${#need[@]}" -eq 0 ] || install_packages "${need[@]}"

# ---------------------------------------------------------------- the user (shared with containers/sshd), state, keys
prepare_user
prepare_state

# ---------------------------------------------------------------- the secret, the PAM service, config files
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
ln -sfn "$SSHD_BIN" "$SSHD_NAMED"
write_configs "$HERE/sshd_config.in" hpcb-totp \
    "# ssh client config for the hpcbridge test sshd with a second factor (state $HPCB_STATE)."
write_env HPCBRIDGE_TEST_TOTP_ HPCBRIDGE_SSHD_TOTP_STATE \
    "HPCBRIDGE_TEST_TOTP_SECRET=$SECRET_FILE" "HPCBRIDGE_TEST_TOTP_ASKPASS=$HERE/askpass.sh"

# ---------------------------------------------------------------- start
start_sshd "$SSHD_NAMED" "sshd (as $PAM_SERVICE)"

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
log "environment: . $ENV_SH"
