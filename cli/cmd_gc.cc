#include "cli/command.h"

#include <cstdio>

#include "base/clock.h"

namespace framemill {

// The store keeps every attempt's error, every worker process and every run, which a
// long-lived dataset grows without bound; gc trims that history. Jobs, items and
// results are never touched.
int CmdGc(const Flags& f) {
  auto env = ResolveExisting(f);
  if (!env.ok()) return UsageError(env.status().message());
  auto store = OpenStore(*env);
  if (!store.ok()) return StoreError(store.status());
  GcOptions o;
  o.before_ms = SystemClock()->NowMs() - static_cast<int64_t>(f.keep_days) * 86'400'000;
  // Heartbeats come every lease_ms/3: an hour of silence is a dead worker, not a busy one.
  o.silent_before_ms = SystemClock()->NowMs() - 3'600'000;
  o.keep_runs = f.keep_runs;
  o.dry_run = f.dry_run;
  auto gc = (*store)->CollectGarbage(o);
  if (!gc.ok()) return StoreError(gc.status());
  std::printf("%s %lld error record(s), %lld worker(s), %lld run(s) older than %d day(s)%s\n",
              f.dry_run ? "would remove" : "removed", static_cast<long long>(gc->job_errors),
              static_cast<long long>(gc->workers), static_cast<long long>(gc->runs), f.keep_days,
              f.dry_run ? " (dry run)" : "");
  return ToInt(ExitCode::kOk);
}

}  // namespace framemill
