// The one typed result of a job. A stage returns an Outcome per claimed job (done with
// its result, failed with the reason, or skipped with the reason); the worker adds the
// retry decision and hands the store a FinishedJob, which the store writes as it is.
// Plain values; thread-safe to copy.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "base/time_split.h"
#include "media/kind.h"

namespace framemill {

// The local file a downloading stage made of a URL item: from then on the item is this
// file, of this kind, for every other stage.
struct FetchedFile {
  std::string path;
  MediaKind kind = MediaKind::kImage;
  std::string content_hash;
  int64_t bytes = 0;
  nlohmann::json media_info = nlohmann::json::object();  // as enqueue records a local file's
};

struct Outcome {
  enum class Kind { kDone, kFailed, kSkipped };

  Kind kind = Kind::kDone;
  nlohmann::json result = nlohmann::json::object();  // kDone: the stage's result
  std::vector<std::string> artifacts;                // kDone: files the stage wrote
  std::string device = "cpu";                        // what produced it: "cpu", "cuda:0"
  std::optional<FetchedFile> fetched;                // kDone, downloading stages only
  Status error;  // kFailed: why (its code decides transient or permanent); kSkipped: the reason
  // kFailed only: a class finer than error's code ("" = the code's name; an OutOfMemory is
  // "resources", jobs/failure.h), and a server's Retry-After, a floor under the retry
  // backoff (-1 = none).
  std::string error_class;
  int64_t retry_after_ms = -1;

  static Outcome Done(nlohmann::json result, std::string device = "cpu");
  static Outcome Failed(Status error, std::string error_class = "", int64_t retry_after_ms = -1);
  static Outcome Skipped(std::string reason);

  bool done() const { return kind == Kind::kDone; }
  bool failed() const { return kind == Kind::kFailed; }
  // The error class the store records and `status` counts: error_class, else the code's name.
  std::string ErrorClass() const;
};

// A claimed job's outcome as the worker hands it to the store: fenced by the claim's
// lease token, and for a failure the retry decision (jobs/retry_policy.h).
struct FinishedJob {
  FinishedJob(int64_t id = 0, int64_t token = 0, Outcome o = {}, int64_t retry_at = 0,
              int64_t decided_at = 0, std::string stage_name = {})
      : job_id(id), lease_token(token), outcome(std::move(o)), retry_at_ms(retry_at),
        decided_at_ms(decided_at), stage(std::move(stage_name)) {}
  int64_t job_id = 0;
  int64_t lease_token = 0;
  Outcome outcome;
  int64_t retry_at_ms = 0;  // kFailed: pending again at this time; 0 = failed for good
  // The worker's clock when it chose retry_at_ms (0: unknown). A store that keeps time by
  // its server's clock (PostgreSQL) applies the delay, not the worker's absolute time.
  int64_t decided_at_ms = 0;
  std::string stage;  // the claimed job's stage; empty: not known to the caller
  // The job's own time, as the worker measured it: its start (worker's clock), its run (a
  // group a stage ran together shares its time evenly; -1: not measured) and the seconds
  // of media it covered (-1: unknown). Stored with a done job's result.
  int64_t started_at_ms = 0;
  int64_t run_ms = -1;
  double media_seconds = -1;
  // Where run_ms went (base/time_split.h): decoding, the rest of the host's work, the device,
  // waiting. Stored with run_ms.
  JobTimeSplit split;
};

}  // namespace framemill
