#include "stages/lighting_stage.h"

#include <exception>

#include "stages/lighting_analysis.h"
#include "stages/media.h"

namespace framemill {

LightingStage::LightingStage(MediaConfig media) : media_(media) {
  spec_.name = "lighting";
  spec_.images = true;
  spec_.videos = true;
}

StageOutput LightingStage::Run(const ClaimedJob& job) {
  try {
    if (job.kind == MediaKind::kImage) {
      auto img = DecodeImageFile(job.source, media_);
      if (!img.ok()) return StageOutput::Failed(img.status());
      nlohmann::json r = lighting::ToJson(lighting::AnalyzeFrame(*img));
      r["media"] = {{"kind", "image"}};
      return StageOutput::Done(std::move(r));
    }
    if (job.kind == MediaKind::kVideo) {
      auto sample = SampleVideoFrames(job.source, media_.video_sample_frames);
      if (!sample.ok()) return StageOutput::Failed(sample.status());
      std::vector<lighting::LightingStats> per_frame;
      for (const cv::Mat& f : sample->frames) per_frame.push_back(lighting::AnalyzeFrame(f));
      nlohmann::json r = lighting::ToJson(lighting::Aggregate(per_frame));
      const VideoInfo& vi = sample->info;
      r["media"] = {{"kind", "video"}, {"fps", vi.fps}, {"frames", vi.frames},
                    {"width", vi.width}, {"height", vi.height}, {"codec", vi.codec}};
      r["frames_sampled"] = sample->indices;
      nlohmann::json per = nlohmann::json::array();
      for (size_t i = 0; i < per_frame.size(); ++i) {
        per.push_back({{"frame", sample->indices[i]},
                       {"exposure_ev", per_frame[i].exposure_ev},
                       {"color_temperature_k", per_frame[i].cct_kelvin}});
      }
      r["per_frame"] = std::move(per);
      return StageOutput::Done(std::move(r));
    }
    return StageOutput::Skipped("lighting applies to images and videos");
  } catch (const std::bad_alloc&) {
    return StageOutput::Failed(Status::OutOfMemory("out of host memory analysing " + job.source));
  } catch (const std::exception& e) {
    // OpenCV throws on inputs it cannot handle; that is this item's failure, not ours.
    return StageOutput::Failed(Status::Corruption(std::string("analysis failed: ") + e.what()));
  }
}

}  // namespace framemill
