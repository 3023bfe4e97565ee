#!/usr/bin/env bash
# Photographs for the categorize benchmark (bench only; never committed):
#   tools/media/fetch_photos.sh OUT_DIR
# Two Debian packages, downloaded with `apt-get download` and pinned by sha256:
# - gcompris-qt-data 3.1-2 (GPL-3+ and other free licences, its copyright file): photos of
#   animals, tools, tableware and landscapes in its activities' Qt resource files, unpacked
#   (tools/media/qt_rcc.py) into OUT_DIR/gcompris/;
# - tuxpaint-stamps-default 2022.06.04-1 (GPL-2): Tux Paint's stamps, many of them photographs
#   of one object cut out on a transparent ground, laid on white (tools/media/flatten_stamps.py)
#   into OUT_DIR/tuxpaint/ as PNG without alpha.
# tests/data/categorize_photos.csv labels them, with opencv-doc's and python3-skimage's photos
# (installed by scripts/install-deps.sh, read where Debian puts them). Idempotent.
set -euo pipefail
if [[ $# -ne 1 ]]; then
  echo "usage: $0 OUT_DIR" >&2
  exit 2
fi
mkdir -p "$1"
out="$(cd "$1" && pwd)"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

# fetch PACKAGE VERSION SHA256 DEST UNPACK: downloads the pinned .deb into OUT_DIR, checks it,
# and runs `UNPACK ROOT DEST` on its unpacked tree unless DEST already holds this pin.
fetch() {
  local package=$1 version=$2 sha=$3 dest=$4 unpack=$5
  local deb="${package}_${version}_all.deb"
  if [[ -f "$dest/.done" && "$(cat "$dest/.done")" == "$sha" ]]; then
    echo "fetch_photos: cached in $dest"
    return 0
  fi
  if [[ ! -f "$out/$deb" ]] || ! echo "$sha  $out/$deb" | sha256sum -c --status; then
    (cd "$out" && apt-get download "$package=$version" >/dev/null)
  fi
  echo "$sha  $out/$deb" | sha256sum -c --status || {
    echo "fetch_photos: $deb: sha256 differs from the pin" >&2
    exit 1
  }
  local tmp
  tmp="$(mktemp -d)"
  dpkg-deb -x "$out/$deb" "$tmp"
  rm -rf "$dest"
  mkdir -p "$dest"
  "$unpack" "$tmp" "$dest"
  rm -rf "$tmp"
  echo "$sha" >"$dest/.done"
}

unpack_gcompris() {
  local rcc="$1/usr/share/gcompris-qt/rcc"
  /usr/bin/python3 "$here/qt_rcc.py" "$2" "$rcc/erase.rcc" "$rcc/explore_farm_animals.rcc" \
    "$rcc/explore_world_animals.rcc" "$rcc/categorization.rcc" "$rcc/explore_monuments.rcc" >/dev/null
  echo "fetch_photos: $(find "$2" -name '*.webp' | wc -l) photos in $2"
}

unpack_tuxpaint() {
  /usr/bin/python3 "$here/flatten_stamps.py" "$1/usr/share/tuxpaint/stamps" "$2"
}

fetch gcompris-qt-data 3.1-2 e9cf06ab2105529068df73085784e835d2ff03f870d2a8091f09125d40abac9f \
  "$out/gcompris" unpack_gcompris
fetch tuxpaint-stamps-default 2022.06.04-1 6db6c1bfc870a47f1499d6203b083522eacb57c5f9c87d468f2e92eb6d9d5f34 \
  "$out/tuxpaint" unpack_tuxpaint
