#!/usr/bin/env bash
# Stop the test sshd with a second factor started by start.sh (same options as
# containers/sshd/stop.sh: --purge, --keep-sessions).  State: HPCBRIDGE_SSHD_TOTP_STATE
# (default /tmp/hpcbridge-sshd-totp).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
HPCBRIDGE_SSHD_STATE=${HPCBRIDGE_SSHD_TOTP_STATE:-/tmp/hpcbridge-sshd-totp} \
    exec bash "$HERE/../sshd/stop.sh" "$@"
