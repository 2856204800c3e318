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
check_names HPCBRIDGE_SSHD_STATE

T0=$(date +%s.%N)

# ---------------------------------------------------------------- running?
exit_if_running HPCBRIDGE_SSHD_PORT restart.sh

# ---------------------------------------------------------------- port (checked before any other change)
choose_port HPCBRIDGE_SSHD_PORT 2222 2299

# ---------------------------------------------------------------- packages
need_install=
[ -x "$SSHD_BIN" ] || need_install=1
# sshfs: the tests mount the test user's folders twice, as two login nodes sharing a home.
for tool in ssh sftp ssh-keygen ssh-keyscan sshfs; do
    command -v "$tool" >/dev/null 2>&1 || need_install=1
done
if [ -n "$need_install" ]; then
    install_packages openssh-server openssh-client sshfs
    [ -x "$SSHD_BIN" ] || die "$SSHD_BIN still missing after installation"
fi

# ---------------------------------------------------------------- test user, state, keys
prepare_user
prepare_state

# ---------------------------------------------------------------- config files
write_configs "$HERE/sshd_config.in" hpcb-test \
    "# ssh client config for the hpcbridge test sshd (state $HPCB_STATE)."$'\n'"#   ssh -F $HPCB_STATE/ssh_config hpcb-test 'id'" \
    "HostKeyAlgorithms ssh-ed25519" "BatchMode yes"
write_env HPCBRIDGE_TEST_SSH_ HPCBRIDGE_SSHD_STATE

# ---------------------------------------------------------------- start sshd
start_sshd "$SSHD_BIN" sshd

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
