#!/usr/bin/env python3
"""The CPU side of the GPU machine, for the figures gpu_bench compares against.

Runs on the lent GPU machine (scripts/gpu-device-run.sh), whose image has
opencv-python-headless (OpenCV with FFmpeg inside) but none of framemill's libraries:

  dnn     each bundled model's ONNX graph through cv2.dnn on all cores: images/s at batch 1
          (and 8 where the model takes a batch), the CPU path framemill uses without a GPU
  dis     DIS optical flow (PRESET_FAST, the motion stage's CPU flow) on consecutive frames
          of a real video at 320x180 and 1280x720: pairs/s on 1 thread and on all cores
  decode  each video decoded by FFmpeg (cv2.VideoCapture): frames/s in one process, and in
          --procs processes at once (one per worker, as `framemill run` starts them), plain
          and with the motion stage's reduction to 320x180 gray

  device_cpu_side.py --models DIR --videos DIR [--procs N] [--min_time S] [--only dnn,dis,decode]

Every figure is printed as one line; the setup first (leveldb's db_bench).
"""
import argparse
import glob
import json
import multiprocessing as mp
import os
import platform
import time

import cv2
import numpy as np


def timed(fn, min_time):
    fn()  # warm-up
    calls, t0 = 0, time.perf_counter()
    while True:
        fn()
        calls += 1
        secs = time.perf_counter() - t0
        if secs >= min_time:
            return secs / calls


def run_dnn(models_dir, min_time, threads):
    cv2.setNumThreads(threads)
    for onnx in sorted(glob.glob(os.path.join(models_dir, "*", "model.onnx"))):
        name = os.path.basename(os.path.dirname(onnx))
        manifest = json.load(open(os.path.join(os.path.dirname(onnx), "manifest.json")))
        shape = [abs(d) for d in manifest["input"]["shape"]]
        batches = [1, 8] if manifest["input"].get("batchable") else [1]
        try:
            net = cv2.dnn.readNetFromONNX(onnx)
            for b in batches:
                blob = np.random.default_rng(1).random([b] + shape[1:], dtype=np.float32)

                def once():
                    net.setInput(blob)
                    net.forward(net.getUnconnectedOutLayersNames())

                secs = timed(once, min_time)
                print(f"dnn {name:18s} batch {b}: {b / secs:9.1f} img/s  ({1e3 * secs / b:.2f} ms/img, "
                      f"cv2.dnn, {threads} threads)", flush=True)
        except Exception as e:  # a model this OpenCV cannot read: say so, go on
            print(f"dnn {name:18s} failed: {str(e).splitlines()[0][:200]}", flush=True)


def video_frames(path, size, limit):
    cap = cv2.VideoCapture(path)
    frames = []
    while len(frames) < limit:
        ok, f = cap.read()
        if not ok:
            break
        frames.append(cv2.resize(cv2.cvtColor(f, cv2.COLOR_BGR2GRAY), size, interpolation=cv2.INTER_AREA))
    return frames


def run_dis(videos, min_time, cores):
    path = next((v for v in videos if v.endswith("vtest.avi")), videos[0])
    for size in [(320, 180), (1280, 720)]:
        frames = video_frames(path, size, 41)
        dis = cv2.DISOpticalFlow_create(cv2.DISOPTICAL_FLOW_PRESET_FAST)
        for threads in [1, cores]:
            cv2.setNumThreads(threads)
            pairs = 0

            def once():
                nonlocal pairs
                i = pairs % (len(frames) - 1)
                dis.calc(frames[i], frames[i + 1], None)
                pairs += 1

            secs = timed(once, min_time)
            print(f"dis {size[0]}x{size[1]} PRESET_FAST {threads:2d} thread(s): {1 / secs:8.1f} pairs/s "
                  f"({os.path.basename(path)})", flush=True)


def decode_all(args):
    path, reduce = args
    cv2.setNumThreads(1)
    cap = cv2.VideoCapture(path)
    n = 0
    while True:
        ok, f = cap.read()
        if not ok:
            return n
        if reduce:
            cv2.resize(cv2.cvtColor(f, cv2.COLOR_BGR2GRAY), (320, 180), interpolation=cv2.INTER_AREA)
        n += 1


def run_decode(videos, procs):
    # spawn, not fork: a child forked after cv2's thread pool has run can hang in it.
    with mp.get_context("spawn").Pool(procs) as pool:
        for path in videos:
            cap = cv2.VideoCapture(path)
            w, h = int(cap.get(cv2.CAP_PROP_FRAME_WIDTH)), int(cap.get(cv2.CAP_PROP_FRAME_HEIGHT))
            codec = int(cap.get(cv2.CAP_PROP_FOURCC)).to_bytes(4, "little").decode(errors="replace")
            cap.release()
            for reduce in [False, True]:
                t0 = time.perf_counter()
                n1 = decode_all((path, reduce))
                one = n1 / (time.perf_counter() - t0)
                pool.map(decode_all, [(path, reduce)] * procs)  # warm every process
                t0 = time.perf_counter()
                total = sum(pool.map(decode_all, [(path, reduce)] * procs))
                many = total / (time.perf_counter() - t0)
                what = "+ 320x180 gray" if reduce else "decode only  "
                print(f"decode {os.path.basename(path):14s} {w}x{h} {codec} {n1} frames {what}: "
                      f"1 process {one:8.1f} frames/s; {procs} processes {many:9.1f} frames/s", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", required=True)
    ap.add_argument("--videos", required=True)
    ap.add_argument("--procs", type=int, default=os.cpu_count())
    ap.add_argument("--min_time", type=float, default=1.0)
    ap.add_argument("--only", default="dnn,dis,decode")
    a = ap.parse_args()
    only = set(a.only.split(","))
    videos = sorted(glob.glob(os.path.join(a.videos, "*")))
    print(f"device_cpu_side: {os.cpu_count()} cores ({platform.processor() or platform.machine()}), "
          f"OpenCV {cv2.__version__}, numpy {np.__version__}; videos: {[os.path.basename(v) for v in videos]}")
    print(f"Timing: 1 warm-up call, then calls for >= {a.min_time} s", flush=True)
    if "dnn" in only:
        run_dnn(a.models, a.min_time, os.cpu_count())
    if "dis" in only and videos:
        run_dis(videos, a.min_time, os.cpu_count())
    if "decode" in only and videos:
        run_decode(videos, a.procs)


if __name__ == "__main__":
    main()
