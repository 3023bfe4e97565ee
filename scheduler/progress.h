// Live progress of a run: a rewritten line on a terminal, periodic log lines
// otherwise. Reads counts from the store it is handed each time (the supervisor closes
// and reopens its connection around forks); used from one thread.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "storage/job_store.h"

namespace framemill {

// Seconds as "1h02m", "3m05s", "12s"; "-" for unknown (negative).
std::string FormatDuration(double seconds);

class Progress {
 public:
  Progress(JobStore* store, std::vector<std::string> stages, bool tty);
  // Refreshes at most twice a second on a terminal, every 5 s in logs; `final`
  // forces a last report and ends the terminal line.
  void Tick(JobStore* store, bool final);

 private:
  std::vector<std::string> stages_;
  bool tty_;
  std::chrono::steady_clock::time_point start_, last_;
  int64_t finished_at_start_ = -1;
};

}  // namespace framemill
