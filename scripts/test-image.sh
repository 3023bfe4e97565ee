#!/usr/bin/env bash
# The container image (scripts/build-image.sh) run as deploy/kubernetes/workers-job.yaml runs
# it, with podman, against a PostgreSQL server on this host (run as root, after
# scripts/test.sh has built build/framemill_test_pg and fetched the models into .cache/models):
#   1. enqueue 40 photos (generated from opencv-doc's samples) in a mounted volume, from the image;
#   2. start the workers' command (`run --metrics :9464`); SIGTERM the container once jobs are
#      done: every claimed job must be back in the queue when it exits, within
#      run.stop_grace_ms;
#   3. start it again until the run ends: every job done exactly once, and `status --json`
#      from the host's binary the same as from the image.
# The podman settings below are this machine's (../shared/notes/containers.md: runc, no
# ulimits, cgroupfs); a user's host needs none of them.
set -euo pipefail
cd "$(dirname "$0")/.."
version=$(sed -n 's/^project(framemill VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
image=localhost/framemill:$version
work=$(mktemp -d /tmp/framemill-image.XXXXXX)
chmod 755 "$work"  # the PostgreSQL server runs as postgres
conf=$work/containers.conf
printf '[containers]\ndefault_ulimits = []\npids_limit = 0\n[engine]\ncgroup_manager = "cgroupfs"\n' >"$conf"
export CONTAINERS_CONF=$conf
pg=$work/pg
cleanup() {
  podman --runtime runc rm -f framemill-test-workers >/dev/null 2>&1 || true
  build/framemill_test_pg stop "$pg" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
build/framemill_test_pg start "$pg"
db="postgresql://framemill@127.0.0.1:$(cat "$pg/port")/postgres"
mkdir -p "$work/data/photos" "$work/data/out"
/usr/bin/python3 ../shared/gpu-e2e/gen-photos.py /usr/share/doc/opencv-doc/examples "$work/data/photos" 40 >/dev/null 2>&1 ||
  cp /usr/share/doc/opencv-doc/examples/data/*.jpg "$work/data/photos/"
chmod -R a+rwX "$work/data"
items=$(ls "$work/data/photos" | wc -l)
in_image() {
  podman --runtime runc run --rm --network=host -e FRAMEMILL_DB="$db" -e FRAMEMILL_STAGES=lighting,categorize \
    -e FRAMEMILL_OUT=/data/out -v "$work/data:/data" -v "$PWD/.cache/models:/models:ro" "$@"
}
in_image "$image" enqueue /data/photos
# The image's binary is CPU-only: with ALL_GPU=false it says so per operation.
# Read whole before grep: `grep -q` stops at its match, and podman, writing the rest to a
# closed pipe, then fails the pipeline (pipefail) though the image said the right thing.
gpu_report=$(in_image -e ALL_GPU=false "$image" gpu)
grep -q "^CATEGORIZE  *cpu  *ALL_GPU=false" <<<"$gpu_report" ||
  { echo "test-image: framemill gpu did not report the CPU choice"; echo "$gpu_report"; exit 1; }
start_workers() {
  podman --runtime runc run -d --name framemill-test-workers --network=host -e FRAMEMILL_DB="$db" \
    -e FRAMEMILL_STAGES=lighting,categorize -e FRAMEMILL_OUT=/data/out -e FRAMEMILL_WORKERS=2 \
    -v "$work/data:/data" -v "$PWD/.cache/models:/models:ro" "$image" run --metrics :9464 >/dev/null
}
host() { FRAMEMILL_DB="$db" build/framemill "$@"; }
count() { host status --json | /usr/bin/python3 -c "import json,sys; s=json.load(sys.stdin)['stages']; print(sum(v['$1'] for v in s.values()))"; }
echo "== $items items; workers started, then SIGTERM once 5 jobs are done =="
start_workers
until [ "$(count done)" -ge 5 ]; do sleep 0.2; done
t0=$(date +%s%N)
podman --runtime runc kill --signal TERM framemill-test-workers >/dev/null
code=$(podman --runtime runc wait framemill-test-workers)
t1=$(date +%s%N)
running=$(count running)
echo "stopped in $(( (t1 - t0) / 1000000 )) ms, exit $code, $(count done) done, $running still claimed"
podman --runtime runc logs framemill-test-workers 2>&1 | tail -3
podman --runtime runc rm framemill-test-workers >/dev/null
[ "$running" -eq 0 ] || { echo "test-image: $running jobs still claimed after SIGTERM"; exit 1; }
[ "$code" -eq 130 ] || { echo "test-image: SIGTERM ended the run with $code, not 130"; exit 1; }
# run.stop_grace_ms (3000) and a moment: the container's own teardown included.
[ $(( (t1 - t0) / 1000000 )) -le 5000 ] || { echo "test-image: the stop took over 5 s"; exit 1; }
echo "== the workers again, to the end =="
start_workers
code=$(podman --runtime runc wait framemill-test-workers)
podman --runtime runc rm framemill-test-workers >/dev/null
inside=$(in_image "$image" status --json)
outside=$(host status --json)
/usr/bin/python3 - "$items" "$inside" "$outside" <<'PY'
import json, sys
items, inside, outside = int(sys.argv[1]), json.loads(sys.argv[2]), json.loads(sys.argv[3])
counts = lambda s: {stage: {k: n[k] for k in ("pending", "running", "done", "failed", "skipped")}
                    for stage, n in s["stages"].items()}
assert counts(inside) == counts(outside), (counts(inside), counts(outside))
for stage, n in outside["stages"].items():
    assert n["done"] == items and n["failed"] == 0 and n["running"] == 0, (stage, n)
print(f"test-image: {items} items, every job of {', '.join(outside['stages'])} done; status from the image and the host agree")
PY
echo "exit of the second run: $code"
podman image ls "$image"
