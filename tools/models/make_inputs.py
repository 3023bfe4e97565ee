#!/usr/bin/python3
"""Golden input tensors for the model reference (tests only).

For each installed model (MODELS/<model>/manifest.json present, naming files that exist) and each
golden image listed for it in golden_images.json: decode with cv2.imread, crop, preprocess exactly
as manifest input.preprocess says, and write the NHWC tensor the TF.js graph takes as raw
little-endian OUT/<model>/<i>.raw plus OUT/<model>/index.json. The layout is the manifest's
tfjs_layout: NHWC for the TF.js graphs, NCHW for ISNet (an ONNX original).

The resize runs on float32 pixels (cv2.resize INTER_LINEAR: bilinear, half-pixel centres, no
antialiasing), which is what a float implementation such as gpu::PreprocessCpu computes; a uint8
cv2.resize would round through 8-bit fixed point instead. int32 inputs (movenet) are rounded to
nearest after scale/mean/std.

Idempotent: a model whose index.json carries the same key (manifest input section, image list,
this script) is left alone.
"""
import argparse
import hashlib
import json
import os
import sys

import cv2
import numpy as np

MODEL_ORDER = ["mobilefacenet", "blazeface", "selfie", "movenet-lightning", "movenet-multipose", "faceres",
               "blazepose-full", "centernet", "isnet", "blazeface-tiled", "facemesh", "nsfw", "nsfw-inception",
               "yolov8n", "yolov8s"]

# blazeface-tiled is not a model of its own: BlazeFace run on the whole frame and on the tiles
# of the faces stage's default detector (models/face_tiles.h), written here again from that
# description: square tiles from ceil(256 * min_face_px / 28) px, doubling while they fit
# the short side, evenly spaced with >= 1/4 overlap, then one zoom-out tile of twice the
# long side centred on the frame (the frame shrunk onto black, INTER_AREA on uint8).
TILED = {"model": "blazeface", "min_face_px": 32, "max_tiles": 48, "overlap": 0.25,
         "smallest_face_input": 28}


def tile_starts(extent, side, overlap):
    if extent <= side:
        return [0]
    step = side * (1.0 - overlap)
    n = int(np.ceil((extent - side) / step)) + 1
    return [int(np.floor(i * (extent - side) / (n - 1) + 0.5)) for i in range(n)]


