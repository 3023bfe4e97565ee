#!/usr/bin/env bash
# Checks framemill's include rules (docs/ARCHITECTURE.md, "Folders"): every `#include
# "folder/..."` in the C++ sources must be one its folder may make; the device code is
# gpu/cuda/ and engine/cuda/: no folder outside gpu/ may include gpu/cuda/, none outside the
# device code may include engine/cuda/ but its CUDA-free factory (cuda_kernels_factory.h), and
# only gpu/ and engine/cuda/ may test for CUDA in the preprocessor (the build links its
# CPU-only variant from the same objects: only they may differ); and the folders' include
# graph has no cycle. Fails (exit 1)
# naming each breach as file:line; exit 0 prints a one-line summary.
#
#   scripts/check-deps.sh [ROOT]     # default: the repository
#   scripts/check-deps.sh --self-test  # proves each rule fails on a tree that breaks it
#
# scripts/test.sh runs both, so CI fails on a breach.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3

check() {
  "$PY" - "$1" <<'EOF'
import os, re, sys

root = sys.argv[1]
# Who may include whom. tests/ and bench/ may include anything (but gpu/cuda/).
ALLOWED = {
    "base": set(),
    "media": {"base"},
    "jobs": {"base", "media"},
    "storage": {"base", "media", "jobs"},
    "engine": {"base"},
    "gpu": {"base", "engine"},
    "models": {"base", "media", "engine", "gpu"},
    "fetch": {"base", "media"},
    "cluster": {"base", "media", "gpu"},
    "analysis": {"base", "media", "gpu"},
    "stages": {"base", "media", "jobs", "gpu", "models", "fetch", "cluster", "analysis"},
    "scheduler": {"base", "media", "jobs", "storage", "engine", "gpu", "models", "fetch", "cluster",
                  "analysis", "stages"},
    "outputs": {"base", "media", "jobs", "storage"},
    "configs": {"base"},
}
PROJECT = set(ALLOWED) | {"cli", "tests", "bench"}
ALLOWED["cli"] = PROJECT - {"tests", "bench", "cli"}
# The rules as the architecture states them, to say why an include is refused.
WHY = [
    (lambda a, b: a == "stages" and b == "storage",
     "stages/ never include storage/: stages return outcomes, the scheduler commits them"),
    (lambda a, b: a in {"storage", "jobs", "engine", "gpu", "media", "cluster", "analysis", "base"}
                  and b in {"scheduler", "cli", "stages"},
     "nothing below the stages includes scheduler/, cli/ or stages/"),
    (lambda a, b: a == "configs",
     "configs/ includes nothing of ours but base/: each module has its own options, filled by cli/"),
    (lambda a, b: a == "base", "base/ includes nothing of ours"),
    (lambda a, b: a == "engine" and b == "gpu",
     "engine/ includes no gpu/: the devices make the engine's kernels, not the other way round"),
]
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
CUDA_IF = re.compile(r'^\s*#\s*(if|ifdef|ifndef|elif)\b.*(CUDA|__NVCC__)')
EXTS = (".h", ".cc", ".cu", ".cuh")

breaches, edges, files = [], {}, 0
for top in sorted(PROJECT):
    for dirpath, _, names in os.walk(os.path.join(root, top)):
        for name in sorted(names):
            if not name.endswith(EXTS):
                continue
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)
            files += 1
            with open(path, encoding="utf-8", errors="replace") as f:
                for lineno, line in enumerate(f, 1):
                    device_code = rel.startswith("gpu/cuda/") or rel.startswith("engine/cuda/")
                    if CUDA_IF.match(line) and not (rel.startswith("gpu/") or device_code):
                        breaches.append(f"{rel}:{lineno}: only gpu/ and engine/cuda/ may depend on CUDA in the preprocessor")
                    m = INCLUDE.match(line)
                    if not m:
                        continue
                    inc = m.group(1)
                    target = inc.split("/")[0]
                    if target not in PROJECT:
                        continue  # a system or third-party header
                    where = f"{rel}:{lineno}: includes \"{inc}\""
                    if inc.startswith("gpu/cuda/") and not rel.startswith("gpu/"):
                        breaches.append(f"{where}: only gpu/ may include gpu/cuda/")
                        continue
                    if (inc.startswith("engine/cuda/") and inc != "engine/cuda/cuda_kernels_factory.h"
                            and not device_code):
                        breaches.append(f"{where}: only the device code (engine/cuda/, gpu/cuda/) may include "
                                        "engine/cuda/ but cuda_kernels_factory.h")
                        continue
                    if top in ("tests", "bench") or target == top:
                        continue
                    if target in ("tests", "bench") or target not in ALLOWED[top]:
                        why = next((w for test, w in WHY if test(top, target)),
                                   f"{top}/ may include only "
                                   + (", ".join(sorted(ALLOWED[top])) or "nothing of ours"))
                        breaches.append(f"{where}: {why}")
                    edges.setdefault(top, {}).setdefault(target, where)

