// /metrics' clip count on a large store, after leveldb's db_bench: a plain executable that
// prints its setup, then one line per workload. It measures only.
//
//   clip_count_bench [--videos=20000] [--clips=12] [--dir=/tmp/clip_count_bench] [--refreshes=10]
//
// Setup: --videos clips jobs done in a SQLite store, each with a result shaped as the clips
// stage writes it (--clips clips, each with its motion figures), finished over an hour.
//   recount    CountClips: every clips result read and parsed (what /metrics did each second)
//   counter    ClipCounter::Update once the counter is warm, with 10 more jobs finished before
//              each refresh (a busy run): the results since the newest seen, less the slack
//   first      ClipCounter's first Update (everything once, as the recount)
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "bench/bench_support.h"
#include "jobs/clip_totals.h"
#include "jobs/stage_graph.h"
#include "storage/job_store.h"

namespace framemill {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct Flags {
  int64_t videos = 20000;
  int clips = 12;
  int refreshes = 10;
  std::string dir = "/tmp/clip_count_bench";
} FLAGS;

double Ms(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

using bench::Die;

json ClipsResult(int n) {
  json clips = json::array();
  for (int k = 0; k < n; ++k)
    clips.push_back({{"index", k}, {"start_frame", 100 * k}, {"end_frame", 100 * k + 90}, {"start_s", 4.0 * k},
                     {"end_s", 4.0 * k + 3.6}, {"frames", 90}, {"fps", 25.0}, {"width", 640}, {"height", 360},
                     {"codec", "h264"}, {"bytes", 400000}, {"artifact", "/out/clips/1/1-f100-0123456789abcdef.mp4"},
                     {"motion", {{"camera", {{"dx", 0.5}, {"dy", 0.1}, {"label", "pan"}}}}}});
  return {{"mode", "encode"}, {"clips", clips}, {"dropped", json::array()}};
}

// Finishes `n` of the enqueued clips jobs at the manual clock's time, advancing it.
int64_t Finish(JobStore& store, ManualClock& clock, int64_t n, int64_t step_ms) {
  int64_t done = 0;
  while (done < n) {
    auto jobs = store.Claim("bench", {"clips"}, std::min<int64_t>(500, n - done), 600'000);
    Die(jobs.status(), "claim");
    if (jobs->empty()) break;
    std::vector<FinishedJob> finished;
    for (const ClaimedJob& j : *jobs) finished.emplace_back(j.id, j.lease_token, Outcome::Done(ClipsResult(FLAGS.clips)));
    clock.Advance(step_ms);
    Die(store.Complete(finished).status(), "complete");
    done += static_cast<int64_t>(jobs->size());
  }
  return done;
}

int Main() {
  fs::remove_all(FLAGS.dir);
  fs::create_directories(FLAGS.dir);
  StageGraph graph;
  std::string error;
  StageSpec clips;
  clips.name = "clips";
  if (!graph.Add(clips, &error)) Die(Status::InvalidArgument(error), "stage");
  ManualClock clock(1'700'000'000'000);
  StoreOptions so;
  so.server_time = false;
  auto store = OpenJobStore(FLAGS.dir + "/fm.db", &graph, &clock, so);
  Die(store.status(), "open");
  std::vector<NewItem> items;
  const int64_t total = FLAGS.videos + int64_t(FLAGS.refreshes) * 10;
  for (int64_t i = 0; i < total; ++i) {
    NewItem item;
    item.source = FLAGS.dir + "/v" + std::to_string(i) + ".mp4";
    item.kind = MediaKind::kVideo;
    items.push_back(std::move(item));
  }
  EnqueueOptions eo;
  eo.stages = {"clips"};
  Die((*store)->Enqueue(items, eo).status(), "enqueue");
  const auto t0 = std::chrono::steady_clock::now();
  Finish(**store, clock, FLAGS.videos, 3'600'000 / std::max<int64_t>(1, FLAGS.videos / 500));
  std::printf("setup:    %lld clips jobs done (%d clips each, %zu bytes a result) in %.1f s; SQLite %s\n",
              static_cast<long long>(FLAGS.videos), FLAGS.clips, ClipsResult(FLAGS.clips).dump().size(), Ms(t0) / 1000,
              (FLAGS.dir + "/fm.db").c_str());
  auto done_now = [&]() -> Result<int64_t> {
    auto counts = (*store)->Counts(0);
    if (!counts.ok()) return counts.status();
    return DoneOf(*counts, "clips");
  };
  auto t = std::chrono::steady_clock::now();
  auto all = CountClips(**store);
  Die(all.status(), "count");
  std::printf("recount:  %8.1f ms a refresh (%lld clips)\n", Ms(t), static_cast<long long>(all->clips));
  ClipCounter counter;
  t = std::chrono::steady_clock::now();
  Die(counter.Update(**store, done_now).status(), "first");
  std::printf("first:    %8.1f ms (parsed %lld)\n", Ms(t), static_cast<long long>(counter.parsed()));
  double ms = 0;
  const int64_t before = counter.parsed();
  ClipTotals last;
  for (int r = 0; r < FLAGS.refreshes; ++r) {
    clock.Advance(1000);
    Finish(**store, clock, 10, 100);
    t = std::chrono::steady_clock::now();
    auto u = counter.Update(**store, done_now);
    ms += Ms(t);
    Die(u.status(), "update");
    last = *u;
  }
  auto check = CountClips(**store);
  Die(check.status(), "count");
  std::printf("counter:  %8.1f ms a refresh, Counts included (%d refreshes, 10 jobs done before each; parsed %lld; "
              "%lld clips, the recount's %lld)\n",
              ms / FLAGS.refreshes, FLAGS.refreshes, static_cast<long long>(counter.parsed() - before),
              static_cast<long long>(last.clips), static_cast<long long>(check->clips));
  return last.clips == check->clips ? 0 : 1;
}

}  // namespace
}  // namespace framemill

int main(int argc, char** argv) {
  using framemill::FLAGS;
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    if (std::strncmp(a, "--videos=", 9) == 0) FLAGS.videos = std::atoll(a + 9);
    else if (std::strncmp(a, "--clips=", 8) == 0) FLAGS.clips = std::atoi(a + 8);
    else if (std::strncmp(a, "--refreshes=", 12) == 0) FLAGS.refreshes = std::atoi(a + 12);
    else if (std::strncmp(a, "--dir=", 6) == 0) FLAGS.dir = a + 6;
    else {
      std::fprintf(stderr, "unknown flag %s\n", a);
      return 2;
    }
  }
  return framemill::Main();
}
