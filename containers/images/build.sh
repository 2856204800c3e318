#!/usr/bin/env bash
# Build, with no registry, the container images the tests run:
#
#   debian12   a Debian 12 root filesystem made by mmdebstrap from Debian's packages
#              (minbase), marked with /etc/hpcbridge-image so that a step can show it
#              ran inside; an image directory as Charliecloud's ch-run takes it
#   worker     containers/worker/Dockerfile built by ch-image over that root filesystem
#              (imported as debian:12), hpcbridge and paramiko from wheels made here
#   flux       containers/flux/Dockerfile the same way: hpcbridge beside flux-core 0.88's
#              Python bindings (the build script's /opt/flux-0.88, copied in)
#
#   bash containers/images/build.sh            (as root; about 3 min the first time)
#
# Installs what it needs from Debian (charliecloud, mmdebstrap) and writes the images under
# $HPCBRIDGE_TEST_IMAGES (default /var/tmp/hpcbridge-images), readable by every user (ch-run
# runs unprivileged).  An image is rebuilt only when what it copies changed (a stamp of its
# Dockerfile, hpcbridge's sources and, for flux, the flux-core build beside it); delete it
# to rebuild anyway.  A failure is written to $HPCBRIDGE_TEST_IMAGES/status (debian12,
# worker) or status-flux, which the tests that need the image quote when they skip.
# Exits 0 unless the command line is wrong: a missing image is the tests' business.
set -uo pipefail
IMAGES=${HPCBRIDGE_TEST_IMAGES:-/var/tmp/hpcbridge-images}
FLUX_PREFIX=${HPCBRIDGE_TEST_FLUX_IMAGE_PREFIX:-/opt/flux-0.88}
PACKAGES="charliecloud mmdebstrap python3-lark"
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
python=${PYTHON:-python3}
say() { echo "[build-images] $*"; }

