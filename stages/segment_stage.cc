#include "stages/segment_stage.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <opencv2/imgcodecs.hpp>

#include "models/decode.h"
#include "stages/model_device.h"

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

SegmentStage::SegmentStage(std::shared_ptr<ModelPool> pool, MediaConfig media,
                           SegmentConfig config, const std::string& out_dir)
    : pool_(std::move(pool)), media_(media), config_(std::move(config)) {
  std::error_code ec;
  auto abs = std::filesystem::absolute(out_dir, ec);
  mask_dir_ = ((ec ? std::filesystem::path(out_dir) : abs) / "segment").lexically_normal().string();
  spec_.name = "segment";
}

std::string SegmentStage::MaskPath(int64_t item_id, int64_t frame) const {
  std::string name = std::to_string(item_id);
  if (frame >= 0) name += "-f" + std::to_string(frame);
  return mask_dir_ + "/" + name + ".png";
}

StageOutput SegmentStage::Run(const ClaimedJob& job) {
  return RunBatch({job}, StageContext{}).front();
}

std::vector<StageOutput> SegmentStage::RunBatch(const std::vector<ClaimedJob>& jobs,
                                                const StageContext& ctx) {
  auto model = pool_->Borrow(config_.model);
  if (!model.ok()) return FailAll(jobs, ctx, model.status());
  ModelRunner& runner = **model;

  auto analyse = [&](const std::vector<ModelFrame>& frames, const std::vector<ClaimedJob>& batch,
                     std::vector<FrameResult>* results, std::string* device) -> Status {
    std::vector<cv::Mat> images;
    for (const ModelFrame& f : frames) images.push_back(f.bgr);
    auto outs = RunModel(runner, images, ctx, device);
    if (!outs.ok()) return outs.status();
    for (size_t i = 0; i < frames.size(); ++i) {
      const models::OutputTensor* best = nullptr;  // the mask: the largest output
      for (const auto& o : (*outs)[i])
        if (best == nullptr || o.data.size() > best->data.size()) best = &o;
      if (best == nullptr) return Status::Corruption("model " + runner.manifest().name + ": no output");
      auto mask = models::DecodeMask(*best, frames[i].bgr.size());
      if (!mask.ok()) return mask.status();
      const std::string path = MaskPath(batch[frames[i].job].item_id, frames[i].index);
      FM_RETURN_IF_ERROR(WritePng(mask->binary, path));
      nlohmann::json r = {{"model", runner.manifest().name},
                          {"coverage", mask->coverage},
                          {"mask", path}};
      r["bbox"] = mask->bbox.area() > 0
                      ? nlohmann::json{mask->bbox.x, mask->bbox.y, mask->bbox.width, mask->bbox.height}
                      : nlohmann::json(nullptr);
      (*results)[i].result = std::move(r);
      (*results)[i].artifacts.push_back(path);
    }
    return Status::OK();
  };
  auto summarise = [](const std::vector<nlohmann::json>& frames, nlohmann::json* r) {
    double sum = 0;
    for (const auto& f : frames) {
      sum += f["coverage"].get<double>();
      (*r)["model"] = f["model"];
    }
    (*r)["mean_coverage"] = frames.empty() ? 0.0 : sum / frames.size();
  };
  ModelStageOptions o;
  o.video_frames = media_.model_frames;
  o.together = runner.batchable();
  return RunModelStage(jobs, ctx, media_, o, analyse, summarise);
}

}  // namespace framemill
