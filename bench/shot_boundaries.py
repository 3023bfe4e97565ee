#!/usr/bin/python3
"""Shot boundaries and clips on the labelled set (bench/shot_set.py): framemill against ffmpeg's
scene filter and PySceneDetect's two detectors as video2dataset uses them (bench/scenedetect_peer.py).

    bench/shot_boundaries.py [--framemill build/framemill] [--set DIR] [--work DIR] [--fps 50]
                             [--split train|validation|held-out|all]

Each side of the set (the truth's "split": training, validation (an earlier round's held-out
side, spent) and held out) is scored apart, framemill
also per frame rate with how many of its cuts fall on the exact frame. --split scores one side
only: the held-out side is scored once, after the thresholds were chosen on training
(bench/shot_search.py).

--fps N re-times every video of the set to N frames/s (each frame one output frame, so the
truth's frame numbers hold; x264 crf 12 into the work dir) before anything runs: above
motion.max_fps (30) framemill analyses a lower rate and must still place each cut on its frame.

Runs `framemill` (motion, clips) on every video of the set, and ffmpeg's scene filter
(`select='gte(scene,0)'`, every frame's score) on the same files, then prints:
1. the boundary table (each rate with its 95% Wilson interval): recall on hard cuts (a found boundary within +-1 frame) and on gradual
   transitions (one inside [first, last + 1]: the new shot may start at the first unmixed
   frame), false boundaries (anything else; several found inside one transition count once),
   precision, and which events (flashes, fast pans, the shake, the fade inside a shot) were
   taken for boundaries; for ffmpeg at several thresholds;
2. clip purity: clips holding a frame of a transition or of two shots (must be none);
3. the exactness check on every clip: its frame count against end_frame - start_frame, and
   PSNR of its first and last frames against the source's at the stated span (>= 35 dB).
Exits 1 when framemill misses issue 74's goals on the held-out side (cut recall or precision
< 0.95, transition recall < 0.9, under 98% of clips pure, an inexact clip).
"""
import argparse
import json
import math
import os
import shutil
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import scenedetect_peer  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
FPS = 25


def run(*cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw).stdout


def framemill_results(binary, set_dir, work, names):
    db, out = os.path.join(work, "fm.db"), os.path.join(work, "out")
    if os.path.exists(db):
        os.remove(db)
    env = dict(os.environ, FRAMEMILL_OUT=out)
    videos = [os.path.join(set_dir, n) for n in sorted(names)]
    run(binary, "enqueue", "--db", db, "--stages", "motion,clips", *videos, env=env)
    run(binary, "run", "--db", db, "--stages", "motion,clips", "--workers", "2", "--out", out, env=env)
    by_file = {}
    for line in run(binary, "export", "--db", db, "--format", "jsonl", env=env).splitlines():
        r = json.loads(line)
        by_file.setdefault(os.path.basename(r["item"]), {})[r["stage"]] = r["result"]
    return by_file


def retimed(set_dir, work, fps):
    """The set's videos re-timed to `fps` (frame n at n / fps s, audio dropped), in work/set-<fps>."""
    out = os.path.join(work, f"set-{fps}")
    os.makedirs(out, exist_ok=True)
    for name in sorted(os.listdir(set_dir)):
        if not name.endswith(".mp4") or os.path.exists(os.path.join(out, name)):
            continue
        subprocess.run(["ffmpeg", "-v", "error", "-y", "-i", os.path.join(set_dir, name), "-an", "-vf",
                        f"settb=1/{fps},setpts=N", "-fps_mode", "passthrough", "-r", str(fps),
                        "-c:v", "libx264", "-preset", "veryfast", "-crf", "12", os.path.join(out, name)], check=True)
    shutil.copy(os.path.join(set_dir, "truth.json"), os.path.join(out, "truth.json"))
    return out


def scene_scores(path):
    """ffmpeg's scene score of every frame (frame index -> score; frames counted in order)."""
    text = subprocess.run(["ffmpeg", "-v", "error", "-i", path, "-an", "-vf",
                           "select='gte(scene,0)',metadata=print:file=-", "-f", "null", "-"],
                          check=True, capture_output=True, text=True).stdout
    scores, frame = {}, None
    for line in text.splitlines():
        if line.startswith("frame:"):
            frame = int(line.split()[0].split(":")[1])
        elif "lavfi.scene_score=" in line and frame is not None:
            scores[frame] = float(line.split("=")[1])
    return scores


def score(truth, found):
    """Matches found boundaries (frame where a new shot starts) against the truth."""
    cut_hit = [any(abs(f - c) <= 1 for f in found) for c in truth["cuts"]]
    tr_hit = [any(t["first"] <= f <= t["last"] + 1 for f in found) for t in truth["transitions"]]
    false = []
    for f in found:
        if any(abs(f - c) <= 1 for c in truth["cuts"]):
            continue
        if any(t["first"] <= f <= t["last"] + 1 for t in truth["transitions"]):
            continue
        false.append(f)
    # Several found at one truth boundary: the extras beyond the first are false too, for cuts.
    for c in truth["cuts"]:
        near = [f for f in found if abs(f - c) <= 1]
        false += near[1:]
    events = []
    for e in truth["events"]:
        lo, hi = e.get("frames", [e.get("frame"), e.get("frame")])
        if any(lo - 1 <= f <= hi + 1 for f in false):
            events.append(e["kind"])
    return sum(cut_hit), len(cut_hit), sum(tr_hit), len(tr_hit), len(false), events