[ $# -eq 0 ] || { echo "usage: bash containers/images/build.sh" >&2; exit 2; }
mkdir -p "$IMAGES"
rm -f "$IMAGES/status" "$IMAGES/status-flux"
fail() {
  say "$*"
  printf '%s\n' "$*" >"$IMAGES/status"
  exit 0
}

if [ "$(id -u)" != 0 ]; then
  fail "the test images are not built: building them needs root (mmdebstrap, apt-get); run bash containers/images/build.sh as root"
fi
missing=""
for package in $PACKAGES; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q ' installed$' || missing="$missing $package"
done
if [ -n "$missing" ]; then
  say "installing Debian packages:$missing"
  # shellcheck disable=SC2086  # one word per package
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
    -o DPkg::Lock::Timeout=300 $missing >"$IMAGES/apt.log" 2>&1 ||
    { DEBIAN_FRONTEND=noninteractive apt-get update -q >>"$IMAGES/apt.log" 2>&1 &&
      DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
        $missing >>"$IMAGES/apt.log" 2>&1; } ||
    fail "the test images are not built: apt-get could not install$missing (see $IMAGES/apt.log)"
fi

# A tar, not a folder, for ch-image: importing a folder copies /dev/zero and its like by
# reading them, which fills the disk.  The step image is the tar unpacked.
image=$IMAGES/debian12
if [ -s "$image/etc/hpcbridge-image" ] && [ -s "$IMAGES/debian12.tar" ]; then
  say "debian12: there, reused ($image)"
else
  started=$SECONDS
  rm -rf "$image" "$image.tmp" "$IMAGES/debian12.tar" "$IMAGES"/*.stamp
  if ! mmdebstrap --variant=minbase --mode=root --format=tar bookworm "$IMAGES/debian12.tar.tmp" \
    >"$IMAGES/mmdebstrap.log" 2>&1; then
    rm -f "$IMAGES/debian12.tar.tmp"
    fail "the test images are not built: mmdebstrap failed; $IMAGES/mmdebstrap.log ends: $(tail -n 3 "$IMAGES/mmdebstrap.log" | tr '\n' ' ')"
  fi
  mv "$IMAGES/debian12.tar.tmp" "$IMAGES/debian12.tar"
  mkdir -p "$image.tmp" && tar -xf "$IMAGES/debian12.tar" -C "$image.tmp" ||
    fail "the test images are not built: $IMAGES/debian12.tar does not unpack"
  echo "hpcbridge test image debian12 (mmdebstrap minbase bookworm)" >"$image.tmp/etc/hpcbridge-image"
  chmod 755 "$image.tmp"
  mv "$image.tmp" "$image"
  say "debian12: built in $((SECONDS - started)) s ($image)"
fi

# ch-image with Debian's own Python (it needs python3-lark), its storage beside the images.
ch_image() {
  env -u PYTHONPATH -u VIRTUAL_ENV PATH=/usr/sbin:/usr/bin:/sbin:/bin \
    CH_IMAGE_STORAGE="$IMAGES/ch-image" USER="${USER:-root}" ch-image "$@"
}
ch_image list 2>/dev/null | grep -qx 'debian:12' || ch_image import "$IMAGES/debian12.tar" debian:12 \
  >"$IMAGES/import.log" 2>&1 ||
  fail "the test images are not built: ch-image import of debian12.tar failed (see $IMAGES/import.log)"

# What an image copies, as one digest: hpcbridge's sources, the Dockerfile, and ARGS.
sources_digest() {
  {
    (cd "$repo" && find hpcbridge pyproject.toml README.md -type f ! -name '*.pyc' -print0 |
      sort -z | xargs -0 sha256sum)
    sha256sum "$1"
    shift
    printf '%s\n' "$@"
  } | sha256sum | cut -d' ' -f1
}

# build NAME DOCKERFILE CONTEXT STAMP [BUILD-OPTION...]: the Dockerfile built over CONTEXT
# into $IMAGES/NAME, an image directory.
build() {
  local name=$1 dockerfile=$2 context=$3 stamp=$4 target=$IMAGES/$1
  shift 4
  ch_image build --force "$@" -t "hpcbridge-$name" -f "$dockerfile" "$context" &&
    rm -rf "$target" &&
    env PATH=/usr/sbin:/usr/bin:/sbin:/bin CH_IMAGE_STORAGE="$IMAGES/ch-image" \
      USER="${USER:-root}" ch-convert -i ch-image -o dir "hpcbridge-$name" "$target" &&
    chmod 755 "$target" &&
    printf '%s\n' "$stamp" >"$IMAGES/$name.stamp"
}

wheels() { # wheels FOLDER EXTRA...: hpcbridge's wheel from the checkout, and EXTRA's
  local folder=$1
  shift
  mkdir -p "$folder"
  "$python" -m pip wheel --quiet --no-deps -w "$folder" "$repo" &&
    { [ $# -eq 0 ] || "$python" -m pip download --quiet --only-binary=:all: \
      --python-version 3.11 -d "$folder" "$@"; }
}

worker=$IMAGES/worker
stamp=$(sources_digest "$repo/containers/worker/Dockerfile")
if [ -x "$worker/usr/local/bin/hpcbridge" ] && [ "$(cat "$IMAGES/worker.stamp" 2>/dev/null)" = "$stamp" ]; then
  say "worker: nothing it copies changed, reused ($worker)"
else
  started=$SECONDS
  context=$IMAGES/worker-context
  rm -rf "$context"
  {
    wheels "$context/wheels" "paramiko>=3.0" "packaging>=20" &&
      build worker "$repo/containers/worker/Dockerfile" "$context" "$stamp"
  } >"$IMAGES/worker.log" 2>&1 ||
    { rm -rf "$worker"; fail "the worker image is not built: see $IMAGES/worker.log, which ends: $(tail -n 4 "$IMAGES/worker.log" | tr '\n' ' ')"; }
  say "worker: built in $((SECONDS - started)) s ($worker)"
fi

# The Flux image copies a flux-core build: Debian's packages of the libraries it links are
# found from that build (ldd, dpkg -S) and installed in the image.
flux_fail() {
  say "$*"
  printf '%s\n' "$*" >"$IMAGES/status-flux"
  exit 0
}
fluximage=$IMAGES/flux
[ -x "$FLUX_PREFIX/bin/flux" ] ||
  flux_fail "the Flux image is not built: no flux-core at $FLUX_PREFIX (scripts/build-schedulers.sh builds it)"
flux_build=$(cd "$FLUX_PREFIX" && find . -type f \( -name '*.so*' -o -path './bin/*' \) -printf '%p %s %T@\n' | sort | sha256sum)
stamp=$(sources_digest "$repo/containers/flux/Dockerfile" "$FLUX_PREFIX" "$flux_build")
if [ -x "$fluximage$FLUX_PREFIX/bin/flux" ] && [ "$(cat "$IMAGES/flux.stamp" 2>/dev/null)" = "$stamp" ]; then
  say "flux: nothing it copies changed, reused ($fluximage)"
  exit 0
fi
started=$SECONDS
context=$IMAGES/flux-context
rm -rf "$context"
mkdir -p "$context"
libraries=$(find "$FLUX_PREFIX" -type f \( -name '*.so*' -o -perm -u+x \) -print0 |
  xargs -0 ldd 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $3}' |
  grep -v "^$FLUX_PREFIX/" | sort -u)
runtime=$(for library in $libraries; do
  # usrmerge: a library found under /lib is Debian's under /usr/lib, or the reverse
  dpkg -S "$library" 2>/dev/null || dpkg -S "${library#/usr}" 2>/dev/null ||
    dpkg -S "$(readlink -f "$library")" 2>/dev/null
done | cut -d: -f1 | sort -u | tr '\n' ' ')
{
  echo "runtime packages: $runtime"
  wheels "$context/wheels" "packaging>=20" &&
    cp -a "$FLUX_PREFIX" "$context/flux" &&
    build flux "$repo/containers/flux/Dockerfile" "$context" "$stamp" \
      --build-arg "RUNTIME_PACKAGES=$runtime"
} >"$IMAGES/flux.log" 2>&1 ||
  { rm -rf "$fluximage"; flux_fail "the Flux image is not built: see $IMAGES/flux.log, which ends: $(tail -n 4 "$IMAGES/flux.log" | tr '\n' ' ')"; }
rm -rf "$context/flux"  # a copy of $FLUX_PREFIX: the image holds it
say "flux: built in $((SECONDS - started)) s ($fluximage)"
