#!/usr/bin/env bash
# Build, from release source archives, the schedulers the tests run against and the machine
# lacks, and install them where the tests look:
#
#   flux-0.88 flux-0.49 flux-0.26   flux-core under /opt/flux-<x.y>
#   accounting-0.88 accounting-0.49 flux-accounting 0.60.0 / 0.23.1 into /opt/flux-0.88 /
#                                   /opt/flux-0.49 (the releases beside them; 0.26 gets none)
#   slurm-25.11                     Slurm 25.11.7 under /opt/slurm-25.11 (a second test cluster,
#                                   of four nodes: built with --enable-multiple-slurmd; another
#                                   prefix with HPCBRIDGE_TEST_SLURM_PREFIX, as the tests read it)
#   pyslurm                         a pyslurm 25.11.2 wheel built against it, in /opt/wheels-pyslurm
#   spack                           Spack 1.1.0 under /opt/spack-1.1, with spack-packages
#                                   2025.11.0 as its builtin repository and clingo from PyPI
#
#   bash scripts/build-schedulers.sh [COMPONENT...]      (default: every one)
#
# The archives are read from HPCBRIDGE_TEST_SOURCES (default: ../shared/vendor beside the
# checkout, when it exists) and checked against the SHA256SUMS file there before anything is
# unpacked.  A component already installed is reused, never rebuilt (delete its prefix to
# rebuild), except Slurm when its configure line is not the one stamped in its prefix.  A component that cannot be built - no archive, a checksum that differs, a failed
# build - is reported with the end of its log and left out; the others are still built, and
# the tests of the one left out skip, quoting the reason this script wrote for it under
# $HPCBRIDGE_TEST_BUILD_DIR/status/ (default /var/tmp/hpcbridge-build).  Exits 0 unless asked
# for an unknown component: a missing scheduler is the tests' business, not a failed setup.
#
# Needs root (it installs Debian's build packages with apt-get).  Nothing here is committed:
# the archives, the unpacked sources and the builds stay outside the repository.
set -uo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

ALL_COMPONENTS="flux-0.88 accounting-0.88 flux-0.49 accounting-0.49 flux-0.26 slurm-25.11 pyslurm spack"
PYSLURM_VERSION=${HPCBRIDGE_TEST_PYSLURM_VERSION:-25.11.2}
BUILD_DIR=${HPCBRIDGE_TEST_BUILD_DIR:-/var/tmp/hpcbridge-build}
STATUS_DIR=$BUILD_DIR/status
LOG_DIR=$BUILD_DIR/logs
SRC_DIR=$BUILD_DIR/src
python=${PYTHON:-python3}
SLURM_PREFIX=${HPCBRIDGE_TEST_SLURM_PREFIX:-/opt/slurm-25.11}
# Several slurmd on one host (the four-node test cluster) need --enable-multiple-slurmd.
SLURM_CONFIGURE="--prefix=$SLURM_PREFIX --sysconfdir=$SLURM_PREFIX/etc --disable-debug --enable-multiple-slurmd"
SLURM_STAMP=$SLURM_PREFIX/.hpcbridge-configure

if [ -n "${HPCBRIDGE_TEST_SOURCES:-}" ]; then
  SOURCES=$HPCBRIDGE_TEST_SOURCES
elif [ -d "$repo/../shared/vendor" ]; then
  SOURCES=$(cd "$repo/../shared/vendor" && pwd)
else
  SOURCES=""
fi

say() { echo "[build-schedulers] $*"; }

# The archive, its install prefix and its Debian build packages, per component.
archive_of() {
  case $1 in
    flux-0.88) echo flux-core-0.88.0.tar.gz ;;
    flux-0.49) echo flux-core-0.49.0.tar.gz ;;
    flux-0.26) echo flux-core-0.26.0.tar.gz ;;
    accounting-0.88) echo flux-accounting-0.60.0.tar.gz ;;
    accounting-0.49) echo flux-accounting-0.23.1.tar.gz ;;
    slurm-25.11 | pyslurm) echo slurm-25.11.7.tar.gz ;;
    spack) echo spack-1.1.0.tar.gz ;;
  esac
}

FLUX_PACKAGES="autoconf automake libtool make pkg-config gcc g++ libzmq3-dev uuid-dev
  libjansson-dev liblz4-dev libarchive-dev libhwloc-dev libsqlite3-dev lua5.1 liblua5.1-0-dev
  lua-posix python3-dev python3-cffi python3-yaml python3-ply python3-setuptools libsodium-dev
  libmunge-dev libpam0g-dev libsystemd-dev jq aspell libczmq-dev libmpfr-dev libncurses-dev
  python3-jsonschema patch"