def false_transitions(truth, spans):
    """Reported transitions that overlap no true one (their frames are lost to clips)."""
    return [s for s in spans
            if not any(s[0] <= t["last"] and s[1] >= t["first"] for t in truth["transitions"])]


def wilson(k, n, z=1.96):
    """The 95% Wilson interval of the proportion k/n, as "lo-hi"."""
    if n == 0:
        return "-"
    p = k / n
    mid, half = p + z * z / (2 * n), z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return f"{(mid - half) / (1 + z * z / n):.2f}-{(mid + half) / (1 + z * z / n):.2f}"


def table_row(name, totals):
    ch, cn, th, tn, fp, events = totals
    found_true = ch + th
    precision = found_true / (found_true + fp) if found_true + fp else 1
    cr, tr = ch / max(1, cn), th / max(1, tn)
    return (f"| {name} | {ch}/{cn} ({cr:.2f}, {wilson(ch, cn)}) | {th}/{tn} ({tr:.2f}, {wilson(th, tn)}) | {fp} | "
            f"{precision:.2f} ({wilson(found_true, found_true + fp)}) | {', '.join(sorted(set(events))) or '-'} |"), precision, cr, tr


def frames_at(path, indices):
    """Luma planes of the frames at `indices` (decoded in order), as uint8 arrays."""
    expr = "+".join(f"eq(n,{i})" for i in sorted(set(indices)))
    w, h = map(int, run("ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries",
                        "stream=width,height", "-of", "csv=p=0", path).strip().split(","))
    raw = subprocess.run(["ffmpeg", "-v", "error", "-i", path, "-an", "-vf", f"select='{expr}'",
                          "-fps_mode", "passthrough", "-pix_fmt", "gray", "-f", "rawvideo", "-"],
                         check=True, capture_output=True).stdout
    planes = np.frombuffer(raw, np.uint8).reshape(-1, h, w)
    return dict(zip(sorted(set(indices)), planes))


def psnr(a, b):
    h, w = min(a.shape[0], b.shape[0]), min(a.shape[1], b.shape[1])
    mse = np.mean((a[:h, :w].astype(np.float64) - b[:h, :w]) ** 2)
    return 99.0 if mse == 0 else 10 * math.log10(255 ** 2 / mse)


def check_clips(set_dir, name, truth, clips):
    impure, inexact, rows = [], [], []
    for c in clips["clips"]:
        a, b = c["start_frame"], c["end_frame"]
        for t in truth["transitions"]:
            if a <= t["last"] and b > t["first"]:
                impure.append((name, a, b, "transition"))
        for cut in truth["cuts"]:
            if a < cut < b:
                impure.append((name, a, b, "two shots"))
        n = int(run("ffprobe", "-v", "error", "-count_frames", "-select_streams", "v:0",
                    "-show_entries", "stream=nb_read_frames", "-of", "csv=p=0", c["artifact"]))
        src = frames_at(os.path.join(set_dir, name), [a, b - 1])
        own = frames_at(c["artifact"], [0, n - 1])
        first, last = psnr(own[0], src[a]), psnr(own[n - 1], src[b - 1])
        rows.append((name, a, b, n, first, last))
        if n != b - a or min(first, last) < 35:
            inexact.append(rows[-1])
    return impure, inexact, rows


def split_of(name, t):
    """A video's side: its truth's "split" (bench/shot_set.py), else by name (the first set)."""
    return t.get("split") or ("held-out" if name.startswith("held-out") else "train")


