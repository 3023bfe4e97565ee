"""Silero VAD v5 (@ricky0123/vad-web dist/silero_vad_v5.onnx) split for OpenCV 4.6.

The shipped graph wraps everything in `If` nodes (on the sample rate, then on shapes),
which cv::dnn cannot load. Its 16 kHz branch is, per 576-sample window (64 samples of the
previous window as context + 512 new), reflect-padded on the right to 640:

    STFT conv (258 filters of 256 taps, stride 128) -> magnitude of (real, imag) ->
    4 x (Conv1d k=3 + ReLU) -> LSTMCell(128 -> 128, state carried) -> ReLU ->
    Conv1d 1x1 (128 -> 1) -> sigmoid = speech probability

The encoder (up to the last ReLU) is stateless per window and becomes an ONNX graph in 2-D
form (NCHW with H = 1) that cv::dnn and our engine run in batches; the STFT conv is split
into its real and imaginary halves so no channel Slice is needed. The recurrent decoder is
a few hundred multiply-adds per window: its weights go to decoder.bin and C++ runs it
(models/voice_activity.cc)."""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

WINDOW = 512
CONTEXT = 64
PADDED = 640  # (CONTEXT + WINDOW) reflect-padded by 64 on the right
SAMPLE_RATE = 16000

# decoder.bin: these tensors, fp32 little-endian, in this order (PyTorch LSTMCell layout:
# gate rows in the order input, forget, cell, output).
DECODER_TENSORS = ["decoder.rnn.weight_ih", "decoder.rnn.weight_hh", "decoder.rnn.bias_ih",
                   "decoder.rnn.bias_hh", "decoder.decoder.2.weight", "decoder.decoder.2.bias"]


def _branch_constants(model):
    """{short name: array} of the 16 kHz (then) branch's Constant nodes."""
    top_if = next(n for n in model.graph.node if n.op_type == "If")
    then = next(a.g for a in top_if.attribute if a.name == "then_branch")
    prefix = "If_0_then_branch__Inline_0__"
    out = {}
    for n in then.node:
        if n.op_type == "Constant":
            name = n.output[0]
            out[name[len(prefix):] if name.startswith(prefix) else name] = numpy_helper.to_array(n.attribute[0].t)
    return then, out


def _check_branch(then):
    """The split assumes the branch's structure; refuse a file that differs."""
    ops = [n.op_type for n in then.node if n.op_type != "Constant"]
    convs = [n for n in then.node if n.op_type == "Conv"]
    pads = [n for n in then.node if n.op_type == "Pad"]
    if len(convs) != 6 or len(pads) != 1 or "LSTM" in ops:
        # LSTM sits one If deeper; at this level there are the STFT, 4 encoder and 1 decoder convs.
        raise ValueError(f"silero: unexpected 16 kHz branch ({len(convs)} Conv, {len(pads)} Pad)")
    mode = helper.get_attribute_value(next(a for a in pads[0].attribute if a.name == "mode"))
    if mode != b"reflect":
        raise ValueError(f"silero: STFT padding is {mode!r}, expected reflect")
    attrs = [{a.name: helper.get_attribute_value(a) for a in c.attribute} for c in convs]
    if attrs[0]["strides"] != [128] or attrs[0]["kernel_shape"] != [256]:
        raise ValueError(f"silero: STFT conv {attrs[0]}")
    return [a["strides"][0] for a in attrs[1:5]]


