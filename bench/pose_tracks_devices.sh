#!/usr/bin/env bash
# Pose tracks on every device (issue 40): the pose stage on opencv-doc's three sample videos
# on the CPU, then on the simulated device with GPU_PRECISION=fp16 (a CUDA device's default)
# and fp32, each compared with the CPU's
#   tracks: the pose stage's own tracks (what a user gets), each device sighting matched to
#           the CPU's in its frame by box, one to one: "identical", a track holding the same
#           people in the same frames; the CPU's links (two consecutive sightings of a track)
#           the device made too; and the tracks identical on the common input (without the
#           sightings in one run's input alone, below)
#   input:  the people the tracker takes (pose.track_keep_score and up; a run with
#           pose.min_person_score at the keep score and pose.track_min_sightings 1 exports
#           every one of them), matched one to one by box in each frame: those in one run's
#           input alone (absent from the other's, or scoring under 0.1 there), and those whose
#           score is on either side of min_person_score (0.15, where a track may start)
# A sighting in one run's input alone is in that run's tracks or none: no rule of the tracker
# can make those tracks equal; the input table bounds what any tracker could match.
#   bench/pose_tracks_devices.sh [BIN]    (BIN: build/framemill; about 15 minutes on 2 cores)
# WORK=DIR keeps the runs in DIR, and a run whose export is there already is not run again.
# FRAMEMILL_MODELS: the models (default .cache/models, where scripts/test.sh fetches them).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(realpath "${1:-build/framemill}")
models=${FRAMEMILL_MODELS:-$PWD/.cache/models}
if [ -n "${WORK:-}" ]; then
  work=$(realpath -m "$WORK")
else
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
fi
mkdir -p "$work/media"
for v in Megamind.avi Megamind_bugy.avi vtest.avi; do
  cp /usr/share/doc/opencv-doc/examples/data/$v "$work/media/"
done
# The simulated device runs the engine's kernels on one core in emulated half: a video's job
# takes minutes, past the default budgets.
export FRAMEMILL_MODELS=$models LOG_LEVEL=warn FRAMEMILL_STAGES=pose \
  FRAMEMILL_JOB_BUDGET_MS=1800000 FRAMEMILL_BATCH_BUDGET_MS=1800000
echo "workload: pose (movenet-multipose) on Megamind.avi, Megamind_bugy.avi, vtest.avi; 2 workers; $("$bin" --version)"
for view in tracks input; do
  for cfg in cpu:cpu:fp32 fp16:sim:fp16 fp32:sim:fp32; do
    IFS=: read -r name backend precision <<< "$cfg"
    run=$work/$view-$name
    [ -s "$run.jsonl" ] && continue
    env=(FRAMEMILL_DB=$run.db FRAMEMILL_OUT=$run GPU_BACKEND=$backend GPU_PRECISION=$precision)
    [ "$view" = input ] && env+=(FRAMEMILL_POSE_MIN_PERSON_SCORE=0.1 FRAMEMILL_POSE_TRACK_MIN_SIGHTINGS=1)
    env "${env[@]}" "$bin" enqueue "$work/media" > /dev/null
    start=$(date +%s)
    rc=0
    env "${env[@]}" "$bin" run --workers 2 > "$run.log" 2>&1 || rc=$?
    echo "  $view $name: $(( $(date +%s) - start )) s, exit $rc"
    [ "$rc" = 0 ] || { tail -5 "$run.log"; exit 1; }
    env "${env[@]}" "$bin" export --stage pose > "$run.jsonl"
  done
done
/usr/bin/python3 - "$work" <<'PY'
import collections, json, sys
work = sys.argv[1]

def load(path):
    """video -> [track: [sighting]]"""
    out = {}
    for line in open(path):
        row = json.loads(line)
        out[row["item"].split("/")[-1]] = [t["frames"] for t in row["result"].get("tracks", [])]
    return out

