#include "scheduler/cost_model.h"

#include <algorithm>

namespace framemill {
namespace {

double Median(std::deque<double> v) {
  if (v.empty()) return -1;
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<long>(mid), v.end());
  return v[mid];
}

void Push(std::deque<double>* q, double v) {
  q->push_back(v);
  if (q->size() > CostModel::kSamples) q->pop_front();
}

}  // namespace

void CostModel::Learn(const std::vector<JobTime>& newest_first) {
  for (auto it = newest_first.rbegin(); it != newest_first.rend(); ++it) Observe(*it);
}

void CostModel::Observe(const JobTime& t) {
  if (t.run_ms < 0) return;
  const Key key{t.stage, t.kind};
  Push(&per_job_[key], static_cast<double>(t.run_ms));
  if (t.bytes > 0) Push(&per_mb_[key], static_cast<double>(t.run_ms) / (static_cast<double>(t.bytes) / (1 << 20)));
}

double CostModel::MedianMs(const std::string& stage, MediaKind kind) const {
  auto it = per_job_.find({stage, kind});
  return it == per_job_.end() ? -1 : Median(it->second);
}

double CostModel::ExpectedMs(const std::string& stage, MediaKind kind, int64_t bytes) const {
  if (kind == MediaKind::kVideo) {
    auto it = per_mb_.find({stage, kind});
    if (it != per_mb_.end() && !it->second.empty() && bytes > 0)
      return Median(it->second) * static_cast<double>(bytes) / (1 << 20);
  }
  const double median = MedianMs(stage, kind);
  if (median >= 0) return median;
  return kind == MediaKind::kImage ? 0.0 : kUnknown;
}

size_t KeepWithinTarget(const std::vector<double>& expected_ms, double target_ms) {
  double kept = 0;
  size_t n = 0;
  while (n < expected_ms.size() && (n == 0 || kept < target_ms)) kept += expected_ms[n++];
  return n;
}

double MediaSecondsOf(const nlohmann::json& result) {
  if (!result.is_object() || !result.contains("media") || !result["media"].is_object()) return -1;
  const nlohmann::json& m = result["media"];
  const double frames = m.value("frames", 0.0), fps = m.value("fps", 0.0);
  return frames > 0 && fps > 0 ? frames / fps : -1;
}

}  // namespace framemill
