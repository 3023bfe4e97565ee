#include "engine/engine.h"

#include <chrono>
#include <cstring>

#include "engine/onnx_import.h"

namespace framemill::engine {

namespace {

// Host fp32 values -> bytes in the storage type.
std::vector<uint8_t> ToStorage(const float* v, size_t n, StorageType st) {
  std::vector<uint8_t> out(n * StorageBytes(st));
  if (st == StorageType::kFloat32) {
    std::memcpy(out.data(), v, n * 4);
  } else {
    auto* h = reinterpret_cast<uint16_t*>(out.data());
    FloatsToHalves(v, h, n);
  }
  return out;
}

}  // namespace

Result<std::unique_ptr<Engine>> Engine::Load(const std::string& fmg_path,
                                             std::unique_ptr<Kernels> kernels,
                                             EngineOptions options) {
  if (!kernels) return Status::InvalidArgument("engine: no kernels");
  auto graph = IsOnnxPath(fmg_path) ? LoadOnnxGraph(fmg_path) : LoadGraph(fmg_path);
  if (!graph.ok()) return graph.status();
  return FromGraph(std::move(graph).value(), std::move(kernels), options);
}

Result<std::unique_ptr<Engine>> Engine::FromGraph(Graph graph, std::unique_ptr<Kernels> kernels,
                                                  EngineOptions options) {
  if (!kernels) return Status::InvalidArgument("engine: no kernels");
  std::unique_ptr<Engine> e(new Engine());
  e->graph_ = std::move(graph);
  e->kernels_ = std::move(kernels);
  e->options_ = options;
  FM_RETURN_IF_ERROR(e->kernels_->Prepare(options.storage));
  auto plan = e->PlanFor(NaturalBatch(e->graph_));
  if (!plan.ok()) return plan.status();
  FM_RETURN_IF_ERROR(e->UploadWeights(**plan));
  e->weights_uploaded_ = true;
  e->plans_.begin()->second->constants.clear();
  return e;
}

Engine::~Engine() {
  if (kernels_) {
    kernels_->Free(arena_);
    kernels_->Free(weights_);
  }
}

Status Engine::UploadWeights(const Plan& plan) {
  weight_bytes_ = plan.weight_bytes;
  if (weight_bytes_ == 0) return Status::OK();
  void* w = nullptr;
  FM_RETURN_IF_ERROR(kernels_->Alloc(static_cast<size_t>(weight_bytes_), &w));
  weights_ = w;
  for (const Buffer& b : plan.buffers) {
    if (!b.weight) continue;
    const HostTensor& t = plan.constants[b.host_const];
    auto bytes = ToStorage(t.f.data(), t.f.size(), options_.storage);
    FM_RETURN_IF_ERROR(kernels_->Upload(static_cast<uint8_t*>(weights_) + b.offset, bytes.data(), bytes.size()));
  }
  return Status::OK();
}

Result<const Plan*> Engine::PlanFor(int batch) {
  auto it = plans_.find(batch);
  if (it != plans_.end()) return static_cast<const Plan*>(it->second.get());
  auto plan = BuildPlan(graph_, batch, options_.storage, kernels_.get());
  if (!plan.ok()) return plan.status();
  if (!plans_.empty()) {
    // Weights are shared by every batch size: the layout must not depend on the batch.
    const Plan& first = *plans_.begin()->second;
    if (plan->weight_bytes != first.weight_bytes)
      return Status::Internal("engine: weights of the batch-" + std::to_string(batch) +
                              " plan differ from the batch-1 plan");
  }
  auto p = std::make_unique<Plan>(std::move(plan).value());
  // The weights' host values are needed only to upload them, once: a plan keeps none after
  // (on the CPU, where the device is the host, yolov8s held 43 MB of them twice more).
  if (weights_uploaded_) p->constants.clear();
  const Plan* raw = p.get();
  plans_[batch] = std::move(p);
  return raw;
}

int64_t Engine::PlanBytes(int batch) {
  auto p = PlanFor(batch);
  return p.ok() ? (*p)->DeviceBytes() : -1;
}

Result<std::map<std::string, Tensor>> Engine::Run(const Tensor& input) {
  return Run(std::vector<const Tensor*>{&input});
}

std::vector<std::string> Engine::InputNames() {
  std::vector<std::string> names;
  auto plan = PlanFor(NaturalBatch(graph_));
  if (plan.ok())
    for (const PlanInput& in : (*plan)->inputs) names.push_back(in.name);
  return names;
}

Result<std::map<std::string, Tensor>> Engine::Run(const std::vector<const Tensor*>& inputs) {
  if (inputs.empty() || inputs[0] == nullptr || (!inputs[0]->shape.empty() && inputs[0]->shape[0] < 1))
    return Status::InvalidArgument("engine: input has no batch dimension");
  const int batch = inputs[0]->shape.empty() ? NaturalBatch(graph_) : static_cast<int>(inputs[0]->shape[0]);
  auto planr = PlanFor(batch);
  if (!planr.ok()) return planr.status();
  const Plan& plan = **planr;
  if (inputs.size() != plan.inputs.size())
    return Status::InvalidArgument("engine: " + std::to_string(inputs.size()) + " input(s) given, the graph takes " +
                                   std::to_string(plan.inputs.size()));
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (inputs[k] != nullptr && inputs[k]->shape == plan.inputs[k].shape) continue;
    std::string want, got;
    for (auto d : plan.inputs[k].shape) want += std::to_string(d) + " ";
    if (inputs[k] != nullptr)
      for (auto d : inputs[k]->shape) got += std::to_string(d) + " ";
    return Status::InvalidArgument("engine: input '" + plan.inputs[k].name + "' shape [" + got +
                                   "] but the graph wants [" + want + "]");
  }
  FM_RETURN_IF_ERROR(EnsureArena(plan, batch));
  for (size_t k = 0; k < inputs.size(); ++k) FM_RETURN_IF_ERROR(UploadInput(plan, plan.inputs[k], *inputs[k]));
  if (step_ms_ != nullptr) step_ms_->resize(plan.steps.size(), 0.0);
  const bool first_run = !noted_batches_.count(batch);
  for (size_t k = 0; k < plan.steps.size(); ++k) {
    const auto t0 = step_ms_ != nullptr ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    Status st = RunStep(plan, plan.steps[k]);
    if (!st.ok()) return Status(st);  // the Kernels' status, unchanged
    if (first_run) {
      StepNote note = kernels_->LastStepNote();
      if (note.kind != StepNote::Kind::kNone) notes_.emplace_back(plan.steps[k].node, std::move(note));
    }
    if (step_ms_ != nullptr) {
      FM_RETURN_IF_ERROR(kernels_->Sync());
      (*step_ms_)[k] += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    }
  }
  FM_RETURN_IF_ERROR(kernels_->Sync());
  noted_batches_.insert(batch);
  return DownloadOutputs(plan);
}

