#include "cli/command.h"

#include <cstdio>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "jobs/stage_names.h"
#include "stages/artifact.h"
#include "storage/job_store.h"

namespace framemill {

namespace {

// Clip files that no done clips job lists (RemoveUnlistedArtifacts): a stale worker killed
// after renaming its clips, before its completion was refused, leaves them to no one. Items
// whose clips job is not done are left alone: an attempt may be writing.
Result<int64_t> SweepClips(JobStore& store, const std::string& out_dir, bool dry_run) {
  const std::string root = ArtifactDir(out_dir, stage_names::kClips);
  int64_t found = 0;
  FM_RETURN_IF_ERROR(store.ForEachItem([&](const ItemView& item) -> Status {
    for (const JobView& job : item.jobs) {
      if (job.stage != stage_names::kClips || job.state != JobState::kDone) continue;
      std::set<std::string> keep;
      const auto listed = nlohmann::json::parse(job.artifacts_json, nullptr, false);
      for (const auto& path : listed.is_array() ? listed : nlohmann::json::array())
        if (path.is_string()) keep.insert(path.get<std::string>());
      auto swept = RemoveUnlistedArtifacts(root + "/" + std::to_string(item.id), item.id, "mp4", keep, dry_run);
      if (!swept.ok()) return swept.status();
      found += *swept;
    }
    return Status::OK();
  }));
  return found;
}

}  // namespace

// The store keeps every attempt's error, every worker process and every run, which a
// long-lived dataset grows without bound; gc trims that history. It also removes the clip
// files no done clips job lists (SweepClips). Jobs, items and results are never touched.
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
  auto clips = SweepClips(**store, env->config.out(), f.dry_run);
  if (!clips.ok()) return StoreError(clips.status());
  std::printf("%s %lld clip file(s) that no done clips job lists%s\n", f.dry_run ? "would remove" : "removed",
              static_cast<long long>(*clips), f.dry_run ? " (dry run)" : "");
  return ToInt(ExitCode::kOk);
}

}  // namespace framemill
