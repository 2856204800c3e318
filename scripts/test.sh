#!/usr/bin/env bash
# Set up everything the tests need, run lint, types and the whole suite, then stop
# what was started.  Works on a fresh Debian 12 machine as root (no systemd):
#   bash scripts/test.sh [pytest arguments...]
# Set HPCBRIDGE_TEST_NO_SERVICES=1 to skip starting Slurm and sshd (their tests then skip,
# saying why).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

python=${PYTHON:-python3}
echo "== installing hpcbridge and test tools"
"$python" -m pip install --quiet --disable-pip-version-check -e ".[test,dev,prefect,mlflow,bench]" 2>&1 \
  | grep -v "Running pip as the 'root' user" || true

echo "== ruff"
"$python" -m ruff check hpcbridge tests bench examples
"$python" -m ruff format --check hpcbridge tests bench examples
echo "== mypy"
"$python" -m mypy

# The integration tests start Prefect and MLflow locally: no telemetry leaves the machine.
export DO_NOT_TRACK=true PREFECT_SERVER_ANALYTICS_ENABLED=false MLFLOW_DISABLE_TELEMETRY=true

started=()
started_slurm_prefixes=()
cleanup() {
  local status=$?
  for service in "${started[@]}"; do
    echo "== stopping $service"
    bash "$repo/containers/$service/stop.sh" >/dev/null 2>&1 || true
  done
  for prefix in "${started_slurm_prefixes[@]}"; do
    echo "== stopping the Slurm test cluster of $prefix"
    HPCBRIDGE_SLURM_PREFIX=$prefix bash "$repo/containers/slurm/stop.sh" >/dev/null 2>&1 || true
  done
  exit "$status"
}
trap cleanup EXIT

if [ "${HPCBRIDGE_TEST_NO_SERVICES:-0}" != 1 ] && [ "$(id -u)" = 0 ]; then
  echo "== starting the Slurm test cluster"
  bash containers/slurm/start.sh && started+=(slurm)
  echo "== starting the sshd test server"
  bash containers/sshd/start.sh && started+=(sshd)
  # The SSH tests submit to Slurm as the unprivileged test user.
  bash containers/slurm/add-user.sh "${HPCBRIDGE_SSH_TEST_USER:-hpcbtest}" || true
  # A Slurm built from source under a prefix (outside this repository) runs as a second
  # cluster (ports 7817-7819, state /tmp/hpcbridge-slurm-2511), and pyslurm is built
  # against it into the test environment (pip reuses its cached wheel).  Where the prefix
  # does not exist its tests skip, saying so.
  slurm_prefix=${HPCBRIDGE_TEST_SLURM_PREFIX:-/opt/slurm-25.11}
  if [ -x "$slurm_prefix/sbin/slurmctld" ]; then
    echo "== starting the Slurm test cluster of $slurm_prefix"
    HPCBRIDGE_SLURM_PREFIX=$slurm_prefix bash containers/slurm/start.sh &&
      started_slurm_prefixes+=("$slurm_prefix")
    pyslurm_version=${HPCBRIDGE_TEST_PYSLURM_VERSION:-25.11.2}
    echo "== pyslurm $pyslurm_version built against $slurm_prefix"
    pyslurm_wheels=()  # a wheel already built against this prefix, where one was kept
    [ -d /opt/wheels-pyslurm ] && pyslurm_wheels=(--find-links /opt/wheels-pyslurm)
    SLURM_INCLUDE_DIR=$slurm_prefix/include SLURM_LIB_DIR=$slurm_prefix/lib \
      "$python" -m pip install --quiet --disable-pip-version-check "${pyslurm_wheels[@]}" \
      "pyslurm==$pyslurm_version" 2>&1 |
      grep -v "Running pip as the 'root' user" || true
  fi
fi

# Every flux-core under /opt/flux-* is tested (built from source outside this repository).
# One process can load only one release's Python bindings, so the newest runs with the whole
# suite and each older release runs the core Flux cases in a pytest process of its own.
older_flux=()
if [ -z "${HPCBRIDGE_TEST_FLUX_PREFIXES:-}" ]; then
  mapfile -t flux_prefixes < <(ls -d /opt/flux-*/ 2>/dev/null | sed 's:/$::' | sort -V -r)
  for prefix in "${flux_prefixes[@]}"; do
    [ -x "$prefix/bin/flux" ] || continue
    if [ -z "${HPCBRIDGE_TEST_FLUX_PREFIXES:-}" ]; then
      export HPCBRIDGE_TEST_FLUX_PREFIXES=$prefix
    else
      older_flux+=("$prefix")
    fi
  done
fi

# Unit tests run in random order (pytest-randomly), the seed printed so that a failure can
# be replayed: HPCBRIDGE_TEST_SEED=N bash scripts/test.sh.  Integration tests run in file order.
seed=${HPCBRIDGE_TEST_SEED:-$(( (RANDOM << 15) | RANDOM ))}
pytest_args=(-q -rs -p no:cacheprovider)
set +e
status=0
if [ "$#" -gt 0 ]; then
  echo "== pytest $*"
  "$python" -m pytest "${pytest_args[@]}" "$@" || status=1
else
  echo "== pytest: unit tests in random order (--randomly-seed=$seed)"
  "$python" -m pytest "${pytest_args[@]}" -p randomly --randomly-seed="$seed" tests/unit || status=1
  echo "== pytest: integration tests"
  "$python" -m pytest "${pytest_args[@]}" tests/integration || status=1
  for prefix in "${older_flux[@]}"; do
    echo "== pytest: the core Flux cases against $prefix"
    HPCBRIDGE_TEST_FLUX_PREFIXES=$prefix "$python" -m pytest "${pytest_args[@]}" \
      tests/integration/test_flux_adapter.py tests/integration/test_flux_queues.py \
      tests/integration/test_flux_fallback.py || status=1
  done
fi
set -e
exit "$status"
