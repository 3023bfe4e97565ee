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

void PushSample(std::deque<double>* q, double v) {
  q->push_back(v);
  if (q->size() > CostModel::kSamples) q->pop_front();
}

}  // namespace

Ran RanOn(const std::string& device) {
  return device.empty() || device == "cpu" ? Ran::kCpu : Ran::kDevice;
}

void CostModel::Learn(const std::vector<JobTime>& newest_first) {
  for (auto it = newest_first.rbegin(); it != newest_first.rend(); ++it) Observe(*it);
}

void CostModel::Push(const Key& key, const JobTime& t) {
  PushSample(&per_job_[key], static_cast<double>(t.run_ms));
  if (t.bytes > 0)
    PushSample(&per_mb_[key], static_cast<double>(t.run_ms) / (static_cast<double>(t.bytes) / (1 << 20)));
}

void CostModel::Observe(const JobTime& t) {
  if (t.run_ms < 0) return;
  Push({t.stage, t.kind, Ran::kAnywhere}, t);
  Push({t.stage, t.kind, RanOn(t.device)}, t);
}

double CostModel::MedianMs(const std::string& stage, MediaKind kind, Ran on) const {
  auto it = per_job_.find({stage, kind, on});
  return it == per_job_.end() ? -1 : Median(it->second);
}

double CostModel::ExpectedMs(const std::string& stage, MediaKind kind, int64_t bytes, Ran on) const {
  if (on != Ran::kAnywhere && MedianMs(stage, kind, on) < 0) on = Ran::kAnywhere;
  if (kind == MediaKind::kVideo) {
    auto it = per_mb_.find({stage, kind, on});
    if (it != per_mb_.end() && !it->second.empty() && bytes > 0)
      return Median(it->second) * static_cast<double>(bytes) / (1 << 20);
  }
  const double median = MedianMs(stage, kind, on);
  if (median >= 0) return median;
  return kind == MediaKind::kImage ? 0.0 : kUnknown;
}

std::set<std::string> CostModel::StagesForTheDevice(const std::vector<std::string>& stages,
                                                    int64_t pending, int device_workers) const {
  std::set<std::string> leave;
  if (device_workers <= 0) return leave;
  double device_sum = 0;
  int device_stages = 0;
  for (const std::string& s : stages)
    if (const double d = MedianMs(s, MediaKind::kImage, Ran::kDevice); d >= 0) device_sum += d, ++device_stages;
  if (device_stages == 0) return leave;
  // How long until a device worker starts a job queued now.
  const double wait = static_cast<double>(pending) * device_sum / device_stages / device_workers;
  for (const std::string& s : stages) {
    const double cpu = MedianMs(s, MediaKind::kImage, Ran::kCpu);
    const double device = MedianMs(s, MediaKind::kImage, Ran::kDevice);
    if (cpu >= 0 && device >= 0 && cpu > wait + device) leave.insert(s);
  }
  return leave;
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
