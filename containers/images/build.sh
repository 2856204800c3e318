#!/usr/bin/env bash
# Build, with no registry, the container images the tests run job steps in:
#
#   debian12   a Debian 12 root filesystem made by mmdebstrap from Debian's packages
#              (minbase), marked with /etc/hpcbridge-image so that a step can show it
#              ran inside; an image directory as Charliecloud's ch-run takes it
#
#   bash containers/images/build.sh            (as root; about 20 s the first time)
#
# Installs what it needs from Debian (charliecloud, mmdebstrap) and writes the images under
# $HPCBRIDGE_TEST_IMAGES (default /var/tmp/hpcbridge-images), readable by every user (ch-run
# runs unprivileged).  An image already there is reused; delete it to rebuild.  A failure is
# written to $HPCBRIDGE_TEST_IMAGES/status, which the tests that need the image quote when
# they skip.  Exits 0 unless the command line is wrong: a missing image is the tests' business.
set -uo pipefail
IMAGES=${HPCBRIDGE_TEST_IMAGES:-/var/tmp/hpcbridge-images}
PACKAGES="charliecloud mmdebstrap"
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

image=$IMAGES/debian12
if [ -s "$image/etc/hpcbridge-image" ]; then
  say "debian12: there, reused ($image)"
  exit 0
fi
started=$SECONDS
rm -rf "$image" "$image.tmp"
if ! mmdebstrap --variant=minbase --mode=root bookworm "$image.tmp" >"$IMAGES/mmdebstrap.log" 2>&1; then
  rm -rf "$image.tmp"
  fail "the test images are not built: mmdebstrap failed; $IMAGES/mmdebstrap.log ends: $(tail -n 3 "$IMAGES/mmdebstrap.log" | tr '\n' ' ')"
fi
echo "hpcbridge test image debian12 (mmdebstrap minbase bookworm)" >"$image.tmp/etc/hpcbridge-image"
chmod 755 "$image.tmp"
mv "$image.tmp" "$image"
say "debian12: built in $((SECONDS - started)) s ($image)"
