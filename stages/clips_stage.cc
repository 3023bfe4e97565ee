#include "stages/clips_stage.h"

#include <cstdio>
#include <filesystem>

#include "jobs/stage_names.h"
#include "stages/artifact.h"

namespace framemill {

namespace {

constexpr const char* kSpoiled =
    "broken packets: these frames decoded with errors, or from a frame that did, up to the next keyframe";

struct MotionShots {
  double fps = 0;
  std::vector<FrameRange> shots;
  std::vector<DroppedSpan> excluded;     // frames no clip may hold, with why
  std::vector<nlohmann::json> figures;  // per shot: {"camera": ..., "subject": ...}
};

// Motion's [[first, last], ...] under `key` (inclusive runs).
std::vector<FrameRange> Runs(const nlohmann::json& m, const char* key) {
  std::vector<FrameRange> out;
  for (const auto& t : m.value(key, nlohmann::json::array()))
    if (t.is_array() && t.size() == 2 && t[0].is_number_integer() && t[1].is_number_integer())
      out.push_back({t[0].get<int64_t>(), t[1].get<int64_t>()});
  return out;
}

Result<MotionShots> ReadMotion(const ClaimedJob& job, const StageContext& ctx) {
  if (ctx.results == nullptr) return Status::Internal("clips needs the store's results to read motion's shots");
  auto row = ctx.results->ResultOf(job.item_id, stage_names::kMotion);
  if (!row.ok()) return row.status();
  if (!row->has_value()) return Status::Aborted("the motion job of this item is not done");
  const auto m = nlohmann::json::parse((*row)->result_json, nullptr, false);
  if (m.is_discarded() || !m.contains("shots") || !m["shots"].is_array())
    return Status::Corruption("motion's result lists no shots");
  MotionShots out;
  out.fps = m.value("fps", 0.0);
  if (!(out.fps > 0)) return Status::Unsupported("the video declares no frame rate: its shots have no length in seconds");
  for (const auto& s : m["shots"]) {
    out.shots.push_back({s.value("start", int64_t{0}), s.value("end", int64_t{0})});
    out.figures.push_back({{"camera", s.value("camera", nlohmann::json::object())},
                           {"subject", s.value("subject", nlohmann::json::object())}});
  }
  out.excluded = ExcludedRuns(Runs(m, "transitions"), "a gradual transition between two shots");
  for (DroppedSpan& d : ExcludedRuns(Runs(m, "damaged_frames"), kSpoiled)) out.excluded.push_back(std::move(d));
  return out;
}

nlohmann::json ClipJson(size_t index, const ClipFile& f, const PlannedClip& planned,
                        const MotionShots& motion) {
  nlohmann::json c = {{"index", index},
                      {"start_frame", f.span.start_frame},
                      {"end_frame", f.span.end_frame},
                      {"start_s", Rounded(f.start_s, 4)},
                      {"end_s", Rounded(f.end_s, 4)},
                      {"frames", f.frames},
                      {"fps", Rounded(f.fps, 4)},
                      {"width", f.width},
                      {"height", f.height},
                      {"codec", f.codec},
                      {"rotation_deg", f.rotation_deg},
                      {"has_audio", f.has_audio},
                      {"bytes", f.bytes},
                      {"artifact", f.path},
                      {"shot", planned.shot},
                      {"motion", motion.figures[planned.shot]}};
  if (planned.parts > 1) {
    c["part"] = planned.part;
    c["parts"] = planned.parts;
  }
  return c;
}

nlohmann::json DroppedJson(const FrameRange& r, const std::string& reason) {
  return {{"start_frame", r.start}, {"end_frame", r.end}, {"reason", reason}};
}

// A copied clip starts at the first keyframe inside its span: why what is left is too short
// to keep, or "" (a keyframe seconds into a shot can leave a fraction of it).
std::string CopyTooShort(const ClipFile& f, const ClipPlanOptions& plan) {
  const double seconds = f.fps > 0 ? double(f.frames) / f.fps : 0;
  if (seconds + 1e-9 >= plan.min_s) return "";
  char b[200];
  std::snprintf(b, sizeof b,
                "copy: the first keyframe inside the span is frame %lld; the %.2f s from it are "
                "shorter than clips.min_s (%.2f s)",
                static_cast<long long>(f.span.start_frame), seconds, plan.min_s);
  return b;
}

}  // namespace

ClipsStage::ClipsStage(ClipsOptions options, const std::string& out_dir)
    : PerJobStage(MakeSpec(stage_names::kClips, Takes::kVideos, {stage_names::kMotion})),
      options_(std::move(options)),
      dir_(ArtifactDir(out_dir, stage_names::kClips)) {}

Outcome ClipsStage::RunOne(const ClaimedJob& job, const StageContext& ctx) {
  auto motion = ReadMotion(job, ctx);
  if (!motion.ok()) return Outcome::Failed(motion.status());
  const ClipPlan plan = PlanClips(motion->shots, motion->excluded, motion->fps, options_.plan);
  const std::string dir = dir_ + "/" + std::to_string(job.item_id);
  if (Status s = RemoveEarlierAttempts(dir, job, "mp4"); !s.ok()) return Outcome::Failed(s);
  std::vector<ClipSpan> spans;
  for (const PlannedClip& p : plan.clips) spans.push_back({p.frames.start, p.frames.end});
  const ClipWriteOptions write{options_.encoding, options_.video_limits};
  auto written = WriteClips(job.source, spans, write, [&](size_t k) {
    return ArtifactPath(dir, job, spans[k].start_frame, "mp4");
  });
  if (!written.ok()) return Outcome::Failed(written.status());
  nlohmann::json clips = nlohmann::json::array(), dropped = nlohmann::json::array();
  std::vector<std::string> artifacts;
  for (const DroppedSpan& d : plan.dropped) dropped.push_back(DroppedJson(d.frames, d.reason));
  for (size_t k = 0; k < written->size(); ++k) {
    ClipOutcome o = (*written)[k];
    if (o.file && options_.encoding.mode == ClipMode::kCopy) o.reason = CopyTooShort(*o.file, options_.plan);
    if (o.file && !o.reason.empty()) {
      std::error_code ec;
      std::filesystem::remove(o.file->path, ec);
      o.file.reset();
    }
    if (!o.file) {
      dropped.push_back(DroppedJson(plan.clips[k].frames, o.reason));
      continue;
    }
    clips.push_back(ClipJson(clips.size(), *o.file, plan.clips[k], *motion));
    artifacts.push_back(o.file->path);
  }
  std::stable_sort(dropped.begin(), dropped.end(), [](const nlohmann::json& a, const nlohmann::json& b) {
    return a["start_frame"].get<int64_t>() < b["start_frame"].get<int64_t>();
  });
  nlohmann::json result = {{"mode", options_.encoding.mode == ClipMode::kCopy ? "copy" : "encode"},
                           {"clips", std::move(clips)},
                           {"dropped", std::move(dropped)}};
  Outcome out = Outcome::Done(std::move(result), "cpu");
  out.artifacts = std::move(artifacts);
  return out;
}

}  // namespace framemill
