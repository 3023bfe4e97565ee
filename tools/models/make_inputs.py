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

MODEL_ORDER = ["mobilefacenet", "blazeface", "selfie", "movenet-lightning", "faceres",
               "blazepose-full", "centernet", "isnet"]


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


def preprocess(img, pp, dtype, layout):
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
        man = installed_manifest(args.models, name)
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
                              "data_dir": data_dir, "script": script_hash}, sort_keys=True)
        key = sha256_bytes(key_src.encode())
        mdir = os.path.join(out, name)
        index_path = os.path.join(mdir, "index.json")
        if os.path.isfile(index_path):
            with open(index_path) as f:
                old = json.load(f)
            if old.get("key") == key and all(
                    os.path.isfile(os.path.join(mdir, it["file"])) for it in old["items"]):
                done.append(name)
                continue
        os.makedirs(mdir, exist_ok=True)
        items = []
        for i, image_id in enumerate(ids):
            pixels, path, crop, ent = src.get(image_id)
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
