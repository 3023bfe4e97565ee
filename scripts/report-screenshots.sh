#!/usr/bin/env bash
# Screenshots of the report, as README shows them: runs the report's browser test over
# the sample media (every stage, real models) and keeps its screenshots in docs/report/,
# scaled to 640 px wide. Only the overview and the failures page are committed: the item,
# grid and cluster pages show the third-party sample photos.
#   scripts/report-screenshots.sh   (after scripts/test.sh has built and fetched)
set -euo pipefail
cd "$(dirname "$0")/.."
export FRAMEMILL_MODELS="${FRAMEMILL_MODELS:-$PWD/.cache/models}"
mkdir -p docs/report
FRAMEMILL_SCREENSHOTS="$PWD/docs/report" FRAMEMILL_REQUIRE_BROWSER=1 \
  build/framemill_integration_tests --gtest_filter='ReportBinaryTest.TheReportOpensInChromium*'
for f in docs/report/*.png; do
  /usr/bin/python3 - "$f" <<'PY'
import sys, cv2
p = sys.argv[1]
m = cv2.imread(p)
h = int(m.shape[0] * 640 / m.shape[1])
cv2.imwrite(p, cv2.resize(m, (640, h), interpolation=cv2.INTER_AREA), [cv2.IMWRITE_PNG_COMPRESSION, 9])
PY
done
mv -f docs/report/index.png docs/report/overview.png
ls -la docs/report
