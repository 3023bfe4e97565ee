#include "jobs/outcome.h"

namespace framemill {

Outcome Outcome::Done(nlohmann::json result, std::string device) {
  Outcome o;
  o.result = std::move(result);
  o.device = std::move(device);
  return o;
}

Outcome Outcome::Failed(Status error, std::string error_class, int64_t retry_after_ms) {
  Outcome o;
  o.kind = Kind::kFailed;
  o.error = std::move(error);
  // An OutOfMemory that reaches a job is the host's (jobs/failure.h): its own class.
  if (error_class.empty() && o.error.IsOutOfMemory()) error_class = "resources";
  o.error_class = std::move(error_class);
  o.retry_after_ms = retry_after_ms;
  return o;
}

Outcome Outcome::Skipped(std::string reason) {
  Outcome o;
  o.kind = Kind::kSkipped;
  o.error = Status::Unsupported(reason);
  return o;
}

std::string Outcome::ErrorClass() const {
  return error_class.empty() ? std::string(error.CodeName()) : error_class;
}

}  // namespace framemill