SLURM_PACKAGES="build-essential pkg-config libjson-c-dev libmariadb-dev libjwt-dev
  libhttp-parser-dev libdbus-1-dev libcurl4-openssl-dev libmunge-dev libyaml-dev libpam0g-dev
  liblz4-dev libhwloc-dev libreadline-dev munge mariadb-server-core mariadb-client-core"

# installed COMPONENT: whether a usable build is already where the tests look.
installed() {
  case $1 in
    flux-*) [ -x "/opt/$1/bin/flux" ] && "/opt/$1/bin/flux" version >/dev/null 2>&1 ;;
    accounting-*) [ -e "/opt/flux-${1#accounting-}/lib/flux/job-manager/plugins/mf_priority.so" ] &&
      "/opt/flux-${1#accounting-}/bin/flux" account --help >/dev/null 2>&1 ;;
    slurm-25.11) [ -x "$SLURM_PREFIX/sbin/slurmctld" ] && [ -e "$SLURM_PREFIX/lib/slurm/libslurmfull.so" ] &&
      [ "$(cat "$SLURM_STAMP" 2>/dev/null)" = "$SLURM_CONFIGURE" ] ;;
    pyslurm) ls /opt/wheels-pyslurm/pyslurm-"$PYSLURM_VERSION"-*.whl >/dev/null 2>&1 ;;
    spack) [ -x /opt/spack-1.1/bin/spack ] && [ -x /opt/spack-1.1/venv/bin/python ] &&
      [ -x /opt/spack-1.1/style-bin/flake8 ] ;;
  esac
}

# status COMPONENT TEXT: what the tests quote when they skip for want of this component.
status() {
  mkdir -p "$STATUS_DIR"
  printf '%s\n' "$2" >"$STATUS_DIR/$1"
}

# verified COMPONENT: the archive is there and its checksum is the one in SHA256SUMS.
verified() {
  local component=$1 archive expected actual
  archive=$(archive_of "$component")
  if [ -z "$SOURCES" ]; then
    status "$component" "$component is not built: no source archives (set HPCBRIDGE_TEST_SOURCES to a folder holding $archive and SHA256SUMS, then run bash scripts/build-schedulers.sh $component)"
    return 1
  fi
  if [ ! -r "$SOURCES/$archive" ]; then
    status "$component" "$component is not built: archive $archive is missing from $SOURCES (HPCBRIDGE_TEST_SOURCES); put it there and run bash scripts/build-schedulers.sh $component"
    return 1
  fi
  expected=$(awk -v f="$archive" '$2 == f {print $1}' "$SOURCES/SHA256SUMS" 2>/dev/null)
  actual=$(sha256sum "$SOURCES/$archive" | cut -d' ' -f1)
  if [ -z "$expected" ] || [ "$expected" != "$actual" ]; then
    status "$component" "$component is not built: $SOURCES/$archive has sha256 $actual, SHA256SUMS there says '${expected:-nothing}'; replace the archive"
    return 1
  fi
  if [ "$component" = flux-0.26 ]; then
    expected=$(awk '$2 == "flux-0.26.0-py311.patch" {print $1}' "$SOURCES/SHA256SUMS")
    actual=$(sha256sum "$SOURCES/flux-0.26.0-py311.patch" 2>/dev/null | cut -d' ' -f1)
    if [ -z "$expected" ] || [ "$expected" != "$actual" ]; then
      status "$component" "$component is not built: flux-0.26.0-py311.patch is missing from $SOURCES or its checksum differs from SHA256SUMS"
      return 1
    fi
  fi
  if [ "$component" = spack ]; then
    expected=$(awk '$2 == "spack-packages-2025.11.0.tar.gz" {print $1}' "$SOURCES/SHA256SUMS")
    actual=$(sha256sum "$SOURCES/spack-packages-2025.11.0.tar.gz" 2>/dev/null | cut -d' ' -f1)
    if [ -z "$expected" ] || [ "$expected" != "$actual" ]; then
      status "$component" "$component is not built: spack-packages-2025.11.0.tar.gz is missing from $SOURCES or its checksum differs from SHA256SUMS"
      return 1
    fi
  fi
}

