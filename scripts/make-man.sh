#!/usr/bin/env bash
# Writes framemill's man page from its own --help (help2man), with a section per command
# made from `framemill CMD --help`, so the page cannot drift from the CLI.
#   scripts/make-man.sh BIN OUT
set -euo pipefail
bin=$1 out=$2
inc=$(mktemp)
trap 'rm -f "$inc"' EXIT
{
  echo "[COMMANDS]"
  # The subcommands as CLI11 lists them under SUBCOMMANDS.
  "$bin" --help | awk '/^Subcommands:/ {on=1; next} on && /^  [a-z]/ {print $1}' |
    while read -r cmd; do
      echo ".SS $cmd"
      echo ".nf"
      "$bin" "$cmd" --help | sed -e 's/\\/\\\\/g' -e 's/^\./\\\&./'
      echo ".fi"
    done
  echo "[ENVIRONMENT]"
  echo "See the configuration file share/framemill/default.yaml for every setting, its"
  echo "environment variable and its default; \\fBframemill config\\fR prints the effective values."
  echo "[SEE ALSO]"
  echo "The reference: every command, flag, exit code, setting, environment variable and JSON"
  echo "key, in share/doc/framemill/REFERENCE.md (docs/REFERENCE.md in the source)."
} > "$inc"
help2man --no-info --no-discard-stderr --section=1 \
  --name="batch analysis of image and video datasets, resumable to the item" \
  --include="$inc" --output="$out" "$bin"
