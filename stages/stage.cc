#include "stages/stage.h"

#include <cmath>
#include <exception>

#include "base/clock.h"

namespace framemill {

Outcome Stage::Run(const ClaimedJob& job) {
  gpu::CpuLadder cpu(SystemClock());
  std::vector<Outcome> out = RunBatch({job}, StageContext{cpu.get(), nullptr});
  if (out.empty()) return Outcome::Failed(Status::Internal(spec().name + " gave no outcome"));
  return std::move(out.front());
}

std::vector<Outcome> RunEachJob(const std::vector<ClaimedJob>& jobs, const StageContext& ctx,
                                const std::string& stage,
                                const std::function<Outcome(const ClaimedJob&)>& one) {
  std::vector<Outcome> out;
  for (const ClaimedJob& job : jobs) {
    if (ctx.stopped()) break;
    try {
      out.push_back(one(job));
    } catch (const std::exception& e) {
      out.push_back(Outcome::Failed(Status::Corruption(stage + ": " + e.what())));
    }
  }
  return out;
}

double Rounded(double v, int decimals) {
  const double f = std::pow(10.0, decimals);
  return std::round(v * f) / f;
}

}  // namespace framemill