Status Engine::EnsureArena(const Plan& plan, int batch) {
  if (arena_batch_ == batch) return Status::OK();
  kernels_->Free(arena_);
  arena_ = nullptr;
  arena_batch_ = 0;
  void* a = nullptr;
  FM_RETURN_IF_ERROR(kernels_->Alloc(static_cast<size_t>(std::max<int64_t>(plan.BatchBytes(), 1)), &a));
  arena_ = a;
  arena_batch_ = batch;
  return Status::OK();
}

void* Engine::Where(const Plan& plan, int b) const {
  if (b < 0) return nullptr;
  const Buffer& buf = plan.buffers[b];
  return (buf.weight ? static_cast<uint8_t*>(weights_) : static_cast<uint8_t*>(arena_)) + buf.offset;
}

Status Engine::UploadInput(const Plan& plan, const PlanInput& pin, const Tensor& input) {
  const Buffer& in = plan.buffers[pin.buffer];
  size_t n_in = static_cast<size_t>(in.elements);
  if (input.data.size() != n_in * input.ElementBytes())
    return Status::InvalidArgument("engine: input data size does not match its shape");
  bool same = (input.type == TensorType::kFloat32) == (options_.storage == StorageType::kFloat32);
  if (same) return kernels_->Upload(Where(plan, pin.buffer), input.data.data(), input.data.size());
  std::vector<float> f(n_in);
  for (size_t k = 0; k < n_in; ++k) f[k] = input.At(k);
  const std::vector<uint8_t> staged = ToStorage(f.data(), n_in, options_.storage);
  return kernels_->Upload(Where(plan, pin.buffer), staged.data(), staged.size());
}

