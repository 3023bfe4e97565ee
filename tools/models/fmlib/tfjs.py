"""TF.js graph model -> ONNX (opset 11) in the forms OpenCV 4.6's cv::dnn importer accepts.

The whole ONNX graph is NCHW: every 4-D TF tensor (NHWC) is carried transposed, and 4-D
outputs get a Transpose back to NHWC so outputs equal the TF.js tensors element by element.
Only the nodes the requested outputs depend on are converted, which is how decode tails are cut.
"""
import base64
import json
import os

import numpy as np
import onnx
from onnx import helper, numpy_helper, TensorProto


class UnsupportedOp(Exception):
    def __init__(self, op, node):
        super().__init__(f"unsupported TF.js op '{op}' (node '{node}')")
        self.op = op
        self.node = node


class ConvertError(Exception):
    pass


# ---------------------------------------------------------------- loading

_QDTYPES = {"float16": np.float16, "uint8": np.uint8, "uint16": np.uint16}
_DTYPES = {"float32": np.float32, "int32": np.int32, "bool": np.bool_}


def decode_weight(w, data, off, precise=False):
    """One weightsManifest entry from `data` at byte `off`: (fp32/int32 array, next offset).
    Quantised values are value * scale + min; `precise` computes it in double before storing
    float32, as tfjs-core's io.decodeWeights does for layers models, else in float32."""
    shape = [int(s) for s in w["shape"]]
    count = int(np.prod(shape)) if shape else 1
    q = w.get("quantization")
    if q:
        qdt = np.dtype(_QDTYPES[q["dtype"]])
        raw = np.frombuffer(data, dtype=qdt, count=count, offset=off)
        off += count * qdt.itemsize
        if q["dtype"] == "float16":
            val = raw.astype(np.float32)
        elif precise:
            val = (raw.astype(np.float64) * q["scale"] + q["min"]).astype(np.float32)
        else:
            val = raw.astype(np.float32) * np.float32(q["scale"]) + np.float32(q["min"])
        if w.get("dtype") == "int32":
            val = np.round(val).astype(np.int32)
    else:
        dt = np.dtype(_DTYPES[w["dtype"]])
        val = np.frombuffer(data, dtype=dt, count=count, offset=off).copy()
        off += count * dt.itemsize
    return val.reshape(shape), off


def load_weights(model_json, bin_dir):
    """Return {name: np.ndarray} with quantised / fp16 weights dequantised to fp32."""
    out = {}
    for group in model_json["weightsManifest"]:
        data = b"".join(open(os.path.join(bin_dir, p), "rb").read() for p in group["paths"])
        off = 0
        for w in group["weights"]:
            out[w["name"]], off = decode_weight(w, data, off)
    return out


def _attr(node, key, default=None):
    a = node.get("attr", {}).get(key)
    if a is None:
        return default
    if "list" in a:
        lst = a["list"]
        if "i" in lst:
            return [int(x) for x in lst["i"]]
        if "s" in lst:
            return [base64.b64decode(x).decode() for x in lst["s"]]
        if "f" in lst:
            return [float(x) for x in lst["f"]]
        return []
    if "s" in a:
        return base64.b64decode(a["s"]).decode()
    if "i" in a:
        return int(a["i"])
    if "f" in a:
        return float(a["f"])
    if "b" in a:
        return bool(a["b"])
    if "type" in a:
        return a["type"]
    if "shape" in a:
        return [int(d.get("size", -1)) for d in a["shape"].get("dim", [])]
    return default


def _split_ref(ref):
    if ref.startswith("^"):
        return None, 0
    if ":" in ref:
        n, i = ref.rsplit(":", 1)
        return n, int(i)
    return ref, 0


# ---------------------------------------------------------------- values

class Val:
    """A converted TF tensor: a numpy constant, or an ONNX tensor name.

    shape is the TF (NHWC) shape with batch taken as 1; nchw says the ONNX tensor is the
    NCHW transpose of the 4-D TF tensor."""

    def __init__(self, name=None, shape=None, nchw=False, const=None):
        self.name, self.shape, self.nchw, self.const = name, list(shape) if shape is not None else None, nchw, const
        if const is not None and self.shape is None:
            self.shape = list(const.shape)

    @property
    def is_const(self):
        return self.const is not None


NHWC2NCHW = [0, 3, 1, 2]
NCHW2NHWC = [0, 2, 3, 1]


