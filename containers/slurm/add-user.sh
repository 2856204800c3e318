#!/usr/bin/env bash
# Associate one or more existing unix users with the test account (hpcb), e.g.
#   bash containers/slurm/add-user.sh hpcbtest
# Needs the cluster running with accounting (HPCBRIDGE_SLURM_ACCOUNTING=1).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

[ $# -ge 1 ] || die "usage: $0 USER [USER...]"
acct_mode || die "accounting is not enabled in $SLURM_CONF; nothing to do"
is_running slurmdbd || die "slurmdbd is not running; run start.sh first"
for u in "$@"; do
    getent passwd "$u" >/dev/null || warn "warning: no unix user '$u' (adding to Slurm anyway)"
    ensure_user "$u"
done
say "users in account $ACCOUNT: $(sacctmgr -n -P show assoc where cluster="$CLUSTER" account="$ACCOUNT" format=user | grep . | sort -u | tr '\n' ' ')"
