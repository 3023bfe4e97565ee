#include "models/engine_model.h"

#include <cstring>

#include <spdlog/spdlog.h>

#include "models/catalog.h"
#include "models/letterbox.h"

namespace framemill::models {

Result<std::unique_ptr<EngineModel>> EngineModel::Open(const ModelManifest& m,
                                                       gpu::ComputeBackend& backend) {
  if (m.graph_file.empty())
    return Status::NotFound("model " + m.name + " has no engine graph (model.fmg.json): run "
                            "`framemill models fetch --force --only " + m.name + "`");
  auto kernels = backend.MakeEngineKernels();
  if (!kernels.ok()) return kernels.status();
  engine::EngineOptions options;
  const gpu::EngineStorage storage = backend.Storage();
  const char* setting = storage == gpu::EngineStorage::kFp16   ? "fp16"
                        : storage == gpu::EngineStorage::kFp32 ? "fp32"
                                                                : "auto";
  const bool fp16 = PrecisionOnDevice(m.name, setting).precision == "fp16";
  options.storage = fp16 ? engine::StorageType::kFloat16 : engine::StorageType::kFloat32;
  auto engine = engine::Engine::Load(m.graph_file, std::move(kernels).value(), options);
  if (!engine.ok()) return engine.status();
  return std::unique_ptr<EngineModel>(new EngineModel(m, backend, std::move(engine).value()));
}

int64_t EngineModel::BatchBytesPerImage() {
  auto plan = engine_->PlanFor(1);
  return plan.ok() ? (*plan)->BatchBytes() : 0;
}

Result<std::vector<std::vector<OutputTensor>>> EngineModel::Run(const std::vector<cv::Mat>& bgr) {
  for (size_t i = 0; i < bgr.size(); ++i)
    if (bgr[i].empty() || bgr[i].type() != CV_8UC3)
      return Status::InvalidArgument("image " + std::to_string(i) + " is not 8-bit BGR");
  std::vector<std::vector<OutputTensor>> out;
  if (batched()) {
    FM_RETURN_IF_ERROR(RunBatch(bgr, &out));
  } else {
    // A graph fixed at batch 1 (a batch-1 reshape inside): image by image.
    for (const cv::Mat& image : bgr) FM_RETURN_IF_ERROR(RunBatch({image}, &out));
  }
  return out;
}

Result<std::vector<std::vector<OutputTensor>>> EngineModel::RunTensor(const gpu::Tensor& nchw) {
  if (nchw.shape.size() != 4 || nchw.type != gpu::TensorType::kFloat32 || nchw.shape[0] < 1 ||
      nchw.data.size() % (4 * static_cast<size_t>(nchw.shape[0])) != 0)
    return Status::InvalidArgument("model " + manifest_.name + ": input must be an NCHW fp32 batch");
  // Engine::Run converts an fp32 input to fp16 storage on the host as it uploads it.
  std::vector<std::vector<OutputTensor>> out;
  FM_RETURN_IF_ERROR(RunInput(nchw, static_cast<size_t>(nchw.shape[0]), &out));
  return out;
}

Status EngineModel::RunBatch(const std::vector<cv::Mat>& images,
                             std::vector<std::vector<OutputTensor>>* out) {
  if (images.empty()) return Status::OK();
  gpu::PreprocessSpec spec = manifest_.preprocess;
  spec.type = engine_->storage() == engine::StorageType::kFloat16 ? gpu::TensorType::kFloat16
                                                                       : gpu::TensorType::kFloat32;
  auto input = backend_.PreprocessBatch(ModelInputImages(manifest_, images), spec);
  if (!input.ok()) return input.status();
  RoundIfIntegerInput(manifest_, &input.value());  // fp16 storage rounds through half anyway
  return RunInput(*input, images.size(), out);
}

Status EngineModel::RunInput(const gpu::Tensor& input, size_t n,
                             std::vector<std::vector<OutputTensor>>* out) {
  auto result = engine_->Run(input);
  if (!result.ok()) return result.status();
  LogNotes();
  // The input as uploaded: in the engine's storage type, whatever type it came in.
  const int64_t input_bytes = static_cast<int64_t>(input.data.size() / input.ElementBytes() *
                                                  engine::StorageBytes(engine_->storage()));
  if (auto plan = engine_->PlanFor(static_cast<int>(n)); plan.ok())
    backend_.SetLastBatchBytes((*plan)->BatchBytes() + input_bytes);
  for (size_t b = 0; b < n; ++b) {
    std::vector<OutputTensor> per_image;
    for (const ModelOutputSpec& o : manifest_.outputs) {
      auto it = result->find(o.name);
      if (it == result->end())
        return Status::Internal("engine gave no output '" + o.name + "' for model " + manifest_.name);
      const gpu::Tensor& t = it->second;
      const size_t total = t.data.size() / sizeof(float);
      if (t.type != gpu::TensorType::kFloat32 || t.shape.empty() ||
          t.shape[0] != static_cast<int64_t>(n) || total % n != 0)
        return Status::Internal("engine output '" + o.name + "' of model " + manifest_.name +
                                " does not hold the batch as fp32");
      OutputTensor ot;
      ot.name = o.name;
      ot.shape = t.shape;
      ot.shape[0] = 1;
      const size_t each = total / n;
      ot.data.resize(each);
      std::memcpy(ot.data.data(), t.data.data() + b * each * sizeof(float), each * sizeof(float));
      per_image.push_back(std::move(ot));
    }
    out->push_back(std::move(per_image));
  }
  return Status::OK();
}

// Once per model and plan, what its backend did beyond running each step as asked: one line
// naming the steps split so that each part runs on a fast kernel (info; why, step by step, at
// debug), and a warning for any step left on a reference kernel (slow: a bug to report).
void EngineModel::LogNotes() {
  const auto& notes = engine_->Notes();
  std::string split;
  int count = 0;
  for (; notes_logged_ < notes.size(); ++notes_logged_) {
    const auto& [step, note] = notes[notes_logged_];
    if (note.kind == engine::StepNote::Kind::kReference) {
      spdlog::warn("model {} on {}: step {} runs on a reference kernel: {}", manifest_.name, backend_.device(), step,
                   note.what);
      continue;
    }
    split += (count++ ? ", " : "") + step;
    spdlog::debug("model {} on {}: step {}: {}", manifest_.name, backend_.device(), step, note.what);
  }
  if (count > 0)
    spdlog::info("model {} on {}: {} step(s) split so that each part runs on a JIT kernel (why: LOG_LEVEL=debug): {}",
                 manifest_.name, backend_.device(), count, split);
}

}  // namespace framemill::models