# Cycles between folders, from the includes actually made (tests/ and bench/ are leaves).
def cycles():
    found, state, stack = [], {}, []
    def visit(n):
        state[n] = 1
        stack.append(n)
        for m in sorted(edges.get(n, {})):
            if state.get(m) == 1:
                loop = stack[stack.index(m):] + [m]
                found.append(" -> ".join(loop) + " (" + edges[n][m] + ")")
            elif m not in state:
                visit(m)
        stack.pop()
        state[n] = 2
    for n in sorted(edges):
        if n not in state:
            visit(n)
    return found

for c in cycles():
    breaches.append(f"cycle between folders: {c}")
if breaches:
    print("check-deps: %d breach(es) of the include rules (docs/ARCHITECTURE.md):" % len(breaches))
    for b in breaches:
        print("  " + b)
    sys.exit(1)
print(f"check-deps: {files} files, {sum(len(v) for v in edges.values())} folder edges, "
      "no breach, no cycle")
EOF
}

self_test() {
  local tmp status=0
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' RETURN
  # A clean tree passes...
  mkdir -p "$tmp/ok/base" "$tmp/ok/media" "$tmp/ok/gpu/cuda" "$tmp/ok/stages"
  echo '#include "base/status.h"' > "$tmp/ok/media/a.h"
  echo '#include "gpu/cuda/k.h"' > "$tmp/ok/gpu/b.cc"
  echo '#include "media/a.h"' > "$tmp/ok/stages/c.h"
  mkdir -p "$tmp/ok/engine/cuda" "$tmp/ok/cli"
  echo '#include "engine/cuda/cuda_status.h"' > "$tmp/ok/gpu/cuda/d.cu"
  echo '#include "engine/cuda/cuda_kernels_factory.h"' > "$tmp/ok/cli/e.cc"
  printf '#ifdef __NVCC__\n#endif\n' > "$tmp/ok/engine/cuda/f.cuh"
  if ! check "$tmp/ok" >/dev/null; then
    echo "self-test: a clean tree was refused"; status=1
  fi
  # ...and each rule catches its own breach.
  local cases=(
    "stages/x.cc|#include \"storage/job_store.h\"|stages/ never include storage/"
    "storage/x.cc|#include \"scheduler/worker.h\"|nothing below the stages"
    "gpu/x.h|#include \"stages/stage.h\"|nothing below the stages"
    "engine/x.h|#include \"gpu/ops.h\"|engine/ includes no gpu/"
    "media/x.h|#include \"cli/command.h\"|nothing below the stages"
    "analysis/x.cc|#include \"stages/stage.h\"|nothing below the stages"
    "analysis/x.h|#include \"jobs/job.h\"|analysis/ may include only base, gpu, media"
    "models/x.cc|#include \"gpu/cuda/kernels.h\"|only gpu/ may include gpu/cuda/"
    "tests/x_test.cc|#include \"gpu/cuda/kernels.h\"|only gpu/ may include gpu/cuda/"
    "configs/x.cc|#include \"gpu/policy.h\"|configs/ includes nothing of ours but base/"
    "base/x.h|#include \"media/kind.h\"|base/ includes nothing of ours"
    "gpu/x.h|#include \"configs/config.h\"|gpu/ may include only base"
    "stages/x.cc|#ifdef FRAMEMILL_WITH_CUDA|only gpu/ and engine/cuda/ may depend on CUDA"
    "engine/dnnl/x.cc|#ifdef __NVCC__|only gpu/ and engine/cuda/ may depend on CUDA"
    "models/x.cc|#include \"engine/cuda/common.cuh\"|only the device code (engine/cuda/, gpu/cuda/) may include"
    "gpu/x.cc|#include \"engine/cuda/cuda_status.h\"|only the device code (engine/cuda/, gpu/cuda/) may include"
  )
  local i=0
  for c in "${cases[@]}"; do
    IFS='|' read -r file line want <<<"$c"
    local t="$tmp/case$i"
    mkdir -p "$t/$(dirname "$file")"
    echo "$line" > "$t/$file"
    if out=$(check "$t"); then
      echo "self-test: $file with $line passed"; status=1
    elif ! grep -qF "$want" <<<"$out"; then
      echo "self-test: $file with $line: expected '$want' in: $out"; status=1
    fi
    i=$((i + 1))
  done
  # A cycle made only of allowed-looking edges: fetch -> models is refused, and the
  # cycle report names both directions.
  mkdir -p "$tmp/cyc/fetch" "$tmp/cyc/models"
  echo '#include "models/a.h"' > "$tmp/cyc/fetch/f.h"
  echo '#include "fetch/f.h"' > "$tmp/cyc/models/a.h"
  if out=$(check "$tmp/cyc"); then
    echo "self-test: a cycle passed"; status=1
  elif ! grep -qF "cycle between folders: fetch -> models -> fetch" <<<"$out"; then
    echo "self-test: no cycle reported in: $out"; status=1
  fi
  [ $status -eq 0 ] && echo "check-deps self-test: ${#cases[@]} breaches and 1 cycle caught, a clean tree passes"
  return $status
}

if [ "${1:-}" = "--self-test" ]; then
  self_test
else
  check "${1:-$PWD}"
fi
