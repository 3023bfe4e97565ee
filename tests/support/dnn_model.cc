#include "tests/support/dnn_model.h"

#include <algorithm>
#include <cmath>

#include <cstring>
#include <filesystem>

#include "gpu/ops.h"
#include "models/letterbox.h"

namespace framemill::models {

Result<std::unique_ptr<DnnModel>> DnnModel::Open(const ModelManifest& manifest) {
  if (manifest.onnx_file.empty() || !std::filesystem::exists(manifest.onnx_file))
    return Status::NotFound("model " + manifest.name + ": no ONNX file at '" +
                            manifest.onnx_file + "'");
  if (manifest.outputs.empty())
    return Status::Corruption("model " + manifest.name + ": manifest lists no outputs");
  std::unique_ptr<DnnModel> m(new DnnModel(manifest));
  try {
    m->net_ = cv::dnn::readNetFromONNX(manifest.onnx_file);
    if (m->net_.empty())
      return Status::Corruption("model " + manifest.name + ": OpenCV loaded no layers from '" +
                                manifest.onnx_file + "'");
    m->net_.setPreferableBackend(cv::dnn::DNN_BACKEND_OPENCV);
    m->net_.setPreferableTarget(cv::dnn::DNN_TARGET_CPU);
  } catch (const cv::Exception& e) {
    return Status::Corruption("model " + manifest.name + ": cannot load '" + manifest.onnx_file +
                              "': " + e.what());
  }
  for (const auto& o : manifest.outputs) m->output_names_.push_back(o.name);
  m->batched_ = manifest.batchable;
  return m;
}

Result<std::vector<std::vector<OutputTensor>>> DnnModel::Run(const std::vector<cv::Mat>& pictures) {
  if (pictures.empty()) return std::vector<std::vector<OutputTensor>>{};
  for (size_t i = 0; i < pictures.size(); ++i) {
    if (pictures[i].empty() || pictures[i].type() != CV_8UC3)
      return Status::InvalidArgument("model " + manifest_.name + ": image " + std::to_string(i) +
                                     " is empty or not 8-bit BGR");
  }
  gpu::PreprocessSpec spec = manifest_.preprocess;
  spec.type = gpu::TensorType::kFloat32;
  gpu::Tensor t = gpu::PreprocessCpu(ModelInputImages(manifest_, pictures), spec);
  RoundIfIntegerInput(manifest_, &t);
  return RunTensor(t);
}

Result<std::vector<std::vector<OutputTensor>>> DnnModel::RunTensor(const gpu::Tensor& nchw) {
  if (nchw.shape.size() != 4 || nchw.type != gpu::TensorType::kFloat32)
    return Status::InvalidArgument("model " + manifest_.name + ": input must be NCHW fp32");
  int dims[4];
  for (int i = 0; i < 4; ++i) dims[i] = static_cast<int>(nchw.shape[i]);
  // Wraps the tensor's memory; Forward copies it into the net before the view goes away.
  const cv::Mat blob(4, dims, CV_32F, const_cast<uint8_t*>(nchw.data.data()));
  return RunBlob(blob);
}

Result<std::vector<std::vector<OutputTensor>>> DnnModel::RunBlob(const cv::Mat& nchw) {
  const int channels = manifest_.input_shape.size() == 4 ? static_cast<int>(manifest_.input_shape[1]) : 3;
  if (nchw.dims != 4 || nchw.type() != CV_32F || nchw.size[1] != channels)
    return Status::InvalidArgument("model " + manifest_.name + ": input must be Nx" +
                                   std::to_string(channels) + "xHxW float32");
  const int n = nchw.size[0];
  if (n == 0) return std::vector<std::vector<OutputTensor>>{};
  if (n > 1 && batched_) {
    auto r = Forward(nchw, n);
    if (r.ok() || !r.status().IsInvalidArgument()) return r;
    batched_ = false;  // the graph does not keep the batch: fall through to one by one
  }
  std::vector<std::vector<OutputTensor>> all;
  all.reserve(n);
  const size_t per = nchw.total() / n;
  for (int b = 0; b < n; ++b) {
    int dims[4] = {1, channels, nchw.size[2], nchw.size[3]};
    cv::Mat one(4, dims, CV_32F, const_cast<float*>(nchw.ptr<float>()) + b * per);
    auto r = Forward(one, 1);
    if (!r.ok()) return r.status();
    all.push_back(std::move(r.value()[0]));
  }
  return all;
}

Result<std::vector<std::vector<OutputTensor>>> DnnModel::Forward(const cv::Mat& nchw, int n) {
  std::vector<cv::Mat> outs;
  try {
    net_.setInput(nchw, manifest_.input_name);
    net_.forward(outs, output_names_);
  } catch (const cv::Exception& e) {
    return Status::Internal("model " + manifest_.name + ": forward failed: " + e.what());
  }
  if (outs.size() != output_names_.size())
    return Status::Internal("model " + manifest_.name + ": OpenCV returned " +
                            std::to_string(outs.size()) + " outputs, manifest lists " +
                            std::to_string(output_names_.size()));
  std::vector<std::vector<OutputTensor>> result(n);
  for (size_t i = 0; i < outs.size(); ++i) {
    cv::Mat o = outs[i];
    if (o.type() != CV_32F) o.convertTo(o, CV_32F);
    if (!o.isContinuous()) o = o.clone();
    const size_t total = o.total();
    // A graph with a hard-coded batch of 1 (a Reshape to [1, ...]) folds the batch away.
    if (o.dims < 1 || o.size[0] != n || total % n != 0) {
      if (n > 1)
        return Status::InvalidArgument("model " + manifest_.name + ": output '" +
                                       output_names_[i] + "' lost the batch dimension");
    }
    std::vector<int64_t> shape;
    shape.push_back(1);
    if (o.dims >= 1 && o.size[0] == n) {
      for (int d = 1; d < o.dims; ++d) shape.push_back(o.size[d]);
    } else {
      for (int d = 0; d < o.dims; ++d) shape.push_back(o.size[d]);
    }
    const size_t per = total / n;
    const float* p = o.ptr<float>();
    for (int b = 0; b < n; ++b) {
      OutputTensor t;
      t.name = output_names_[i];
      t.shape = shape;
      t.data.assign(p + b * per, p + (b + 1) * per);
      result[b].push_back(std::move(t));
    }
  }
  return result;
}

}  // namespace framemill::models
