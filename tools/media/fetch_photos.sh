#!/usr/bin/env bash
# Ordinary photographs for the categorize benchmark (bench only; never committed):
#   tools/media/fetch_photos.sh OUT_DIR
# Debian's gcompris-qt-data 3.1-2 (GPL-3+ and other free licences, its copyright file; photos of animals, tools, tableware and
# landscapes in its activities' Qt resource files): downloaded with `apt-get download`, pinned
# by sha256, and its photos unpacked from the .rcc files (tools/media/qt_rcc.py) into
# OUT_DIR/gcompris/. tests/data/categorize_photos.csv labels them. Idempotent.
set -euo pipefail
if [[ $# -ne 1 ]]; then
  echo "usage: $0 OUT_DIR" >&2
  exit 2
fi
mkdir -p "$1"
out="$(cd "$1" && pwd)"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
deb=gcompris-qt-data_3.1-2_all.deb
sha=e9cf06ab2105529068df73085784e835d2ff03f870d2a8091f09125d40abac9f
dest="$out/gcompris"
if [[ -f "$dest/.done" && "$(cat "$dest/.done")" == "$sha" ]]; then
  echo "fetch_photos: cached in $dest"
  exit 0
fi
if [[ ! -f "$out/$deb" ]] || ! echo "$sha  $out/$deb" | sha256sum -c --status; then
  (cd "$out" && apt-get download gcompris-qt-data=3.1-2 >/dev/null)
fi
echo "$sha  $out/$deb" | sha256sum -c --status || { echo "fetch_photos: $deb: sha256 differs from the pin" >&2; exit 1; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
dpkg-deb -x "$out/$deb" "$tmp"
rm -rf "$dest"
mkdir -p "$dest"
rcc="$tmp/usr/share/gcompris-qt/rcc"
/usr/bin/python3 "$here/qt_rcc.py" "$dest" "$rcc/erase.rcc" "$rcc/explore_farm_animals.rcc" \
  "$rcc/explore_world_animals.rcc" "$rcc/categorization.rcc" "$rcc/explore_monuments.rcc" >/dev/null
echo "$sha" >"$dest/.done"
echo "fetch_photos: $(find "$dest" -name '*.webp' | wc -l) photos in $dest"
