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
"$python" -m ruff check hpcbridge tests bench examples scripts
"$python" -m ruff format --check hpcbridge tests bench examples scripts
echo "== mypy"
"$python" -m mypy

# The integration tests start Prefect and MLflow locally: no telemetry leaves the machine.
export DO_NOT_TRACK=true PREFECT_SERVER_ANALYTICS_ENABLED=false MLFLOW_DISABLE_TELEMETRY=true

started=()
started_slurm_prefixes=()
lane_pids=()
lane_logs=()
cleanup() {
  local status=$?
  # A run stopped early stops the lanes beside it too (their pytest and what it started).
  for pid in "${lane_pids[@]}"; do
    if kill -0 "$pid" 2>/dev/null; then
      pkill -TERM -P "$pid" 2>/dev/null || true
      kill "$pid" 2>/dev/null || true
    fi
  done
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

# The schedulers no registry has (flux-core 0.88/0.49/0.26, Slurm 25.11 + pyslurm, Spack)
# are built from the source archives in HPCBRIDGE_TEST_SOURCES (default ../shared/vendor)
# where they are missing; a build already there is reused.  What cannot be built is said
# there and again by the skips of its tests.  HPCBRIDGE_TEST_NO_BUILD=1 builds nothing.
if [ "${HPCBRIDGE_TEST_NO_BUILD:-0}" != 1 ] && [ "$(id -u)" = 0 ]; then
  echo "== building the schedulers the machine lacks"
  build_started=$SECONDS
  PYTHON=$python bash scripts/build-schedulers.sh
  echo "== schedulers ready after $((SECONDS - build_started)) s"
  # The image job steps run in (Charliecloud's ch-run; mmdebstrap, no registry): ~20 s once.
  bash containers/images/build.sh
fi

if [ "${HPCBRIDGE_TEST_NO_SERVICES:-0}" != 1 ] && [ "$(id -u)" = 0 ]; then
  echo "== starting the Slurm test cluster"
  bash containers/slurm/start.sh && started+=(slurm)
  echo "== starting the sshd test server"
  bash containers/sshd/start.sh && started+=(sshd)
  echo "== starting the sshd test server with a second factor (key, then a TOTP code)"
  bash containers/sshd-totp/start.sh && started+=(sshd-totp)
  # The SSH tests submit to Slurm as the unprivileged test user.
  bash containers/slurm/add-user.sh "${HPCBRIDGE_SSH_TEST_USER:-hpcbtest}" || true
  # Slurm 25.11 runs as a second cluster (ports 7817-7819, state /tmp/hpcbridge-slurm-2511),
  # and the pyslurm wheel built against it goes into the test environment.
  slurm_prefix=${HPCBRIDGE_TEST_SLURM_PREFIX:-/opt/slurm-25.11}
  if [ -x "$slurm_prefix/sbin/slurmctld" ]; then
    echo "== starting the Slurm test cluster of $slurm_prefix"
    HPCBRIDGE_SLURM_PREFIX=$slurm_prefix bash containers/slurm/start.sh &&
      started_slurm_prefixes+=("$slurm_prefix")
    # The SSH test user submits to this cluster too (its commands first on the remote PATH).
    HPCBRIDGE_SLURM_PREFIX=$slurm_prefix bash containers/slurm/add-user.sh \
      "${HPCBRIDGE_SSH_TEST_USER:-hpcbtest}" || true
    pyslurm_version=${HPCBRIDGE_TEST_PYSLURM_VERSION:-25.11.2}
    if ls /opt/wheels-pyslurm/pyslurm-"$pyslurm_version"-*.whl >/dev/null 2>&1; then
      echo "== pyslurm $pyslurm_version (built against $slurm_prefix)"
      "$python" -m pip install --quiet --disable-pip-version-check --no-index \
        --find-links /opt/wheels-pyslurm "pyslurm==$pyslurm_version" 2>&1 |
        grep -v "Running pip as the 'root' user" || true
    fi
  fi
fi

# Spack, where it was set up: its own Python with clingo, offline configuration in its site scope.
spack_prefix=/opt/spack-1.1
if [ -z "${HPCBRIDGE_TEST_SPACK:-}" ] && [ -x "$spack_prefix/bin/spack" ] &&
  [ -x "$spack_prefix/venv/bin/python" ]; then
  export HPCBRIDGE_TEST_SPACK=$spack_prefix/bin/spack SPACK_PYTHON=$spack_prefix/venv/bin/python
fi

# Every supported flux-core release is tested.  One process can load only one release's
# Python bindings, so the newest one installed runs with the whole suite and each other
# release runs the core Flux cases in a pytest process of its own - a release that is not
# installed too, so that its cases skip saying why.
other_flux=()
if [ -z "${HPCBRIDGE_TEST_FLUX_PREFIXES:-}" ]; then
  main_flux=""
  for release in 0.88 0.49 0.26; do
    prefix=/opt/flux-$release
    if [ -z "$main_flux" ] && [ -x "$prefix/bin/flux" ]; then
      main_flux=$prefix
    else
      other_flux+=("$prefix")
    fi
  done
  export HPCBRIDGE_TEST_FLUX_PREFIXES=${main_flux:-${other_flux[0]}}
  [ -n "$main_flux" ] || other_flux=("${other_flux[@]:1}")
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
  # Two lanes run beside the main suite (the cases of the shared Slurm clusters and of
  # the shared sshd's faults), each its output in a log printed when all end; none of
  # their cases touches the shared Slurm clusters:
  # - Flux: the modules whose brokers are their own with the main release, then the
  #   other releases' core cases, four-node site (instances of their own) and the Flux
  #   cases of the four-node Slurm cluster (a cluster of their own), one after the other,
  #   then the
  #   Flux modules that need no shared service but the sshd, then the REST driver's
  #   modules (Slurm clusters of their own, for which the other lane has no room);
  # - the unit tests, then the modules with Slurm clusters of their own (test_polite_client
  #   counts its own controller's RPCs) and Spack (no service), the slowest of the suite,
  #   then the modules of the mock.
  own=(tests/integration/test_polite_client.py tests/integration/test_exactly_once.py
    tests/integration/test_slurm_no_accounting.py tests/integration/test_slurm_rest.py
    tests/integration/test_slurm_nodes.py tests/integration/test_spack.py
    tests/integration/test_futures_slurm.py)
  # the Slurm modules with clusters of their own that the own lane has no room for: the
  # REST driver's (its contract on three targets, a token through a 150 s wait, a lost
  # answer to a submission), after Flux's
  slurm_beside_flux=(tests/integration/test_slurm_rest_contract.py
    tests/integration/test_slurm_rest_jwt.py tests/integration/test_slurm_rest_once.py)
  flux_own=(tests/integration/test_flux_adapter.py tests/integration/test_flux_active_cap.py
    tests/integration/test_flux_fallback.py tests/integration/test_flux_journal_stream.py
    tests/integration/test_flux_many.py tests/integration/test_flux_queues.py
    tests/integration/test_flux_submission_path.py tests/integration/test_flux_sweeps.py
    tests/integration/test_flux_site_vocabulary.py tests/integration/test_flux_banks.py
    tests/integration/test_futures_flux.py tests/integration/test_flux_nodes.py)
  flux_beside=(tests/integration/test_flux_nested.py tests/integration/test_flux_ssh.py
    tests/integration/test_flux_dry_run_command.py
    tests/integration/test_flux_doctor_bare_python.py tests/integration/test_flux_image.py
    tests/integration/test_flux_no_instance.py tests/integration/test_flux_packing.py)
  mock=(tests/integration/test_cli_mock.py tests/integration/test_cli_truth.py
    tests/integration/test_mock_scheduler.py tests/integration/test_sweeps_mock.py
    tests/integration/test_examples_mock.py tests/integration/test_integrations_core.py
    tests/integration/test_integrations_pipeline.py tests/integration/test_futures_mock.py
    tests/integration/test_futures_guide.py)
  lane() { # lane NAME COMMAND...: run COMMAND in the background into a log of its own
    local log root
    log=$(mktemp "/tmp/hpcbridge-lane-$1.XXXXXX")
    # A temporary root of its own: pytest keeps only the newest roots under one base,
    # and a lane's numbered folder must not be removed by another process.
    root=/tmp/hpcb-$1
    mkdir -p "$root"
    shift
    (PYTEST_DEBUG_TEMPROOT=$root "$@") >"$log" 2>&1 &
    lane_pids+=($!)
    lane_logs+=("$log")
  }
  flux_lane() {
    local other_status=0 prefix
    echo "== pytest: the Flux modules with brokers of their own against $HPCBRIDGE_TEST_FLUX_PREFIXES"
    "$python" -m pytest "${pytest_args[@]}" --durations=10 "${flux_own[@]}" || other_status=1
    for prefix in "${other_flux[@]}"; do
      echo "== pytest: the core Flux cases against $prefix"
      HPCBRIDGE_TEST_FLUX_PREFIXES=$prefix HPCBRIDGE_TEST_FLUX_CORE_ONLY=1 "$python" -m pytest \
        "${pytest_args[@]}" tests/integration/test_flux_adapter.py \
        tests/integration/test_flux_queues.py tests/integration/test_flux_fallback.py \
        tests/integration/test_flux_sweeps.py tests/integration/test_flux_site_vocabulary.py \
        tests/integration/test_flux_banks.py tests/integration/test_flux_nodes.py || other_status=1
      echo "== pytest: the Flux cases of the four-node Slurm cluster against $prefix"
      HPCBRIDGE_TEST_FLUX_PREFIXES=$prefix HPCBRIDGE_TEST_FLUX_CORE_ONLY=1 "$python" -m pytest \
        "${pytest_args[@]}" -m flux tests/integration/test_slurm_nodes.py || other_status=1
    done
    echo "== pytest: the Flux modules beside the shared services: ${flux_beside[*]}"
    "$python" -m pytest "${pytest_args[@]}" --durations=5 "${flux_beside[@]}" || other_status=1
    echo "== pytest: Slurm modules with clusters of their own: ${slurm_beside_flux[*]}"
    "$python" -m pytest "${pytest_args[@]}" --durations=5 "${slurm_beside_flux[@]}" ||
      other_status=1
    return "$other_status"
  }
  own_lane() {
    local own_status=0
    echo "== pytest: unit tests in random order (--randomly-seed=$seed)"
    "$python" -m pytest "${pytest_args[@]}" -p randomly --randomly-seed="$seed" tests/unit ||
      own_status=1
    echo "== pytest: the modules with services of their own: ${own[*]}"
    "$python" -m pytest "${pytest_args[@]}" --durations=10 "${own[@]}" || own_status=1
    echo "== pytest: the modules of the mock: ${mock[*]}"
    "$python" -m pytest "${pytest_args[@]}" --durations=5 "${mock[@]}" || own_status=1
    return "$own_status"
  }
  lane flux flux_lane
  lane own own_lane
  echo "== pytest: beside the suite, in lanes of their own: ${flux_own[*]}; the core Flux" \
    "cases of ${other_flux[*]:-no other release}; ${flux_beside[*]}; ${slurm_beside_flux[*]};" \
    "the unit tests;" \
    "${own[*]}; ${mock[*]}"
  echo "== pytest: integration tests"
  # The slowest cases are listed, to keep the warm run within its budget.
  ignored=()
  for path in "${own[@]}" "${flux_own[@]}" "${flux_beside[@]}" "${slurm_beside_flux[@]}" \
    "${mock[@]}"; do
    ignored+=("--ignore=$path")
  done
  "$python" -m pytest "${pytest_args[@]}" --durations=25 "${ignored[@]}" tests/integration ||
    status=1
  for index in "${!lane_pids[@]}"; do
    wait "${lane_pids[$index]}" || status=1
    cat "${lane_logs[$index]}"
    rm -f "${lane_logs[$index]}"
  done
  echo "== done after $SECONDS s"
fi
set -e
exit "$status"
