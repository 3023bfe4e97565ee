#!/usr/bin/python3
"""Train the photo-or-drawing linear probe on the nsfw model's features (deterministic).

usage: /usr/bin/python3 tools/models/train_content_probe.py [--models .cache/models] [--model nsfw]
           [--labels tests/data/content_labels.csv] [--out tools/models/content_probe.json]
           [--holdout tests/data/content_holdout.csv] [--min-group 3] [--no-write]

Features: each picture is read as the C++ runtime reads it (cv2.imread IMREAD_COLOR), resized to
the manifest's input size in float with cv2.INTER_LINEAR (half-pixel centres), BGR->RGB, x/255,
NCHW (eval_content.py's load/preprocess, the same arithmetic as gpu::PreprocessCpu), run through
model.onnx with cv2.dnn on one thread; the model output 'features' [1,1280] is L2-normalised.

Model: p(photo) = sigmoid(w.f + b), L2-regularised logistic regression (penalty lam/2 |w|^2, bias
not penalised), each class weighted n / (2 n_class) so both classes count equally. Fitted exactly
by Newton's method in the span of the training features (w = V beta, X = U S V^T), which is the
same minimum as in the full 1280-d space; no randomness, so no seed is needed.

Evaluation: leave-one-group-out cross-validation, a group being the picture's folder; folders with
fewer than --min-group pictures are merged into one group per Debian package (dpkg-query -S).
For each held-out group, lam is chosen from LAMBDAS by an inner leave-one-group-out over the
remaining groups only (lowest class-weighted log loss on the inner held-out pictures; ties go to
the larger lam), then the probe is fitted on the remaining groups and scores the held-out one.
The probe written to --out is fitted on all labelled pictures, with lam chosen by the same inner
rule over all groups.
"""
import argparse
import json
import os
import subprocess
import sys

import cv2
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
from eval_content import load, preprocess, read_labels  # noqa: E402

LAMBDAS = [1e-6, 3e-6, 1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1, 3e-1, 1.0]
THRESHOLDS = [0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7]
NEWTON_ITERS = 100


# ---------------------------------------------------------------- features

def features(rows, models, model):
    man = json.load(open(os.path.join(models, model, "manifest.json")))
    pp = man["input"]["preprocess"]
    net = cv2.dnn.readNetFromONNX(os.path.join(models, model, man["onnx"]))
    out = []
    for path, _ in rows:
        img = load(path, False)
        if img is None:
            sys.exit(f"train_content_probe: cannot read {path}")
        net.setInput(preprocess(img, pp))
        f = net.forward("features").reshape(-1).astype(np.float64)
        out.append(f / max(np.linalg.norm(f), 1e-12))
    return np.array(out)


# ---------------------------------------------------------------- groups

def package_of(path):
    try:
        r = subprocess.run(["dpkg-query", "-S", path], capture_output=True, text=True, timeout=30)
        if r.returncode == 0 and ":" in r.stdout:
            return r.stdout.split(":", 1)[0].split(",")[0].strip()
    except (OSError, subprocess.TimeoutExpired):
        pass
    return None


def groups_of(paths, min_group):
    folders = [os.path.dirname(p) for p in paths]
    count = {d: folders.count(d) for d in set(folders)}
    out = []
    for p, d in zip(paths, folders):
        if count[d] >= min_group:
            out.append(d)
        else:
            pkg = package_of(p)
            out.append(f"package:{pkg}" if pkg else d)
    return out


# ---------------------------------------------------------------- logistic regression

def sigmoid(z):
    return 0.5 * (1.0 + np.tanh(0.5 * z))


def class_weights(y):
    n, n1 = len(y), y.sum()
    n0 = n - n1
    return np.where(y == 1, n / (2.0 * max(n1, 1)), n / (2.0 * max(n0, 1)))


def fit_path(X, y, lams):
    """For each lam: minimise mean_i c_i logloss(y_i, w.x_i + b) + lam/2 |w|^2 (c: class_weights).
    Returns [(w, b)] in the order of lams. The minimiser has w in the row space of X, so the fit
    runs in its coordinates (X = U S V^T, w = V beta, |w| = |beta|): Newton's method with a
    backtracking line search, started from zero, at most NEWTON_ITERS steps."""
    c = class_weights(y)
    n = len(y)
    U, S, Vt = np.linalg.svd(X, full_matrices=False)
    keep = S > 1e-10 * S[0]
    A = np.hstack([U[:, keep] * S[keep], np.ones((n, 1))])
    V = Vt[keep].T
    r = A.shape[1]
    out = []
    for lam in lams:
        pen = np.full(r, lam)
        pen[-1] = 0.0

        def objective(th):
            z = A @ th
            # log(1 + e^-z) for y=1, log(1 + e^z) for y=0, computed stably
            return float(np.mean(c * np.logaddexp(0.0, np.where(y == 1, -z, z)))) + 0.5 * float(pen @ (th * th))

        theta = np.zeros(r)
        f = objective(theta)
        for _ in range(NEWTON_ITERS):
            p = sigmoid(A @ theta)
            g = A.T @ (c * (p - y)) / n + pen * theta
            h = (A * (c * p * (1 - p))[:, None]).T @ A / n + np.diag(pen) + 1e-12 * np.eye(r)
            step = np.linalg.solve(h, g)
            t = 1.0
            while True:
                cand = theta - t * step
                fc = objective(cand)
                if fc <= f + 1e-4 * t * float(g @ -step) or t < 1e-8:
                    break
                t *= 0.5
            theta, f = cand, fc
            if np.max(np.abs(t * step)) < 1e-10:
                break
        out.append((V @ theta[:-1], float(theta[-1])))
    return out


