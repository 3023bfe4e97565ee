#!/usr/bin/python3
"""The shot splitters a video curator would use: PySceneDetect's ContentDetector and
AdaptiveDetector (what video2dataset splits with), written from their published algorithms
(scenedetect.com, "Detection Algorithms"), with their default parameters. A peer for
bench/shot_boundaries.py; PySceneDetect itself is not a Debian package.

    bench/scenedetect_peer.py VIDEO...      prints {"VIDEO": {"content": [...], "adaptive": [...]}}

Each list holds the frames where a new shot starts.
- Content (detect-content): every frame in HSV (OpenCV's: H 0-179), scaled down as
  PySceneDetect does by default (to about 256 px wide, by an integer factor); the frame's
  score is the mean over the three channels of the mean absolute difference from the frame
  before (weights 1, 1, 1, edges 0). A cut where the score is at least `threshold` (27) and at
  least `min_scene_len` (15) frames after the last cut.
- Adaptive (detect-adaptive): the same scores; a frame's ratio is its score over the mean of
  the `window_width` (2) scores on either side (capped at 255). A cut where the ratio is at
  least `adaptive_threshold` (3.0), the score at least `min_content_val` (15), and
  `min_scene_len` frames after the last cut.
"""
import json
import sys

import cv2
import numpy as np


def content_scores(path):
    """Per frame (from 1): the content score against the frame before; 0 for frame 0."""
    cap = cv2.VideoCapture(path)
    scores, last = [], None
    while True:
        ok, frame = cap.read()
        if not ok:
            break
        factor = max(1, frame.shape[1] // 256)  # PySceneDetect's auto downscale
        if factor > 1:
            frame = frame[::factor, ::factor]
        hsv = cv2.cvtColor(frame, cv2.COLOR_BGR2HSV).astype(np.int32)
        if last is None:
            scores.append(0.0)
        else:
            deltas = [np.mean(np.abs(hsv[..., c] - last[..., c])) for c in range(3)]
            scores.append(float(sum(deltas) / 3))
        last = hsv
    return scores


def content_cuts(scores, threshold=27.0, min_scene_len=15):
    cuts, last_cut = [], 0
    for i, s in enumerate(scores):
        if i > 0 and s >= threshold and i - last_cut >= min_scene_len:
            cuts.append(i)
            last_cut = i
    return cuts


def adaptive_cuts(scores, adaptive_threshold=3.0, window_width=2, min_content_val=15.0, min_scene_len=15):
    cuts, last_cut = [], 0
    for i in range(1 + window_width, len(scores) - window_width):
        around = scores[i - window_width:i] + scores[i + 1:i + 1 + window_width]
        mean = sum(around) / len(around)
        ratio = 255.0 if mean < 1e-5 else min(255.0, scores[i] / mean)
        if ratio >= adaptive_threshold and scores[i] >= min_content_val and i - last_cut >= min_scene_len:
            cuts.append(i)
            last_cut = i
    return cuts


def main():
    out = {}
    for path in sys.argv[1:]:
        s = content_scores(path)
        out[path] = {"content": content_cuts(s), "adaptive": adaptive_cuts(s)}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
