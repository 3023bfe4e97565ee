// What the CPU benchmarks share: choosing workloads from --benchmarks and timing one.
// Header-only (each bench is one .cc); single-threaded use.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "jobs/job.h"

namespace framemill::bench {

// A job of `stage` on the image at `path`, as a worker would hand it to the stage.
inline ClaimedJob ImageJob(const std::string& stage, const std::string& path) {
  ClaimedJob job;
  job.id = job.item_id = 1;
  job.stage = stage;
  job.source = path;
  job.kind = MediaKind::kImage;
  return job;
}

// The value of the flag `prefix` ("--name=") in `arg`, or null when `arg` is another flag.
inline const char* FlagValue(const char* arg, const char* prefix) {
  const size_t n = std::strlen(prefix);
  return std::strncmp(arg, prefix, n) == 0 ? arg + n : nullptr;
}

// Whether `name` is in the comma-separated `csv`; an empty list selects everything.
inline bool Listed(const std::string& csv, const std::string& name) {
  if (csv.empty()) return true;
  const std::string padded = "," + csv + ",";
  return padded.find("," + name + ",") != std::string::npos;
}

inline double NowMs() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

// The median wall time of `reps` runs of f, after one warm-up run (first-run allocations,
// OpenCV's lazy initialisation).
template <typename F>
double MedianMs(int reps, F&& f) {
  f();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const double t0 = NowMs();
    f();
    t.push_back(NowMs() - t0);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace framemill::bench
