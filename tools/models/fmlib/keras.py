"""Keras layers model (TF.js layers format) -> the TF.js graph form tfjs.Converter converts.

A layers model is a Keras topology (model_config: layers with inbound_nodes) plus a weights
manifest. translate() writes each layer as the TF graph nodes TF.js would run for it (Conv2D,
DepthwiseConv2dNative, Pad, AddV2, ConcatV2, MaxPool, AvgPool, Mean, MatMul, Softmax, ...), named
after the layer so a layer's name is the node that holds its output. Batch normalisation that
follows a linear convolution read by nothing else is folded into the convolution's kernel and bias
(y = conv(x, k * s) + (b - mean) * s + beta with s = gamma / sqrt(var + eps)); any other one becomes
Mul and Add by per-channel constants (a folded convolution's node then holds the normalised
values, equal to its batch norm's). Dropout is the identity (inference).

nsfwjs ships its models as UMD `.min.js` files: the model JSON as a JavaScript object literal and
each weight shard as a base64 string literal. load_umd() reads those without running JavaScript.
"""
import base64
import json
import re

import numpy as np

from . import tfjs


class KerasError(Exception):
    pass


# ---------------------------------------------------------------- UMD .min.js files

_UMD_VALUE = re.compile(r"\.exports=(?=[{\"'\[])")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'')
_NUMBER = re.compile(r"-?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_IDENT = re.compile(r"[A-Za-z_$][\w$]*")
_WORDS = {"null": None, "true": True, "false": False, "!0": True, "!1": False, "void 0": None}


class _Literal:
    """Recursive-descent reader of the JSON-like JavaScript literal a minifier writes: unquoted
    keys, numbers such as .5 and -.5, !0/!1 for true/false."""

    def __init__(self, text, pos):
        self.s, self.i = text, pos

    def ws(self):
        while self.i < len(self.s) and self.s[self.i] in " \t\r\n":
            self.i += 1

    def value(self):
        self.ws()
        c = self.s[self.i]
        if c == "{":
            return self.obj()
        if c == "[":
            return self.arr()
        if c in "\"'":
            return self.string()
        for w, v in _WORDS.items():
            if self.s.startswith(w, self.i) and not re.match(r"[\w$]", self.s[self.i + len(w):self.i + len(w) + 1]):
                self.i += len(w)
                return v
        m = _NUMBER.match(self.s, self.i)
        if m:
            self.i = m.end()
            t = m.group()
            return float(t) if re.search(r"[.eE]", t) else int(t)
        raise KerasError(f"unexpected {self.s[self.i:self.i + 20]!r} at {self.i}")

    def string(self):
        m = _STRING.match(self.s, self.i)
        if not m:
            raise KerasError(f"unterminated string at {self.i}")
        self.i = m.end()
        t = m.group()
        if t[0] == "'":
            t = '"' + t[1:-1].replace('\\\'', "'").replace('"', '\\"') + '"'
        return json.loads(t)

    def expect(self, c):
        self.ws()
        if self.s[self.i] != c:
            raise KerasError(f"expected {c!r} at {self.i}, found {self.s[self.i:self.i + 20]!r}")
        self.i += 1

    def obj(self):
        self.expect("{")
        out = {}
        self.ws()
        if self.s[self.i] == "}":
            self.i += 1
            return out
        while True:
            self.ws()
            if self.s[self.i] in "\"'":
                key = self.string()
            else:
                m = _IDENT.match(self.s, self.i) or _NUMBER.match(self.s, self.i)
                if not m:
                    raise KerasError(f"bad key at {self.i}")
                key = m.group()
                self.i = m.end()
            self.expect(":")
            out[key] = self.value()
            if not self.more("}"):
                return out

    def arr(self):
        self.expect("[")
        out = []
        self.ws()
        if self.s[self.i] == "]":
            self.i += 1
            return out
        while True:
            out.append(self.value())
            if not self.more("]"):
                return out

    def more(self, close):
        """After an item: True past a comma (another item follows), False past `close`."""
        self.ws()
        if self.s[self.i] == ",":
            self.i += 1
            return True
        self.expect(close)
        return False


def load_umd(text):
    """The value a UMD bundle's module exports (`x.exports=<literal>`): a dict or a string."""
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    m = _UMD_VALUE.search(text)
    if not m:
        raise KerasError("no `.exports=<literal>` in the bundle")
    return _Literal(text, m.end()).value()


# ---------------------------------------------------------------- weights

def decode_weights(manifest, data):
    """{name: float32 array} from the concatenated shard bytes, dequantised as TF.js does
    (tfjs-core io decodeWeights: value * scale + min in double, stored as float32)."""
    out, off = {}, 0
    for group in manifest:
        for w in group["weights"]:
            if w.get("dtype", "float32") != "float32":
                raise KerasError(f"weight {w['name']}: dtype {w['dtype']} in a layers model")
            out[w["name"]], off = tfjs.decode_weight(w, data, off, precise=True)
    if off != len(data):
        raise KerasError(f"weights manifest covers {off} bytes, the shards hold {len(data)}")
    return out


def shard_bytes(shard_texts):
    """Concatenated weight bytes of UMD shard bundles (each exports a base64 string), in order."""
    return b"".join(base64.b64decode(load_umd(t)) for t in shard_texts)


# ---------------------------------------------------------------- topology -> graph nodes

def _b64(s):
    return base64.b64encode(s.encode()).decode()


def _ints(v):
    return {"list": {"i": [str(int(x)) for x in v]}}


def _str(s):
    return {"s": _b64(s)}


def _strs(v):
    return {"list": {"s": [_b64(x) for x in v]}}


def _pair(v):
    return [int(v), int(v)] if isinstance(v, (int, float)) else [int(x) for x in v]


class _Graph:
    def __init__(self):
        self.nodes, self.weights = [], {}

    def node(self, name, op, inputs, **attr):
        self.nodes.append({"name": name, "op": op, "input": list(inputs), "attr": attr})
        return name

    def const(self, name, arr):
        self.weights[name] = np.asarray(arr)
        return self.node(name, "Const", [], dtype={"type": "DT_INT32" if self.weights[name].dtype.kind == "i"
                                                   else "DT_FLOAT"})


ACTIVATIONS = {"relu": "Relu", "relu6": "Relu6", "sigmoid": "Sigmoid", "tanh": "Tanh", "elu": "Elu",
               "softmax": "Softmax"}


class Translator:
    """Keras topology + weights -> ({"modelTopology": {"node": [...]}}, weights) for tfjs.Converter."""

    SUPPORTED = {"InputLayer", "Conv2D", "DepthwiseConv2D", "BatchNormalization", "ReLU", "Activation",
                 "ZeroPadding2D", "Add", "Concatenate", "MaxPooling2D", "AveragePooling2D",
                 "GlobalAveragePooling2D", "Flatten", "Dense", "Dropout", "Softmax"}

    def __init__(self, topology, weights, model_name="model"):
        cfg = topology.get("model_config", topology)
        if cfg.get("class_name") not in ("Model", "Functional"):
            raise KerasError(f"{model_name}: model class {cfg.get('class_name')} (only functional models)")
        self.cfg = cfg["config"]
        self.layers = {l["name"]: l for l in self.cfg["layers"]}
        self.w = weights
        self.model = model_name
        self.g = _Graph()
        self.shapes = {}  # layer name -> NHWC / NC shape, batch -1
        self.folded = set()  # conv layers whose batch norm went into their kernel
        self.consumers = {}
        for l in self.cfg["layers"]:
            for src in self.inbound(l):
                self.consumers[src] = self.consumers.get(src, 0) + 1

    def inbound(self, layer):
        nodes = layer.get("inbound_nodes") or []
        if len(nodes) > 1:
            raise KerasError(f"{self.model}: layer {layer['name']} is called {len(nodes)} times (shared layers)")
        out = []
        for ref in (nodes[0] if nodes else []):
            if ref[1] != 0 or ref[2] != 0:
                raise KerasError(f"{self.model}: layer {layer['name']} reads {ref[0]}[{ref[1]}][{ref[2]}]")
            out.append(ref[0])
        return out

    def weight(self, layer, key):
        name = f"{layer}/{key}"
        if name not in self.w:
            raise KerasError(f"{self.model}: no weight {name}")
        return self.w[name].astype(np.float32)

    def input_name(self):
        (name, _, _), = self.cfg["input_layers"]
        return name

    def output_name(self):
        (name, _, _), = self.cfg["output_layers"]
        return name

    def translate(self):
        for l in self.cfg["layers"]:  # Keras writes the layers in topological order
            cls = l["class_name"]
            if cls not in self.SUPPORTED:
                raise tfjs.UnsupportedOp(f"Keras {cls}", l["name"])
            getattr(self, "layer_" + cls)(l, l["config"], self.inbound(l))
        return {"format": "graph-model", "modelTopology": {"node": self.g.nodes}}, self.g.weights

    def activation(self, name, act, x):
        """Node `name` = act(x)."""
        if act in (None, "linear"):
            return self.g.node(name, "Identity", [x])
        if act not in ACTIVATIONS:
            raise tfjs.UnsupportedOp(f"Keras activation {act}", name)
        return self.g.node(name, ACTIVATIONS[act], [x])

    # -- layers
    def layer_InputLayer(self, l, c, ins):
        shape = [-1 if d is None else int(d) for d in c["batch_input_shape"]]
        self.g.node(l["name"], "Placeholder", [], dtype={"type": "DT_FLOAT"},
                    shape={"shape": {"dim": [{"size": str(d)} for d in shape]}})
        self.shapes[l["name"]] = shape

    def _check_channels_last(self, l, c):
        if c.get("data_format", "channels_last") != "channels_last":
            raise tfjs.UnsupportedOp(f"Keras {l['class_name']}[{c['data_format']}]", l["name"])

    def _bn_params(self, bn):
        c = bn["config"]
        if c.get("axis", -1) not in (-1, 3, [3], [-1]):
            raise KerasError(f"{self.model}: batch norm {bn['name']} over axis {c['axis']}")
        mean = self.weight(bn["name"], "moving_mean").astype(np.float64)
        var = self.weight(bn["name"], "moving_variance").astype(np.float64)
        gamma = self.weight(bn["name"], "gamma").astype(np.float64) if c.get("scale", True) else np.ones_like(mean)
        beta = self.weight(bn["name"], "beta").astype(np.float64) if c.get("center", True) else np.zeros_like(mean)
        s = gamma / np.sqrt(var + float(c.get("epsilon", 1e-3)))
        return s, beta - mean * s

    def _foldable_bn(self, l):
        """The batch norm that alone reads this linear conv, or None."""
        if l["config"].get("activation", "linear") != "linear" or self.consumers.get(l["name"]) != 1:
            return None
        for other in self.cfg["layers"]:
            if other["class_name"] == "BatchNormalization" and self.inbound(other) == [l["name"]]:
                return other
        return None

    def _conv(self, l, c, ins, depthwise):
        self._check_channels_last(l, c)
        name, (x,) = l["name"], ins
        n, h, w, cin = self.shapes[x]
        kh, kw = _pair(c["kernel_size"])
        st, dil = _pair(c.get("strides", 1)), _pair(c.get("dilation_rate", 1))
        pad = c.get("padding", "valid").upper()
        if pad not in ("SAME", "VALID"):
            raise tfjs.UnsupportedOp(f"Keras {l['class_name']}(padding={pad})", name)
        if depthwise:
            k = self.weight(name, "depthwise_kernel")
            cout = cin * k.shape[3]
        else:
            k = self.weight(name, "kernel")
            cout = k.shape[3]
        b = self.weight(name, "bias") if c.get("use_bias", True) else None
        bn = self._foldable_bn(l)
        if bn is not None:
            s, t = self._bn_params(bn)
            if depthwise:  # [kh, kw, cin, mult]: output channel ci*mult + m
                k = (k.astype(np.float64) * s.reshape(cin, -1)).astype(np.float32)
            else:
                k = (k.astype(np.float64) * s).astype(np.float32)
            b = ((b if b is not None else 0.0) * s + t).astype(np.float32)
            self.folded.add(bn["name"])
        kname = self.g.const(f"{name}/kernel", k)
        if b is not None:
            op = "FusedDepthwiseConv2dNative" if depthwise else "_FusedConv2D"
            ins_ = [x, kname, self.g.const(f"{name}/bias", b)]
            fused = ["BiasAdd"]
        else:
            op = "DepthwiseConv2dNative" if depthwise else "Conv2D"
            ins_, fused = [x, kname], []
        attrs = dict(strides=_ints([1, st[0], st[1], 1]), padding=_str(pad), data_format=_str("NHWC"),
                     dilations=_ints([1, dil[0], dil[1], 1]))
        if fused:
            attrs["fused_ops"] = _strs(fused)
        act = c.get("activation", "linear")
        self.g.node(f"{name}/conv" if act not in (None, "linear") else name, op, ins_, **attrs)
        if act not in (None, "linear"):
            self.activation(name, act, f"{name}/conv")
        if pad == "SAME":
            oh, ow = -(-h // st[0]), -(-w // st[1])
        else:
            oh = (h - ((kh - 1) * dil[0] + 1)) // st[0] + 1
            ow = (w - ((kw - 1) * dil[1] + 1)) // st[1] + 1
        self.shapes[name] = [n, oh, ow, cout]

    def layer_Conv2D(self, l, c, ins):
        self._conv(l, c, ins, False)

    def layer_DepthwiseConv2D(self, l, c, ins):
        self._conv(l, c, ins, True)

    def layer_BatchNormalization(self, l, c, ins):
        name, (x,) = l["name"], ins
        self.shapes[name] = self.shapes[x]
        if name in self.folded:
            self.g.node(name, "Identity", [x])
            return
        s, t = self._bn_params(l)
        m = self.g.node(f"{name}/mul", "Mul", [x, self.g.const(f"{name}/scale", s.astype(np.float32))])
        self.g.node(name, "AddV2", [m, self.g.const(f"{name}/shift", t.astype(np.float32))])

    def layer_ReLU(self, l, c, ins):
        name, (x,) = l["name"], ins
        self.shapes[name] = self.shapes[x]
        mx, slope, thr = c.get("max_value"), float(c.get("negative_slope", 0) or 0), float(c.get("threshold", 0) or 0)
        if slope != 0 or thr != 0:
            raise tfjs.UnsupportedOp(f"Keras ReLU(negative_slope={slope}, threshold={thr})", name)
        if mx is None:
            self.g.node(name, "Relu", [x])
        elif float(mx) == 6.0:
            self.g.node(name, "Relu6", [x])
        else:
            raise tfjs.UnsupportedOp(f"Keras ReLU(max_value={mx})", name)

    def layer_Activation(self, l, c, ins):
        name, (x,) = l["name"], ins
        self.shapes[name] = self.shapes[x]
        self.activation(name, c["activation"], x)

    def layer_Softmax(self, l, c, ins):
        name, (x,) = l["name"], ins
        if c.get("axis", -1) not in (-1, len(self.shapes[x]) - 1):
            raise tfjs.UnsupportedOp(f"Keras Softmax(axis={c['axis']})", name)
        self.shapes[name] = self.shapes[x]
        self.g.node(name, "Softmax", [x])

    def layer_Dropout(self, l, c, ins):
        name, (x,) = l["name"], ins
        self.shapes[name] = self.shapes[x]
        self.g.node(name, "Identity", [x])

    def layer_ZeroPadding2D(self, l, c, ins):
        self._check_channels_last(l, c)
        name, (x,) = l["name"], ins
        p = c["padding"]
        if isinstance(p, (int, float)):
            p = [[p, p], [p, p]]
        elif isinstance(p[0], (int, float)):
            p = [[p[0], p[0]], [p[1], p[1]]]
        pads = np.array([[0, 0], p[0], p[1], [0, 0]], np.int32)
        self.g.node(name, "Pad", [x, self.g.const(f"{name}/paddings", pads)])
        n, h, w, ch = self.shapes[x]
        self.shapes[name] = [n, h + int(pads[1].sum()), w + int(pads[2].sum()), ch]

    def layer_Add(self, l, c, ins):
        name = l["name"]
        if len(ins) < 2:
            raise KerasError(f"{self.model}: Add {name} has {len(ins)} inputs")
        self.shapes[name] = self.shapes[ins[0]]
        if len(ins) == 2:
            self.g.node(name, "AddV2", ins)
        else:
            self.g.node(name, "AddN", ins)

    def layer_Concatenate(self, l, c, ins):
        name = l["name"]
        rank = len(self.shapes[ins[0]])
        axis = int(c.get("axis", -1)) % rank
        shape = list(self.shapes[ins[0]])
        shape[axis] = sum(self.shapes[i][axis] for i in ins)
        self.shapes[name] = shape
        self.g.node(name, "ConcatV2", ins + [self.g.const(f"{name}/axis", np.array(axis, np.int32))])

    def _pool(self, l, c, ins, op):
        self._check_channels_last(l, c)
        name, (x,) = l["name"], ins
        n, h, w, ch = self.shapes[x]
        k = _pair(c.get("pool_size", 2))
        st = _pair(c.get("strides") or k)
        pad = c.get("padding", "valid").upper()
        if op == "AvgPool" and pad == "VALID" and k == [h, w]:
            # One window over the whole map: global average pooling, the form cv::dnn runs best.
            self.g.node(name, "Mean", [x, self.g.const(f"{name}/axes", np.array([1, 2], np.int32))],
                        keep_dims={"b": True})
            self.shapes[name] = [n, 1, 1, ch]
            return
        self.g.node(name, op, [x], ksize=_ints([1, k[0], k[1], 1]), strides=_ints([1, st[0], st[1], 1]),
                    padding=_str(pad), data_format=_str("NHWC"))
        if pad == "SAME":
            self.shapes[name] = [n, -(-h // st[0]), -(-w // st[1]), ch]
        else:
            self.shapes[name] = [n, (h - k[0]) // st[0] + 1, (w - k[1]) // st[1] + 1, ch]

    def layer_MaxPooling2D(self, l, c, ins):
        self._pool(l, c, ins, "MaxPool")

    def layer_AveragePooling2D(self, l, c, ins):
        self._pool(l, c, ins, "AvgPool")

    def layer_GlobalAveragePooling2D(self, l, c, ins):
        self._check_channels_last(l, c)
        name, (x,) = l["name"], ins
        keep = bool(c.get("keepdims", False))
        self.g.node(name, "Mean", [x, self.g.const(f"{name}/axes", np.array([1, 2], np.int32))],
                    keep_dims={"b": keep})
        n, _, _, ch = self.shapes[x]
        self.shapes[name] = [n, 1, 1, ch] if keep else [n, ch]

    def layer_Flatten(self, l, c, ins):
        self._check_channels_last(l, c)
        name, (x,) = l["name"], ins
        size = int(np.prod(self.shapes[x][1:]))
        self.g.node(name, "Reshape", [x, self.g.const(f"{name}/shape", np.array([-1, size], np.int32))])
        self.shapes[name] = [self.shapes[x][0], size]

    def layer_Dense(self, l, c, ins):
        name, (x,) = l["name"], ins
        if len(self.shapes[x]) != 2:
            raise tfjs.UnsupportedOp(f"Keras Dense on rank {len(self.shapes[x])}", name)
        k = self.weight(name, "kernel")
        ins_ = [x, self.g.const(f"{name}/kernel", k)]
        fused = []
        if c.get("use_bias", True):
            ins_.append(self.g.const(f"{name}/bias", self.weight(name, "bias")))
            fused.append("BiasAdd")
        act = c.get("activation", "linear")
        if act in ("relu", "relu6", "elu"):
            fused.append(ACTIVATIONS[act])
            act = "linear"
        linear = act in (None, "linear")
        self.g.node(name if linear else f"{name}/matmul", "_FusedMatMul", ins_, fused_ops=_strs(fused),
                    transpose_a={"b": False}, transpose_b={"b": False})
        if not linear:
            self.activation(name, act, f"{name}/matmul")
        self.shapes[name] = [self.shapes[x][0], k.shape[1]]


def translate(topology, weights, model_name="model"):
    """(graph model JSON for tfjs.Converter, its weights, input node name, output node name)."""
    t = Translator(topology, weights, model_name)
    mj, w = t.translate()
    return mj, w, t.input_name(), t.output_name()


def convert_layers(topology, weights, model_name, outputs, batchable):
    """outputs: [(onnx name, Keras layer name)]; returns (onnx.ModelProto, [(name, TF shape)])."""
    mj, w, inp, _ = translate(topology, weights, model_name)
    return tfjs.convert_tfjs(mj, w, model_name, inp, outputs, batchable)
