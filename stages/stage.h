// A stage: one analysis applied to one item (or, dataset-level, to the whole store).
// Stages are constructed once per worker process and called from that worker's
// threads; Run must be thread-safe (stages keep no per-call state in members).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

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

  static StageOutput Done(nlohmann::json r, std::string device = "cpu") {
    StageOutput o;
    o.result = std::move(r);
    o.device = std::move(device);
    return o;
  }
  static StageOutput Failed(Status s) {
    StageOutput o;
    o.kind = Kind::kFailed;
    o.error = std::move(s);
    return o;
  }
  static StageOutput Skipped(std::string reason) {
    StageOutput o;
    o.kind = Kind::kSkipped;
    o.error = Status::Unsupported(reason);
    return o;
  }
};

class Stage {
 public:
  virtual ~Stage() = default;
  virtual const StageSpec& spec() const = 0;
  // Analyses one item. Bad input is a failed output with the reason, never a throw
  // or a crash: the worker records it against this job and moves on.
  virtual StageOutput Run(const ClaimedJob& job) = 0;
};

}  // namespace framemill
