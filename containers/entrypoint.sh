#!/usr/bin/env bash
# Entry point of the hpcbridge test-cluster image (containers/Dockerfile).
#
# Starts the same single-node Slurm cluster and loopback sshd that the test suite uses,
# with the project's own scripts, then runs the container's command (default: bash) with
# their environment (SLURM_CONF, HPCBRIDGE_TEST_SSH_*, ...) exported:
#
#   docker run --rm -it hpcbridge-cluster                       # a shell on the cluster
#   docker run --rm hpcbridge-cluster python3 -m pytest -q -rs  # the whole suite
#
# HPCBRIDGE_CLUSTER_SERVICES=0 skips starting anything (a plain shell with hpcbridge).
# The scripts read their usual variables (HPCBRIDGE_SLURM_*, HPCBRIDGE_SSHD_*); see
# containers/slurm/README.md and containers/sshd/README.md.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

if [ "${HPCBRIDGE_CLUSTER_SERVICES:-1}" != 0 ]; then
    bash "$repo/containers/slurm/start.sh"
    bash "$repo/containers/sshd/start.sh"
    # The second sshd, which asks for a TOTP code after the key (the tests find it by its
    # state folder's env.sh).
    bash "$repo/containers/sshd-totp/start.sh" ||
        echo "entrypoint: containers/sshd-totp/start.sh failed; its tests skip" >&2
    # The SSH tests submit to Slurm as the unprivileged test user (as scripts/test.sh
    # does); this fails harmlessly when accounting is off.
    bash "$repo/containers/slurm/add-user.sh" "${HPCBRIDGE_SSH_TEST_USER:-hpcbtest}" ||
        echo "entrypoint: add-user.sh failed; SSH jobs may be refused by Slurm" >&2

    # Export what the scripts wrote for clients and tests.
    for env_file in "${HPCBRIDGE_SLURM_STATE:-/tmp/hpcbridge-slurm}/env.sh" \
        "${HPCBRIDGE_SSHD_STATE:-/tmp/hpcbridge-sshd}/env.sh"; do
        # shellcheck source=/dev/null
        . "$env_file"
    done
fi

[ $# -gt 0 ] || set -- bash
exec "$@"