def split(model):
    """(encoder ONNX model, {decoder tensor name: array}) from the shipped model."""
    then, c = _branch_constants(model)
    enc_strides = _check_branch(then)
    basis = c["stft.forward_basis_buffer"].astype(np.float32)  # [258, 1, 256]
    half = basis.shape[0] // 2
    inits, nodes = [], []

    def init(name, arr):
        inits.append(numpy_helper.from_array(np.ascontiguousarray(arr, np.float32), name))
        return name

    nodes.append(helper.make_node("Conv", ["input", init("stft_re", basis[:half, :, None, :])], ["re"],
                                  kernel_shape=[1, 256], strides=[1, 128], pads=[0, 0, 0, 0]))
    nodes.append(helper.make_node("Conv", ["input", init("stft_im", basis[half:, :, None, :])], ["im"],
                                  kernel_shape=[1, 256], strides=[1, 128], pads=[0, 0, 0, 0]))
    nodes.append(helper.make_node("Mul", ["re", "re"], ["re2"]))
    nodes.append(helper.make_node("Mul", ["im", "im"], ["im2"]))
    nodes.append(helper.make_node("Add", ["re2", "im2"], ["power"]))
    nodes.append(helper.make_node("Sqrt", ["power"], ["magnitude"]))
    x = "magnitude"
    for i, s in enumerate(enc_strides):
        w = c[f"encoder.{i}.reparam_conv.weight"].astype(np.float32)  # [out, in, 3]
        b = c[f"encoder.{i}.reparam_conv.bias"].astype(np.float32)
        y = "features" if i == len(enc_strides) - 1 else f"enc{i}"
        nodes.append(helper.make_node("Conv", [x, init(f"enc{i}_w", w[:, :, None, :]), init(f"enc{i}_b", b)],
                                      [f"enc{i}_conv"], kernel_shape=[1, 3], strides=[1, s], pads=[0, 1, 0, 1]))
        nodes.append(helper.make_node("Relu", [f"enc{i}_conv"], [y]))
        x = y
    t = 1 + (PADDED - 256) // 128
    for s in enc_strides:
        t = (t + 2 - 3) // s + 1
    channels = c[f"encoder.{len(enc_strides) - 1}.reparam_conv.weight"].shape[0]
    g = helper.make_graph(nodes, "silero_vad_encoder",
                          [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 1, 1, PADDED])],
                          [helper.make_tensor_value_info("features", TensorProto.FLOAT, ["N", channels, 1, t])],
                          inits)
    enc = helper.make_model(g, producer_name="framemill-convert", opset_imports=[helper.make_opsetid("", 11)])
    enc.ir_version = 6
    decoder = {k: c[k].astype(np.float32) for k in DECODER_TENSORS}
    if decoder["decoder.rnn.weight_ih"].shape != (4 * channels, channels * t):
        raise ValueError(f"silero: LSTM input weights {decoder['decoder.rnn.weight_ih'].shape}")
    return enc, decoder, [channels, 1, t]


def decoder_blob(decoder):
    """decoder.bin's bytes and its table of contents [{name, shape, offset}] (offsets in floats)."""
    toc, parts, at = [], [], 0
    for k in DECODER_TENSORS:
        a = np.ascontiguousarray(decoder[k], "<f4")
        parts.append(a.tobytes())
        toc.append({"name": k, "shape": list(a.shape), "offset": at})
        at += a.size
    return b"".join(parts), toc


def reference_encoder(model, padded):
    """The shipped encoder in numpy (float64), for the converter's own check."""
    then, c = _branch_constants(model)
    strides = _check_branch(then)
    basis = c["stft.forward_basis_buffer"][:, 0, :].astype(np.float64)
    frames = np.stack([padded[i * 128:i * 128 + 256] for i in range(1 + (len(padded) - 256) // 128)], 1)
    spec = basis @ frames
    half = spec.shape[0] // 2
    x = np.sqrt(spec[:half] ** 2 + spec[half:] ** 2)
    for i, s in enumerate(strides):
        w = c[f"encoder.{i}.reparam_conv.weight"].astype(np.float64)
        b = c[f"encoder.{i}.reparam_conv.bias"].astype(np.float64)
        xp = np.pad(x, ((0, 0), (1, 1)))
        n = (xp.shape[1] - 3) // s + 1
        x = np.stack([np.einsum("oik,ik->o", w, xp[:, j * s:j * s + 3]) + b for j in range(n)], 1)
        x = np.maximum(x, 0)
    return x
