// The one failure policy for work that throws instead of returning a Status: every catch
// that turns an exception into a job's failure (the worker's boundary, PerJobStage,
// ModelStage, the lighting stage) goes through here, so the same exception is the same
// error class wherever it is caught (docs/ARCHITECTURE.md, "Bad input is data").
//   std::bad_alloc: the host ran out of memory: OutOfMemory, class "resources" (transient:
//     the retry policy runs it again after its backoff, when memory may be free again);
//   any other exception: Internal, class "internal" (transient: the retry policy decides,
//     and a job that throws on every attempt fails for good on its last).
// An OutOfMemory that reaches a job at all is the host's: the device's is the out-of-memory
// ladder's to handle, and its last step, the CPU, reports the host's (gpu/oom_ladder.h). So
// Outcome::Failed classes every OutOfMemory as "resources".
// Thread-safe.
#pragma once

#include <string_view>

#include "base/status.h"
#include "jobs/outcome.h"

namespace framemill {

inline constexpr const char* kResourcesClass = "resources";

// The Status of the exception being handled; call only inside a catch block. `where` says
// what was running ("echo", "decoding /x/y.jpg").
Status ThrownStatus(std::string_view where);

// Outcome::Failed(ThrownStatus(where)): a job's failure from inside a catch block.
Outcome FailedByThrow(std::string_view where);

}  // namespace framemill
