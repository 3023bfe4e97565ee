#include "cli/command.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdio>

#include "cli/enqueue.h"
#include "cli/options.h"

namespace framemill {
namespace {

// A progress line rewritten on a terminal; otherwise a log line per 100k URLs and at the end.
void ShowProgress(bool tty, const EnqueueProgress& p) {
  if (tty) {
    std::fprintf(stderr, "\r\033[Kscanned %lld files, read %lld/%lld, %lld URLs, written %lld%s",
                 static_cast<long long>(p.files_seen), static_cast<long long>(p.files_read),
                 static_cast<long long>(p.to_read), static_cast<long long>(p.urls_read),
                 static_cast<long long>(p.items_written), p.done ? "\n" : "");
  } else if (p.done || (p.urls_read > 0 && p.urls_read % 100'000 == 0)) {
    spdlog::info("scanned {} files, read {}/{}, {} URLs, written {}", p.files_seen,
                 p.files_read, p.to_read, p.urls_read, p.items_written);
  }
}

void PrintReport(EnqueueReport& report) {
  const EnqueueStats& s = report.stats;
  std::printf("enqueue: %lld files seen, %lld media\n", static_cast<long long>(report.files_seen),
              static_cast<long long>(report.media_files));
  std::printf("  items: %lld added, %lld changed (re-queued), %lld unchanged\n",
              static_cast<long long>(s.items_added), static_cast<long long>(s.items_changed),
              static_cast<long long>(s.items_unchanged));
  std::printf("  jobs:  %lld added (%lld not applicable, skipped), %lld re-queued\n",
              static_cast<long long>(s.jobs_added), static_cast<long long>(s.jobs_not_applicable),
              static_cast<long long>(s.jobs_requeued));
  for (const auto& [reason, n] : report.skipped)
    std::printf("  skipped %lld file(s): %s (e.g. %s)\n", static_cast<long long>(n),
                reason.c_str(), report.skipped_example[reason].c_str());
  for (const auto& [reason, n] : report.unreadable)
    std::printf("  could not read %lld entr%s: %s (e.g. %s)\n", static_cast<long long>(n),
                n == 1 ? "y" : "ies", reason.c_str(), report.unreadable_example[reason].c_str());
  if (report.url_lists == 0) return;
  int64_t rejected = 0;
  for (const auto& [reason, n] : report.urls_rejected) rejected += n;
  std::printf("  URL lists: %lld, %lld URLs accepted, %lld line(s) rejected\n",
              static_cast<long long>(report.url_lists), static_cast<long long>(report.urls_seen),
              static_cast<long long>(rejected));
  for (const auto& [reason, n] : report.urls_rejected)
    std::printf("    %lld: %s\n", static_cast<long long>(n), reason.c_str());
  for (const std::string& e : report.rejected_examples) std::printf("    %s\n", e.c_str());
}

}  // namespace

int CmdEnqueue(const Flags& f) {
  auto env = Resolve(f);
  if (!env.ok()) return UsageError(env.status().message());
  auto stages = ResolveStages(*env);
  if (!stages.ok()) return UsageError(stages.status().message());
  if (f.sources.empty()) return UsageError("enqueue needs at least one SOURCE");
  auto store = OpenStore(*env);
  if (!store.ok()) return StoreError(store.status());
  const bool tty = isatty(STDERR_FILENO) != 0;
  auto report = EnqueueSources(**store, f.sources, ToEnqueueOptions(env->config, *stages),
                               [&](const EnqueueProgress& p) { ShowProgress(tty, p); });
  if (!report.ok()) return StoreError(report.status());
  PrintReport(*report);
  // Everything readable was added; exit 3 says some entries were not (see above).
  return ToInt(report->unreadable.empty() ? ExitCode::kOk : ExitCode::kSomeFailed);
}

}  // namespace framemill
