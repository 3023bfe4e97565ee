#include "stages/motion_stage.h"

#include <algorithm>
#include <cstdlib>

#include "analysis/motion_analysis.h"
#include "gpu/ops.h"
#include "jobs/stage_names.h"
#include "media/video_reader.h"

namespace framemill {

namespace {

constexpr const char* kMotionOperation = "MOTION";

// Flow on the device the ladder chose for MOTION (our pyramidal Lucas-Kanade), stepping
// down to its CPU twin when the device runs out of memory. `device` gets who ran it.
FlowFn DeviceFlow(gpu::OomLadder& ladder, std::string* device) {
  return [&ladder, device](const cv::Mat& from, const cv::Mat& to) -> Result<cv::Mat> {
    const gpu::FlowSpec spec;
    const std::vector<gpu::FlowPair> pairs = {{from, to}};
    return ladder.RunOne<cv::Mat>(
        kMotionOperation, static_cast<int64_t>(from.total()), gpu::DenseFlowBytesPerItem(from.size(), spec),
        [&](gpu::ComputeBackend& backend) { return backend.DenseFlowBatch(pairs, spec); }, device);
  };
}

}  // namespace

VideoReaderOptions MotionReaderOptions(const MotionOptions& options) {
  VideoReaderOptions ro;
  ro.max_width = options.analysis_width;
  ro.max_fps = options.max_fps;
  ro.also_skipped = true;  // each cut on its exact source frame above max_fps
  ro.limits = options.video_limits;
  return ro;
}

double AnalysedFps(const MotionOptions& options, double fps) {
  return options.max_fps > 0 ? std::min(fps, options.max_fps) : fps;
}

// A still image has no motion: its job is skipped with the reason.
MotionStage::MotionStage(MotionOptions options, const std::string& out_dir)
    : PerJobStage(MakeSpec(stage_names::kMotion, Takes::kVideos), out_dir),
      options_(std::move(options)) {}

Outcome MotionStage::RunOne(const ClaimedJob& job, const StageContext& ctx) {
  auto reader = VideoReader::Open(job.source, MotionReaderOptions(options_));
  if (!reader.ok()) return Outcome::Failed(reader.status());
  VideoReader& r = **reader;
  std::string device = "cpu";
  FlowFn flow;  // DIS on the CPU, unless MOTION runs on a device
  if (ctx.ladder != nullptr && ctx.ladder->OnDevice(kMotionOperation)) flow = DeviceFlow(*ctx.ladder, &device);
  const std::string method =
      flow ? "lk-pyramid" : "dis-" + FlowPresetName(options_.analysis.preset);
  MotionAnalyser analyser(options_.analysis, cv::Size(r.info().width, r.info().height), r.output_size(),
                          AnalysedFps(options_, r.info().fps), flow);
  VideoFrame frame;
  for (;;) {
    auto more = r.Next(&frame);
    if (!more.ok()) return Outcome::Failed(more.status());
    if (!*more) break;
    if (!frame.kept) {
      analyser.Skipped(frame.index, frame.image);
      continue;
    }
    if (Status s = analyser.Add(frame.index, frame.time_s, frame.image); !s.ok())
      return Outcome::Failed(s);
  }
  if (analyser.frames_analysed() < 2)
    return Outcome::Skipped("motion needs two frames; the video has " +
                            std::to_string(analyser.frames_analysed()));
  const MotionSummary summary = analyser.Finish(r.frames_decoded());
  nlohmann::json result = MotionJson(summary, r.info().fps, analyser.frames_analysed(),
                                     r.output_size());
  result["frames"] = r.frames_decoded();
  // A header whose length the frames do not bear out (a container whose duration lies):
  // the shots and clips are the frames', and this says what the header claimed.
  const int64_t declared = r.info().frames, decoded = r.frames_decoded();
  if (declared > 0 && decoded < options_.video_limits.max_frames && std::abs(declared - decoded) > std::max<int64_t>(2, decoded / 20))
    result["declared_frames"] = declared;
  result["flow"] = method;
  if (r.damaged_packets() > 0) result["damaged_packets"] = r.damaged_packets();
  // The clips stage leaves these frames out of every clip.
  nlohmann::json damaged = nlohmann::json::array();
  for (const auto& [first, last] : r.damaged_frames()) damaged.push_back({first, last});
  if (!damaged.empty()) result["damaged_frames"] = std::move(damaged);
  return DoneWithArtifact(job, "csv", analyser.SeriesCsv(), "series", std::move(result), device);
}

}  // namespace framemill
