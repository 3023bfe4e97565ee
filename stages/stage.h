// A stage: one analysis applied to one item (or, dataset-level, to the whole store).
// Stages are constructed once per worker process and called from that worker's
// threads; Run must be thread-safe (stages keep no per-call state in members).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpu/oom_ladder.h"
#include "jobs/job.h"
#include "jobs/stage_graph.h"
#include "storage/status.h"

namespace framemill {

struct StageOutput {
  enum class Kind { kDone, kFailed, kSkipped };
  Kind kind = Kind::kDone;
  nlohmann::json result = nlohmann::json::object();
  std::vector<std::string> artifacts;
  std::string device = "cpu";
  Status error;  // kFailed: why (its code decides retry); kSkipped: the reason
  // kFailed only: a class finer than error's code ("" = the code's name), and a
  // server's Retry-After floor under the store's backoff (-1 = none).
  std::string error_class;
  int64_t retry_after_ms = -1;

  static StageOutput Done(nlohmann::json r, std::string device = "cpu") {
    StageOutput o;
    o.result = std::move(r);
    o.device = std::move(device);
    return o;
  }
  static StageOutput Failed(Status s, std::string error_class = "",
                            int64_t retry_after_ms = -1) {
    StageOutput o;
    o.kind = Kind::kFailed;
    o.error = std::move(s);
    o.error_class = std::move(error_class);
    o.retry_after_ms = retry_after_ms;
    return o;
  }
  static StageOutput Skipped(std::string reason) {
    StageOutput o;
    o.kind = Kind::kSkipped;
    o.error = Status::Unsupported(reason);
    return o;
  }
};

// What a worker lends its stages: the out-of-memory ladder, which owns the choice of
// device and batch size for every device operation. Owned by the worker.
struct StageContext {
  gpu::OomLadder* ladder = nullptr;
  const std::atomic<bool>* stop = nullptr;  // set: finish what is in hand, start nothing new
};

class Stage {
 public:
  virtual ~Stage() = default;
  virtual const StageSpec& spec() const = 0;
  // Analyses one item on the CPU. Bad input is a failed output with the reason, never
  // a throw or a crash: the worker records it against this job and moves on.
  virtual StageOutput Run(const ClaimedJob& job) = 0;
  // Analyses a claimed batch with device operations batched through ctx.ladder.
  // Returns outputs for a prefix of `jobs`, in order: all of them unless ctx.stop was
  // set, in which case the worker gives the rest back. The default runs each job
  // alone, checking stop between jobs.
  virtual std::vector<StageOutput> RunBatch(const std::vector<ClaimedJob>& jobs,
                                            const StageContext& ctx) {
    std::vector<StageOutput> out;
    for (const ClaimedJob& j : jobs) {
      if (ctx.stop != nullptr && ctx.stop->load()) break;
      out.push_back(Run(j));
    }
    return out;
  }
};

}  // namespace framemill
