#include "scheduler/metrics_server.h"

#include <prometheus/collectable.h>
#include <prometheus/exposer.h>
#include <prometheus/metric_family.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <map>
#include <mutex>

#include "gpu/device_ledger.h"
#include "jobs/stage_names.h"
#include "scheduler/worker.h"

namespace framemill {

struct DeviceSnapshot {
  std::string id;
  int workers = 0;
  int64_t planned_bytes = 0, total_bytes = 0, oom_events = 0, cpu_fallbacks = 0;
  double busy_s = 0, busy_ratio = 0;
};

struct MetricsServer::Snapshot {
  std::vector<StageCounts> jobs;
  ClipTotals clips;
  std::vector<DeviceSnapshot> devices;
  int64_t lease_rescues = 0;
  int workers = 0;
};

namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

ClientMetric Value(MetricType type, double v, std::vector<prometheus::ClientMetric::Label> labels = {}) {
  ClientMetric m;
  m.label = std::move(labels);
  if (type == MetricType::Counter) m.counter.value = v;
  else m.gauge.value = v;
  return m;
}

MetricFamily JobsFamily(const std::vector<StageCounts>& jobs) {
  MetricFamily f{"framemill_jobs", "Jobs in the store by stage and state (every machine's)",
                 MetricType::Gauge, {}};
  for (const StageCounts& c : jobs)
    for (const auto& [state, n] : {std::pair<const char*, int64_t>{"pending", c.pending}, {"running", c.running},
                                   {"done", c.done}, {"failed", c.failed}, {"skipped", c.skipped},
                                   {"waiting", c.waiting}})
      f.metric.push_back(Value(MetricType::Gauge, static_cast<double>(n), {{"stage", c.stage}, {"state", state}}));
  return f;
}

MetricFamily SecondsFamily(const RunCounters* counters) {
  MetricFamily f{"framemill_job_seconds", "Seconds each job run on this machine took, by stage and device",
                 MetricType::Histogram, {}};
  if (counters == nullptr) return f;
  for (const RunCounters::Histogram& h : counters->Histograms()) {
    ClientMetric m;
    m.label = {{"stage", h.stage}, {"device", h.device}};
    m.histogram.sample_count = h.count;
    m.histogram.sample_sum = h.sum_s;
    uint64_t cumulative = 0;
    for (size_t b = 0; b < h.buckets.size(); ++b) {
      cumulative += h.buckets[b];
      const double bound = b < RunCounters::kBounds.size() ? RunCounters::kBounds[b]
                                                           : std::numeric_limits<double>::infinity();
      m.histogram.bucket.push_back({cumulative, bound});
    }
    f.metric.push_back(std::move(m));
  }
  return f;
}

// One family per device figure, a sample per device.
std::vector<MetricFamily> DeviceFamilies(const std::vector<DeviceSnapshot>& devices) {
  MetricFamily workers{"framemill_device_workers", "This run's worker processes on each device now",
                       MetricType::Gauge, {}};
  MetricFamily memory{"framemill_device_memory_bytes",
                      "Device memory: kind=planned, what its workers plan to use now; kind=total",
                      MetricType::Gauge, {}};
  MetricFamily ratio{"framemill_device_busy_ratio",
                     "Share of the time since the run began in which the device had a batch in flight",
                     MetricType::Gauge, {}};
  MetricFamily busy{"framemill_device_busy_seconds_total",
                    "Seconds the device had a batch in flight since the run began", MetricType::Counter, {}};
  MetricFamily oom{"framemill_oom_events_total", "Out-of-memory events on the device during the run",
                   MetricType::Counter, {}};
  MetricFamily fallbacks{"framemill_cpu_fallbacks_total",
                         "Items that fell back from the device to the CPU during the run",
                         MetricType::Counter, {}};
  for (const DeviceSnapshot& d : devices) {
    workers.metric.push_back(Value(MetricType::Gauge, d.workers, {{"device", d.id}}));
    memory.metric.push_back(Value(MetricType::Gauge, static_cast<double>(d.planned_bytes),
                                  {{"device", d.id}, {"kind", "planned"}}));
    memory.metric.push_back(Value(MetricType::Gauge, static_cast<double>(d.total_bytes),
                                  {{"device", d.id}, {"kind", "total"}}));
    ratio.metric.push_back(Value(MetricType::Gauge, d.busy_ratio, {{"device", d.id}}));
    busy.metric.push_back(Value(MetricType::Counter, d.busy_s, {{"device", d.id}}));
    oom.metric.push_back(Value(MetricType::Counter, static_cast<double>(d.oom_events), {{"device", d.id}}));
    fallbacks.metric.push_back(Value(MetricType::Counter, static_cast<double>(d.cpu_fallbacks), {{"device", d.id}}));
  }
  return {workers, memory, ratio, busy, oom, fallbacks};
}

}  // namespace

class MetricsServer::Collector : public prometheus::Collectable {
 public:
  explicit Collector(const RunCounters* counters) : counters_(counters) {}

  void Set(Snapshot s) {
    std::lock_guard<std::mutex> lock(mu_);
    snapshot_ = std::move(s);
  }