Status Engine::RunStep(const Plan& plan, const Step& s) {
  void* scratch = static_cast<uint8_t*>(arena_) + plan.ScratchOffset();
  auto in_ptr = [&](size_t k) -> const void* { return k < s.inputs.size() ? Where(plan, s.inputs[k]) : nullptr; };
  void* y = Where(plan, s.output);
  switch (s.kind) {
    case StepKind::kConv2d:
      return kernels_->Conv2d(std::get<Conv2dParams>(s.params), in_ptr(0), in_ptr(1), in_ptr(2), in_ptr(3), y, scratch);
    case StepKind::kConvTranspose2d:
      return kernels_->ConvTranspose2d(std::get<ConvTranspose2dParams>(s.params), in_ptr(0), in_ptr(1), in_ptr(2), y, scratch);
    case StepKind::kPool2d: return kernels_->Pool2d(std::get<Pool2dParams>(s.params), in_ptr(0), y);
    case StepKind::kBinary: return kernels_->Binary(std::get<BinaryParams>(s.params), in_ptr(0), in_ptr(1), y);
    case StepKind::kUnary: return kernels_->Unary(std::get<UnaryParams>(s.params), in_ptr(0), y);
    case StepKind::kResize: return kernels_->Resize(std::get<ResizeParams>(s.params), in_ptr(0), y);
    case StepKind::kPad: return kernels_->Pad(std::get<PadParams>(s.params), in_ptr(0), y);
    case StepKind::kConcat: {
      ConcatParams p = std::get<ConcatParams>(s.params);
      p.axis_sizes = s.concat_sizes.data();
      std::vector<const void*> ins;
      for (size_t k = 0; k < s.inputs.size(); ++k) ins.push_back(in_ptr(k));
      return kernels_->Concat(p, ins.data(), y);
    }
    case StepKind::kTranspose: return kernels_->Transpose(std::get<TransposeParams>(s.params), in_ptr(0), y);
    case StepKind::kSlice: return kernels_->Slice(std::get<SliceParams>(s.params), in_ptr(0), y);
    case StepKind::kReduce: return kernels_->Reduce(std::get<ReduceParams>(s.params), in_ptr(0), y);
    case StepKind::kSoftmax: return kernels_->Softmax(std::get<SoftmaxParams>(s.params), in_ptr(0), y);
    case StepKind::kMatMul:
      return kernels_->MatMul(std::get<MatMulParams>(s.params), in_ptr(0), in_ptr(1), in_ptr(2), y, scratch);
    case StepKind::kArgMax: return kernels_->ArgMax(std::get<ArgMaxParams>(s.params), in_ptr(0), y);
    case StepKind::kCopy: return kernels_->Copy(in_ptr(0), y, std::get<CopyParams>(s.params).elements);
  }
  return Status::OK();
}

Result<std::map<std::string, Tensor>> Engine::DownloadOutputs(const Plan& plan) {
  std::map<std::string, Tensor> outs;
  for (const PlanOutput& o : plan.outputs) {
    const Buffer& b = plan.buffers[o.buffer];
    Tensor t;
    t.shape = o.shape;
    t.type = TensorType::kFloat32;
    t.data.resize(static_cast<size_t>(b.elements) * 4);
    if (options_.storage == StorageType::kFloat32) {  // straight into the tensor: no copy between
      FM_RETURN_IF_ERROR(kernels_->Download(t.data.data(), Where(plan, o.buffer), t.data.size()));
    } else {
      std::vector<uint8_t> raw(static_cast<size_t>(b.bytes));
      FM_RETURN_IF_ERROR(kernels_->Download(raw.data(), Where(plan, o.buffer), raw.size()));
      auto* h = reinterpret_cast<const uint16_t*>(raw.data());
      auto* f = reinterpret_cast<float*>(t.data.data());
      HalvesToFloats(h, f, static_cast<size_t>(b.elements));
    }
    outs[o.name] = std::move(t);
  }
  return outs;
}

}  // namespace framemill::engine
