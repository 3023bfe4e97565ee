#include "jobs/clip_totals.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "jobs/stage_names.h"

namespace framemill {

ClipTotals ClipTotalsOf(const std::string& result_json) {
  ClipTotals t;
  const auto r = nlohmann::json::parse(result_json, nullptr, false);
  if (r.is_discarded() || !r.is_object() || !r.contains("clips") || !r["clips"].is_array()) return t;
  for (const auto& c : r["clips"]) {
    if (!c.is_object()) continue;
    ++t.clips;
    t.seconds += c.value("end_s", 0.0) - c.value("start_s", 0.0);
  }
  return t;
}

Result<ClipTotals> CountClips(ResultReader& results) {
  ClipTotals total;
  Status s = results.ForEachResult(stage_names::kClips, [&](const ExportRow& row) -> Status {
    const ClipTotals t = ClipTotalsOf(row.result_json);
    total.clips += t.clips;
    total.seconds += t.seconds;
    return Status::OK();
  });
  if (!s.ok()) return s;
  return total;
}

void ClipCounter::Clear() {
  by_job_.clear();
  total_ = {};
  newest_ms_ = -1;
  misses_ = 0;
}

Status ClipCounter::ReadSince(ResultReader& results, int64_t since_ms) {
  return results.ForEachResultFinishedSince(stage_names::kClips, since_ms, [&](const ExportRow& row) -> Status {
    newest_ms_ = std::max(newest_ms_, row.finished_at);
    if (by_job_.count(row.job_id) > 0) return Status::OK();
    ++parsed_;
    const ClipTotals t = ClipTotalsOf(row.result_json);
    by_job_.emplace(row.job_id, t);
    total_.clips += t.clips;
    total_.seconds += t.seconds;
    return Status::OK();
  });
}

Result<ClipTotals> ClipCounter::Update(ResultReader& results, const std::function<Result<int64_t>()>& done_now) {
  FM_RETURN_IF_ERROR(ReadSince(results, newest_ms_ < 0 ? 0 : newest_ms_ - kSlackMs));
  auto done = done_now();
  if (!done.ok()) return done.status();
  const auto held = static_cast<int64_t>(by_job_.size());
  misses_ = held < *done ? misses_ + 1 : 0;
  if (held > *done || misses_ >= kMissesBeforeRecount) {
    Clear();
    FM_RETURN_IF_ERROR(ReadSince(results, 0));
  }
  return total_;
}

}  // namespace framemill
