#!/usr/bin/python3
"""Chooses the motion decision's thresholds on the labelled set's training videos alone, by a
coordinate search (issue 74), and prints how each was chosen.

    bench/shot_search.py --set DIR [--replay build/shot_replay] [--sweeps 1] [--out FILE]
    bench/shot_search.py --set DIR --try '{"transitions.span_margin": 0.392}' ...

The set is bench/shot_set.py's; only the videos whose truth says "split": "train" are read.
The held-out videos are never opened here.

The search: every named threshold (DecisionParameters in analysis/motion_analysis.h, 27) in
turn, starting from START (round 2: round 1's choice), is tried at its value times 0.7 and 1.4
(an integer at its value -1 and +1; a value of 0 at 0.1 and 0.2), the others held; where the
lowest cost is at the grid's edge, it goes on that way (x0.7 or x1.4 again, or one more) while
the cost falls, at most 3 steps. A setting's cost is the training videos' errors: hard cuts
missed (no boundary within +-1 frame), transitions missed (no boundary inside [first, last +
1]), false boundaries, transitions reported where none is (each loses its frames from the
clips), all as bench/shot_boundaries.py counts them, and (round 2) the clips that would hold a
true transition's frame or two shots (clips_of: the shots less the reported transitions, runs
of clips.min_s or more). The value kept is the current one when it ties for the lowest cost
(round 3: the training videos give no reason to move it), else the middle one of those tied (in
the order tried, smallest to largest): the widest margin the grid shows on either side. Each
trial replays the decision
through bench/shot_replay.cc, which decodes each video and computes each flow once.
"""
import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import shot_boundaries  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
# Where round 1's search started (issue 74, part 2): the values written by hand before it,
# which analysis/motion_analysis.h and gradual_transitions.h held at da38892.
ROUND1_START = {
    "cut_histogram": 0.15, "cut_residual": 0.45, "isolated_cut": 3.0, "isolated_histogram": 1.5,
    "isolated_residual": 0.1, "flat_std": 10.0, "flat_luma": 60.0, "transitions.lag_s": 0.5,
    "transitions.max_s": 3.0, "transitions.change": 0.15, "transitions.mixed_lo": 0.15,
    "transitions.min_mixed": 2, "transitions.max_fit_ratio": 0.75, "transitions.max_step": 0.3,
    "transitions.residual_rise": 2.5, "transitions.min_residual": 0.06, "transitions.edge": 0.04,
    "transitions.max_camera": 0.015, "transitions.bump_min_mixed": 5,
}
# Where round 2's search starts (issue 74, part 3: round 1's videos all training, the cost
# counting impure clips too): round 1's choice (fab99cb), the two whip-pan thresholds written
# by hand, and the span margin at 0.
START = dict(ROUND1_START, **{
    "cut_histogram": 0.21, "isolated_histogram": 1.05, "isolated_residual": 0.07,
    "transitions.max_s": 2.1, "transitions.mixed_lo": 0.105, "transitions.edge": 0.0196,
    "slide_min_shift": 0.04, "slide_residual": 0.3, "ramp_ratio": 0.5, "ramp_max_s": 0.25,
    "transitions.span_margin": 0.0, "transitions.wipe_fit_ratio": 0.5, "transitions.wipe_sweep": 0.8,
    # Round 4 (issue 74, part 5): the spans widened out to where the picture stops changing.
    "transitions.widen_ratio": 2.0})
MIN_CLIP_S = 2  # clips.min_s: shorter shots give no clip
FACTORS = (0.7, 1.0, 1.4)
MORE = 3  # steps taken past the grid's edge while the cost keeps falling there


class Replay:
    def __init__(self, binary, set_dir, names):
        self.p = subprocess.Popen([binary, set_dir, *names], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)

    def __call__(self, params):
        self.p.stdin.write(json.dumps(params) + "\n")
        self.p.stdin.flush()
        return json.loads(self.p.stdout.readline())


def clips_of(frames, fps, cuts, spans):
    """The clips the clips stage would cut: the shots between cuts less every transition's
    frames, each run of at least MIN_CLIP_S, as [start, end) frames."""
    bounds = sorted(set([0, frames] + [c for c in cuts if 0 < c < frames]))
    out = []
    for a, b in zip(bounds, bounds[1:]):
        start = a
        for f, l in sorted(spans):
            if l < start or f >= b:
                continue
            if f - start >= MIN_CLIP_S * fps:
                out.append((start, f))
            start = max(start, l + 1)
        if b - start >= MIN_CLIP_S * fps:
            out.append((start, b))
    return out


