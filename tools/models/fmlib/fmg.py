"""framemill graph form (model.fmg.json + model.fmg.bin): a generic dump of an ONNX graph.

Initializers are little-endian fp32 (int64 for integer shape/index tensors), each at an offset
aligned to 64 bytes; nodes are ONNX's, in topological order (ONNX graphs already are), with the
ai.onnx opset they follow ("opset": the engine lowers each op by that opset's rules) and the
element types of the graph's inputs and outputs. Version 2: version 1 had no opset."""
import json

import numpy as np
from onnx import helper, mapping, numpy_helper, AttributeProto

ALIGN = 64


def _shape_of(vi):
    dims = []
    for d in vi.type.tensor_type.shape.dim:
        dims.append(int(d.dim_value) if d.HasField("dim_value") else -1)
    return dims


def _dtype_of(vi):
    """A graph input's or output's element type as numpy names it ("float32", "int64")."""
    elem = vi.type.tensor_type.elem_type
    return np.dtype(mapping.TENSOR_TYPE_TO_NP_TYPE[elem]).name if elem else "float32"


def _opset_of(model):
    """The ai.onnx opset version; a node of another domain has no place in the engine."""
    versions = {o.domain or "ai.onnx": o.version for o in model.opset_import}
    for n in model.graph.node:
        if n.domain not in ("", "ai.onnx"):
            raise ValueError("node %s is of domain %s, which the engine does not run" % (n.name, n.domain))
    if "ai.onnx" not in versions:
        raise ValueError("the model imports no ai.onnx opset")
    return versions["ai.onnx"]


def _attr_json(a):
    v = helper.get_attribute_value(a)
    if a.type == AttributeProto.TENSOR:
        arr = numpy_helper.to_array(v)
        return {"dtype": "int64" if arr.dtype.kind in "iu" else "float32",
                "shape": list(arr.shape), "data": arr.reshape(-1).tolist()}
    if isinstance(v, bytes):
        return v.decode()
    if isinstance(v, list):
        return [x.decode() if isinstance(x, bytes) else x for x in v]
    return v


def dump(model, json_path, bin_path):
    g = model.graph
    inits, blob = [], bytearray()
    for t in g.initializer:
        arr = numpy_helper.to_array(t)
        arr = arr.astype("<i8") if arr.dtype.kind in "iub" else arr.astype("<f4")
        pad = (-len(blob)) % ALIGN
        blob += b"\0" * pad
        inits.append({"name": t.name, "dtype": "int64" if arr.dtype.kind == "i" else "float32",
                      "shape": list(arr.shape), "offset": len(blob), "bytes": arr.nbytes})
        blob += arr.tobytes()
    init_names = {t.name for t in g.initializer}
    doc = {
        "format": "framemill-graph", "version": 2, "opset": _opset_of(model),
        "inputs": [{"name": i.name, "shape": _shape_of(i), "dtype": _dtype_of(i)}
                   for i in g.input if i.name not in init_names],
        "outputs": [{"name": o.name, "dtype": _dtype_of(o)} for o in g.output],
        "initializers": inits,
        "nodes": [{"op": n.op_type, "name": n.name, "inputs": list(n.input), "outputs": list(n.output),
                   "attrs": {a.name: _attr_json(a) for a in n.attribute}} for n in g.node],
    }
    with open(json_path, "w") as f:
        json.dump(doc, f, indent=1)
    with open(bin_path, "wb") as f:
        f.write(bytes(blob))
    return doc


def load(json_path, bin_path):
    """Read back: (doc, {initializer name: np.ndarray})."""
    doc = json.load(open(json_path))
    blob = open(bin_path, "rb").read()
    arrays = {}
    for i in doc["initializers"]:
        dt = np.dtype("<f4") if i["dtype"] == "float32" else np.dtype("<i8")
        n = int(np.prod(i["shape"])) if i["shape"] else 1
        assert i["offset"] % ALIGN == 0 and i["bytes"] == n * dt.itemsize
        arrays[i["name"]] = np.frombuffer(blob, dt, n, i["offset"]).reshape(i["shape"])
    return doc, arrays
