// What the CPU benchmarks share: choosing workloads from --benchmarks and timing one.
// Header-only (each bench is one .cc); single-threaded use.
#pragma once

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "base/status.h"
#include "jobs/job.h"
#include "jobs/outcome.h"

namespace framemill::bench {

// Ends the benchmark with "<what>: <status>" unless `s` is OK.
inline void Die(const Status& s, const char* what) {
  if (s.ok()) return;
  std::fprintf(stderr, "%s: %s\n", what, s.ToString().c_str());
  std::exit(1);
}

// A job of `stage` on the image at `path`, as a worker would hand it to the stage.
inline ClaimedJob ImageJob(const std::string& stage, const std::string& path) {
  ClaimedJob job;
  job.id = job.item_id = 1;
  job.stage = stage;
  job.source = path;
  job.kind = MediaKind::kImage;
  return job;
}

// `stage`'s outcome on the image at `path` where it is done; otherwise a line "<what> <path>:
// <why>" and nothing.
template <class Stage>
std::optional<Outcome> DoneOn(Stage& stage, const std::string& path, const char* what) {
  Outcome out = stage.Run(ImageJob(stage.spec().name, path));
  if (out.kind == Outcome::Kind::kDone) return out;
  std::printf("%s %s: %s\n", what, path.c_str(), out.error.ToString().c_str());
  return std::nullopt;
}

// The value of the flag `prefix` ("--name=") in `arg`, or null when `arg` is another flag.
inline const char* FlagValue(const char* arg, const char* prefix) {
  const size_t n = std::strlen(prefix);
  return std::strncmp(arg, prefix, n) == 0 ? arg + n : nullptr;
}

// A flag ("--name=") and the field it sets: text, or a whole number (raised to `min` where
// it is below; anything but a whole number is refused).
struct FlagRow {
  const char* prefix;
  std::variant<std::string*, int*, int64_t*> field;
  int64_t min = INT64_MIN;
};

// Sets the fields of argv[1..] through `rows`. At a flag no row names, or a number field
// given something else: a line on stderr ("<program>: unknown flag ...", then `usage`
// where given) and false.
inline bool ParseFlags(const char* program, int argc, char** argv,
                       const std::vector<FlagRow>& rows, const char* usage = "") {
  for (int i = 1; i < argc; ++i) {
    const FlagRow* row = nullptr;
    const char* v = nullptr;
    for (const FlagRow& r : rows)
      if ((v = FlagValue(argv[i], r.prefix)) != nullptr) {
        row = &r;
        break;
      }
    if (row == nullptr) {
      std::fprintf(stderr, "%s: unknown flag %s\n%s", program, argv[i], usage);
      return false;
    }
    if (auto* text = std::get_if<std::string*>(&row->field)) {
      **text = v;
      continue;
    }
    int64_t n = 0;
    const char* end = v + std::strlen(v);
    const auto [stop, err] = std::from_chars(v, end, n);
    if (err != std::errc() || stop != end || *v == '\0') {
      std::fprintf(stderr, "%s: %s expects a whole number, got '%s'\n%s", program, row->prefix, v, usage);
      return false;
    }
    n = std::max(row->min, n);
    if (auto* small = std::get_if<int*>(&row->field)) **small = static_cast<int>(n);
    else **std::get_if<int64_t*>(&row->field) = n;
  }
  return true;
}

// Whether `name` is in the comma-separated `csv`; an empty list selects everything.
inline bool Listed(const std::string& csv, const std::string& name) {
  if (csv.empty()) return true;
  const std::string padded = "," + csv + ",";
  return padded.find("," + name + ",") != std::string::npos;
}

// The CPU's model name, as /proc/cpuinfo gives it ("?" where it does not).
inline std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "?";
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
