// The process exit codes of the contract (../shared/CONTRACT.md), one enum for every
// command and for the worker processes the supervisor forks. Plain values.
#pragma once

namespace framemill {

enum class ExitCode : int {
  kOk = 0,           // all work done
  kUsage = 2,        // usage or configuration error; the message names the flag, variable or key
  kSomeFailed = 3,   // finished, but some jobs failed permanently
  kStoreFailed = 4,  // the store or the machine failed: nothing is lost, rerun to resume
  kInterrupted = 130,  // graceful stop (SIGINT/SIGTERM)
};

constexpr int ToInt(ExitCode c) { return static_cast<int>(c); }

}  // namespace framemill
