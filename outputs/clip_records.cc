#include "outputs/clip_records.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include <unordered_set>

#include "jobs/stage_names.h"
#include "outputs/webdataset.h"

namespace framemill {
namespace {

// The motion labels motion_analysis.cc's CameraLabel gives, and "unknown".
const std::vector<std::string>& CameraLabels() {
  static const std::vector<std::string> labels = {"static", "pan", "tilt", "zoom",
                                                   "handheld shake", "unknown"};
  return labels;
}

// The frames of a video's per-frame results that lie in [start, end).
std::vector<const nlohmann::json*> FramesInside(const nlohmann::json& result, int64_t start,
                                                int64_t end) {
  std::vector<const nlohmann::json*> out;
  const auto frames = result.find("frames");
  if (frames == result.end() || !frames->is_array()) return out;
  for (const auto& f : *frames) {
    if (!f.is_object() || !f.contains("frame") || !f["frame"].is_number_integer()) continue;
    const int64_t at = f["frame"].get<int64_t>();
    if (at >= start && at < end) out.push_back(&f);
  }
  return out;
}

nlohmann::json LabelsInside(const std::vector<const nlohmann::json*>& frames) {
  std::map<std::string, std::pair<double, int>> best;  // label -> best score, frames
  for (const nlohmann::json* f : frames) {
    const auto c = f->find("categories");
    if (c == f->end() || !c->is_array()) continue;
    for (const auto& entry : *c) {
      if (!entry.is_object() || !entry.contains("label") || !entry["label"].is_string()) continue;
      auto& b = best[entry["label"].get<std::string>()];
      b.first = std::max(b.first, entry.value("score", 0.0));
      ++b.second;
    }
  }
  std::vector<std::pair<std::string, std::pair<double, int>>> sorted(best.begin(), best.end());
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [label, b] : sorted)
    out.push_back({{"label", label}, {"score", b.first}, {"frames", b.second}});
  return out;
}

// The most of `key` (an integer) in one of `frames`; null when no frame has it.
nlohmann::json MostInOneFrame(const std::vector<const nlohmann::json*>& frames, const char* key) {
  nlohmann::json most;
  for (const nlohmann::json* f : frames) {
    const auto v = f->find(key);
    if (v == f->end() || !v->is_number_integer()) continue;
    if (most.is_null() || v->get<int64_t>() > most.get<int64_t>()) most = v->get<int64_t>();
  }
  return most;
}

// audio_sync's estimate for the shot overlapping [start_s, end_s) the most; null if none does.
nlohmann::json AudioInside(const nlohmann::json& audio_sync, double start_s, double end_s) {
  const auto shots = audio_sync.find("shots");
  if (shots == audio_sync.end() || !shots->is_array()) return nullptr;
  nlohmann::json best;
  double most = 0;
  for (const auto& s : *shots) {
    if (!s.is_object() || !s.contains("offset_ms")) continue;
    const double overlap = std::min(end_s, s.value("end_s", 0.0)) - std::max(start_s, s.value("start_s", 0.0));
    if (overlap > most) {
      most = overlap;
      best = {{"offset_ms", s["offset_ms"]}, {"confidence", s.value("confidence", 0.0)},
              {"signal", s.value("signal", "")}};
    }
  }
  return best;
}

double ClipSeconds(const nlohmann::json& clip) {
  return clip.value("end_s", 0.0) - clip.value("start_s", 0.0);
}

}  // namespace

Status ParseCameras(const std::string& text, std::vector<std::string>* out) {
  const auto& known = CameraLabels();
  for (const std::string& label : SplitCommaList(text)) {
    if (std::find(known.begin(), known.end(), label) == known.end())
      return Status::InvalidArgument("--camera: '" + label + "' is not one of motion's labels "
                                     "(static, pan, tilt, zoom, handheld shake, unknown)");
    out->push_back(label);
  }
  return Status::OK();
}

nlohmann::json ClipContents(const nlohmann::json& clip,
                            const std::map<std::string, nlohmann::json>& results) {
  const int64_t start = clip.value("start_frame", int64_t{0}), end = clip.value("end_frame", int64_t{0});
  nlohmann::json out = {{"labels", nullptr}, {"faces", nullptr}, {"people", nullptr},
                        {"audio", nullptr}, {"analysed", nlohmann::json::object()}};
  auto inside = [&](const char* stage) -> std::optional<std::vector<const nlohmann::json*>> {
    const auto r = results.find(stage);
    if (r == results.end()) return std::nullopt;
    auto frames = FramesInside(r->second, start, end);
    out["analysed"][stage] = frames.size();
    return frames;
  };
  if (auto f = inside(stage_names::kCategorize); f && !f->empty()) out["labels"] = LabelsInside(*f);
  if (auto f = inside(stage_names::kFaces); f && !f->empty()) out["faces"] = MostInOneFrame(*f, "count");
  if (auto f = inside(stage_names::kPose); f && !f->empty()) out["people"] = MostInOneFrame(*f, "people");
  if (const auto a = results.find(stage_names::kAudioSync); a != results.end())
    out["audio"] = AudioInside(a->second, clip.value("start_s", 0.0), clip.value("end_s", 0.0));
  return out;
}

