#include "stages/segment_stage.h"

#include <opencv2/imgcodecs.hpp>

#include "jobs/stage_names.h"
#include "models/decode.h"
#include "stages/artifact.h"

namespace framemill {
namespace {

// A 1-bit PNG: the mask is 0/255, and every reader (OpenCV, browsers) expands it back to
// 0/255. A 1.3 MP mask encodes in ~1 ms instead of ~10 on a device worker's thread.
Status WritePng(const cv::Mat& mask, const std::string& path) {
  std::vector<uchar> bytes;
  if (!cv::imencode(".png", mask, bytes, {cv::IMWRITE_PNG_BILEVEL, 1}))
    return Status::Internal("cannot encode the mask for " + path);
  return WriteArtifact(path, std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

}  // namespace

SegmentStage::SegmentStage(std::shared_ptr<models::ModelCache> cache, ModelStageOptions frames,
                           SegmentOptions options, const std::string& out_dir)
    : ModelStage(stage_names::kSegment, std::move(cache), frames), options_(std::move(options)) {
  mask_dir_ = ArtifactDir(out_dir, stage_names::kSegment);
}

std::string SegmentStage::MaskPath(const ClaimedJob& job, int64_t frame) const {
  return ArtifactPath(mask_dir_, job, frame, "png");
}

Status SegmentStage::Analyse(const ModelBatch& batch, const StageContext& ctx,
                             std::vector<FrameResult>* results, std::string* device) {
  models::ModelRunner& runner = *batch.runners.front();
  auto outs = RunOnFrames(runner, batch, ctx, device);
  if (!outs.ok()) return outs.status();
  // Each frame's mask at its size, written, on the worker's threads at once: the device
  // waits for the host while they are made.
  return ForEachFrame(0, batch.frames.size(), [&](size_t i) -> Status {
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
    return Status::OK();
  });
}

void SegmentStage::Summarise(const std::vector<nlohmann::json>& frames, nlohmann::json* r) const {
  SummariseMean(frames, "coverage", "mean_coverage", r);
}

}  // namespace framemill