def exact_cuts(truth, found):
    """Of the true cuts found within +-1 frame, how many on their exact frame."""
    near = [min((abs(f - c), f - c) for f in found) for c in truth["cuts"]
            if any(abs(f - c) <= 1 for f in found)]
    return sum(1 for d in near if d[0] == 0), len(near), [d[1] for d in near if d[0]]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--framemill", default=os.path.join(HERE, "..", "build", "framemill"))
    ap.add_argument("--set", default="/tmp/framemill-shot-set")
    ap.add_argument("--work", default="/tmp/framemill-shot-work")
    ap.add_argument("--fps", type=int, default=0, help="re-time the set to this rate first")
    ap.add_argument("--split", choices=["train", "validation", "held-out", "all"], default="all",
                    help="only the videos of one side of the set")
    args = ap.parse_args()
    global FPS
    if not os.path.exists(os.path.join(args.set, "truth.json")):
        subprocess.run([sys.executable, os.path.join(HERE, "shot_set.py"), args.set], check=True)
    os.makedirs(args.work, exist_ok=True)
    if args.fps:
        args.set, FPS = retimed(args.set, args.work, args.fps), args.fps
        print(f"re-timed to {FPS} frames/s: {args.set}")
    truth = json.load(open(os.path.join(args.set, "truth.json")))
    truth = {n: t for n, t in truth.items() if args.split in ("all", split_of(n, t))}
    if args.fps:
        for t in truth.values():
            t["fps"] = args.fps
    sides = {s: [n for n, t in truth.items() if split_of(n, t) == s] for s in ("train", "validation", "held-out")}
    print(f"set: {args.set}: " + ", ".join(f"{s}: {len(v)} videos" for s, v in sides.items()))
    for n, t in truth.items():
        print(f"  {n} ({split_of(n, t)}, {t.get('fps', 25)} fps, {t.get('codec', 'h264')}, "
              f"{t['frames']} frames, {len(t['cuts'])} cuts, {len(t['transitions'])} transitions, "
              f"{len(t['events'])} events)")
    results = framemill_results(os.path.abspath(args.framemill), args.set, args.work, truth)
    scores = {n: scene_scores(os.path.join(args.set, n)) for n in truth}
    content = {n: scenedetect_peer.content_scores(os.path.join(args.set, n)) for n in truth}

    def total(found_of, names=None):
        acc = [0, 0, 0, 0, 0, []]
        for n, t in truth.items():
            if names is not None and n not in names:
                continue
            r = score(t, found_of(n))
            for i in range(5):
                acc[i] += r[i]
            acc[5] += r[5]
        return acc

    fm_cuts = lambda n: results[n]["motion"]["cuts"]
    detectors = [("framemill motion", fm_cuts)]
    detectors += [(f"ffmpeg scene > {thr}", lambda n, thr=thr: [f for f, s in scores[n].items() if s > thr])
                  for thr in (0.1, 0.2, 0.3, 0.4)]
    detectors += [("PySceneDetect-style content (27)", lambda n: scenedetect_peer.content_cuts(content[n])),
                  ("PySceneDetect-style adaptive (3.0)", lambda n: scenedetect_peer.adaptive_cuts(content[n]))]
    goals = {}
    for side, names in sides.items():
        if not names:
            continue
        print(f"\n{side}: {len(names)} videos\n")
        print("| detector | hard cuts found | transitions found | false boundaries | precision | events taken for boundaries |")
        print("|---|---|---|---|---|---|")
        for label, found_of in detectors:
            row, precision, cut_recall, tr_recall = table_row(label, total(found_of, names))
            print(row)
            if label == "framemill motion":
                goals[side] = (precision, cut_recall, tr_recall)
        # Per frame rate: framemill's figures, and how many of its cuts are on the exact frame.
        print("\n| frame rate | videos | hard cuts found | transitions found | false | precision | cuts on their exact frame |")
        print("|---|---|---|---|---|---|---|")
        for fps in sorted({truth[n].get("fps", 25) for n in names}):
            some = [n for n in names if truth[n].get("fps", 25) == fps]
            row = table_row(f"{fps}", total(fm_cuts, some))[0]
            ex = [exact_cuts(truth[n], fm_cuts(n)) for n in some]
            on, near = sum(e[0] for e in ex), sum(e[1] for e in ex)
            off = sum((e[2] for e in ex), [])
            cells = row.split(" | ")
            print(f"| {fps} | {len(some)} | " + " | ".join(cells[1:5]) + f" | {on}/{near} (off by {off or 'none'}) |")
    spurious = sum((false_transitions(t, results[n]["motion"].get("transitions", [])) for n, t in truth.items()), [])
    print(f"\nframemill transitions reported where none is: {len(spurious)} {spurious}")
    for n, t in truth.items():
        m = results[n]["motion"]
        print(f"  {n}: cuts {m['cuts']}\n    truth {t['cuts']}\n    transitions {m.get('transitions')}"
              f"\n    truth {[[x['first'], x['last']] for x in t['transitions']]}")

    ok = True
    for side, names in sides.items():
        if not names:
            continue
        impure, inexact, rows = [], [], []
        for n in names:
            i, x, r = check_clips(args.set, n, truth[n], results[n]["clips"])
            impure += i
            inexact += x
            rows += r
        pure = 1 - len({(c[0], c[1]) for c in impure}) / max(1, len(rows))
        print(f"\n{side} clips: {len(rows)}; holding a transition's frame or two shots: "
              f"{len({(c[0], c[1]) for c in impure})} ({100 * pure:.1f}% pure) {impure}")
        print(f"exactness: {len(rows) - len(inexact)} of {len(rows)} clips have end_frame - start_frame "
              f"frames and first and last frames >= 35 dB; failing: {inexact}")
        precision, cut_recall, tr_recall = goals[side]
        if side == "held-out":  # issue 74's goals
            ok = ok and precision >= 0.95 and cut_recall >= 0.95 and tr_recall >= 0.9 and pure >= 0.98 and not inexact
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
