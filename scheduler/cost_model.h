// What a job is expected to cost, so that a worker's claim holds a few seconds of work
// rather than a fixed count (issue 28): sixteen photos for a neural stage, one long video.
// Learned from done jobs' own times (JobStore::RecentJobTimes, then the worker's own):
// per stage and media kind, the median ms per job, and for videos the median ms per MB of
// file times this file's MB. Before any history an image is taken as cheap (the count
// limit sizes the claim, as before) and a video or dataset job as filling a claim alone.
//
// The times are also kept apart by where the jobs ran, on the CPU or on a device (issue 38):
// a worker expects its own kind of time, and a worker on the CPU leaves the device the jobs
// a device worker would finish sooner (StagesForTheDevice).
// Not thread-safe: one per worker.
#pragma once

#include <cstdint>
#include <deque>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "jobs/job.h"
#include "storage/job_store.h"

namespace framemill {

// Where a done job ran: on the CPU, or on a device (any: "cuda:0", "sim:0").
enum class Ran { kAnywhere, kCpu, kDevice };
Ran RanOn(const std::string& device);

class CostModel {
 public:
  static constexpr size_t kSamples = 64;  // newest times kept per (stage, kind)
  static constexpr double kUnknown = std::numeric_limits<double>::infinity();

  // Newest first, as RecentJobTimes returns them.
  void Learn(const std::vector<JobTime>& newest_first);
  void Observe(const JobTime& t);
  // Expected ms of one job on `on` (its history there; without any, every job's);
  // kUnknown for a video or dataset job with no history.
  double ExpectedMs(const std::string& stage, MediaKind kind, int64_t bytes, Ran on = Ran::kAnywhere) const;
  // The median ms per job of (stage, kind) on `on`, or -1 without history there.
  double MedianMs(const std::string& stage, MediaKind kind, Ran on = Ran::kAnywhere) const;

  // The stages of `stages` a worker on the CPU leaves to the device workers now: those whose
  // image jobs a device worker would finish sooner, its wait included. A job takes `cpu` ms
  // here; on a device `device` ms, after the jobs ahead of it: `pending` jobs shared among
  // `device_workers`, each the device's mean per job. Stages without both histories stay.
  std::set<std::string> StagesForTheDevice(const std::vector<std::string>& stages, int64_t pending,
                                           int device_workers) const;

 private:
  using Key = std::tuple<std::string, MediaKind, Ran>;
  void Push(const Key& key, const JobTime& t);
  std::map<Key, std::deque<double>> per_job_, per_mb_;
};

// How many of a claim's jobs (their expected ms, in claim order) to keep: each next job is
// kept while those already kept are expected to take less than target_ms. At least one.
size_t KeepWithinTarget(const std::vector<double>& expected_ms, double target_ms);

// The seconds of media a done job's result says it covered (its `media`'s frames over fps),
// or -1.
double MediaSecondsOf(const nlohmann::json& result);

}  // namespace framemill
