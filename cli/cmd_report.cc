#include "cli/command.h"

#include <chrono>
#include <cstdio>

#include "base/json_text.h"
#include "outputs/report.h"

namespace framemill {

int CmdReport(const Flags& f) {
  auto env = ResolveExisting(f);
  if (!env.ok()) return UsageError(env.status().message());
  if (f.limit < 0) return UsageError("--limit: expected 0 (every item) or more, got " + std::to_string(f.limit));
  auto store = OpenStore(*env);
  if (!store.ok()) return StoreError(store.status());
  ReportOptions o;
  o.dir = f.output.empty() ? "framemill-report" : f.output;
  o.limit = f.limit;
  o.unsafe = env->config.unsafe;
  o.blur_unsafe = !f.show_nsfw;
  o.path_map = env->config.paths;
  const auto t0 = std::chrono::steady_clock::now();
  auto stats = WriteReport(**store, o);
  if (!stats.ok()) {
    if (stats.status().IsInvalidArgument()) return UsageError(stats.status().message());
    return StoreError(stats.status());
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("report: %s/index.html (%lld item(s), %lld item page(s), %lld grid page(s), %lld cluster(s), "
              "%lld failure(s); pictures: %lld made, %lld reused; %.1f MB of pages; %.1f s)\n",
              o.dir.c_str(), static_cast<long long>(stats->items), static_cast<long long>(stats->item_pages),
              static_cast<long long>(stats->grid_pages), static_cast<long long>(stats->clusters),
              static_cast<long long>(stats->failures), static_cast<long long>(stats->pictures_made),
              static_cast<long long>(stats->pictures_reused), stats->total_bytes / 1e6, s);
  if (stats->problem_count > 0) {
    std::fprintf(stderr, "%lld item(s) shown without some pictures (their media or artifacts could not be read):\n",
                 static_cast<long long>(stats->problem_count));
    for (const auto& p : stats->problems) std::fprintf(stderr, "  %s\n", JsonDump(nlohmann::json(p)).c_str());
  }
  return ToInt(ExitCode::kOk);
}

}  // namespace framemill
