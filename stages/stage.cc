#include "stages/stage.h"

#include "base/clock.h"

namespace framemill {

Outcome Stage::Run(const ClaimedJob& job) {
  gpu::CpuLadder cpu(SystemClock());
  std::vector<Outcome> out = RunBatch({job}, StageContext{cpu.get(), nullptr});
  if (out.empty()) return Outcome::Failed(Status::Internal(spec().name + " gave no outcome"));
  return std::move(out.front());
}

}  // namespace framemill
