#include "jobs/clip_totals.h"

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

}  // namespace framemill
