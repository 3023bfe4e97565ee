#include "scheduler/progress.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>

namespace framemill {

std::string FormatDuration(double s) {
  if (s < 0 || s > 1e8) return "-";
  char buf[32];
  long t = static_cast<long>(s + 0.5);
  if (t >= 3600)
    std::snprintf(buf, sizeof buf, "%ldh%02ldm", t / 3600, (t / 60) % 60);
  else if (t >= 60)
    std::snprintf(buf, sizeof buf, "%ldm%02lds", t / 60, t % 60);
  else
    std::snprintf(buf, sizeof buf, "%lds", t);
  return buf;
}

Progress::Progress(JobStore* store, std::vector<std::string> stages, bool tty)
    : stages_(std::move(stages)), tty_(tty) {
  start_ = last_ = std::chrono::steady_clock::now();
  // Throughput counts only what this run finishes, not what earlier runs did.
  finished_at_start_ = 0;
  if (store == nullptr) return;
  auto counts = store->Counts(60'000);
  if (counts.ok()) {
    for (const StageCounts& c : *counts)
      if (std::find(stages_.begin(), stages_.end(), c.stage) != stages_.end())
        finished_at_start_ += c.done + c.failed + c.skipped;
  }
}

void Progress::Tick(JobStore* store, bool final) {
  auto now = std::chrono::steady_clock::now();
  auto every = tty_ ? std::chrono::milliseconds(500) : std::chrono::milliseconds(5000);
  if (!final && now - last_ < every) return;
  last_ = now;
  if (store == nullptr) return;
  auto counts = store->Counts(60'000);
  if (!counts.ok()) return;
  int64_t done = 0, failed = 0, skipped = 0, left = 0, running = 0;
  for (const StageCounts& c : *counts) {
    if (std::find(stages_.begin(), stages_.end(), c.stage) == stages_.end()) continue;
    done += c.done;
    failed += c.failed;
    skipped += c.skipped;
    running += c.running;
    left += c.pending + c.running + c.waiting;
  }
  int64_t finished = done + failed + skipped;
  double elapsed = std::chrono::duration<double>(now - start_).count();
  double rate = elapsed > 0.5 ? (finished - finished_at_start_) / elapsed : 0;
  double eta = rate > 0 ? left / rate : -1;
  int64_t total = finished + left;
  char line[256];
  std::snprintf(line, sizeof line,
                "%lld/%lld jobs  %.1f%%  done %lld  failed %lld  skipped %lld  running %lld  "
                "%.1f jobs/s  ETA %s",
                static_cast<long long>(finished), static_cast<long long>(total),
                total > 0 ? 100.0 * finished / total : 100.0, static_cast<long long>(done),
                static_cast<long long>(failed), static_cast<long long>(skipped),
                static_cast<long long>(running), rate, left == 0 ? "0s" : FormatDuration(eta).c_str());
  if (tty_) {
    std::fprintf(stderr, "\r\033[K%s%s", line, final ? "\n" : "");
    std::fflush(stderr);
  } else {
    spdlog::info("{}", line);
  }
}

}  // namespace framemill