def pair(a, b):
    """Sightings of one frame matched one to one, nearest boxes first, within a fifth of the box."""
    d = sorted((sum(abs(p["box"][i] - q["box"][i]) for i in range(4)), i, j)
               for i, p in enumerate(a) for j, q in enumerate(b))
    ai, bj, pairs = set(), set(), []
    for dist, i, j in d:
        if i in ai or j in bj or dist > max(24, 0.2 * (a[i]["box"][2] + a[i]["box"][3])):
            continue
        ai.add(i); bj.add(j); pairs.append((a[i], b[j]))
    return pairs, [a[i] for i in range(len(a)) if i not in ai], [b[j] for j in range(len(b)) if j not in bj]

def by_frame(tracks):
    frames = {}
    for k, t in enumerate(tracks):
        for s in t:
            frames.setdefault(s["frame"], []).append((s, k))
    return frames

def links(tracks):
    return {(x["frame"], y["frame"], tuple(x["box"]), tuple(y["box"])) for t in tracks for x, y in zip(t, t[1:])}

def canon(tracks, match=None):
    """Tracks as a multiset of tuples of sightings (frame, box); `match` maps each sighting to
    the CPU's it matches (one matched to none stays its own)."""
    key = lambda s: (s["frame"], tuple(s["box"]))
    token = (lambda k: k) if match is None else (lambda k: match.get(k, k + ("own",)))
    return collections.Counter(tuple(token(key(s)) for s in t) for t in tracks)

def matches(a, b):
    """(frame, box) of b's sightings -> (frame, box) of a's, and b's and a's sightings alone."""
    fa, fb, match, alone = by_frame(a), by_frame(b), {}, set()
    for f in set(fa) | set(fb):
        pairs, only_a, only_b = pair([s for s, _ in fa.get(f, [])], [s for s, _ in fb.get(f, [])])
        for p, q in pairs:
            match[(f, tuple(q["box"]))] = (f, tuple(p["box"]))
        alone |= {(f, tuple(s["box"])) for s in only_a + only_b}
    return match, alone

print("\n| video | device | tracks (sightings) | identical to the CPU's | CPU links kept | identical on the common input |")
print("|---|---|---|---|---|---|")
cpu, cpu_in = load(f"{work}/tracks-cpu.jsonl"), load(f"{work}/input-cpu.jsonl")
for name in ("cpu", "fp16", "fp32"):
    other, other_in = load(f"{work}/tracks-{name}.jsonl"), load(f"{work}/input-{name}.jsonl")
    for video in sorted(cpu):
        a, b = cpu[video], other.get(video, [])
        match, _ = matches(a, b)
        same = sum((canon(a) & canon(b, match)).values())
        cpu_links = links(a)
        kept = sum(1 for t in b for x, y in zip(t, t[1:])
                   if (x["frame"], y["frame"], match.get((x["frame"], tuple(x["box"])), (0, ()))[1],
                       match.get((y["frame"], tuple(y["box"])), (0, ()))[1]) in cpu_links)
        # Without the sightings that one run's input holds alone (the tracker never saw them
        # in the other): what the tracker itself decided differently.
        in_match, alone = matches(cpu_in[video], other_in.get(video, []))
        drop = lambda tracks: [u for u in ([s for s in t if (s["frame"], tuple(s["box"])) not in alone]
                                           for t in tracks) if u]
        ca, cb = canon(drop(a)), canon(drop(b), in_match)
        common = f"{sum((ca & cb).values())} of {sum(ca.values())}"
        n = sum(len(t) for t in b)
        print(f"| {video} | {name} | {len(b)} ({n}) | {same} of {len(a)} | {kept} of {len(cpu_links)} | {common} |")

print("\n| video | device | people in the CPU's input | in one run's input alone | across 0.15 |")
print("|---|---|---|---|---|")
cpu = load(f"{work}/input-cpu.jsonl")
for name in ("fp16", "fp32"):
    other = load(f"{work}/input-{name}.jsonl")
    for video in sorted(cpu):
        fa, fb = by_frame(cpu[video]), by_frame(other.get(video, []))
        alone = across = people = 0
        for f in set(fa) | set(fb):
            a, b = [s for s, _ in fa.get(f, [])], [s for s, _ in fb.get(f, [])]
            pairs, only_a, only_b = pair(a, b)
            people += len(a)
            alone += len(only_a) + len(only_b)
            across += sum((p["score"] >= 0.15) != (q["score"] >= 0.15) for p, q in pairs)
        print(f"| {video} | {name} | {people} | {alone} | {across} |")
PY