def fit(X, y, lam):
    return fit_path(X, y, [lam])[0]


def prob(X, w, b):
    return sigmoid(X @ w + b)


def weighted_logloss(y, p):
    c = class_weights(y)
    p = np.clip(p, 1e-12, 1 - 1e-12)
    return float(np.mean(c * -(y * np.log(p) + (1 - y) * np.log(1 - p))))


def choose_lambda(X, y, g):
    """Inner leave-one-group-out over the groups of (X, y, g): the lam with the lowest pooled
    class-weighted log loss; ties (within 1e-9) go to the larger lam."""
    ug = sorted(set(g))
    best = None
    p = np.zeros((len(LAMBDAS), len(y)))
    for h in ug:
        te = np.array([x == h for x in g])
        for k, (w, b) in enumerate(fit_path(X[~te], y[~te], LAMBDAS)):
            p[k, te] = prob(X[te], w, b)
    losses = {lam: weighted_logloss(y, p[k]) for k, lam in enumerate(LAMBDAS)}
    for lam in LAMBDAS:
        if best is None or losses[lam] <= losses[best] + 1e-9:
            best = lam
    return best, losses


# ---------------------------------------------------------------- report

def scores(y, p, t=0.5):
    pred = p >= t
    yb = y == 1
    return dict(accuracy=float((pred == yb).mean()),
                photo_recall=float(pred[yb].mean()) if yb.any() else float("nan"),
                drawing_recall=float((~pred[~yb]).mean()) if (~yb).any() else float("nan"),
                confusion=[[int(np.sum(yb & pred)), int(np.sum(yb & ~pred))],
                           [int(np.sum(~yb & pred)), int(np.sum(~yb & ~pred))]])


def print_confusion(cm, indent="  "):
    print(f"{indent}confusion (rows: truth, columns: predicted photo / drawing)")
    print(f"{indent}  photo    {cm[0][0]:4d} {cm[0][1]:4d}")
    print(f"{indent}  drawing  {cm[1][0]:4d} {cm[1][1]:4d}")


