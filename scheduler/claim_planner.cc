#include "scheduler/claim_planner.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <set>

namespace framemill {
namespace {

constexpr int64_t kCostRefreshMs = 10'000;  // how often a worker reads others' job times
constexpr int64_t kCostHistory = 256;       // each stage's newest done jobs read each time
constexpr double kTailShare = 4;            // at the tail a claim keeps target / this

// The distinct items of a claim.
int ItemsOf(const std::vector<ClaimedJob>& jobs) {
  std::set<int64_t> items;
  for (const ClaimedJob& j : jobs) items.insert(j.item_id);
  return static_cast<int>(items.size());
}

// What a claim keeps or gives back whole: an image item with all its claimed jobs (they
// share one decode), or one job of a video or of the dataset (each reads its media its own
// way, and a long video's stages are better spread over workers).
struct ClaimUnit {
  double expected_ms = 0;
  std::vector<ClaimedJob> jobs;
};

std::vector<ClaimUnit> UnitsOf(std::vector<ClaimedJob>* jobs, const CostModel& costs, Ran on) {
  std::vector<ClaimUnit> units;
  std::map<int64_t, size_t> image_unit;  // item id -> its unit
  for (ClaimedJob& j : *jobs) {
    size_t u = units.size();
    if (j.kind == MediaKind::kImage) u = image_unit.emplace(j.item_id, units.size()).first->second;
    if (u == units.size()) units.emplace_back();
    units[u].expected_ms += costs.ExpectedMs(j.stage, j.kind, j.size, on);
    units[u].jobs.push_back(std::move(j));
  }
  jobs->clear();
  return units;
}

}  // namespace

ClaimPlanner::ClaimPlanner(JobStore* store, const StageRegistry* registry, const WorkerOptions* options)
    : store_(store), registry_(registry), options_(options) {}

int ClaimPlanner::BatchOf(const std::string& stage) const {
  auto it = options_->batch_by_stage.find(stage);
  return it != options_->batch_by_stage.end() && it->second > 0 ? it->second : options_->batch;
}

void ClaimPlanner::RefreshCosts(bool on_device) {
  const int64_t now = SteadyNowMs();
  if (costs_loaded_at_ >= 0 && now - costs_loaded_at_ < kCostRefreshMs) return;
  costs_loaded_at_ = now;
  auto times = store_->RecentJobTimes(kCostHistory);
  if (!times.ok()) {
    spdlog::warn("could not read job times: {}", times.status().ToString());
    return;
  }
  costs_ = CostModel();
  costs_.Learn(*times);
  if (on_device) return;  // the rest is for a worker on the CPU
  device_workers_ = 0;
  if (auto run = store_->LastRun(); run.ok() && run->has_value())
    for (const RunDevice& d : (*run)->devices) device_workers_ += d.workers;
  if (auto left = store_->CountOutstanding(options_->stages); left.ok()) pending_ = left->pending;
}

std::vector<std::string> ClaimPlanner::ClaimStages(bool on_device) {
  if (on_device) return options_->stages;
  RefreshCosts(on_device);
  const std::set<std::string> leave =
      costs_.StagesForTheDevice(options_->stages, pending_, device_workers_);
  if (leave.empty()) return options_->stages;
  std::vector<std::string> mine;
  for (const std::string& s : options_->stages)
    if (leave.count(s) == 0) mine.push_back(s);
  return mine;
}

Result<std::vector<ClaimedJob>> ClaimPlanner::Claim(bool on_device, int64_t* trimmed) {
  auto jobs = ClaimByCount(on_device);
  if (jobs.ok() && options_->counters != nullptr)
    options_->counters->ObserveClaim(static_cast<int64_t>(jobs->size()));
  if (!jobs.ok() || jobs->empty()) return jobs;
  // A claim short of its limit found every due job there was.
  const bool tail = ItemsOf(*jobs) < options_->batch;
  if (Status s = TrimToTarget(&*jobs, tail, on_device, trimmed); !s.ok()) {
    (void)store_->Release(*jobs);
    return s;
  }
  return jobs;
}

Result<std::vector<ClaimedJob>> ClaimPlanner::ClaimByCount(bool on_device) {
  const std::vector<std::string> stages = ClaimStages(on_device);
  if (stages.empty()) return std::vector<ClaimedJob>();
  auto jobs = store_->ClaimItems(options_->id, stages, options_->batch, options_->lease_ms);
  // A claim short of its limit found every due job there was: nothing to top up.
  if (!jobs.ok() || ItemsOf(*jobs) < options_->batch || options_->batch_by_stage.empty())
    return jobs;
  // One claim over all stages keeps priority order; a stage with a larger batch that it
  // reached is then topped up alone (a smaller one is cut into groups by the worker), and
  // TrimToTarget orders them stage by stage.
  std::map<std::string, int> claimed;
  for (const ClaimedJob& j : *jobs) ++claimed[j.stage];
  for (const auto& [stage, n] : claimed) {
    if (options_->batch_by_stage.count(stage) == 0) continue;
    const int more = BatchOf(stage) - n;
    if (more <= 0) continue;
    auto extra = store_->Claim(options_->id, {stage}, more, options_->lease_ms);
    if (!extra.ok()) {
      // Give back what is held rather than leave it to lease expiry.
      (void)store_->Release(*jobs);
      return extra.status();
    }
    for (ClaimedJob& j : *extra) jobs->push_back(std::move(j));
  }
  return jobs;
}

Status ClaimPlanner::TrimToTarget(std::vector<ClaimedJob>* jobs, bool tail, bool on_device,
                                  int64_t* trimmed) {
  const bool trim = options_->claim_target_ms > 0 && jobs->size() > 1;
  if (trim) RefreshCosts(on_device);
  std::vector<ClaimUnit> units = UnitsOf(jobs, costs_, on_device ? Ran::kDevice : Ran::kCpu);
  // The claim took the last due jobs: the longest first, and a quarter of the target, so
  // that what is left goes to the workers that fall idle first.
  if (trim && tail)
    std::stable_sort(units.begin(), units.end(),
                     [](const auto& a, const auto& b) { return a.expected_ms > b.expected_ms; });
  std::vector<double> expected;
  for (const ClaimUnit& u : units) expected.push_back(u.expected_ms);
  const double target = static_cast<double>(options_->claim_target_ms) / (tail ? kTailShare : 1);
  const size_t keep = trim ? KeepWithinTarget(expected, target) : units.size();
  std::vector<ClaimedJob> rest;
  for (size_t k = 0; k < units.size(); ++k)
    for (ClaimedJob& j : units[k].jobs) (k < keep ? *jobs : rest).push_back(std::move(j));
  if (!rest.empty()) {
    auto r = store_->Release(rest);
    if (!r.ok()) return r.status();
    *trimmed += *r;
  }
  OrderForRunning(jobs, on_device);
  return Status::OK();
}

void ClaimPlanner::OrderForRunning(std::vector<ClaimedJob>* jobs, bool on_device) const {
  // On a device, stage by stage in dependency order (every claimed job's dependencies are
  // done already), so that each stage runs its jobs as one device batch. On the CPU, item by
  // item as claimed: an item's stages run one after another on its picture while it is in
  // cache, and a batch can give its unstarted items back between two of them; only a stage
  // with a batch size of its own (fetch: its transfers overlap within a batch) is gathered.
  const auto& order = registry_->graph().stages();
  auto rank = [&](const ClaimedJob& j) -> long {
    if (!on_device && options_->batch_by_stage.count(j.stage) == 0) return static_cast<long>(order.size());
    auto it = std::find_if(order.begin(), order.end(), [&](const StageSpec& s) { return s.name == j.stage; });
    return it - order.begin();
  };
  std::stable_sort(jobs->begin(), jobs->end(),
                   [&](const ClaimedJob& a, const ClaimedJob& b) { return rank(a) < rank(b); });
}

bool ClaimPlanner::ShouldGiveBack(int64_t elapsed_ms) {
  if (options_->claim_target_ms <= 0 || elapsed_ms < options_->claim_target_ms) return false;
  auto left = store_->CountOutstanding(options_->stages);
  return left.ok() && left->pending == 0;
}

}  // namespace framemill
