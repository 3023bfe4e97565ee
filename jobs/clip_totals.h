// The clips the clips stage made and the seconds of video they hold, from its results as the
// stage writes them (`clips`: [{"start_s", "end_s", ...}]): what `status`, /metrics and the
// report's overview count.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>

#include "base/status.h"
#include "jobs/result_reader.h"

namespace framemill {

struct ClipTotals {
  int64_t clips = 0;
  double seconds = 0;
};

// One clips result's.
ClipTotals ClipTotalsOf(const std::string& result_json);
// Summed over every done clips result (one parse per video).
Result<ClipTotals> CountClips(ResultReader& results);

// The same totals kept up to date as clips jobs finish (what /metrics reads each second): each
// Update reads only the results finished since `kSlackMs` before the newest one it has seen (a
// job stamped earlier may commit later) and parses those it has not counted. `done_now`: the
// store's count of done clips jobs, asked after the read. Everything is counted again when the
// counter holds more results than that (one went away: `retry`, garbage collection), or fewer
// for kMissesBeforeRecount updates in a row (one committed later than the slack allows). Not
// thread-safe.
class ClipCounter {
 public:
  static constexpr int64_t kSlackMs = 10'000;
  static constexpr int kMissesBeforeRecount = 3;

  Result<ClipTotals> Update(ResultReader& results, const std::function<Result<int64_t>()>& done_now);
  int64_t parsed() const { return parsed_; }  // results parsed in all (the tests')

 private:
  Status ReadSince(ResultReader& results, int64_t since_ms);
  void Clear();

  std::unordered_map<int64_t, ClipTotals> by_job_;
  ClipTotals total_;
  int64_t newest_ms_ = -1;  // the newest finished_at seen; -1: none yet
  int misses_ = 0;
  int64_t parsed_ = 0;
};

}  // namespace framemill
