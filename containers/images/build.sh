#!/usr/bin/env bash
# Build, with no registry, the container images the tests run job steps in:
#
#   debian12   a Debian 12 root filesystem made by mmdebstrap from Debian's packages
#              (minbase), marked with /etc/hpcbridge-image so that a step can show it
#              ran inside; an image directory as Charliecloud's ch-run takes it
#   worker     containers/worker/Dockerfile built by ch-image over that root filesystem
#              (imported as debian:12), hpcbridge and paramiko from wheels made here;
#              an image directory too
#
#   bash containers/images/build.sh            (as root; about 2 min the first time)
#
# Installs what it needs from Debian (charliecloud, mmdebstrap) and writes the images under
# $HPCBRIDGE_TEST_IMAGES (default /var/tmp/hpcbridge-images), readable by every user (ch-run
# runs unprivileged).  An image already there is reused; delete it to rebuild.  A failure is
# written to $HPCBRIDGE_TEST_IMAGES/status, which the tests that need the image quote when
# they skip.  Exits 0 unless the command line is wrong: a missing image is the tests' business.
set -uo pipefail
IMAGES=${HPCBRIDGE_TEST_IMAGES:-/var/tmp/hpcbridge-images}
PACKAGES="charliecloud mmdebstrap python3-lark"
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
python=${PYTHON:-python3}
say() { echo "[build-images] $*"; }

[ $# -eq 0 ] || { echo "usage: bash containers/images/build.sh" >&2; exit 2; }
mkdir -p "$IMAGES"
rm -f "$IMAGES/status"
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
  rm -rf "$image" "$image.tmp" "$IMAGES/debian12.tar"
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
worker=$IMAGES/worker
if [ -x "$worker/usr/local/bin/hpcbridge" ]; then
  say "worker: there, reused ($worker)"
  exit 0
fi
started=$SECONDS
context=$IMAGES/worker-context
rm -rf "$context" "$worker"
mkdir -p "$context/wheels"
{
  ch_image import "$IMAGES/debian12.tar" debian:12 &&
    "$python" -m pip wheel --quiet --no-deps -w "$context/wheels" "$repo" &&
    "$python" -m pip download --quiet --only-binary=:all: --python-version 3.11 \
      -d "$context/wheels" "paramiko>=3.0" "packaging>=20" &&
    ch_image build --force -t hpcbridge-worker -f "$repo/containers/worker/Dockerfile" "$context" &&
    env PATH=/usr/sbin:/usr/bin:/sbin:/bin CH_IMAGE_STORAGE="$IMAGES/ch-image" USER="${USER:-root}" \
      ch-convert -i ch-image -o dir hpcbridge-worker "$worker"
} >"$IMAGES/worker.log" 2>&1 ||
  { rm -rf "$worker"; fail "the worker image is not built: see $IMAGES/worker.log, which ends: $(tail -n 4 "$IMAGES/worker.log" | tr '\n' ' ')"; }
chmod 755 "$worker"
say "worker: built in $((SECONDS - started)) s ($worker)"
