"""ISNet (@imgly/background-removal-data /models/medium): reassemble the chunks, fp16 -> fp32.

OpenCV 4.6 rejects FLOAT16 tensors; with the initializers in fp32 and the Casts that bridged
fp16 and fp32 removed, cv::dnn loads and runs it."""
import hashlib
import json
import os

import numpy as np
import onnx
from onnx import numpy_helper, TensorProto, helper


def assemble(dist_dir, key="/models/medium"):
    res = json.load(open(os.path.join(dist_dir, "resources.json")))
    entry = res[key]
    data = bytearray()
    for ch in entry["chunks"]:
        blob = open(os.path.join(dist_dir, ch["hash"]), "rb").read()
        if hashlib.sha256(blob).hexdigest() != ch["hash"]:
            raise ValueError(f"chunk {ch['hash']}: sha256 mismatch")
        if len(data) != ch["offsets"][0] or len(data) + len(blob) != ch["offsets"][1]:
            raise ValueError(f"chunk {ch['hash']}: offsets do not match")
        data += blob
    if len(data) != entry["size"]:
        raise ValueError(f"{key}: {len(data)} bytes, resources.json says {entry['size']}")
    return bytes(data)


def to_fp32(model):
    g = model.graph
    for i, t in enumerate(g.initializer):
        if t.data_type == TensorProto.FLOAT16:
            arr = numpy_helper.to_array(t).astype(np.float32)
            g.initializer[i].CopyFrom(numpy_helper.from_array(arr, t.name))
    for n in g.node:
        if n.op_type == "Constant":
            for a in n.attribute:
                if a.name == "value" and a.t.data_type == TensorProto.FLOAT16:
                    arr = numpy_helper.to_array(a.t).astype(np.float32)
                    a.t.CopyFrom(numpy_helper.from_array(arr, a.t.name))
    # Casts to/from fp16 become identities: rewire their consumers to the Cast's input.
    alias = {}
    keep = []
    for n in g.node:
        if n.op_type == "Cast":
            to = helper.get_attribute_value(next(a for a in n.attribute if a.name == "to"))
            if to in (TensorProto.FLOAT16, TensorProto.FLOAT):
                alias[n.output[0]] = n.input[0]
                continue
        keep.append(n)

    def res(x):
        while x in alias:
            x = alias[x]
        return x
    graph_outs = {o.name for o in g.output}
    for n in keep:
        for i, x in enumerate(n.input):
            n.input[i] = res(x)
    # A graph output produced by a removed Cast: rename the producer's output instead.
    for o in graph_outs:
        if o in alias:
            src = res(o)
            for n in keep:
                for i, x in enumerate(n.output):
                    if x == src:
                        n.output[i] = o
                for i, x in enumerate(n.input):
                    if x == src:
                        n.input[i] = o
    del g.node[:]
    g.node.extend(keep)
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        if vi.type.tensor_type.elem_type == TensorProto.FLOAT16:
            vi.type.tensor_type.elem_type = TensorProto.FLOAT
    return model


def prune_to(model, keep_outputs):
    """Drop graph outputs other than keep_outputs and every node they alone needed."""
    g = model.graph
    need = set(keep_outputs)
    kept = []
    for n in reversed(list(g.node)):
        if any(o in need for o in n.output):
            kept.append(n)
            need.update(n.input)
    kept.reverse()
    outs = [o for o in g.output if o.name in keep_outputs]
    del g.node[:]
    g.node.extend(kept)
    del g.output[:]
    g.output.extend(outs)
    inits = [t for t in g.initializer if t.name in need]
    del g.initializer[:]
    g.initializer.extend(inits)
    vis = [v for v in g.value_info if v.name in need]
    del g.value_info[:]
    g.value_info.extend(vis)
    return model