def sig7(v):
    return float(f"{v:.7g}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default=os.path.join(ROOT, ".cache", "models"))
    ap.add_argument("--model", default="nsfw")
    ap.add_argument("--labels", default=os.path.join(ROOT, "tests", "data", "content_labels.csv"))
    ap.add_argument("--out", default=os.path.join(HERE, "content_probe.json"))
    ap.add_argument("--holdout", default="", help="labelled pictures NOT used for training: score the final probe")
    ap.add_argument("--min-group", type=int, default=3,
                    help="folders with fewer pictures are merged into one group per package")
    ap.add_argument("--no-write", action="store_true")
    a = ap.parse_args()
    cv2.setNumThreads(1)

    rows = read_labels(a.labels)
    paths = [p for p, _ in rows]
    y = np.array([1.0 if l == "photo" else 0.0 for _, l in rows])
    X = features(rows, a.models, a.model)
    g = groups_of(paths, a.min_group)
    ug = sorted(set(g), key=lambda h: (-g.count(h), h))
    print(f"== {len(rows)} pictures ({int(y.sum())} photos, {int(len(y) - y.sum())} drawings), "
          f"{X.shape[1]}-d '{a.model}' features, {len(ug)} groups (folders; folders under "
          f"{a.min_group} pictures merged per package)")

    # ---- outer leave-one-group-out
    oof = np.zeros(len(y))
    print("   fold (held-out group)                                         n  photo draw   lam     acc")
    fold_rows = []
    for h in ug:
        te = np.array([x == h for x in g])
        tr_g = [x for x, t in zip(g, te) if not t]
        lam, _ = choose_lambda(X[~te], y[~te], tr_g)
        w, b = fit(X[~te], y[~te], lam)
        oof[te] = prob(X[te], w, b)
        s = scores(y[te], oof[te])
        fold_rows.append((h, int(te.sum()), lam, s))
        name = h if len(h) <= 60 else "..." + h[-57:]
        print(f"   {name:60s} {int(te.sum()):3d} {int(y[te].sum()):5d} {int((1 - y[te]).sum()):4d}  "
              f"{lam:<7g} {s['accuracy']:.3f}")
        for i in np.where(te)[0]:
            if (oof[i] >= 0.5) != (y[i] == 1):
                print(f"        wrong: {rows[i][1]:7s} p(photo)={oof[i]:.3f} {os.path.basename(paths[i])}")
    s = scores(y, oof)
    bal = (s["photo_recall"] + s["drawing_recall"]) / 2
    print(f"   overall (pooled out-of-fold, t=0.5): accuracy {s['accuracy']:.3f}, photo recall "
          f"{s['photo_recall']:.3f}, drawing recall {s['drawing_recall']:.3f}, balanced {bal:.3f}")
    print(f"   mean of per-fold accuracies {np.mean([r[3]['accuracy'] for r in fold_rows]):.3f} "
          f"(unweighted over {len(fold_rows)} folds)")
    print_confusion(s["confusion"], "   ")
    print("   threshold  accuracy  photo recall  drawing recall  balanced")
    for t in THRESHOLDS:
        st = scores(y, oof, t)
        print(f"   {t:<9g}  {st['accuracy']:8.3f}  {st['photo_recall']:12.3f}  {st['drawing_recall']:14.3f}  "
              f"{(st['photo_recall'] + st['drawing_recall']) / 2:8.3f}")

    # ---- final probe on everything
    lam, losses = choose_lambda(X, y, g)
    w, b = fit(X, y, lam)
    p_train = prob(X, w, b)
    print(f"== final probe: lam {lam:g} (inner leave-one-group-out log loss: "
          + ", ".join(f"{k:g}:{v:.3f}" for k, v in losses.items()) + ")")
    print(f"   training accuracy {scores(y, p_train)['accuracy']:.3f}, |w| {np.linalg.norm(w):.3f}, b {b:.4f}")

    hold = None
    if a.holdout:
        hrows = read_labels(a.holdout)
        overlap = set(p for p, _ in hrows) & set(paths)
        if overlap:
            sys.exit(f"train_content_probe: {len(overlap)} holdout pictures are in {a.labels}: {sorted(overlap)[:3]}")
        hy = np.array([1.0 if l == "photo" else 0.0 for _, l in hrows])
        hp = prob(features(hrows, a.models, a.model), w, b)
        hold = scores(hy, hp)
        print(f"== holdout {os.path.relpath(a.holdout, ROOT)}: {len(hrows)} pictures ({int(hy.sum())} photos, "
              f"{int(len(hy) - hy.sum())} drawings), final probe at t=0.5: accuracy {hold['accuracy']:.3f}, "
              f"photo recall {hold['photo_recall']:.3f}, drawing recall {hold['drawing_recall']:.3f}")
        print_confusion(hold["confusion"], "   ")
        for (pth, l), pv in zip(hrows, hp):
            mark = "" if (pv >= 0.5) == (l == "photo") else "   <-- wrong"
            print(f"     {l:7s} p(photo)={pv:.3f} {pth}{mark}")

    if a.no_write:
        return
    measured = {
        "protocol": f"leave-one-group-out over {len(ug)} groups (source folders; folders under {a.min_group} "
                    "pictures merged per Debian package), lam chosen per fold by inner leave-one-group-out "
                    "(class-weighted log loss), threshold 0.5, pooled out-of-fold predictions",
        "n": len(y), "n_photo": int(y.sum()), "n_drawing": int(len(y) - y.sum()), "groups": len(ug),
        "cv_accuracy": round(s["accuracy"], 4), "cv_photo_recall": round(s["photo_recall"], 4),
        "cv_drawing_recall": round(s["drawing_recall"], 4), "cv_balanced_accuracy": round(bal, 4),
        "cv_confusion": {"rows": "truth photo, drawing", "columns": "predicted photo, drawing",
                         "table": s["confusion"]},
        "lambda": lam,
    }
    if hold is not None:
        measured["holdout"] = {"file": os.path.relpath(a.holdout, ROOT), "n": len(hy),
                               "accuracy": round(hold["accuracy"], 4),
                               "photo_recall": round(hold["photo_recall"], 4),
                               "drawing_recall": round(hold["drawing_recall"], 4)}
    probe = {"features": "features", "l2_normalise": True, "weights": [sig7(v) for v in w], "bias": sig7(b),
             "positive": "photo", "threshold": 0.5,
             "trained_on": os.path.relpath(os.path.abspath(a.labels), ROOT), "measured": measured}
    with open(a.out, "w") as f:
        json.dump(probe, f, indent=1)
        f.write("\n")
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
