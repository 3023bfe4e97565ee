#!/usr/bin/env bash
# Installs framemill's build and test dependencies from Debian 12 (run as root).
# Skips apt entirely when everything is already there, so reruns are quick.
set -euo pipefail
pkgs=(
  build-essential cmake ninja-build pkg-config ccache sqlite3
  libsqlite3-dev libopencv-dev libtbb-dev libyaml-cpp-dev libspdlog-dev libcli11-dev
  nlohmann-json3-dev libxxhash-dev googletest libgtest-dev libgmock-dev libbenchmark-dev
  opencv-doc opencv-data
)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