# apt_install PACKAGE...: install those not installed yet (no daemon is started by it).
apt_install() {
  local missing="" p policy_created=0 rc=0
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q ' installed$' || missing="$missing $p"
  done
  [ -z "$missing" ] && return 0
  say "installing Debian packages:$missing"
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
    chmod 755 /usr/sbin/policy-rc.d
    policy_created=1
  fi
  local apt_opts="-y -q --no-install-recommends -o DPkg::Lock::Timeout=300"
  # shellcheck disable=SC2086
  DEBIAN_FRONTEND=noninteractive apt-get install $apt_opts $missing >>"$LOG_DIR/apt.log" 2>&1 ||
    { DEBIAN_FRONTEND=noninteractive apt-get update -q >>"$LOG_DIR/apt.log" 2>&1 &&
      DEBIAN_FRONTEND=noninteractive apt-get install $apt_opts $missing >>"$LOG_DIR/apt.log" 2>&1; } ||
    rc=1
  [ $policy_created = 1 ] && rm -f /usr/sbin/policy-rc.d
  [ $rc = 0 ] || { say "apt-get install failed; end of $LOG_DIR/apt.log:"; tail -n 20 "$LOG_DIR/apt.log"; }
  return $rc
}

# unpack ARCHIVE: a fresh copy of its source tree under $SRC_DIR; prints the tree's path.
unpack() {
  local archive=$1 top
  top=$(tar -tzf "$SOURCES/$archive" | head -n 1)
  top=${top%%/*}
  rm -rf "${SRC_DIR:?}/$top"
  mkdir -p "$SRC_DIR"
  tar -xzf "$SOURCES/$archive" -C "$SRC_DIR"
  echo "$SRC_DIR/$top"
}

# A plain build environment: the system Python, no virtual environment or pyenv first.
plain_env=(env -u PYTHONPATH -u LD_LIBRARY_PATH -u VIRTUAL_ENV -u PYENV_VERSION
  PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin)

build_flux() {
  local component=$1 short=${1#flux-} version tree prefix cflags extra=()
  version=$(archive_of "$component" | sed 's/^flux-core-//; s/\.tar\.gz$//')
  prefix=/opt/flux-$short
  tree=$(unpack "$(archive_of "$component")") || return 1
  cd "$tree" || return 1
  cflags="-O2 -g"
  case $short in
    0.49) cflags="$cflags -Wno-error=use-after-free" ;;
    0.26)
      patch -p1 <"$SOURCES/flux-0.26.0-py311.patch" || return 1
      cflags="$cflags -Wno-error=mismatched-dealloc -Wno-error=use-after-free"
      # 0.26's configure cannot read Python 3.11's version; tell it where the bindings go.
      extra=(am_cv_python_version=3.11
        "am_cv_python_pythondir=$prefix/lib/python3.11/site-packages"
        "am_cv_python_pyexecdir=$prefix/lib/python3.11/site-packages")
      ;;
  esac
  # A `git archive` export: AC_INIT takes the version from FLUX_VERSION, not `git describe`.
  "${plain_env[@]}" FLUX_VERSION="$version" ./autogen.sh &&
    "${plain_env[@]}" FLUX_VERSION="$version" ./configure --prefix="$prefix" --disable-docs \
      PYTHON=/usr/bin/python3 CFLAGS="$cflags" "${extra[@]}" &&
    "${plain_env[@]}" make -j"$(nproc)" &&
    "${plain_env[@]}" make install &&
    "$prefix/bin/flux" version
}

build_accounting() {
  local short=${1#accounting-} version tree prefix
  version=$(archive_of "$1" | sed 's/^flux-accounting-//; s/\.tar\.gz$//')
  prefix=/opt/flux-$short
  tree=$(unpack "$(archive_of "$1")") || return 1
  cd "$tree" || return 1
  # A `git archive` export: AC_INIT asks `git describe` for the version.
  sed -i "s/m4_esyscmd(\[git describe[^]]*\]))/[$version])/" configure.ac || return 1
  grep -q "\[$version\])" configure.ac || { echo "AC_INIT not rewritten"; return 1; }
  # The plugin's own *_CPPFLAGS drop FLUX_CORE_CFLAGS: flux/core.h through CPPFLAGS.
  "${plain_env[@]}" ./autogen.sh &&
    "${plain_env[@]}" PKG_CONFIG_PATH="$prefix/lib/pkgconfig" ./configure --prefix="$prefix" \
      PYTHON=/usr/bin/python3 CPPFLAGS="-I$prefix/include" LDFLAGS="-L$prefix/lib" &&
    "${plain_env[@]}" make -j"$(nproc)" &&
    "${plain_env[@]}" make install
}

build_slurm() {
  local tree
  tree=$(unpack "$(archive_of slurm-25.11)") || return 1
  cd "$tree" || return 1
  rm -f "$SLURM_STAMP"
  # shellcheck disable=SC2086  # one word per option (no option holds a space)
  "${plain_env[@]}" ./configure $SLURM_CONFIGURE &&
    "${plain_env[@]}" make -j"$(nproc)" &&
    "${plain_env[@]}" make install &&
    "$SLURM_PREFIX/sbin/slurmctld" -V &&
    printf '%s\n' "$SLURM_CONFIGURE" >"$SLURM_STAMP"
}

build_pyslurm() {
  local prefix=$SLURM_PREFIX wheels=/opt/wheels-pyslurm
  mkdir -p "$wheels"
  # pyslurm finds $prefix/lib/slurm/libslurmfull.so and bakes it into its RUNPATH.
  SLURM_INCLUDE_DIR=$prefix/include SLURM_LIB_DIR=$prefix/lib \
    "$python" -m pip wheel --no-deps --disable-pip-version-check -w "$wheels" \
    "pyslurm==$PYSLURM_VERSION"
}

build_spack() {
  local tree packages_tree prefix=/opt/spack-1.1 packages=/opt/spack-packages-2025.11 spack
  tree=$(unpack "$(archive_of spack)") || return 1
  packages_tree=$(unpack spack-packages-2025.11.0.tar.gz) || return 1
  rm -rf "$prefix" "$packages"
  mv "$tree" "$prefix" && mv "$packages_tree" "$packages" || return 1
  # Spack's concretizer: clingo from PyPI in a Python of Spack's own (no bootstrapping),
  # with the checkers `spack style` runs (the versions Spack 1.1 would bootstrap), found on
  # PATH through style-bin/ (the venv's own bin/ would put its python first).
  "$python" -m venv "$prefix/venv" &&
    "$prefix/venv/bin/python" -m pip install --quiet --disable-pip-version-check clingo \
      "isort>=5,<6" "black<=25.1.0" "flake8>=3.8.2" || return 1
  mkdir -p "$prefix/style-bin" &&
    ln -sf "$prefix/venv/bin/isort" "$prefix/venv/bin/black" "$prefix/venv/bin/flake8" \
      "$prefix/style-bin/" || return 1
  spack=(env SPACK_PYTHON="$prefix/venv/bin/python" "$prefix/bin/spack")
  # Offline: no bootstrapping, and the builtin repository from the archive instead of the
  # git clone Spack's default configuration asks for - both in the site scope of this
  # installation, so no user's ~/.spack is touched.
  "${spack[@]}" bootstrap disable --scope site &&
    printf 'repos:\n  builtin: %s\n' "$packages/repos/spack_repo/builtin" \
      >"$prefix/etc/spack/repos.yaml" &&
    "${spack[@]}" repo list &&
    "${spack[@]}" info zlib >/dev/null
}

# build COMPONENT: build it unless installed; record why not where it cannot be.
build() {
  local component=$1 log started rc prefix="" packages=""
  if installed "$component"; then
    say "$component: installed, reused"
    rm -f "$STATUS_DIR/$component"
    return 0
  fi
  verified "$component" || { say "$(cat "$STATUS_DIR/$component")"; return 0; }
  case $component in accounting-*)
    if ! installed "flux-${component#accounting-}"; then
      status "$component" "$component is not built: it needs flux-core under /opt/flux-${component#accounting-}, which is not built ($(cat "$STATUS_DIR/flux-${component#accounting-}" 2>/dev/null || echo 'see above'))"
      say "$(cat "$STATUS_DIR/$component")"
      return 0
    fi ;;
  esac
  if [ "$component" = pyslurm ] && ! installed slurm-25.11; then
    status pyslurm "pyslurm is not built: it needs Slurm 25.11 under $SLURM_PREFIX, which is not built ($(cat "$STATUS_DIR/slurm-25.11" 2>/dev/null || echo 'see above'))"
    say "$(cat "$STATUS_DIR/pyslurm")"
    return 0
  fi
  case $component in
    flux-*) packages=$FLUX_PACKAGES prefix=/opt/$component ;;
    accounting-*) packages=$FLUX_PACKAGES ;;
    slurm-25.11) packages=$SLURM_PACKAGES prefix=$SLURM_PREFIX ;;
  esac
  # shellcheck disable=SC2086  # one word per package
  if [ -n "$packages" ] && ! apt_install $packages; then
    status "$component" "$component is not built: its Debian build packages could not be installed (see $LOG_DIR/apt.log)"
    say "$(cat "$STATUS_DIR/$component")"
    return 0
  fi
  log=$LOG_DIR/$component.log
  say "$component: building from $SOURCES/$(archive_of "$component") (log: $log)"
  started=$SECONDS
  (
    set -o pipefail
    case $component in
      flux-*) build_flux "$component" ;;
      accounting-*) build_accounting "$component" ;;
      slurm-25.11) build_slurm ;;
      pyslurm) build_pyslurm ;;
      spack) build_spack ;;
    esac
  ) >"$log" 2>&1
  rc=$?
  if [ $rc = 0 ] && installed "$component"; then
    say "$component: built in $((SECONDS - started)) s"
    rm -f "$STATUS_DIR/$component"
    case $component in flux-* | accounting-* | slurm-25.11) rm -rf "${SRC_DIR:?}"/"$(archive_of "$component" | sed 's/\.tar\.gz$//')" ;; esac
    return 0
  fi
  # A half-installed prefix would pass for a build next time: remove it.
  [ -n "$prefix" ] && rm -rf "$prefix"
  [ "$component" = spack ] && rm -rf /opt/spack-1.1 /opt/spack-packages-2025.11
  status "$component" "$component is not built: its build failed after $((SECONDS - started)) s; the log is $log, which ends: $(tail -n 5 "$log" | tr '\n' ' ' | cut -c1-600)"
  say "$component: BUILD FAILED (exit $rc) after $((SECONDS - started)) s; last 30 lines of $log:"
  tail -n 30 "$log" | sed 's/^/    /'
  return 0
}

main() {
  local components=("$@") component
  [ ${#components[@]} -gt 0 ] || read -r -a components <<<"$ALL_COMPONENTS"
  for component in "${components[@]}"; do
    case " $ALL_COMPONENTS " in
      *" $component "*) ;;
      *) echo "build-schedulers.sh: unknown component '$component' (known: $ALL_COMPONENTS)" >&2; exit 2 ;;
    esac
  done
  if [ "$(id -u)" != 0 ]; then
    say "not root: nothing is built (the tests of what is absent skip, saying so)"
    exit 0
  fi
  mkdir -p "$STATUS_DIR" "$LOG_DIR" "$SRC_DIR"
  say "sources: ${SOURCES:-none (HPCBRIDGE_TEST_SOURCES unset and no ../shared/vendor)}"
  # Every Debian build package first, in one apt-get: two at once would wait on each
  # other's lock and share policy-rc.d.  (A component whose packages fail tries again
  # on its own, and is left out if they still cannot be had.)
  local packages="" flux_chain=() slurm_chain=() rest=() slurm_pid=""
  for component in "${components[@]}"; do
    installed "$component" && continue
    case $component in
      flux-* | accounting-*) packages="$packages $FLUX_PACKAGES" ;;
      slurm-25.11) packages="$packages $SLURM_PACKAGES" ;;
    esac
  done
  # shellcheck disable=SC2086  # one word per package
  [ -z "$packages" ] || apt_install $(printf '%s\n' $packages | sort -u) || true
  # Two chains side by side on a machine of two cores: flux-core's releases, and Slurm
  # 25.11 then pyslurm (whose Cython build keeps one core busy for minutes); Spack after.
  for component in "${components[@]}"; do
    case $component in
      flux-* | accounting-*) flux_chain+=("$component") ;;
      slurm-25.11 | pyslurm) slurm_chain+=("$component") ;;
      *) rest+=("$component") ;;
    esac
  done
  if [ ${#slurm_chain[@]} -gt 0 ]; then
    build_chain "${slurm_chain[@]}" &
    slurm_pid=$!
  fi
  build_chain "${flux_chain[@]}"
  [ -z "$slurm_pid" ] || wait "$slurm_pid"
  build_chain "${rest[@]}"
}

# build_chain COMPONENT...: each in turn (each reports for itself).
build_chain() {
  local component
  for component in "$@"; do
    (cd / && build "$component")
  done
}

main "$@"
