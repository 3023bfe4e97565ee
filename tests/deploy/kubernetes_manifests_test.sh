#!/usr/bin/env bash
# deploy/kubernetes's manifests against the Kubernetes API's schema (npm kubernetes-models,
# installed into .cache/npm-k8s on first use), and a broken copy of the workers' Job
# rejected, so that the check is known to look.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
npm_dir=${FRAMEMILL_NPM_K8S:-$root/.cache/npm-k8s}
if [ ! -d "$npm_dir/node_modules/kubernetes-models" ]; then
  mkdir -p "$npm_dir"
  npm install --prefix "$npm_dir" --no-audit --no-fund --silent kubernetes-models@5.1.0 js-yaml@4.1.0
fi
check() { K8S_NODE_MODULES="$npm_dir/node_modules" node "$root/tests/deploy/check_manifests.mjs" "$@"; }
check "$root"/deploy/kubernetes/*.yaml
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
# completionMode must be NonIndexed or Indexed; parallelism an integer.
sed 's/completionMode: Indexed/completionMode: Sharded/' "$root/deploy/kubernetes/workers-job.yaml" >"$tmp/bad1.yaml"
sed 's/parallelism: 4/parallelism: four/' "$root/deploy/kubernetes/workers-job.yaml" >"$tmp/bad2.yaml"
for bad in "$tmp/bad1.yaml" "$tmp/bad2.yaml"; do
  if check "$bad" 2>"$tmp/err"; then echo "FAIL: $bad was accepted"; exit 1; fi
  echo "rejected as it should be: $(head -c 300 "$tmp/err")"
done
echo "PASS"
