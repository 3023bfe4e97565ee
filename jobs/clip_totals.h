// The clips the clips stage made and the seconds of video they hold, from its results as the
// stage writes them (`clips`: [{"start_s", "end_s", ...}]): what `status`, /metrics and the
// report's overview count.
#pragma once

#include <cstdint>
#include <string>

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

}  // namespace framemill
