#!/usr/bin/python3
"""Photo-or-drawing accuracy of a converted nsfwjs model on labelled pictures (measurement only).

usage: /usr/bin/python3 tools/models/eval_content.py --models DIR [--only nsfw,nsfw-inception]
           [--labels tests/data/content_labels.csv] [--thresholds 0.1,0.2,...] [--alpha-on-white]

Each picture is read as the runtime reads it (cv2.imread IMREAD_COLOR: any alpha channel is
dropped) and preprocessed as manifest input.preprocess says (float bilinear resize, half-pixel
centres), then run through model.onnx with cv2.dnn on one thread (cv2.setNumThreads(1)).
The rule "drawing when P(Drawing) + P(Hentai) > t" is scored for each t: accuracy, and
the confusion table at the t with the best balanced accuracy. Prints ms per image (forward only,
and with decode + preprocess).
"""
import argparse
import json
import os
import sys
import time

import cv2
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_LABELS = os.path.join(HERE, "..", "..", "tests", "data", "content_labels.csv")


def read_labels(path):
    rows = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            p, label = line.rsplit(",", 1)
            if label not in ("photo", "drawing"):
                sys.exit(f"eval_content: {path}: label '{label}' for {p} is not photo|drawing")
            rows.append((p, label))
    return rows


def load(path, alpha_on_white):
    if alpha_on_white:
        img = cv2.imread(path, cv2.IMREAD_UNCHANGED)
        if img is not None and img.ndim == 3 and img.shape[2] == 4:
            if img.dtype != np.uint8:
                img = (img / 257).astype(np.uint8)
            a = img[:, :, 3:4].astype(np.float32) / 255
            return (img[:, :, :3] * a + 255 * (1 - a)).astype(np.uint8)
    return cv2.imread(path, cv2.IMREAD_COLOR)


def preprocess(img, pp):
    x = cv2.resize(img.astype(np.float32), (int(pp["width"]), int(pp["height"])), interpolation=cv2.INTER_LINEAR)
    if pp.get("to_rgb", True):
        x = x[:, :, ::-1]
    x = (x * np.float32(pp["scale"]) - np.float32(pp["mean"])) / np.float32(pp["std"])
    return np.ascontiguousarray(x.transpose(2, 0, 1)[None], dtype=np.float32)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", required=True)
    ap.add_argument("--only", default="nsfw")
    ap.add_argument("--labels", default=DEFAULT_LABELS)
    ap.add_argument("--thresholds", default="0.02,0.05,0.1,0.2,0.3,0.5,0.7")
    ap.add_argument("--alpha-on-white", action="store_true",
                    help="composite transparent pictures on white (as a viewer shows them) instead")
    ap.add_argument("--json", default="", help="also write per-picture probabilities here")
    a = ap.parse_args()
    cv2.setNumThreads(1)
    rows = read_labels(a.labels)
    ts = [float(t) for t in a.thresholds.split(",")]
    per_model = {}
    for name in [n for n in a.only.split(",") if n]:
        man = json.load(open(os.path.join(a.models, name, "manifest.json")))
        classes = man.get("classes") or ["Drawing", "Hentai", "Neutral", "Porn", "Sexy"]
        net = cv2.dnn.readNetFromONNX(os.path.join(a.models, name, man["onnx"]))
        pp = man["input"]["preprocess"]
        net.setInput(preprocess(np.zeros((8, 8, 3), np.uint8), pp))
        net.forward("probabilities")  # warm-up: first forward allocates
        probs, fwd, total = [], [], []
        for path, _ in rows:
            t0 = time.perf_counter()
            img = load(path, a.alpha_on_white)
            if img is None:
                sys.exit(f"eval_content: cannot read {path}")
            x = preprocess(img, pp)
            t1 = time.perf_counter()
            net.setInput(x)
            p = net.forward("probabilities")[0].copy()
            t2 = time.perf_counter()
            fwd.append((t2 - t1) * 1e3)
            total.append((t2 - t0) * 1e3)
            probs.append(p)
        probs = np.array(probs)
        per_model[name] = probs
        y = np.array([l == "drawing" for _, l in rows])
        score = probs[:, classes.index("Drawing")] + probs[:, classes.index("Hentai")]
        print(f"== {name}: {len(rows)} pictures ({y.sum()} drawings, {(~y).sum()} photos), "
              f"{'alpha on white' if a.alpha_on_white else 'imread IMREAD_COLOR'}")
        print(f"   ms per image, 1 thread: forward median {np.median(fwd):.1f} (mean {np.mean(fwd):.1f}), "
              f"with decode+preprocess median {np.median(total):.1f}")
        print("   t      accuracy  drawing recall  photo recall  balanced")
        best = None
        for t in ts:
            pred = score > t
            acc = (pred == y).mean()
            dr, phr = pred[y].mean(), (~pred[~y]).mean()
            bal = (dr + phr) / 2
            print(f"   {t:<6g} {acc:8.3f}  {dr:14.3f}  {phr:12.3f}  {bal:8.3f}")
            if best is None or bal > best[1]:
                best = (t, bal)
        t = best[0]
        pred = score > t
        print(f"   confusion at t={t:g} (rows: truth, columns: predicted photo / drawing)")
        print(f"     photo    {np.sum(~y & ~pred):4d} {np.sum(~y & pred):4d}")
        print(f"     drawing  {np.sum(y & ~pred):4d} {np.sum(y & pred):4d}")
        top = np.array(classes)[probs.argmax(1)]
        print("   argmax class, photos:   " + ", ".join(f"{c} {np.sum(top[~y] == c)}" for c in classes))
        print("   argmax class, drawings: " + ", ".join(f"{c} {np.sum(top[y] == c)}" for c in classes))
        wrong = [(rows[i][0], rows[i][1], float(score[i])) for i in range(len(rows)) if pred[i] != y[i]]
        for p, l, s in wrong:
            print(f"     wrong: {l:7s} D+H={s:.3f} {p}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"pictures": [p for p, _ in rows], "labels": [l for _, l in rows],
                       "probabilities": {k: v.round(6).tolist() for k, v in per_model.items()}}, f)


if __name__ == "__main__":
    main()
