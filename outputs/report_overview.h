// The overview page's tables (DIR/index.html): jobs per stage and state, throughput over
// time, where the time goes, failures by class, and the runs with their devices.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "storage/job_store.h"

namespace framemill::report {

// Jobs per stage, counted by JobState.
using StateCounts = std::map<std::string, std::array<int64_t, 6>>;

// The jobs of one (stage, error class) that failed for good: how many, one message, a few items.
struct FailureExample {
  int64_t count = 0;
  std::string example_message;
  std::vector<std::pair<std::string, int64_t>> items;  // name, item id
};
using FailureExamples = std::map<std::pair<std::string, std::string>, FailureExample>;

// Jobs finished over time (epoch ms), in 60 bars.
std::string ThroughputChart(std::vector<int64_t> finished);
std::string StagesTable(const StateCounts& stages);
// Failures by class, largest first; items link to their page where one was written.
std::string FailuresTable(const FailureExamples& failures, const std::set<std::string>& written_items);
// Where the time goes: per stage and media kind, the newest done jobs' own times
// (SummariseJobTimes, the medians `status` prints).
std::string TimeTable(const std::vector<JobTime>& times);
// A run's devices, one line each: its workers there, its busy share of the run, the most
// memory they planned at once against the device's total, and its out-of-memory events and
// CPU fallbacks.
std::string RunDevices(const RunRecord& r, int64_t now_ms);
std::string RunsTable(const std::vector<RunRecord>& runs, int64_t now_ms);

}  // namespace framemill::report