def plan_tiles(w, h, input_side):
    side = max(8, int(np.ceil(input_side * TILED["min_face_px"] / TILED["smallest_face_input"])))
    levels = []
    while side <= min(w, h):
        levels.append([[x, y, side, side] for y in tile_starts(h, side, TILED["overlap"])
                       for x in tile_starts(w, side, TILED["overlap"])])
        side *= 2
    total = sum(len(l) for l in levels)
    while levels and total > TILED["max_tiles"]:
        total -= len(levels.pop(0))
    tiles = [t for l in levels for t in l]
    longest = max(w, h)
    tiles.append([w // 2 - longest, h // 2 - longest, 2 * longest, 2 * longest])
    return tiles


def tile_pixels(img, rect, input_side):
    x, y, side, _ = rect
    H, W = img.shape[:2]
    if x >= 0 and y >= 0 and x + side <= W and y + side <= H:
        return img[y:y + side, x:x + side]
    scale = input_side / side
    small = cv2.resize(img, None, fx=scale, fy=scale, interpolation=cv2.INTER_AREA)
    out = np.zeros((input_side, input_side, 3), np.uint8)
    ax, ay = int(np.floor(-x * scale + 0.5)), int(np.floor(-y * scale + 0.5))
    fx0, fy0 = max(ax, 0), max(ay, 0)
    fx1, fy1 = min(ax + small.shape[1], input_side), min(ay + small.shape[0], input_side)
    out[fy0:fy1, fx0:fx1] = small[fy0 - ay:fy1 - ay, fx0 - ax:fx1 - ax]
    return out


def sha256_bytes(b):
    return hashlib.sha256(b).hexdigest()


def installed_manifest(models_dir, name):
    path = os.path.join(models_dir, name, "manifest.json")
    if not os.path.isfile(path):
        return None
    with open(path) as f:
        man = json.load(f)
    for key in ("onnx", "graph"):
        if key in man and not os.path.isfile(os.path.join(models_dir, name, man[key])):
            return None
    return man


def write_atomic(path, data):
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


class ImageSource:
    """Resolves golden image ids to BGR uint8 pixels and the file a C++ test can imread."""

    def __init__(self, spec, data_dir, frames_dir):
        self.spec = spec["images"]
        self.data_dir = data_dir
        self.frames_dir = frames_dir
        self.cache = {}

    def whole(self, image_id):
        """(pixels, path) of an uncropped image."""
        if image_id in self.cache:
            return self.cache[image_id]
        ent = self.spec[image_id]
        src = os.path.join(self.data_dir, ent["file"])
        if "frame" in ent:
            path = os.path.join(self.frames_dir, f"{image_id}.png")
            if not os.path.isfile(path):
                cap = cv2.VideoCapture(src)
                if not cap.isOpened():
                    sys.exit(f"make_inputs: cannot open video {src}")
                img = None
                for _ in range(ent["frame"] + 1):  # sequential read: seeking is codec-dependent
                    ok, img = cap.read()
                    if not ok:
                        sys.exit(f"make_inputs: {src} has no frame {ent['frame']}")
                cap.release()
                os.makedirs(self.frames_dir, exist_ok=True)
                if not cv2.imwrite(path + ".tmp.png", img):
                    sys.exit(f"make_inputs: cannot write {path}")
                os.replace(path + ".tmp.png", path)
        else:
            path = src
        img = cv2.imread(path, cv2.IMREAD_COLOR)
        if img is None:
            sys.exit(f"make_inputs: cannot read {path}")
        self.cache[image_id] = (img, path)
        return img, path

    def get(self, image_id):
        """(pixels, path, crop or None, description)."""
        ent = self.spec[image_id]
        if "from" in ent:
            img, path = self.whole(ent["from"])
            x, y, w, h = ent["crop"]
            H, W = img.shape[:2]
            if x < 0 or y < 0 or w <= 0 or h <= 0 or x + w > W or y + h > H:
                sys.exit(f"make_inputs: crop {ent['crop']} of {image_id} outside {W}x{H}")
            return img[y:y + h, x:x + w], path, [x, y, w, h], ent
        img, path = self.whole(image_id)
        return img, path, None, ent


def letterbox(img, width, height, pad):
    """Ultralytics' LetterBox (ultralytics/data/augment.py, center=True), written from its source:
    r = min(h'/h, w'/w); new_unpad = round(w r), round(h r); the spare split in two, top/left
    round(d - 0.1), bottom/right round(d + 0.1); cv2.resize INTER_LINEAR on the 8-bit pixels;
    cv2.copyMakeBorder with (pad, pad, pad). Returns (image, {scale, left, top})."""
    h, w = img.shape[:2]
    r = min(height / h, width / w)
    new_w, new_h = int(round(w * r)), int(round(h * r))
    dw, dh = (width - new_w) / 2, (height - new_h) / 2
    if (w, h) != (new_w, new_h):
        img = cv2.resize(img, (new_w, new_h), interpolation=cv2.INTER_LINEAR)
    top, bottom = int(round(dh - 0.1)), int(round(dh + 0.1))
    left, right = int(round(dw - 0.1)), int(round(dw + 0.1))
    img = cv2.copyMakeBorder(img, top, bottom, left, right, cv2.BORDER_CONSTANT, value=(pad, pad, pad))
    return img, {"scale": r, "left": left, "top": top}


def preprocess(img, pp, dtype, layout):
    if "letterbox" in pp:
        img, _ = letterbox(img, int(pp["width"]), int(pp["height"]), int(pp["letterbox"]))
    x = img.astype(np.float32)
    x = cv2.resize(x, (int(pp["width"]), int(pp["height"])), interpolation=cv2.INTER_LINEAR)
    if pp.get("to_rgb", True):
        x = x[:, :, ::-1]
    x = x * np.float32(pp.get("scale", 1.0))
    mean = np.asarray(pp.get("mean", [0, 0, 0]), dtype=np.float32)
    std = np.asarray(pp.get("std", [1, 1, 1]), dtype=np.float32)
    x = (x - mean) / std
    if layout == "NCHW":  # ISNet: the original ONNX model takes NCHW
        x = x.transpose(2, 0, 1)
    x = x[np.newaxis]  # batch 1
    if dtype == "int32":
        return np.ascontiguousarray(np.rint(x).astype("<i4"))
    if dtype != "float32":
        sys.exit(f"make_inputs: unsupported tfjs_dtype {dtype}")
    return np.ascontiguousarray(x.astype("<f4"))


def write_tiles(mdir, i, image_id, pixels, path, pp, dtype, layout):
    """One item: the whole frame (rect null), then each tile, each a tensor of its own."""
    H, W = pixels.shape[:2]
    tensors = []
    for k, rect in enumerate([None] + plan_tiles(W, H, int(pp["width"]))):
        t = preprocess(pixels if rect is None else tile_pixels(pixels, rect, int(pp["width"])),
                       pp, dtype, layout)
        raw = t.tobytes()
        fname = f"{i}_{k}.raw"
        write_atomic(os.path.join(mdir, fname), raw)
        tensors.append({"rect": rect, "file": fname, "shape": list(t.shape), "dtype": dtype,
                        "sha256": sha256_bytes(raw)})
    return {"i": i, "id": image_id, "image": path, "width": W, "height": H, "tensors": tensors}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", required=True, help="FRAMEMILL_MODELS directory")
    ap.add_argument("--images", required=True, help="golden_images.json")
    ap.add_argument("--out", required=True, help="output directory (OUT_DIR/inputs)")
    ap.add_argument("--data-dir", default=None, help="overrides golden_images.json data_dir")
    args = ap.parse_args()

    with open(args.images, "rb") as f:
        spec_bytes = f.read()
    spec = json.loads(spec_bytes)
    data_dir = args.data_dir or spec["data_dir"]
    with open(os.path.abspath(__file__), "rb") as f:
        script_hash = sha256_bytes(f.read())
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    src = ImageSource(spec, data_dir, os.path.join(out, "frames"))

    done = []
    for name in MODEL_ORDER:
        if name not in spec["models"]:
            continue
        man = installed_manifest(args.models, TILED["model"] if name == "blazeface-tiled" else name)
        if man is None:
            print(f"make_inputs: {name}: not installed, skipped")
            continue
        inp = man["input"]
        pp = inp["preprocess"]
        dtype = inp.get("tfjs_dtype", "float32")
        layout = inp.get("tfjs_layout", "NHWC")
        if layout not in ("NHWC", "NCHW"):
            sys.exit(f"make_inputs: {name}: tfjs_layout {layout} unsupported")
        ids = spec["models"][name]
        key_src = json.dumps({"input": inp, "ids": ids,
                              "images": {i: spec["images"][i] for i in ids},
                              "parents": {spec["images"][i]["from"]: spec["images"][spec["images"][i]["from"]]
                                          for i in ids if "from" in spec["images"][i]},
                              "data_dir": data_dir, "script": script_hash,
                              "tiled": TILED if name == "blazeface-tiled" else None}, sort_keys=True)
        key = sha256_bytes(key_src.encode())
        mdir = os.path.join(out, name)
        index_path = os.path.join(mdir, "index.json")
        if os.path.isfile(index_path):
            with open(index_path) as f:
                old = json.load(f)
            files = [t["file"] for it in old["items"] for t in it.get("tensors", [it])]
            if old.get("key") == key and all(os.path.isfile(os.path.join(mdir, f)) for f in files):
                done.append(name)
                continue
        os.makedirs(mdir, exist_ok=True)
        items = []
        for i, image_id in enumerate(ids):
            pixels, path, crop, ent = src.get(image_id)
            if name == "blazeface-tiled":
                items.append(write_tiles(mdir, i, image_id, pixels, path, pp, dtype, layout))
                continue
            t = preprocess(pixels, pp, dtype, layout)
            raw = t.tobytes()
            fname = f"{i}.raw"
            write_atomic(os.path.join(mdir, fname), raw)
            items.append({"i": i, "id": image_id, "image": path, "crop": crop,
                          "source": os.path.join(data_dir, spec["images"][ent.get("from", image_id)]["file"]),
                          "frame": spec["images"][ent.get("from", image_id)].get("frame"),
                          "file": fname, "shape": list(t.shape), "dtype": dtype,
                          "sha256": sha256_bytes(raw),
                          "min": float(t.min()), "max": float(t.max())})
            if "letterbox" in pp:
                items[-1]["letterbox"] = letterbox(pixels, int(pp["width"]), int(pp["height"]),
                                                   int(pp["letterbox"]))[1]
                items[-1]["width"], items[-1]["height"] = pixels.shape[1], pixels.shape[0]
        index = {"model": name, "key": key, "layout": layout, "tfjs_name": inp.get("tfjs_name"),
                 "tfjs_dtype": dtype, "preprocess": pp,
                 "resize": "cv2.resize(float32 BGR, INTER_LINEAR) then to_rgb, x*scale, (x-mean)/std"
                           + ("; int32: rint" if dtype == "int32" else ""),
                 "items": items}
        write_atomic(index_path, (json.dumps(index, indent=1) + "\n").encode())
        done.append(name)
        print(f"make_inputs: {name}: {len(items)} inputs written")
    print("make_inputs: ready: " + (" ".join(done) if done else "(none)"))


if __name__ == "__main__":
    main()
