#include "stages/segment_stage.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <opencv2/imgcodecs.hpp>

#include "models/decode.h"

namespace framemill {
namespace {

// Written beside its final name, then renamed: a reader (or a rerun after a crash) sees
// the whole PNG or none.
Status WritePng(const cv::Mat& mask, const std::string& path) {
  std::vector<uchar> bytes;
  if (!cv::imencode(".png", mask, bytes))
    return Status::Internal("cannot encode the mask for " + path);
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  if (ec) return Status::IOError("cannot create " + std::filesystem::path(path).parent_path().string() +
                                 ": " + ec.message());
  const std::string tmp = path + ".tmp" + std::to_string(getpid());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    if (!f) return Status::IOError("cannot write " + tmp);
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    return Status::IOError("cannot rename the mask to " + path);
  }
  return Status::OK();
}

}  // namespace

SegmentStage::SegmentStage(std::shared_ptr<models::ModelCache> cache, ModelStageOptions frames,
                           SegmentOptions options, const std::string& out_dir)
    : ModelStage("segment", std::move(cache), frames), options_(std::move(options)) {
  std::error_code ec;
  auto abs = std::filesystem::absolute(out_dir, ec);
  mask_dir_ = ((ec ? std::filesystem::path(out_dir) : abs) / "segment").lexically_normal().string();
}

std::string SegmentStage::MaskPath(const ClaimedJob& job, int64_t frame) const {
  // The lease token in the name fences the file as the store fences the result: a worker
  // that lost its lease writes beside the new holder's mask, never over it.
  std::string name = std::to_string(job.item_id);
  if (frame >= 0) name += "-f" + std::to_string(frame);
  char token[24];
  std::snprintf(token, sizeof token, "-%016llx",
                static_cast<unsigned long long>(job.lease_token));
  return mask_dir_ + "/" + name + token + ".png";
}

Status SegmentStage::Analyse(const ModelBatch& batch, const StageContext& ctx,
                             std::vector<FrameResult>* results, std::string* device) {
  models::ModelRunner& runner = *batch.runners.front();
  auto outs = RunOnFrames(runner, batch, ctx, device);
  if (!outs.ok()) return outs.status();
  for (size_t i = 0; i < batch.frames.size(); ++i) {
    const ModelFrame& frame = batch.frames[i];
    auto mask = models::DecodeSegmentation(runner.manifest(), (*outs)[i], frame.bgr.size());
    if (!mask.ok()) return mask.status();
    const std::string path = MaskPath(batch.jobs[frame.job], frame.index);
    FM_RETURN_IF_ERROR(WritePng(mask->binary, path));
    nlohmann::json r = {{"model", runner.manifest().name}, {"coverage", mask->coverage},
                        {"mask", path}};
    r["bbox"] = mask->bbox.area() > 0
                    ? nlohmann::json{mask->bbox.x, mask->bbox.y, mask->bbox.width, mask->bbox.height}
                    : nlohmann::json(nullptr);
    (*results)[i].result = std::move(r);
    (*results)[i].artifacts.push_back(path);
  }
  return Status::OK();
}

void SegmentStage::Summarise(const std::vector<nlohmann::json>& frames, nlohmann::json* r) const {
  SummariseMean(frames, "coverage", "mean_coverage", r);
}

}  // namespace framemill