def impure(t, clips):
    """Clips that hold a true transition's frame or a true cut inside."""
    return sum(1 for a, b in clips
               if any(a <= x["last"] and b > x["first"] for x in t["transitions"])
               or any(a < c < b for c in t["cuts"]))


def cost(truth, found):
    """(errors, the counts behind them) over the training videos."""
    missed_cuts = missed_tr = false = spurious = dirty = 0
    for name, t in truth.items():
        r = found[name]
        ch, cn, th, tn, fp, _ = shot_boundaries.score(t, r["cuts"])
        missed_cuts += cn - ch
        missed_tr += tn - th
        false += fp
        spurious += len(shot_boundaries.false_transitions(t, r["transitions"]))
        dirty += impure(t, clips_of(t["frames"], t["fps"], r["cuts"], r["transitions"]))
    return (missed_cuts + missed_tr + false + spurious + dirty,
            (missed_cuts, missed_tr, false, spurious, dirty))


def candidates(name, value):
    if value == 0:  # a margin that starts at none
        return [0, 0.1, 0.2]
    if isinstance(START[name], int):
        return [v for v in (value - 1, value, value + 1) if v >= 1]
    return [round(value * f, 6) for f in FACTORS]


def beyond(name, value, upward):
    """The next value past the grid's edge, the way the cost fell."""
    if isinstance(START[name], int):
        return value + 1 if upward else max(1, value - 1)
    if value == 0:
        return 0 if not upward else 0.1
    return round(value * (FACTORS[-1] if upward else FACTORS[0]), 6)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--set", required=True)
    ap.add_argument("--replay", default=os.path.join(HERE, "..", "build", "shot_replay"))
    ap.add_argument("--sweeps", type=int, default=1)
    ap.add_argument("--out", help="write the chosen thresholds here (JSON)")
    ap.add_argument("--try", dest="settings", nargs="+", metavar="JSON",
                    help="print the training cost of each setting (JSON: thresholds over the "
                         "defaults in code) and stop: a sweep of a few parameters by hand")
    ap.add_argument("--start", help="start from these thresholds (JSON, as --out writes) instead "
                                    "of START: a further sweep from an earlier search's choice")
    args = ap.parse_args()
    truth = {n: t for n, t in json.load(open(os.path.join(args.set, "truth.json"))).items()
             if t.get("split") == "train"}
    print(f"training videos: {len(truth)}: {', '.join(sorted(truth))}", flush=True)
    replay = Replay(args.replay, args.set, sorted(truth))
    if args.settings:
        for setting in args.settings:
            print(setting, *cost(truth, replay(json.loads(setting))), flush=True)
        return
    current = dict(START)
    if args.start:
        current.update(json.load(open(args.start)))
    best, counts = cost(truth, replay(current))
    print(f"start (the defaults in code): cost {best} (cuts missed, transitions missed, false "
          f"boundaries, false transitions, impure clips) = {counts}", flush=True)
    for sweep in range(args.sweeps):
        changed = False
        for name in START:
            tried = []
            for v in candidates(name, current[name]):
                if v == current[name]:
                    tried.append((v, best, counts))
                    continue
                c, k = cost(truth, replay(dict(current, **{name: v})))
                tried.append((v, c, k))
            for _ in range(MORE):  # the lowest at an edge: go on that way while it falls
                low = min(c for _, c, _ in tried)
                edge = [i for i, t in enumerate(tried) if t[1] == low]
                if edge != [0] and edge != [len(tried) - 1]:
                    break
                upward = edge == [len(tried) - 1]
                v = beyond(name, tried[-1][0] if upward else tried[0][0], upward)
                if v in [t[0] for t in tried]:
                    break
                c, k = cost(truth, replay(dict(current, **{name: v})))
                tried.insert(len(tried) if upward else 0, (v, c, k))
            low = min(c for _, c, _ in tried)
            tied = [t for t in tried if t[1] == low]
            here = [t for t in tied if t[0] == current[name]]
            v, c, k = here[0] if here else tied[(len(tied) - 1) // 2]
            print(f"sweep {sweep + 1} {name}: " + ", ".join(f"{tv:g}: {tc}" for tv, tc, _ in tried)
                  + f" -> {v:g} (cost {c} = {k})", flush=True)
            if v != current[name]:
                changed = True
            current[name], best, counts = v, c, k
        if not changed:
            break
    print(f"chosen: cost {best} = {counts}\n{json.dumps(current, indent=1)}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(current, f, indent=1)


if __name__ == "__main__":
    main()
