// Lowerings of the ops that move data (plan_builder.h): resize, pad, concat, transpose,
// slice, gather, split, and the reshapes that only relabel a buffer (or fold a constant).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <numeric>
#include <set>

#include "engine/plan_builder.h"
#include "engine/tensor.h"

namespace framemill::engine::plan_detail {

namespace {

// Positions [first, last] of the runs of `idx` that step evenly (a run of one included).
std::vector<std::pair<size_t, size_t>> ArithmeticRuns(const std::vector<int64_t>& idx) {
  std::vector<std::pair<size_t, size_t>> runs;
  for (size_t k = 0; k < idx.size();) {
    size_t e = k + 1;
    if (e < idx.size() && idx[e] != idx[k]) {
      const int64_t step = idx[e] - idx[k];
      while (e + 1 < idx.size() && idx[e + 1] - idx[e] == step) ++e;
      ++e;
    }
    runs.emplace_back(k, e - 1);
    k = e;
  }
  return runs;
}

}  // namespace


// Resize's output shape from its constant sizes or scales (opset 10: (X, scales); from 11:
// (X, roi, scales, sizes)), with p's spatial scales; *scales: the scales, when they gave it.
Result<Shape> PlanBuilder::ResizeOutput(const Node& n, const Val& x, bool v10, ResizeParams* p,
                                        std::vector<float>* scales) {
  std::vector<int64_t> sizes;
  const size_t scale_in = v10 ? 1 : 2;
  if (!v10 && Has(n, 3)) {
    auto s = ConstInts(n, 3);
    if (!s.ok()) return s.status();
    sizes = *s;
  }
  if (sizes.empty() && Has(n, scale_in)) {
    auto s = ConstFloats(n, scale_in);
    if (!s.ok()) return s.status();
    *scales = *s;
  }
  if (sizes.empty() && scales->empty()) return Bad(n, "neither scales nor sizes");
  Shape out = x.shape;
  if (sizes.size() == 4) {
    scales->clear();
    out = sizes;
    p->scale_h = static_cast<float>(out[2]) / x.shape[2];
    p->scale_w = static_cast<float>(out[3]) / x.shape[3];
  } else if (scales->size() == 4) {
    for (int d = 0; d < 4; ++d) out[d] = static_cast<int64_t>(std::floor(x.shape[d] * (*scales)[d]));
    p->scale_h = (*scales)[2];
    p->scale_w = (*scales)[3];
  } else {
    return Unsup(n, "needs constant 4-entry scales or sizes");
  }
  return out;
}

// Resize's mode, coordinate transformation and nearest rounding, by its opset's defaults.
Status PlanBuilder::ResizeModes(const Node& n, bool v10, ResizeParams* p) {
  std::string mode = n.AttrString("mode", "nearest");
  if (mode == "linear" || mode == "bilinear") p->mode = ResizeMode::kLinear;
  else if (mode == "nearest") p->mode = ResizeMode::kNearest;
  else return Unsup(n, "mode " + mode);
  // Opset 10's Resize is Upsample's: asymmetric coordinates, the nearest pixel by floor.
  std::string ct = n.AttrString("coordinate_transformation_mode", v10 ? "asymmetric" : "half_pixel");
  static const std::map<std::string, ResizeCoord> kCt = {
      {"half_pixel", ResizeCoord::kHalfPixel}, {"pytorch_half_pixel", ResizeCoord::kPytorchHalfPixel},
      {"align_corners", ResizeCoord::kAlignCorners}, {"asymmetric", ResizeCoord::kAsymmetric},
      {"tf_half_pixel_for_nn", ResizeCoord::kTfHalfPixelForNn}};
  if (!kCt.count(ct)) return Unsup(n, "coordinate_transformation_mode " + ct);
  p->coord = kCt.at(ct);
  std::string nm = n.AttrString("nearest_mode", v10 ? "floor" : "round_prefer_floor");
  static const std::map<std::string, ResizeNearest> kNm = {
      {"round_prefer_floor", ResizeNearest::kRoundPreferFloor},
      {"round_prefer_ceil", ResizeNearest::kRoundPreferCeil}, {"floor", ResizeNearest::kFloor},
      {"ceil", ResizeNearest::kCeil}};
  if (!kNm.count(nm)) return Unsup(n, "nearest_mode " + nm);
  p->nearest = kNm.at(nm);
  return Status::OK();
}

Status PlanBuilder::LowerResize(size_t i) {
  const Node& n = g_.nodes[i];
  const Val& x = V(n.inputs[0]);
  if (x.is_const || x.shape.size() != 4) return Unsup(n, "only 4-D non-constant input");
  const bool v10 = g_.opset < 11;
  ResizeParams p;
  std::vector<float> scales;
  auto out = ResizeOutput(n, x, v10, &p, &scales);
  if (!out.ok()) return out.status();
  if ((*out)[0] != x.shape[0] || (*out)[1] != x.shape[1]) return Unsup(n, "only spatial resizing");
  FM_RETURN_IF_ERROR(ResizeModes(n, v10, &p));
  // align_corners divides by the output's length less one: where scales give a fractional
  // length (4 x 0.6 = 2.4), ONNX's spec takes the length of the output (2) and ONNX 1.12's
  // reference implementation and test data the product (2.4). Neither is computed.
  if (p.coord == ResizeCoord::kAlignCorners && !scales.empty())
    for (int d : {2, 3})
      if (std::fabs(x.shape[d] * scales[d] - std::round(x.shape[d] * scales[d])) > 1e-4)
        return Unsup(n, "align_corners with a scale that gives a fractional output length (ONNX's spec and its "
                        "reference disagree)");
  p.planes = x.shape[0] * x.shape[1];
  p.h_in = x.shape[2]; p.w_in = x.shape[3]; p.h_out = (*out)[2]; p.w_out = (*out)[3];
  return Emit(StepKind::kResize, {x.buf}, n, *out, p);
}


Status PlanBuilder::LowerPad(size_t i) {
  const Node& n = g_.nodes[i];
  const Val& x = V(n.inputs[0]);
  std::vector<int64_t> pads = n.AttrInts("pads");
  if (Has(n, 1)) {
    auto p = ConstInts(n, 1);
    if (!p.ok()) return p.status();
    pads = *p;
  }
  float value = n.AttrFloat("value", 0.0f);
  if (Has(n, 2)) {
    auto v = ConstFloats(n, 2);
    if (!v.ok()) return v.status();
    if (!v->empty()) value = (*v)[0];
  }
  size_t r = x.shape.size();
  if (pads.size() != 2 * r) return Bad(n, "pads needs 2 x rank entries");
  if (r > static_cast<size_t>(kMaxRank) || x.is_const) return Unsup(n, "rank above 6 or constant input");
  PadParams p;
  std::string mode = n.AttrString("mode", "constant");
  if (mode == "constant") p.mode = PadMode::kConstant;
  else if (mode == "reflect") p.mode = PadMode::kReflect;
  else if (mode == "edge") p.mode = PadMode::kEdge;
  else return Unsup(n, "mode " + mode);
  p.rank = static_cast<int32_t>(r);
  p.value = value;
  Shape out(r);
  for (size_t d = 0; d < r; ++d) {
    if (pads[d] < 0 || pads[d + r] < 0) return Unsup(n, "negative pads");
    p.in_dims[d] = x.shape[d];
    p.before[d] = pads[d];
    p.after[d] = pads[d + r];
    out[d] = x.shape[d] + pads[d] + pads[d + r];
    if (p.mode == PadMode::kReflect && (pads[d] >= x.shape[d] || pads[d + r] >= x.shape[d]))
      return Bad(n, "reflect pad wider than the input");
  }
  if (FusePadIntoConv(n, p)) return Status::OK();
  return Emit(StepKind::kPad, {x.buf}, n, out, p);
}

// Keras' ZeroPadding2D before a "valid" strided convolution (MobileNetV2: nsfw's five) is the
// convolution's own padding: the copy, and on the CPU two layout changes, saved.
bool PlanBuilder::FusePadIntoConv(const Node& n, const PadParams& p) {
  const int c = SoleConsumer(n.outputs[0]);
  if (c < 0 || p.rank != 4 || p.mode != PadMode::kConstant || p.value != 0) return false;
  const Node& conv = g_.nodes[c];
  if (conv.op != "Conv" || conv.inputs.empty() || conv.inputs[0] != n.outputs[0]) return false;
  const std::string auto_pad = conv.AttrString("auto_pad", "NOTSET");
  if (auto_pad != "NOTSET" && auto_pad != "VALID") return false;
  for (int d : {0, 1})
    if (p.before[d] != 0 || p.after[d] != 0) return false;
  vals_[n.outputs[0]] = V(n.inputs[0]);
  pad_into_conv_[n.outputs[0]] = {p.before[2], p.before[3], p.after[2], p.after[3]};
  plan_.fused++;
  return true;
}


Status PlanBuilder::LowerConcat(size_t i) {
  const Node& n = g_.nodes[i];
  std::vector<const Val*> in;
  for (const auto& name : n.inputs)
    if (!name.empty()) in.push_back(&V(name));
  if (in.empty()) return Bad(n, "no inputs");
  int64_t r = static_cast<int64_t>(in[0]->shape.size());
  // Before opset 4 the axis could be left out, meaning 1; since, it must be given.
  if (g_.opset >= 4 && !n.HasAttr("axis")) return Bad(n, "no axis");
  int64_t axis = AxisOf(n, 1, static_cast<size_t>(r));
  if (axis < 0 || axis >= r) return Bad(n, "axis out of range");
  Shape out = in[0]->shape;
  out[axis] = 0;
  bool all_const = true;
  for (const Val* v : in) {
    if (static_cast<int64_t>(v->shape.size()) != r) return Bad(n, "ranks differ");
    for (int64_t d = 0; d < r; ++d)
      if (d != axis && v->shape[d] != out[d]) return Bad(n, "shapes " + ShapeStr(v->shape) + " and " + ShapeStr(in[0]->shape));
    out[axis] += v->shape[axis];
    all_const = all_const && v->is_const;
  }
  int64_t outer = Prod(out, 0, axis), inner = Prod(out, axis + 1);
  if (all_const) {
    HostTensor t;
    t.is_int = in[0]->c.is_int;
    t.shape = out;
    for (int64_t o = 0; o < outer; ++o)
      for (const Val* v : in) {
        int64_t chunk = v->shape[axis] * inner;
        for (int64_t k = 0; k < chunk; ++k) {
          double e = v->c.At(o * chunk + k);
          if (t.is_int) t.i.push_back(v->c.is_int ? v->c.i[o * chunk + k] : static_cast<int64_t>(e));
          else t.f.push_back(static_cast<float>(e));
        }
      }
    SetConst(n.outputs[0], std::move(t));
    return Status::OK();
  }
  std::vector<std::string> parts;
  for (const auto& name : n.inputs)
    if (!name.empty()) parts.push_back(name);
  ConcatStep(n, parts, axis, out);
  return Status::OK();
}

void PlanBuilder::ConcatStep(const Node& n, const std::vector<std::string>& parts, int64_t axis, const Shape& out) {
  Step s;
  s.kind = StepKind::kConcat;
  for (const std::string& name : parts) {
    s.inputs.push_back(DeviceOf(name));
    s.concat_sizes.push_back(V(name).shape[axis]);
  }
  ConcatParams p;
  p.count = static_cast<int32_t>(s.inputs.size());
  p.outer = Prod(out, 0, axis);
  p.inner = Prod(out, axis + 1);
  s.output = NewBuffer(n.outputs[0], out);
  s.params = p;
  AddStep(std::move(s), n);
}


Status PlanBuilder::LowerTranspose(size_t i) {
  const Node& n = g_.nodes[i];
  const Val& x = V(n.inputs[0]);
  int r = static_cast<int>(x.shape.size());
  std::vector<int64_t> perm = n.AttrInts("perm");
  if (perm.empty())
    for (int k = r - 1; k >= 0; --k) perm.push_back(k);
  if (static_cast<int>(perm.size()) != r) return Bad(n, "perm size");
  Shape out(r);
  for (int k = 0; k < r; ++k) out[k] = x.shape[perm[k]];
  if (x.is_const) {
    Shape st = Strides(x.shape);
    std::vector<int64_t> idx;
    ForEachIndex(out, [&](int64_t, const Shape& oi) {
      int64_t src = 0;
      for (int k = 0; k < r; ++k) src += oi[k] * st[perm[k]];
      idx.push_back(src);
    });
    SetConst(n.outputs[0], Take(x.c, idx, out));
    return Status::OK();
  }
  // When the non-unit axes keep their order the bytes do not move.
  std::vector<int64_t> order;
  for (int k = 0; k < r; ++k)
    if (x.shape[perm[k]] != 1) order.push_back(perm[k]);
  if (std::is_sorted(order.begin(), order.end())) {
    Alias(n.outputs[0], x.buf, out);
    return Status::OK();
  }
  if (r > kMaxRank) return Unsup(n, "rank above 6");
  TransposeParams p;
  p.rank = r;
  for (int k = 0; k < r; ++k) { p.in_dims[k] = x.shape[k]; p.perm[k] = static_cast<int32_t>(perm[k]); }
  return Emit(StepKind::kTranspose, {x.buf}, n, out, p);
}


Status PlanBuilder::SliceStep(const Node& n, const std::string& in, const std::string& out,
                          const Shape& starts, const Shape& steps, const Shape& out_dims) {
  const Val& x = V(in);
  int r = static_cast<int>(x.shape.size());
  if (x.is_const) {
    Shape st = Strides(x.shape);
    std::vector<int64_t> idx;
    ForEachIndex(out_dims, [&](int64_t, const Shape& oi) {
      int64_t src = 0;
      for (int k = 0; k < r; ++k) src += (starts[k] + oi[k] * steps[k]) * st[k];
      idx.push_back(src);
    });
    SetConst(out, Take(x.c, idx, out_dims));
    return Status::OK();
  }
  if (out_dims == x.shape) {
    bool whole = true;
    for (int k = 0; k < r; ++k) whole = whole && starts[k] == 0 && steps[k] == 1;
    if (whole) { Alias(out, x.buf, out_dims); return Status::OK(); }
  }
  if (r > kMaxRank) return Unsup(n, "rank above 6");
  SliceParams p;
  p.rank = r;
  for (int k = 0; k < r; ++k) {
    p.in_dims[k] = x.shape[k]; p.out_dims[k] = out_dims[k];
    p.starts[k] = starts[k]; p.steps[k] = steps[k];
  }
  return Emit(StepKind::kSlice, {x.buf}, n, out_dims, p, out);
}


Status PlanBuilder::LowerSlice(size_t i) {
  const Node& n = g_.nodes[i];
  const Val& x = V(n.inputs[0]);
  int r = static_cast<int>(x.shape.size());
  std::vector<int64_t> st = n.AttrInts("starts"), en = n.AttrInts("ends"), ax = n.AttrInts("axes"), sp;
  if (n.inputs.size() >= 3) {
    auto a = ConstInts(n, 1), b = ConstInts(n, 2);
    if (!a.ok()) return a.status();
    if (!b.ok()) return b.status();
    st = *a; en = *b;
    if (Has(n, 3)) { auto c = ConstInts(n, 3); if (!c.ok()) return c.status(); ax = *c; }
    if (Has(n, 4)) { auto d = ConstInts(n, 4); if (!d.ok()) return d.status(); sp = *d; }
  }
  if (ax.empty()) for (size_t k = 0; k < st.size(); ++k) ax.push_back(static_cast<int64_t>(k));
  if (sp.empty()) sp.assign(st.size(), 1);
  if (st.size() != en.size() || ax.size() != st.size() || sp.size() != st.size())
    return Bad(n, "starts/ends/axes/steps sizes differ");
  Shape starts(r, 0), steps(r, 1), out = x.shape;
  for (size_t k = 0; k < st.size(); ++k) {
    int64_t a = ax[k] < 0 ? ax[k] + r : ax[k];
    if (a < 0 || a >= r) return Bad(n, "axis out of range");
    int64_t dim = x.shape[a], step = sp[k];
    if (step == 0) return Bad(n, "step 0");
    int64_t s = st[k], e = en[k];
    if (s < 0) s += dim;
    if (e < 0) e += dim;
    if (step > 0) {
      s = std::clamp<int64_t>(s, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
      out[a] = std::max<int64_t>(0, (e - s + step - 1) / step);
    } else {
      s = std::clamp<int64_t>(s, 0, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
      out[a] = std::max<int64_t>(0, (s - e + (-step) - 1) / (-step));
    }
    starts[a] = s;
    steps[a] = step;
  }
  return SliceStep(n, n.inputs[0], n.outputs[0], starts, steps, out);
}


Status PlanBuilder::LowerGather(size_t i) {
  const Node& n = g_.nodes[i];
  const Val& x = V(n.inputs[0]);
  if (!IsConst(n, 1)) return Unsup(n, "indices must be a constant");
  const HostTensor& ind = V(n.inputs[1]).c;
  int r = static_cast<int>(x.shape.size());
  int64_t axis = AxisOf(n, 0, static_cast<size_t>(r));
  if (axis < 0 || axis >= r) return Bad(n, "axis out of range");
  std::vector<int64_t> idx;
  for (int64_t k = 0; k < ind.size(); ++k) {
    int64_t v = static_cast<int64_t>(ind.At(k));
    if (v < 0) v += x.shape[axis];
    if (v < 0 || v >= x.shape[axis]) return Bad(n, "index out of range");
    idx.push_back(v);
  }
  Shape out;
  for (int64_t d = 0; d < axis; ++d) out.push_back(x.shape[d]);
  for (int64_t d : ind.shape) out.push_back(d);
  for (int64_t d = axis + 1; d < r; ++d) out.push_back(x.shape[d]);
  if (!x.is_const) return GatherBySlices(n, x, idx, axis, out);
  int64_t outer = Prod(x.shape, 0, axis), inner = Prod(x.shape, axis + 1);
  std::vector<int64_t> src;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t v : idx)
      for (int64_t in = 0; in < inner; ++in) src.push_back((o * x.shape[axis] + v) * inner + in);
  SetConst(n.outputs[0], Take(x.c, src, out));
  return Status::OK();
}

// On the device: each arithmetic run of indices a Slice, the runs concatenated along the axis
// (the indices' own dimensions follow in their order: the same bytes as the output).
Status PlanBuilder::GatherBySlices(const Node& n, const Val& x, const std::vector<int64_t>& idx, int64_t axis,
                                   const Shape& out) {
  if (idx.empty()) return Unsup(n, "empty indices");
  std::vector<std::string> parts;
  for (const auto& [first, last] : ArithmeticRuns(idx)) {
    Shape starts(x.shape.size(), 0), steps(x.shape.size(), 1), sliced = x.shape;
    starts[axis] = idx[first];
    steps[axis] = last > first ? idx[first + 1] - idx[first] : 1;
    sliced[axis] = static_cast<int64_t>(last - first + 1);
    parts.push_back(n.outputs[0] + "#slice" + std::to_string(parts.size()));
    FM_RETURN_IF_ERROR(SliceStep(n, n.inputs[0], parts.back(), starts, steps, sliced));
  }
  if (parts.size() == 1) {
    Alias(n.outputs[0], V(parts[0]).buf, out);
    return Status::OK();
  }
  Shape joined = x.shape;
  joined[axis] = static_cast<int64_t>(idx.size());
  ConcatStep(n, parts, axis, joined);
  Alias(n.outputs[0], V(n.outputs[0]).buf, out);
  return Status::OK();
}


Status PlanBuilder::LowerSplit(size_t i) {
  const Node& n = g_.nodes[i];
  const Val& x = V(n.inputs[0]);
  int r = static_cast<int>(x.shape.size());
  int64_t axis = AxisOf(n, 0, static_cast<size_t>(r));
  if (axis < 0 || axis >= r) return Bad(n, "axis out of range");
  std::vector<int64_t> split = n.AttrInts("split");
  if (split.empty() && Has(n, 1)) {
    auto s = ConstInts(n, 1);
    if (!s.ok()) return s.status();
    split = *s;
  }
  int64_t parts = static_cast<int64_t>(n.outputs.size());
  if (split.empty() && n.HasAttr("num_outputs")) {
    // Opset 18: num_outputs chunks of ceil(dim / num_outputs), the last one smaller.
    if (n.AttrInt("num_outputs", 0) != parts) return Bad(n, "num_outputs is not the number of outputs");
    const int64_t chunk = (x.shape[axis] + parts - 1) / parts;
    for (int64_t k = 0, left = x.shape[axis]; k < parts; ++k, left -= chunk) split.push_back(std::min(chunk, left));
    if (split.back() <= 0) return Bad(n, "axis of " + std::to_string(x.shape[axis]) + " in " + std::to_string(parts));
  } else if (split.empty()) {
    if (x.shape[axis] % parts) return Bad(n, "axis not divisible into equal parts");
    split.assign(parts, x.shape[axis] / parts);
  }
  if (static_cast<int64_t>(split.size()) != parts) return Bad(n, "split sizes vs outputs");
  int64_t start = 0;
  for (int64_t k = 0; k < parts; ++k) {
    Shape starts(r, 0), steps(r, 1), out = x.shape;
    starts[axis] = start;
    out[axis] = split[k];
    start += split[k];
    if (!n.outputs[k].empty()) FM_RETURN_IF_ERROR(SliceStep(n, n.inputs[0], n.outputs[k], starts, steps, out));
  }
  if (start != x.shape[axis]) return Bad(n, "split sizes do not add up");
  return Status::OK();
}


// Shape: the input's dimensions, [start, end), folded into a constant.
Status PlanBuilder::FoldShapeOf(const Node& n, const Val& x) {
  const int r = static_cast<int>(x.shape.size());
  HostTensor t;
  t.is_int = true;
  int64_t start = n.AttrInt("start", 0), end = n.AttrInt("end", r);
  if (start < 0) start += r;
  if (end < 0) end += r;
  start = std::clamp<int64_t>(start, 0, r);
  end = std::clamp<int64_t>(end, start, r);
  t.i.assign(x.shape.begin() + start, x.shape.begin() + end);
  t.shape = {end - start};
  SetConst(n.outputs[0], std::move(t));
  return Status::OK();
}

namespace {

// bfloat16 rounding (to nearest, ties to even) of a float, as a float.
float ToBfloat16(float v) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  if ((u & 0x7f800000u) != 0x7f800000u) u += 0x7fffu + ((u >> 16) & 1u);
  u &= 0xffff0000u;
  float r;
  std::memcpy(&r, &u, 4);
  return r;
}

// The range of ONNX's integer types (TensorProto.DataType): {lo, hi}, or false.
bool IntRange(int64_t to, double* lo, double* hi) {
  switch (to) {
    case 2: *lo = 0; *hi = 255; return true;                          // uint8
    case 3: *lo = -128; *hi = 127; return true;                       // int8
    case 4: *lo = 0; *hi = 65535; return true;                        // uint16
    case 5: *lo = -32768; *hi = 32767; return true;                   // int16
    case 6: *lo = -2147483648.0; *hi = 2147483647.0; return true;     // int32
    case 7: *lo = -9.2233720368547758e18; *hi = 9.2233720368547758e18; return true;  // int64
    case 12: *lo = 0; *hi = 4294967295.0; return true;                // uint32
    case 13: *lo = 0; *hi = 1.8446744073709552e19; return true;       // uint64
    default: return false;
  }
}

}  // namespace

// Cast of a constant, folded: to float32 and float64 (kept as float32), float16 and bfloat16
// (rounded through them), bool (non-zero), and the integer types (toward zero, refused out of
// the type's range).
Status PlanBuilder::FoldCast(const Node& n, const Val& x, int64_t to) {
  HostTensor t = x.c;
  double lo, hi;
  if (to == 1 || to == 11 || to == 10 || to == 16) {
    if (t.is_int) { t.f.assign(t.i.begin(), t.i.end()); t.i.clear(); t.is_int = false; }
    if (to == 10) for (float& v : t.f) v = HalfToFloat(FloatToHalf(v));
    if (to == 16) for (float& v : t.f) v = ToBfloat16(v);
  } else if (to == 9) {
    std::vector<int64_t> b;
    for (int64_t k = 0; k < t.size(); ++k) b.push_back(t.At(k) != 0 ? 1 : 0);
    t.i = std::move(b);
    t.f.clear();
    t.is_int = true;
  } else if (IntRange(to, &lo, &hi)) {
    std::vector<int64_t> v;
    for (int64_t k = 0; k < t.size(); ++k) {
      if (t.is_int) { v.push_back(t.i[k]); continue; }
      const double d = std::trunc(double{t.f[k]});
      if (!(d >= lo && d <= hi)) return Unsup(n, "casting " + std::to_string(t.f[k]) + " out of the type's range");
      v.push_back(static_cast<int64_t>(d));
    }
    for (int64_t e : v)
      if (e < lo || e > hi) return Unsup(n, "casting " + std::to_string(e) + " out of the type's range");
    t.i = std::move(v);
    t.f.clear();
    t.is_int = true;
  } else {
    return Unsup(n, "casting to type " + std::to_string(to));
  }
  SetConst(n.outputs[0], std::move(t));
  return Status::OK();
}

// Cast of a computed tensor: to float32 it is the same floats; an integer-valued one (ArgMax's
// indices) to an integer type too; anything else would be computed at another precision.
Status PlanBuilder::LowerCast(const Node& n, const Val& x) {
  const int64_t to = n.AttrInt("to", 1);
  if (x.is_const) return FoldCast(n, x, to);
  double lo, hi;
  if (to == 1 || (x.int_valued && IntRange(to, &lo, &hi))) {
    Alias(n.outputs[0], x.buf, x.shape);
    return Status::OK();
  }
  if (IntRange(to, &lo, &hi) || to == 9) return Unsup(n, "casting a computed float tensor to an integer type");
  return Unsup(n, "casting a computed tensor to type " + std::to_string(to) + ": the engine computes in float32");
}

Result<Shape> PlanBuilder::SqueezedShape(const Node& n, const Val& x) {
  const int r = static_cast<int>(x.shape.size());
  std::vector<int64_t> axes = n.AttrInts("axes");
  if (axes.empty() && Has(n, 1)) {
    auto a = ConstInts(n, 1);
    if (!a.ok()) return a.status();
    axes = *a;
  }
  Shape out;
  if (n.op == "Squeeze") {
    for (auto& a : axes) if (a < 0) a += r;
    for (int d = 0; d < r; ++d) {
      bool listed = std::find(axes.begin(), axes.end(), d) != axes.end();
      if (listed && x.shape[d] != 1) return Bad(n, "squeezing a dimension that is not 1");
      if (!(listed || (axes.empty() && x.shape[d] == 1))) out.push_back(x.shape[d]);
    }
    return out;
  }
  int64_t ro = r + static_cast<int64_t>(axes.size());
  for (auto& a : axes) if (a < 0) a += ro;
  size_t src = 0;
  for (int64_t d = 0; d < ro; ++d) {
    if (std::find(axes.begin(), axes.end(), d) != axes.end()) out.push_back(1);
    else if (src < x.shape.size()) out.push_back(x.shape[src++]);
    else return Bad(n, "axes out of range");
  }
  return out;
}

Result<Shape> PlanBuilder::ReshapedShape(const Node& n, const Val& x) {
  const int64_t total = Prod(x.shape);
  std::vector<int64_t> target = n.AttrInts("shape");
  if (Has(n, 1)) {
    auto t = ConstInts(n, 1);
    if (!t.ok()) return t.status();
    target = *t;
  }
  bool allowzero = n.AttrInt("allowzero", 0) != 0;
  int64_t known = 1, infer = -1;
  Shape out;
  for (size_t d = 0; d < target.size(); ++d) {
    int64_t v = target[d];
    if (v == 0 && !allowzero) v = d < x.shape.size() ? x.shape[d] : 0;
    if (v == -1) { if (infer >= 0) return Bad(n, "two -1 dims"); infer = static_cast<int64_t>(d); }
    else known *= v;
    out.push_back(v);
  }
  // A batch of 1 baked into a reshape (converted from a fixed-batch TF.js graph) follows
  // the real batch, so one plan serves every batch size.
  const bool batch_of_one = batch_ > 1 && !out.empty() && out[0] == 1 && !x.shape.empty() && x.shape[0] == batch_;
  if ((batch_of_one && known * batch_ == total && infer < 0) ||
      (batch_of_one && infer > 0 && known > 0 && total % (known * batch_) == 0)) {
    out[0] = batch_;
    known *= batch_;
  }
  if (infer >= 0) {
    if (known == 0 || total % known) return Bad(n, "cannot reshape " + ShapeStr(x.shape) + " to " + ShapeStr(target));
    out[infer] = total / known;
  }
  return out;
}

Status PlanBuilder::LowerReshapeLike(size_t i) {
  const Node& n = g_.nodes[i];
  const Val x = V(n.inputs[0]);
  if (n.op == "Shape") return FoldShapeOf(n, x);
  Result<Shape> out = x.shape;  // Identity, Dropout
  if (n.op == "Cast") return LowerCast(n, x);
  if (n.op == "Dropout") {  // inference unless training_mode says otherwise: every element kept
    if (Has(n, 2)) {
      auto training = ConstInts(n, 2);
      if (!training.ok()) return training.status();
      if (!training->empty() && (*training)[0] != 0) return Unsup(n, "training_mode true");
    }
    if (n.outputs.size() > 1 && !n.outputs[1].empty()) {
      HostTensor mask;
      mask.is_int = true;
      mask.shape = x.shape;
      mask.i.assign(static_cast<size_t>(Prod(x.shape)), 1);
      SetConst(n.outputs[1], std::move(mask));
    }
  }
  if (n.op == "Flatten") {
    const int r = static_cast<int>(x.shape.size());
    int64_t axis = AxisOf(n, 1, static_cast<size_t>(r));
    out = Shape{Prod(x.shape, 0, axis), Prod(x.shape, axis)};
  } else if (n.op == "Squeeze" || n.op == "Unsqueeze") {
    out = SqueezedShape(n, x);
  } else if (n.op == "Reshape") {
    out = ReshapedShape(n, x);
  }
  if (!out.ok()) return out.status();
  if (Prod(*out) != Prod(x.shape)) return Bad(n, "cannot reshape " + ShapeStr(x.shape) + " to " + ShapeStr(*out));
  if (x.is_const) {
    HostTensor t = x.c;
    t.shape = *out;
    SetConst(n.outputs[0], std::move(t));
  } else {
    Alias(n.outputs[0], x.buf, *out);
  }
  return Status::OK();
}

}  // namespace framemill::engine::plan_detail
