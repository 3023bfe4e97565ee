#include "outputs/result_json.h"

#include "base/json_text.h"
#include "jobs/job.h"
#include "jobs/stage_names.h"
#include "outputs/clip_records.h"

namespace framemill {
namespace {

nlohmann::json ParsedOrText(const std::string& text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  return j.is_discarded() ? nlohmann::json(text) : j;
}

}  // namespace

nlohmann::json DoneResultJson(const std::string& device, int64_t attempts,
                              const std::string& result_json, const std::string& artifacts_json) {
  return {{"device", device},
          {"attempts", attempts},
          {"result", ParsedOrText(result_json)},
          {"artifacts", ParsedOrText(artifacts_json.empty() ? "[]" : artifacts_json)}};
}

nlohmann::json ItemJson(const ItemView& item, const std::string& key) {
  nlohmann::json j;
  j["key"] = key;
  SetBytesField(j, "item", item.source);
  j["kind"] = std::string(MediaKindName(item.kind));
  j["media"] = ParsedOrText(item.media_info.empty() ? "{}" : item.media_info);
  j["results"] = nlohmann::json::object();
  j["states"] = nlohmann::json::object();
  j["reasons"] = nlohmann::json::object();
  for (const JobView& job : item.jobs) {
    j["states"][job.stage] = std::string(JobStateName(job.state));
    if (job.state == JobState::kDone)
      j["results"][job.stage] =
          DoneResultJson(job.device, job.attempts, job.result_json, job.artifacts_json);
    if (job.state == JobState::kFailed || job.state == JobState::kSkipped) {
      nlohmann::json e = {{"class", job.error_class}};
      SetBytesField(e, "message", job.last_error);
      j["reasons"][job.stage] = e;
    }
  }
  // A clip's keys include what the item's other stages found inside it (the contract's).
  if (j["results"].contains(stage_names::kClips))
    j["results"][stage_names::kClips]["result"] =
        WithClipContents(j["results"][stage_names::kClips]["result"], DoneResults(item));
  return j;
}

Result<std::set<std::string>> DuplicateMembers(ResultReader& results) {
  std::set<std::string> out;
  Status s = results.ForEachResult(stage_names::kDedup, [&](const ExportRow& r) {
    const auto j = nlohmann::json::parse(r.result_json, nullptr, false);
    if (j.is_discarded() || !j.value("groups", nlohmann::json()).is_array())
      return Status::Corruption("the dedup result is not readable: rerun dedup");
    for (const auto& g : j["groups"])
      for (const auto& m : g.value("members", nlohmann::json::array()))
        if (m.contains("item") && m["item"].is_string()) out.insert(m["item"].get<std::string>());
    return Status::OK();
  });
  if (!s.ok()) return s;
  return out;
}

}  // namespace framemill