nlohmann::json WithClipContents(nlohmann::json clips_result,
                                const std::map<std::string, nlohmann::json>& results) {
  if (!clips_result.is_object() || !clips_result.contains("clips") || !clips_result["clips"].is_array())
    return clips_result;
  for (auto& c : clips_result["clips"])
    if (c.is_object()) c.update(ClipContents(c, results));
  return clips_result;
}

std::map<std::string, nlohmann::json> DoneResults(const ItemView& item) {
  std::map<std::string, nlohmann::json> results;
  for (const JobView& j : item.jobs) {
    if (j.state != JobState::kDone || j.result_json.empty()) continue;
    auto parsed = nlohmann::json::parse(j.result_json, nullptr, false);
    if (!parsed.is_discarded() && parsed.is_object()) results[j.stage] = std::move(parsed);
  }
  return results;
}

Result<std::map<std::string, nlohmann::json>> ContentResults(ResultReader& results, int64_t item_id) {
  std::map<std::string, nlohmann::json> out;
  for (const char* stage : {stage_names::kCategorize, stage_names::kFaces, stage_names::kPose,
                            stage_names::kAudioSync}) {
    auto row = results.ResultOf(item_id, stage);
    if (!row.ok()) return row.status();
    if (!row->has_value()) continue;
    auto parsed = nlohmann::json::parse((*row)->result_json, nullptr, false);
    if (!parsed.is_discarded() && parsed.is_object()) out[stage] = std::move(parsed);
  }
  return out;
}

std::vector<ClipRecord> ClipsOf(const ItemView& item, const std::string& item_key) {
  const std::map<std::string, nlohmann::json> results = DoneResults(item);
  std::vector<ClipRecord> out;
  const auto clips = results.find(stage_names::kClips);
  if (clips == results.end()) return out;
  const nlohmann::json with = WithClipContents(clips->second, results);
  for (const auto& c : with.value("clips", nlohmann::json::array())) {
    if (!c.is_object()) continue;
    ClipRecord r;
    r.item = item.source;
    char frame[32];
    std::snprintf(frame, sizeof frame, "_f%07lld", static_cast<long long>(c.value("start_frame", int64_t{0})));
    r.key = item_key + frame;
    r.clip = c;
    r.artifact = c.value("artifact", "");
    out.push_back(std::move(r));
  }
  return out;
}

bool ClipPasses(const ClipFilter& f, const ExportFilter& labels, const nlohmann::json& clip) {
  const double seconds = ClipSeconds(clip);
  if (f.min_duration_s >= 0 && seconds + 1e-9 < f.min_duration_s) return false;
  if (f.max_duration_s >= 0 && seconds - 1e-9 > f.max_duration_s) return false;
  const nlohmann::json motion = clip.value("motion", nlohmann::json::object());
  if (!f.cameras.empty()) {
    const std::string camera = motion.value("camera", nlohmann::json::object()).value("label", "unknown");
    if (std::find(f.cameras.begin(), f.cameras.end(), camera) == f.cameras.end()) return false;
  }
  if (f.min_subject_motion >= 0 &&
      motion.value("subject", nlohmann::json::object()).value("mean", -1.0) < f.min_subject_motion)
    return false;
  if (!labels.labels.empty() || !labels.no_labels.empty()) {
    if (!clip.contains("labels") || !clip["labels"].is_array()) return false;  // not analysed there
    auto shown = [&](const std::string& l) {
      return std::any_of(clip["labels"].begin(), clip["labels"].end(),
                         [&](const nlohmann::json& e) { return e.value("label", "") == l; });
    };
    if (!labels.labels.empty() && std::none_of(labels.labels.begin(), labels.labels.end(), shown)) return false;
    if (std::any_of(labels.no_labels.begin(), labels.no_labels.end(), shown)) return false;
  }
  if (labels.UsesFaces()) {
    if (!clip.contains("faces") || !clip["faces"].is_number_integer()) return false;
    const int64_t n = clip["faces"].get<int64_t>();
    if (n < labels.min_faces || (labels.max_faces >= 0 && n > labels.max_faces)) return false;
  }
  return true;
}

Status ForEachClip(JobStore& store, const ItemSelection& items, const ClipFilter& clips,
                   const ExportFilter& labels,
                   const std::function<Status(const ItemView&, const ClipRecord&)>& fn) {
  std::unordered_set<std::string> seen;
  return store.ForEachItem([&](const ItemView& item) -> Status {
    if (item.kind != MediaKind::kVideo || !items.Keeps(item.source)) return Status::OK();
    const bool duplicate = !seen.insert(item.content_hash).second;  // as WriteWebDataset keys
    for (const ClipRecord& r : ClipsOf(item, WebDatasetKey(item, duplicate)))
      if (ClipPasses(clips, labels, r.clip)) FM_RETURN_IF_ERROR(fn(item, r));
    return Status::OK();
  });
}

}  // namespace framemill
