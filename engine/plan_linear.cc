// Lowerings of MatMul, Gemm and the reductions (plan_builder.h).
#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <numeric>
#include <set>

#include "engine/plan_builder.h"

namespace framemill::engine::plan_detail {


Status PlanBuilder::LowerMatMul(size_t i) {
  const Node& n = g_.nodes[i];
  const Val& a = V(n.inputs[0]);
  const Val& b = V(n.inputs[1]);
  if (a.is_const && b.is_const) return Unsup(n, "constant folding of MatMul");
  Shape as = a.shape, bs = b.shape;
  bool a_vec = as.size() == 1, b_vec = bs.size() == 1;
  if (a_vec) as.insert(as.begin(), 1);
  if (b_vec) bs.push_back(1);
  MatMulParams p;
  p.m = as[as.size() - 2]; p.k = as.back(); p.n = bs.back();
  if (bs[bs.size() - 2] != p.k) return Bad(n, "inner dims of " + ShapeStr(a.shape) + " x " + ShapeStr(b.shape));
  Shape lead_a(as.begin(), as.end() - 2), lead_b(bs.begin(), bs.end() - 2), lead;
  if (lead_b.empty() || Prod(lead_b) == 1) {
    // [.., M, K] x [K, N]: one GEMM with M' = prod(leading) * M.
    p.m *= Prod(lead_a);
    lead = lead_a;
  } else if (lead_a == lead_b) {
    p.batch = Prod(lead_a);
    p.a_batch_stride = p.m * p.k;
    p.b_batch_stride = p.k * p.n;
    lead = lead_a;
  } else if (lead_a.empty() || Prod(lead_a) == 1) {
    p.batch = Prod(lead_b);
    p.b_batch_stride = p.k * p.n;
    lead = lead_b;
  } else {
    return Unsup(n, "broadcast of batch dims " + ShapeStr(a.shape) + " x " + ShapeStr(b.shape));
  }
  Shape out = lead;
  if (!a_vec) out.push_back(as[as.size() - 2]);
  if (!b_vec) out.push_back(p.n);
  p.beta = 0;
  int ab = DeviceOf(n.inputs[0]), bb = DeviceOf(n.inputs[1]), cb = -1;
  std::string name = n.outputs[0];
  int c = SoleConsumer(name);
  if (c >= 0 && g_.nodes[c].op == "Add" && g_.nodes[c].inputs.size() == 2) {
    const Node& add = g_.nodes[c];
    const std::string& other = add.inputs[0] == name ? add.inputs[1] : add.inputs[0];
    const Val& o = V(other);
    if (o.is_const && o.c.size() == p.n && (o.shape.empty() || o.shape.back() == p.n) &&
        o.shape.size() <= out.size()) {
      cb = DeviceOf(other);
      p.beta = 1;
      p.c_stride_n = 1;
      skip_[c] = true;
      plan_.fused++;
      name = add.outputs[0];
    }
  }
  name = FuseActivation(name, &p.act);
  return Emit(StepKind::kMatMul, {ab, bb, cb}, n, out, p, name, kernels_ ? kernels_->MatMulScratchBytes(p) : 0);
}


Status PlanBuilder::LowerGemm(size_t i) {
  const Node& n = g_.nodes[i];
  const Val& a = V(n.inputs[0]);
  const Val& b = V(n.inputs[1]);
  if (a.shape.size() != 2 || b.shape.size() != 2) return Bad(n, "Gemm needs 2-D inputs");
  MatMulParams p;
  p.trans_a = n.AttrInt("transA", 0) != 0;
  p.trans_b = n.AttrInt("transB", 0) != 0;
  p.alpha = n.AttrFloat("alpha", 1.0f);
  p.beta = n.AttrFloat("beta", 1.0f);
  p.m = p.trans_a ? a.shape[1] : a.shape[0];
  p.k = p.trans_a ? a.shape[0] : a.shape[1];
  p.n = p.trans_b ? b.shape[0] : b.shape[1];
  if ((p.trans_b ? b.shape[1] : b.shape[0]) != p.k) return Bad(n, "inner dims disagree");
  int cb = -1;
  if (Has(n, 2)) {
    const Val& c = V(n.inputs[2]);
    Shape cs = c.shape;
    while (cs.size() < 2) cs.insert(cs.begin(), 1);
    if ((cs[0] != 1 && cs[0] != p.m) || (cs[1] != 1 && cs[1] != p.n)) return Bad(n, "C does not broadcast");
    p.c_stride_m = cs[0] == 1 ? 0 : cs[1];
    p.c_stride_n = cs[1] == 1 ? 0 : 1;
    cb = DeviceOf(n.inputs[2]);
  } else {
    p.beta = 0;
  }
  int ab = DeviceOf(n.inputs[0]), bb = DeviceOf(n.inputs[1]);
  std::string name = FuseActivation(n.outputs[0], &p.act);
  return Emit(StepKind::kMatMul, {ab, bb, cb}, n, {p.m, p.n}, p, name,
              kernels_ ? kernels_->MatMulScratchBytes(p) : 0);
}


Status PlanBuilder::LowerReduce(size_t i) {
  const Node& n = g_.nodes[i];
  const Val& x = V(n.inputs[0]);
  int64_t r = static_cast<int64_t>(x.shape.size());
  std::vector<int64_t> axes = n.AttrInts("axes");
  if (axes.empty() && Has(n, 1)) {
    auto ax = ConstInts(n, 1);
    if (!ax.ok()) return ax.status();
    axes = *ax;
  }
  if (axes.empty()) {
    if (n.AttrInt("noop_with_empty_axes", 0)) { vals_[n.outputs[0]] = x; return Status::OK(); }
    for (int64_t k = 0; k < r; ++k) axes.push_back(k);
  }
  for (auto& a : axes) {
    if (a < 0) a += r;
    if (a < 0 || a >= r) return Bad(n, "axis out of range");
  }
  std::sort(axes.begin(), axes.end());
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  for (size_t k = 1; k < axes.size(); ++k)
    if (axes[k] != axes[k - 1] + 1) return Unsup(n, "reduction over non-adjacent axes");
  bool keep = n.AttrInt("keepdims", 1) != 0;
  Shape out;
  for (int64_t k = 0; k < r; ++k) {
    bool red = std::find(axes.begin(), axes.end(), k) != axes.end();
    if (!red) out.push_back(x.shape[k]);
    else if (keep) out.push_back(1);
  }
  ReduceParams p;
  static const std::map<std::string, ReduceOp> kOps = {
      {"ReduceMean", ReduceOp::kMean}, {"ReduceSum", ReduceOp::kSum}, {"ReduceMax", ReduceOp::kMax},
      {"ReduceMin", ReduceOp::kMin}, {"ReduceSumSquare", ReduceOp::kSumSquare}, {"ReduceL2", ReduceOp::kL2}};
  p.op = kOps.at(n.op);
  p.outer = Prod(x.shape, 0, axes.front());
  p.reduce = Prod(x.shape, axes.front(), axes.back() + 1);
  p.inner = Prod(x.shape, axes.back() + 1);
  if (x.is_const) return Unsup(n, "constant folding of reductions");
  return Emit(StepKind::kReduce, {x.buf}, n, out, p);
}

}  // namespace framemill::engine::plan_detail
