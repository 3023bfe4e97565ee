#!/usr/bin/env bash
# Builds the CUDA device tests and the GPU benchmark and packs them, with the shared
# libraries they load and a file of real photos for the benchmark, into a folder that
# runs on a machine with only the NVIDIA driver (no CUDA toolkit, no OpenCV):
#
#   scripts/bundle-gpu.sh [BUNDLE_DIR]        # default .gpu-bundle (git-ignored)
#   BUNDLE_DIR/run.sh [gpu_bench flags...]    # on the GPU machine
#
# Contents: bin/framemill_gpu_tests, bin/gpu_bench (debug info stripped), lib/ (every
# library ldd shows except glibc's own and the driver's: libcuda comes with the
# driver; the CUDA runtime is linked in statically), photos.raw (bench/gpu_bench_data.cc:
# Debian's opencv-doc sample photos, decoded here, since the bench has no codecs), and
# run.sh, which runs the tests and then the bench; the ONNX graphs, sample videos and
# scripts of the CPU side (bench/device_cpu_side.py) and the memory hog
# (scripts/gpu-hog.py); all packed into BUNDLE_DIR.tar.xz, the one file that travels
# (scripts/gpu-device-run.sh unpacks and runs it there). Fails if that is 60 MB or more.
# libstdc++/libgcc_s go to lib/fallback/: run.sh uses them only when the target's own
# libstdc++ lacks the GLIBCXX version the binaries need, because this build machine's
# libstdc++ needs a newer glibc than the binaries do (printed at the end).
# Environment: BUILD_DIR (default build-gpu), PHOTO_MB (raw photo budget, default 20).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
nvcc_version() { /usr/local/cuda/bin/nvcc --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p'; }
bundle=${1:-.gpu-bundle}
build=${BUILD_DIR:-build-gpu}
photo_mb=${PHOTO_MB:-4}

# CMAKE_CUDA_STANDARD=17: CMake 3.25 knows no CUDA20 dialect for nvcc, and the .cu
# files need only C++17 (the .cc files are still built as C++20).
# The lent machines are H100/H200 (sm_90): one architecture keeps the engine's kernels
# small enough to travel (all four of the main build would double the bundle).
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFRAMEMILL_CUDA=ON \
  -DCMAKE_CUDA_STANDARD=17 -DCMAKE_CUDA_ARCHITECTURES="${BUNDLE_CUDA_ARCHS:-90}" >/dev/null
ninja -C "$build" framemill_gpu_tests gpu_bench

rm -rf "$bundle"
mkdir -p "$bundle/bin" "$bundle/lib/fallback"
for exe in framemill_gpu_tests gpu_bench; do
  cp "$build/$exe" "$bundle/bin/$exe"
  strip --strip-debug "$bundle/bin/$exe"
done

# Shared libraries: all that ldd resolves, but not glibc (the target has its own, and
# must: these binaries need GLIBC >= the version printed below) nor any driver library.
skip='^(linux-vdso|ld-linux|libc\.so|libm\.so|libpthread\.so|libdl\.so|librt\.so|libresolv\.so|libutil\.so|libcuda\.so|libnvidia)'
for exe in "$bundle"/bin/*; do
  ldd "$exe" | awk '/=> \// {print $1, $3}'
done | sort -u | while read -r soname path; do
  if [[ "$soname" =~ $skip ]]; then continue; fi
  if [[ "$soname" =~ ^(libstdc\+\+|libgcc_s)\.so ]]; then
    cp -L "$path" "$bundle/lib/fallback/$soname"
  else
    cp -L "$path" "$bundle/lib/$soname"
  fi
done
if ldd "$bundle"/bin/* | grep -q "not found"; then
  echo "bundle-gpu: unresolved libraries:" >&2
  ldd "$bundle"/bin/* | grep "not found" >&2
  exit 1
fi
newest() {  # newest symbol version with prefix $1 that the given files need
  local prefix=$1
  shift
  objdump -T "$@" 2>/dev/null | grep -o "${prefix}_[0-9][0-9.]*" | sort -uV | tail -1
}
glibc=$(newest GLIBC "$bundle"/bin/* "$bundle"/lib/*.so*)
glibc_fallback=$(newest GLIBC "$bundle"/lib/fallback/*)
glibcxx=$(newest GLIBCXX "$bundle"/bin/* "$bundle"/lib/*.so*)

# Real photos for the bench, decoded here (the bench itself links no image codecs).
if pkg-config --exists opencv4; then
  # shellcheck disable=SC2046
  g++ -std=c++20 -O2 -Wall -Wextra bench/gpu_bench_data.cc \
    $(pkg-config --cflags-only-I opencv4 | sed 's/-I/-isystem /g') \
    -lopencv_imgcodecs -lopencv_core -o "$build/gpu_bench_data"
  "$build/gpu_bench_data" --out="$bundle/photos.raw" --max_mb="$photo_mb"
  data_flag='--data="$here/photos.raw"'
else
  echo "bundle-gpu: no opencv4 pkg-config here: the bench will use synthetic images" >&2
  data_flag=''
fi

# Converted models for the engine's device tests and bench: the fmg graphs of the small
# models (ISNet's 176 MB would not travel). framemill_gpu_tests and gpu_bench read them
# from FRAMEMILL_MODELS, which run.sh points here.
models_src=${MODELS_DIR:-.cache/models}
for m in ${BUNDLE_MODELS:-blazeface selfie mobilefacenet movenet-lightning}; do
  if [ -f "$models_src/$m/model.fmg.json" ]; then
    mkdir -p "$bundle/models/$m"
    cp "$models_src/$m/manifest.json" "$models_src/$m/model.fmg.json" \
       "$models_src/$m/model.fmg.bin" "$bundle/models/$m/"
    # The ONNX graph too: the CPU side (bench/device_cpu_side.py) runs it through cv2.dnn.
    if [ -f "$models_src/$m/model.onnx" ]; then cp "$models_src/$m/model.onnx" "$bundle/models/$m/"; fi
  else
    echo "bundle-gpu: model $m not in $models_src (run framemill models fetch): not bundled" >&2
  fi
done

# Real videos for the CPU side's decode and DIS figures (Debian's opencv-doc and
# python3-imageio samples; they travel in the archive, never in git), and the scripts
# that run there: the CPU side, the memory hog, the whole device run.
mkdir -p "$bundle/videos"
for v in /usr/share/doc/opencv-doc/examples/data/vtest.avi /usr/share/doc/opencv-doc/examples/data/Megamind.avi \
         /usr/lib/python3/dist-packages/imageio/resources/images/cockatoo.mp4 \
         /usr/lib/python3/dist-packages/imageio/resources/images/realshort.mp4; do
  if [ -f "$v" ]; then cp "$v" "$bundle/videos/"; else echo "bundle-gpu: no $v: not bundled" >&2; fi
done
cp bench/device_cpu_side.py scripts/gpu-hog.py scripts/gpu-device-run.sh "$bundle/"

cat > "$bundle/run.sh" <<RUN
#!/usr/bin/env bash
# Runs the CUDA device tests, then the GPU benchmark, with the bundled libraries.
# Logs go to \${LOG_DIR:-<bundle>/logs}. Extra arguments go to gpu_bench. RUN_TESTS=0
# skips the tests, RUN_BENCH=0 the bench; BENCH_LOG names the bench's log (default gpu_bench.txt).
# Exit status: that of the tests (the bench runs either way).
set -uo pipefail
here="\$(cd "\$(dirname "\$0")" && pwd)"
lib="\$here/lib"
# The target's libstdc++ if it is new enough (it needs $glibcxx), else the bundled one.
sys_cxx=\$( (ldconfig -p 2>/dev/null || /sbin/ldconfig -p 2>/dev/null) | awk '/libstdc\+\+\.so\.6 .*x86-64/ {print \$NF; exit}')
if [ -z "\$sys_cxx" ] || ! grep -qa "$glibcxx" "\$sys_cxx"; then
  echo "run.sh: using the bundled libstdc++ (the system's lacks $glibcxx; the bundled one needs $glibc_fallback)"
  lib="\$lib:\$here/lib/fallback"
fi
export LD_LIBRARY_PATH="\$lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
[ -d "\$here/models" ] && export FRAMEMILL_MODELS="\$here/models"
logs="\${LOG_DIR:-\$here/logs}"
mkdir -p "\$logs"
if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv 2>&1 | tee "\$logs/nvidia-smi.txt"
else
  echo "run.sh: no nvidia-smi on this machine"
fi
tests=0
if [ "\${RUN_TESTS:-1}" = 1 ]; then
  echo "== framemill_gpu_tests"
  "\$here/bin/framemill_gpu_tests" --gtest_color=no 2>&1 | tee "\$logs/gpu_tests.txt"
  tests=\${PIPESTATUS[0]}
fi
if [ "\${RUN_BENCH:-1}" = 1 ]; then
  echo "== gpu_bench"
  "\$here/bin/gpu_bench" $data_flag \${FRAMEMILL_MODELS:+--models="\$FRAMEMILL_MODELS"} "\$@" 2>&1 | tee "\$logs/\${BENCH_LOG:-gpu_bench.txt}"
fi
echo "== framemill_gpu_tests exit status \$tests (logs in \$logs)"
exit "\$tests"
RUN
chmod +x "$bundle/run.sh"

# One xz archive travels (64 MiB is all a device call carries, this repository with it);
# the target unpacks it with Python's tarfile (scripts/gpu-device-run.sh).
tar -C "$bundle" -cf - . | xz -T0 -6 > "$bundle.tar.xz"
bytes=$(stat -c %s "$bundle.tar.xz")
echo "bundle-gpu: $root/$bundle and $root/$bundle.tar.xz"
du -sh "$bundle/bin" "$bundle/lib" "$bundle/models" "$bundle/videos" "$bundle"/photos.raw 2>/dev/null || true
echo "bundle-gpu: unpacked $(du -sh "$bundle" | cut -f1); archive $(awk -v b="$bytes" 'BEGIN {printf "%.1f MB", b / 1e6}') ($bytes bytes)"
echo "bundle-gpu: the target needs $glibc and the NVIDIA driver (CUDA $(nvcc_version) runtime inside);"
echo "            libstdc++ with $glibcxx, or $glibc_fallback for the bundled fallback"
if ((bytes >= 60000000)); then
  echo "bundle-gpu: the archive is over 60 MB" >&2
  exit 1
fi