  std::vector<MetricFamily> Collect() const override {
    Snapshot s;
    {
      std::lock_guard<std::mutex> lock(mu_);
      s = snapshot_;
    }
    std::vector<MetricFamily> out = {JobsFamily(s.jobs), SecondsFamily(counters_)};
    out.push_back({"framemill_clips", "Clips the clips stage made (every machine's)", MetricType::Gauge,
                   {Value(MetricType::Gauge, static_cast<double>(s.clips.clips))}});
    out.push_back({"framemill_clip_seconds", "Seconds of video in those clips", MetricType::Gauge,
                   {Value(MetricType::Gauge, s.clips.seconds)}});
    const double claims = counters_ ? static_cast<double>(counters_->claims()) : 0;
    const double claimed = counters_ ? static_cast<double>(counters_->claimed_jobs()) : 0;
    out.push_back({"framemill_claims_total", "Claims this machine's workers made (empty ones too)",
                   MetricType::Counter, {Value(MetricType::Counter, claims)}});
    out.push_back({"framemill_claimed_jobs_total", "Jobs this machine's workers leased",
                   MetricType::Counter, {Value(MetricType::Counter, claimed)}});
    out.push_back({"framemill_lease_rescues_total",
                   "Jobs whose lease expired (their worker crashed or hung) and went back, since the run began",
                   MetricType::Counter, {Value(MetricType::Counter, static_cast<double>(s.lease_rescues))}});
    out.push_back({"framemill_workers", "This run's live worker processes on this machine", MetricType::Gauge,
                   {Value(MetricType::Gauge, s.workers)}});
    for (MetricFamily& f : DeviceFamilies(s.devices)) out.push_back(std::move(f));
    return out;
  }

 private:
  const RunCounters* counters_;
  mutable std::mutex mu_;
  Snapshot snapshot_;
};

Result<std::unique_ptr<MetricsServer>> MetricsServer::Start(const std::string& addr,
                                                           const RunCounters* counters,
                                                           std::string ledger_dir) {
  std::unique_ptr<MetricsServer> s(new MetricsServer());
  const size_t colon = addr.rfind(':');
  if (colon == std::string::npos)
    return Status::InvalidArgument("--metrics wants HOST:PORT or :PORT, got '" + addr + "'");
  s->host_ = colon == 0 ? "0.0.0.0" : addr.substr(0, colon);
  try {
    s->exposer_ = std::make_unique<prometheus::Exposer>(s->host_ + addr.substr(colon), 2);
  } catch (const std::exception& e) {
    return Status::InvalidArgument("cannot serve metrics at " + addr + ": " + e.what());
  }
  s->collector_ = std::make_shared<Collector>(counters);
  s->exposer_->RegisterCollectable(s->collector_);
  s->ledger_dir_ = std::move(ledger_dir);
  return s;
}

MetricsServer::~MetricsServer() = default;

std::string MetricsServer::address() const {
  const std::vector<int> ports = exposer_->GetListeningPorts();
  return host_ + ":" + (ports.empty() ? std::string("?") : std::to_string(ports.front()));
}

DeviceSnapshot MetricsServer::Device(const RunDevice& d, int64_t now_ms) {
  DeviceSnapshot s{d.id, d.workers, 0, d.total_mb << 20, d.oom_events, d.cpu_fallbacks, 0, 0};
  auto view = gpu::DeviceLedger::Read(ledger_dir_, d.id);
  if (!view.ok() || !view->has_value()) return s;
  const gpu::LedgerView& v = **view;
  s.workers = static_cast<int>(v.members.size());
  s.planned_bytes = v.planned_bytes;
  s.total_bytes = v.total_bytes;
  Busy& b = busy_.try_emplace(d.id, Busy{now_ms, v.busy_ns, 0}).first->second;
  // The ledger counts from when it was last empty: a smaller count started again.
  b.total_ns += v.busy_ns >= b.last_ns ? v.busy_ns - b.last_ns : v.busy_ns;
  b.last_ns = v.busy_ns;
  s.busy_s = static_cast<double>(b.total_ns) / 1e9;
  if (now_ms > b.since_ms) s.busy_ratio = std::min(1.0, s.busy_s * 1000 / static_cast<double>(now_ms - b.since_ms));
  return s;
}

void MetricsServer::Refresh(JobStore* store, int64_t run_id, int live_workers) {
  const int64_t now = SteadyNowMs();
  if (store == nullptr || (refreshed_ms_ >= 0 && now - refreshed_ms_ < 1000)) return;
  refreshed_ms_ = now;
  Snapshot s;
  s.workers = live_workers;
  // The job counts are read after the clips results: the counter compares the two.
  bool counted = false;
  auto clips = clips_.Update(*store, [&]() -> Result<int64_t> {
    auto jobs = store->Counts(0);
    if (!jobs.ok()) return jobs.status();
    s.jobs = std::move(jobs).value();
    counted = true;
    return DoneOf(s.jobs, stage_names::kClips);
  });
  if (clips.ok()) s.clips = *clips;
  if (!counted)
    if (auto jobs = store->Counts(0); jobs.ok()) s.jobs = std::move(jobs).value();
  auto runs = store->Runs(64);  // other machines' runs may have begun since
  const RunRecord* run = nullptr;
  if (runs.ok())
    for (const RunRecord& r : *runs)
      if (r.id == run_id) run = &r;
  if (run != nullptr) {
    if (auto n = store->CountErrorsSince("lease_expired", run->started_at); n.ok()) s.lease_rescues = *n;
    for (const RunDevice& d : run->devices) s.devices.push_back(Device(d, now));
  }
  collector_->Set(std::move(s));
}

}  // namespace framemill