def same_pads(in_hw, k_hw, s_hw, d_hw):
    """TF 'SAME' padding: returns ([top, left], [bottom, right])."""
    begin, end = [], []
    for i, k, s, d in zip(in_hw, k_hw, s_hw, d_hw):
        ek = (k - 1) * d + 1
        out = -(-i // s)
        total = max((out - 1) * s + ek - i, 0)
        begin.append(total // 2)
        end.append(total - total // 2)
    return begin, end


def conv_out(i, k, s, d, pb, pe):
    return (i + pb + pe - ((k - 1) * d + 1)) // s + 1


class Converter:
    SUPPORTED = {
        "Placeholder", "Const", "Identity", "_FusedConv2D", "Conv2D", "DepthwiseConv2dNative",
        "FusedDepthwiseConv2dNative", "MaxPool", "AvgPool", "Pad", "PadV2", "Add", "AddV2", "AddN",
        "Sub", "Mul", "RealDiv", "Maximum", "Minimum", "SquaredDifference", "Relu", "Relu6",
        "Sigmoid", "Abs", "Sqrt", "Rsqrt", "Square", "Softmax", "Mean", "Sum", "Squeeze", "Reshape",
        "ResizeBilinear", "Conv2DBackpropInput", "_FusedMatMul", "MatMul", "ConcatV2", "Cast",
        "ExpandDims", "Tanh", "LeakyRelu", "Elu", "BiasAdd", "Shape", "StridedSlice", "Pack",
        "Prelu",
    }

    def __init__(self, model_json, weights, model_name="model"):
        self.mj = model_json
        self.w = weights
        self.model = model_name
        self.nodes = {n["name"]: n for n in model_json["modelTopology"]["node"]}
        self.vals = {}
        self.onnx_nodes = []
        self.inits = []
        self.init_names = set()
        self.uid = 0

    # -- helpers
    def fresh(self, base):
        self.uid += 1
        return f"{base}__{self.uid}"

    def add_init(self, arr, base):
        name = self.fresh(base)
        if arr.dtype in (np.int32, np.int64):
            arr = arr.astype(np.int64)
        else:
            arr = arr.astype(np.float32)
        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(arr), name))
        self.init_names.add(name)
        return name

    def emit(self, op, inputs, base, n_out=1, **attrs):
        outs = [self.fresh(base) for _ in range(n_out)]
        self.onnx_nodes.append(helper.make_node(op, inputs, outs, name=outs[0], **attrs))
        return outs if n_out > 1 else outs[0]

    def val(self, ref):
        name, idx = _split_ref(ref)
        v = self.vals.get((name, idx))
        if v is None:
            self.convert_node(name)
            v = self.vals.get((name, idx))
        if v is None:
            raise ConvertError(f"{self.model}: no value for '{ref}'")
        return v

    def to_nhwc(self, v):
        if v.is_const or not v.nchw:
            return v
        return Val(self.emit("Transpose", [v.name], "to_nhwc", perm=NCHW2NHWC), v.shape, False)

    def to_nchw(self, v):
        if v.is_const:
            return v
        if v.nchw or len(v.shape) != 4:
            return v
        return Val(self.emit("Transpose", [v.name], "to_nchw", perm=NHWC2NCHW), v.shape, True)

    def const_for(self, arr, other, base):
        """Initializer name for a constant broadcast against a tensor with the other's layout."""
        arr = np.asarray(arr)
        if other.nchw and arr.ndim > 0:
            a4 = arr.reshape([1] * (4 - arr.ndim) + list(arr.shape))
            arr = a4.transpose(NHWC2NCHW)
            if arr.shape[0] == 1:
                # [C,1,1], not [1,C,1,1]: cv::dnn takes a 4-D constant shaped like the batch-1
                # input as a second batch-1 input, which breaks batch > 1.
                arr = arr[0]
        return self.add_init(arr.astype(np.float32), base)

    # -- main
    def convert(self, input_node, outputs, input_bind=None, input_shape=None):
        """outputs: list of (onnx_name, tf_ref). input_bind: TF node the ONNX input replaces.
        input_shape: the NHWC shape to fix where the graph's input has free dimensions."""
        ph = self.nodes[input_node]
        shape = list(input_shape) if input_shape else _attr(ph, "shape")
        self.in_shape_tf = [1 if s < 0 else s for s in shape]
        self.batch_dynamic = shape[0] < 0
        self.vals[(input_bind or input_node, 0)] = Val("input", self.in_shape_tf, nchw=True)
        out_infos, renames = [], []
        for oname, ref in outputs:
            v = self.val(ref)
            if v.is_const:
                raise ConvertError(f"{self.model}: output {ref} is constant")
            if v.nchw:
                v = Val(self.emit("Transpose", [v.name], "out", perm=NCHW2NHWC), v.shape, False)
            renames.append((v.name, oname))
            out_infos.append((oname, v.shape))
        # After all outputs are converted: later outputs may read tensors an earlier one renames.
        for old, new in renames:
            self.rename(old, new)
        return out_infos

    def rename(self, old, new):
        for n in self.onnx_nodes:
            for i, x in enumerate(n.output):
                if x == old:
                    n.output[i] = new
                    if n.name == old:
                        n.name = new
            for i, x in enumerate(n.input):
                if x == old:
                    n.input[i] = new

    def fold_bias(self, outputs):
        """Fold Add(Conv(x), per-channel constant) into the Conv's bias."""
        inits = {t.name: t for t in self.inits}
        consumers = {}
        for n in self.onnx_nodes:
            for x in n.input:
                consumers[x] = consumers.get(x, 0) + 1
        producer = {n.output[0]: n for n in self.onnx_nodes}
        drop = set()
        for n in self.onnx_nodes:
            if n.op_type != "Add" or n.input[1] not in inits:
                continue
            conv = producer.get(n.input[0])
            if conv is None or conv.op_type not in ("Conv", "ConvTranspose") or consumers[conv.output[0]] != 1:
                continue
            w = numpy_helper.to_array(inits[conv.input[1]])
            if conv.output[0] in outputs:
                continue
            cout = w.shape[0] if conv.op_type == "Conv" else w.shape[1]
            k = numpy_helper.to_array(inits[n.input[1]])
            if not (k.size == 1 or (k.shape[0] == cout and k.size == cout)):
                continue
            bias = k.reshape(-1) * np.ones(cout, np.float32)
            if len(conv.input) > 2:
                bias = bias + numpy_helper.to_array(inits[conv.input[2]])
                inits[conv.input[2]].CopyFrom(numpy_helper.from_array(bias.astype(np.float32), conv.input[2]))
            else:
                conv.input.append(self.add_init(bias, "B"))
                inits = {t.name: t for t in self.inits}
            conv.output[0] = n.output[0]
            conv.name = n.output[0]
            drop.add(id(n))
        self.onnx_nodes = [n for n in self.onnx_nodes if id(n) not in drop]
        used = {x for n in self.onnx_nodes for x in n.input}
        self.inits = [t for t in self.inits if t.name in used]

    def build(self, out_infos, batchable, opset=11):
        self.fold_bias({name for name, _ in out_infos})
        n, c, h, w = 1, self.in_shape_tf[3], self.in_shape_tf[1], self.in_shape_tf[2]
        bdim = "N" if batchable else 1
        inp = helper.make_tensor_value_info("input", TensorProto.FLOAT, [bdim, c, h, w])
        outs = []
        for name, shape in out_infos:
            s = list(shape)
            s[0] = bdim
            outs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, s))
        g = helper.make_graph(self.onnx_nodes, self.model, [inp], outs, self.inits)
        m = helper.make_model(g, producer_name="framemill-convert",
                              opset_imports=[helper.make_opsetid("", opset)])
        m.ir_version = 6
        return m

    # -- node conversion
    def convert_node(self, name):
        node = self.nodes.get(name)
        if node is None:
            raise ConvertError(f"{self.model}: unknown node '{name}'")
        op = node["op"]
        if op not in self.SUPPORTED:
            raise UnsupportedOp(op, name)
        if op == "Const":
            self.vals[(name, 0)] = Val(const=self.const_value(node))
            return
        if op == "Placeholder":
            raise ConvertError(f"{self.model}: placeholder '{name}' is not the model input")
        ins = [r for r in node.get("input", []) if not r.startswith("^")]
        args = [self.val(r) for r in ins]
        fn = getattr(self, "op_" + op.lstrip("_"))
        res = fn(node, args)
        if isinstance(res, Val):
            res = [res]
        for i, r in enumerate(res):
            self.vals[(name, i)] = r

    def const_value(self, node):
        name = node["name"]
        if name in self.w:
            return self.w[name]
        t = node["attr"]["value"]["tensor"]
        dims = [int(d["size"]) for d in t.get("tensorShape", {}).get("dim", [])]
        dt = t.get("dtype")
        if "intVal" in t:
            return np.full(dims, int(t["intVal"][0]), np.int32)
        if "floatVal" in t:
            return np.full(dims, float(t["floatVal"][0]), np.float32)
        if "tensorContent" in t:
            raw = base64.b64decode(t["tensorContent"])
            return np.frombuffer(raw, np.int32 if dt == "DT_INT32" else np.float32).reshape(dims)
        raise ConvertError(f"{self.model}: constant '{name}' has no data")

    def _prelu(self, node, x, alpha):
        """PReLU as Relu(x) + alpha * Min(x, 0): ops both cv::dnn and our engine run (the
        engine has no per-channel PRelu kernel). `alpha` is a constant Val, per channel."""
        if not alpha.is_const:
            raise UnsupportedOp("Prelu(non-constant alpha)", node["name"])
        pos = Val(self.emit("Relu", [x.name], "prelu_pos"), x.shape, x.nchw)
        neg = Val(self.emit("Clip", [x.name], "prelu_neg", min=-3.4e38, max=0.0), x.shape, x.nchw)
        scaled = self._binary(node, [neg, Val(const=np.asarray(alpha.const, np.float32))], "Mul", True)
        return self._binary(node, [pos, scaled], "Add", True)

    def op_Prelu(self, node, args):
        return self._prelu(node, args[0], args[1])

    def _fused_tail(self, x, node, fused, base, extra=None):
        for f in fused:
            if f == "BiasAdd":
                continue
            elif f == "Prelu":
                x = self._prelu(node, x, extra)
            elif f == "Relu":
                x = Val(self.emit("Relu", [x.name], base), x.shape, x.nchw)
            elif f == "Relu6":
                x = Val(self.emit("Clip", [x.name], base, min=0.0, max=6.0), x.shape, x.nchw)
            elif f == "Elu":
                x = Val(self.emit("Elu", [x.name], base), x.shape, x.nchw)
            else:
                raise UnsupportedOp(f"{node['op']}+{f}", node["name"])
        return x

    def _padding(self, node, in_hw, k_hw, s_hw, d_hw):
        pad = _attr(node, "padding", "VALID")
        if pad == "SAME":
            b, e = same_pads(in_hw, k_hw, s_hw, d_hw)
        elif pad == "VALID":
            b, e = [0, 0], [0, 0]
        elif pad == "EXPLICIT":
            ep = _attr(node, "explicit_paddings")
            b, e = [ep[2], ep[4]], [ep[3], ep[5]]
        else:
            raise ConvertError(f"{self.model}: padding {pad}")
        return b, e

    def _check_nhwc(self, node):
        df = _attr(node, "data_format", "NHWC")
        if df not in ("NHWC", None, ""):
            raise UnsupportedOp(f"{node['op']}[{df}]", node["name"])

    def _conv(self, node, args, depthwise):
        self._check_nhwc(node)
        x = self.to_nchw(args[0])
        wt = args[1].const
        if wt is None:
            raise ConvertError(f"{self.model}: non-constant filter in {node['name']}")
        kh, kw = wt.shape[0], wt.shape[1]
        s = _attr(node, "strides", [1, 1, 1, 1])[1:3]
        d = _attr(node, "dilations", [1, 1, 1, 1])[1:3]
        b, e = self._padding(node, x.shape[1:3], [kh, kw], s, d)
        cin = x.shape[3]
        if depthwise:
            mult = wt.shape[3]
            w = wt.reshape(kh, kw, cin * mult).transpose(2, 0, 1)[:, None, :, :]
            cout, group = cin * mult, cin
        else:
            w = wt.transpose(3, 2, 0, 1)
            cout, group = wt.shape[3], 1
        inputs = [x.name, self.add_init(w, "W")]
        fused = _attr(node, "fused_ops", []) or []
        if "BiasAdd" in fused:
            inputs.append(self.add_init(args[2].const.reshape(-1), "B"))
        elif fused:
            raise UnsupportedOp(f"{node['op']}+{','.join(fused)}", node["name"])
        oh = conv_out(x.shape[1], kh, s[0], d[0], b[0], e[0])
        ow = conv_out(x.shape[2], kw, s[1], d[1], b[1], e[1])
        y = self.emit("Conv", inputs, "conv", kernel_shape=[kh, kw], strides=s, dilations=d,
                      pads=[b[0], b[1], e[0], e[1]], group=group)
        out = Val(y, [x.shape[0], oh, ow, cout], True)
        return self._fused_tail(out, node, [f for f in fused if f != "BiasAdd"], "act",
                                args[3] if len(args) > 3 else None)

    def op_FusedConv2D(self, node, args):
        return self._conv(node, args, False)

    def op_Conv2D(self, node, args):
        return self._conv(node, args, False)

    def op_DepthwiseConv2dNative(self, node, args):
        return self._conv(node, args, True)

    def op_FusedDepthwiseConv2dNative(self, node, args):
        return self._conv(node, args, True)

    def op_Conv2DBackpropInput(self, node, args):
        self._check_nhwc(node)
        out_size = args[0].const
        wt = args[1].const  # [kh, kw, out_c, in_c]
        x = self.to_nchw(args[2])
        kh, kw, oc, ic = wt.shape
        s = _attr(node, "strides", [1, 1, 1, 1])[1:3]
        oh, ow = int(out_size[1]), int(out_size[2])
        pads_b, pads_e, opad = [], [], []
        for i, k, st, o in zip(x.shape[1:3], (kh, kw), s, (oh, ow)):
            full = (i - 1) * st + k
            if _attr(node, "padding") == "SAME":
                b, _ = same_pads([o], [k], [st], [1])
                b = b[0]
            else:
                b = 0
            total = full - o
            e = total - b
            if e < 0:
                opad.append(-e)
                e = 0
            else:
                opad.append(0)
            pads_b.append(b)
            pads_e.append(e)
        w = wt.transpose(3, 2, 0, 1)  # [in_c, out_c, kh, kw]
        attrs = dict(kernel_shape=[kh, kw], strides=s, pads=pads_b + pads_e)
        if any(opad):
            attrs["output_padding"] = opad
        y = self.emit("ConvTranspose", [x.name, self.add_init(w, "W")], "deconv", **attrs)
        return Val(y, [x.shape[0], oh, ow, oc], True)

    def _pool(self, node, args, op):
        self._check_nhwc(node)
        x = self.to_nchw(args[0])
        k = _attr(node, "ksize")[1:3]
        s = _attr(node, "strides")[1:3]
        b, e = self._padding(node, x.shape[1:3], k, s, [1, 1])
        attrs = dict(kernel_shape=k, strides=s, pads=[b[0], b[1], e[0], e[1]])
        if op == "AveragePool":
            attrs["count_include_pad"] = 0
        y = self.emit(op, [x.name], "pool", **attrs)
        oh = conv_out(x.shape[1], k[0], s[0], 1, b[0], e[0])
        ow = conv_out(x.shape[2], k[1], s[1], 1, b[1], e[1])
        return Val(y, [x.shape[0], oh, ow, x.shape[3]], True)

    def op_MaxPool(self, node, args):
        return self._pool(node, args, "MaxPool")

    def op_AvgPool(self, node, args):
        return self._pool(node, args, "AveragePool")

    def op_Pad(self, node, args):
        x = args[0]
        p = np.asarray(args[1].const).astype(np.int64)
        value = float(args[2].const) if len(args) > 2 else 0.0
        if x.is_const:
            return Val(const=np.pad(x.const, p, constant_values=value))
        if len(x.shape) == 4:
            x = self.to_nchw(x)
            p = p[NHWC2NCHW]
        pads = np.concatenate([p[:, 0], p[:, 1]])
        y = self.emit("Pad", [x.name, self.add_init(pads, "pads"), self.add_init(np.array(value, np.float32), "pv")],
                      "pad", mode="constant")
        shape = [d + int(a) + int(bb) for d, (a, bb) in zip(args[0].shape, np.asarray(args[1].const))]
        return Val(y, shape, x.nchw)

    op_PadV2 = op_Pad

    # elementwise
    def _binary(self, node, args, op, commutative):
        a, b = args
        if a.is_const and b.is_const:
            f = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide,
                 "Max": np.maximum, "Min": np.minimum}[op]
            return Val(const=f(a.const, b.const))
        shape = list(np.broadcast_shapes(tuple(a.shape), tuple(b.shape)))
        if a.is_const and commutative:
            a, b = b, a
        if b.is_const:
            c = np.asarray(b.const, np.float32)
            if op == "Sub":
                op, c = "Add", -c
            elif op == "Div":
                op, c = "Mul", (1.0 / c).astype(np.float32)
            if op in ("Max", "Min") and c.size == 1:
                kw = {"min": float(c.reshape(-1)[0])} if op == "Max" else {"max": float(c.reshape(-1)[0])}
                return Val(self.emit("Clip", [a.name], "clip", **kw), shape, a.nchw)
            if a.nchw and c.ndim > 4:
                raise ConvertError("rank > 4 constant")
            if not a.nchw and len(shape) == 4 and len(a.shape) == 4:
                a = self.to_nchw(a)
            y = self.emit(op, [a.name, self.const_for(c, a, "k")], op.lower())
            return Val(y, shape, a.nchw)
        if a.is_const:  # non-commutative with const first: c - x, c / x
            if op == "Sub":
                neg = self.emit("Neg", [b.name], "neg")
                bb = Val(neg, b.shape, b.nchw)
                return Val(self.emit("Add", [neg, self.const_for(a.const, bb, "k")], "add"), shape, b.nchw)
            raise UnsupportedOp(f"{node['op']}(const, tensor)", node["name"])
        # both tensors
        if len(a.shape) == 4 and len(b.shape) == 4:
            a, b = self.to_nchw(a), self.to_nchw(b)
            nchw = True
        else:
            a, b = self.to_nhwc(a), self.to_nhwc(b)
            nchw = False
        return Val(self.emit(op, [a.name, b.name], op.lower()), shape, nchw)

    def op_Add(self, node, args):
        return self._binary(node, args, "Add", True)

    op_AddV2 = op_Add
    op_BiasAdd = op_Add

    def op_Sub(self, node, args):
        return self._binary(node, args, "Sub", False)

    def op_Mul(self, node, args):
        return self._binary(node, args, "Mul", True)

    def op_RealDiv(self, node, args):
        return self._binary(node, args, "Div", False)

    def op_Maximum(self, node, args):
        return self._binary(node, args, "Max", True)

    def op_Minimum(self, node, args):
        return self._binary(node, args, "Min", True)

    def op_SquaredDifference(self, node, args):
        d = self._binary(node, args, "Sub", False)
        if d.is_const:
            return Val(const=d.const * d.const)
        return Val(self.emit("Mul", [d.name, d.name], "sq"), d.shape, d.nchw)

    def op_AddN(self, node, args):
        acc = args[0]
        for b in args[1:]:
            acc = self._binary(node, [acc, b], "Add", True)
        return acc

    def _unary(self, args, op, **attrs):
        x = args[0]
        return Val(self.emit(op, [x.name], op.lower(), **attrs), x.shape, x.nchw)

    def op_Relu(self, node, args):
        return self._unary(args, "Relu")

    def op_Relu6(self, node, args):
        return self._unary(args, "Clip", min=0.0, max=6.0)

    def op_Sigmoid(self, node, args):
        return self._unary(args, "Sigmoid")

    def op_Tanh(self, node, args):
        return self._unary(args, "Tanh")

    def op_Elu(self, node, args):
        return self._unary(args, "Elu")

    def op_LeakyRelu(self, node, args):
        return self._unary(args, "LeakyRelu", alpha=float(_attr(node, "alpha", 0.2)))

    def op_Abs(self, node, args):
        return self._unary(args, "Abs")

    def op_Sqrt(self, node, args):
        return self._unary(args, "Sqrt")

    def op_Rsqrt(self, node, args):
        s = self._unary(args, "Sqrt")
        return self._unary([s], "Reciprocal")

    def op_Square(self, node, args):
        x = args[0]
        return Val(self.emit("Mul", [x.name, x.name], "sq"), x.shape, x.nchw)

    def op_Identity(self, node, args):
        return args[0]

    def op_Cast(self, node, args):
        x = args[0]
        if x.is_const:
            dst = _attr(node, "DstT")
            return Val(const=x.const.astype(np.float32 if dst == "DT_FLOAT" else np.int32))
        if _attr(node, "DstT") == "DT_FLOAT" and _attr(node, "SrcT") == "DT_FLOAT":
            return x
        raise UnsupportedOp("Cast", node["name"])

    def op_Softmax(self, node, args):
        x = self.to_nhwc(args[0])
        return Val(self.emit("Softmax", [x.name], "softmax", axis=len(x.shape) - 1), x.shape, False)

    def _reduce(self, node, args, op):
        x = args[0]
        axes = [int(a) % len(x.shape) for a in np.asarray(args[1].const).reshape(-1)]
        keep = bool(_attr(node, "keep_dims", False))
        shape = [1 if i in axes else d for i, d in enumerate(x.shape)] if keep else \
            [d for i, d in enumerate(x.shape) if i not in axes]
        if x.nchw and sorted(axes) == [1, 2] and op == "ReduceMean":
            # Global pooling is the form cv::dnn handles best.
            y = self.emit("GlobalAveragePool", [x.name], "gap")
            if keep:
                return Val(y, shape, True)
            return Val(self.emit("Flatten", [y], "flat", axis=1), shape, False)
        if x.nchw:
            axes_onnx = sorted([NHWC2NCHW.index(a) for a in axes])
            remaining = [NCHW2NHWC[i] for i in range(4)]
            if keep:
                return Val(self.emit(op, [x.name], "red", axes=axes_onnx, keepdims=1), shape, True)
            # dropping axes: order of survivors in NCHW must equal their order in NHWC
            surv_nchw = [NCHW2NHWC[i] for i in range(4) if i not in axes_onnx]
            if surv_nchw != sorted(surv_nchw):
                x = self.to_nhwc(x)
                axes_onnx = axes
            return Val(self.emit(op, [x.name], "red", axes=axes_onnx, keepdims=0), shape, False)
        return Val(self.emit(op, [x.name], "red", axes=axes, keepdims=int(keep)), shape, False)

    def op_Mean(self, node, args):
        return self._reduce(node, args, "ReduceMean")

    def op_Sum(self, node, args):
        return self._reduce(node, args, "ReduceSum")

    def _reshape_to(self, x, shape, base):
        if x.is_const:
            return Val(const=x.const.reshape(shape))
        if x.nchw and len(shape) == 2 and shape[1] == int(np.prod(x.shape[1:])) and \
                (x.shape[1] == 1 and x.shape[2] == 1 or x.shape[3] == 1):
            # NCHW and NHWC hold the same order when only one of H*W or C is not 1.
            return Val(self.emit("Flatten", [x.name], base, axis=1), shape, False)
        x = self.to_nhwc(x)
        tgt = list(shape)
        if tgt[0] == x.shape[0] == 1:
            tgt[0] = 0 if -1 in tgt[1:] else -1  # keep batch dynamic
        return Val(self.emit("Reshape", [x.name, self.add_init(np.array(tgt, np.int64), "shape")], base),
                   shape, False)

    def op_Reshape(self, node, args):
        x = args[0]
        tgt = [int(v) for v in np.asarray(args[1].const).reshape(-1)]
        total = int(np.prod(x.shape))
        if -1 in tgt:
            known = int(np.prod([t for t in tgt if t != -1]))
            tgt = [total // known if t == -1 else t for t in tgt]
        return self._reshape_to(x, tgt, "reshape")

    def op_Squeeze(self, node, args):
        x = args[0]
        dims = _attr(node, "squeeze_dims", []) or [i for i, d in enumerate(x.shape) if d == 1]
        dims = [d % len(x.shape) for d in dims]
        shape = [d for i, d in enumerate(x.shape) if i not in dims]
        return self._reshape_to(x, shape, "squeeze")

    def op_ExpandDims(self, node, args):
        x = args[0]
        ax = int(np.asarray(args[1].const).reshape(-1)[0])
        shape = list(x.shape)
        ax = ax % (len(shape) + 1)
        shape.insert(ax, 1)
        return self._reshape_to(x, shape, "expand")

    # Shape arithmetic: with every shape fixed at conversion, Shape and the slicing and packing
    # of its result fold to constants (movenet-multipose sizes its upsampling this way).
    def op_Shape(self, node, args):
        return Val(const=np.array(args[0].shape, np.int32))

    def op_StridedSlice(self, node, args):
        x, begin, end, strides = args
        if not x.is_const or any(_attr(node, m, 0) for m in ("ellipsis_mask", "new_axis_mask")):
            raise UnsupportedOp("StridedSlice(tensor)", node["name"])
        bm, em, sm = (_attr(node, m, 0) for m in ("begin_mask", "end_mask", "shrink_axis_mask"))
        idx = []
        for i, (b, e, st) in enumerate(zip(*(np.asarray(v.const).reshape(-1) for v in (begin, end, strides)))):
            if sm >> i & 1:
                idx.append(int(b))
            else:
                idx.append(slice(None if bm >> i & 1 else int(b), None if em >> i & 1 else int(e), int(st)))
        return Val(const=np.asarray(x.const[tuple(idx)]))

    def op_Pack(self, node, args):
        if not all(v.is_const for v in args):
            raise UnsupportedOp("Pack(tensor)", node["name"])
        return Val(const=np.stack([v.const for v in args], axis=int(_attr(node, "axis", 0))))

    def op_ResizeBilinear(self, node, args):
        x = self.to_nchw(args[0])
        size = [int(v) for v in np.asarray(args[1].const).reshape(-1)]
        if _attr(node, "align_corners", False):
            mode = "align_corners"
        elif _attr(node, "half_pixel_centers", False):
            mode = "half_pixel"
        else:
            mode = "asymmetric"
        scales = np.array([1, 1, size[0] / x.shape[1], size[1] / x.shape[2]], np.float32)
        roi = self.add_init(np.zeros([0], np.float32), "roi")
        y = self.emit("Resize", [x.name, roi, self.add_init(scales, "scales")], "resize",
                      mode="linear", coordinate_transformation_mode=mode)
        return Val(y, [x.shape[0], size[0], size[1], x.shape[3]], True)

    def _matmul(self, node, args):
        x = self.to_nhwc(args[0])
        w = args[1].const
        if w is None or len(x.shape) != 2:
            raise UnsupportedOp("MatMul(non-constant or rank != 2)", node["name"])
        if _attr(node, "transpose_a", False):
            raise UnsupportedOp("MatMul(transpose_a)", node["name"])
        if not _attr(node, "transpose_b", False):
            w = w.T  # cv::dnn wants Gemm transB=1
        inputs = [x.name, self.add_init(w, "W")]
        fused = _attr(node, "fused_ops", []) or []
        if "BiasAdd" in fused:
            inputs.append(self.add_init(args[2].const.reshape(-1), "B"))
        else:
            inputs.append(self.add_init(np.zeros([w.shape[0]], np.float32), "B"))
        y = Val(self.emit("Gemm", inputs, "gemm", transB=1), [x.shape[0], w.shape[0]], False)
        return self._fused_tail(y, node, [f for f in fused if f != "BiasAdd"], "act")

    op_FusedMatMul = _matmul
    op_MatMul = _matmul

    def op_ConcatV2(self, node, args):
        xs, axis = args[:-1], int(np.asarray(args[-1].const).reshape(-1)[0])
        rank = len(xs[0].shape)
        axis %= rank
        if all(v.is_const for v in xs):
            return Val(const=np.concatenate([v.const for v in xs], axis))
        shape = list(xs[0].shape)
        shape[axis] = sum(v.shape[axis] for v in xs)
        if rank == 4:
            xs = [self.to_nchw(v) if not v.is_const else v for v in xs]
            names = [v.name if not v.is_const else self.add_init(v.const.transpose(NHWC2NCHW), "k") for v in xs]
            return Val(self.emit("Concat", names, "concat", axis=NHWC2NCHW.index(axis)), shape, True)
        xs = [self.to_nhwc(v) for v in xs]
        names = [v.name if not v.is_const else self.add_init(v.const, "k") for v in xs]
        return Val(self.emit("Concat", names, "concat", axis=axis), shape, False)


def op_counts(model):
    counts = {}
    for n in model.graph.node:
        counts[n.op_type] = counts.get(n.op_type, 0) + 1
    return dict(sorted(counts.items()))


def convert_tfjs(model_json, weights, model_name, input_node, outputs, batchable, input_bind=None,
                 input_shape=None):
    """Convert; returns (onnx.ModelProto, [(output name, TF shape)])."""
    c = Converter(model_json, weights, model_name)
    infos = c.convert(input_node, outputs, input_bind, input_shape)
    return c.build(infos, batchable), infos
