// The report and the WebDataset export at scale, after leveldb's db_bench: a plain
// executable that prints its setup, then one line per workload. It measures only.
//
//   report_bench [--items=10000] [--side=480] [--dir=/tmp/report_bench]
//                [--benchmarks=report_cold,report_warm,webdataset]
//
// Setup: --items distinct real images (crops of opencv-doc's photos, JPEG and PNG, at most
// --side px), enqueued into a SQLite store with results shaped as the stages write them:
// lighting on every item, faces on every item (one in five with two faces), and one
// face_clusters result that puts the faces into identities of 2 to 40 faces.
//   report_cold  `framemill report`'s work with no picture made yet (every still and crop)
//   report_warm  the same again: every picture reused (a report regenerated during a run)
//   webdataset   `export --format webdataset`, 1000 items a shard
#include <sys/stat.h>
#include <xxhash.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>

#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "bench/bench_support.h"
#include "jobs/stage_graph.h"
#include "outputs/report.h"
#include "outputs/webdataset.h"
#include "storage/job_store.h"
#include "tests/support/test_support.h"

namespace framemill {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct Flags {
  int64_t items = 10000;
  int side = 480;
  std::string dir = "/tmp/report_bench";
  std::string benchmarks = "report_cold,report_warm,webdataset";
} FLAGS;

double Seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::pair<int64_t, int64_t> DirBytes(const std::string& dir) {
  int64_t bytes = 0, files = 0;
  std::error_code ec;
  for (const auto& e : fs::recursive_directory_iterator(dir, ec))
    if (e.is_regular_file()) bytes += static_cast<int64_t>(e.file_size()), ++files;
  return {bytes, files};
}

std::string Hash(const std::string& path) {
  const std::string bytes = testing::ReadFile(path);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(XXH3_64bits(bytes.data(), bytes.size())));
  return hex;
}

using bench::Die;

std::unique_ptr<JobStore> MakeStore(const StageGraph* graph) {
  const std::string db = FLAGS.dir + "/fm.db";
  const bool fresh = !fs::exists(db);
  auto store = OpenJobStore(db, graph, SystemClock());
  Die(store.status(), "open");
  if (!fresh) return std::move(store).value();
  const auto t0 = std::chrono::steady_clock::now();
  auto paths = testing::MakeRealImages(FLAGS.dir + "/media", static_cast<int>(FLAGS.items), FLAGS.side);
  std::vector<NewItem> items;
  for (const auto& p : paths) {
    NewItem it;
    it.source = p;
    it.size = static_cast<int64_t>(fs::file_size(p));
    it.content_hash = Hash(p);
    it.media_info = p.ends_with(".png") ? R"({"format":"png"})" : R"({"format":"jpeg"})";
    items.push_back(std::move(it));
  }
  EnqueueOptions o;
  o.stages = {"lighting", "faces", "face_clusters"};
  Die((*store)->Enqueue(items, o).status(), "enqueue");
  std::mt19937 rng(7);
  json members = json::array();
  for (const char* stage : {"lighting", "faces"}) {
    for (;;) {
      auto jobs = (*store)->Claim("bench", {stage}, 1000, 600'000);
      Die(jobs.status(), "claim");
      if (jobs->empty()) break;
      std::vector<FinishedJob> done;
      for (const ClaimedJob& j : *jobs) {
        json r;
        if (std::string(stage) == "lighting") {
          r = {{"color_temperature_k", 3000 + rng() % 4000}, {"exposure_ev", 0.1 * (rng() % 20) - 1},
               {"dynamic_range_stops", 8.5}, {"light_direction", {{"degrees", rng() % 360}, {"strength", 0.2}}}};
        } else {
          json faces = json::array();
          const int n = j.item_id % 5 == 0 ? 2 : 1;
          for (int f = 0; f < n; ++f) {
            const float x = 10.f + 60.f * f;
            faces.push_back({{"box", {x, 10.f, x + 48.f, 58.f}}, {"score", 0.9}});
            members.push_back({{"item", j.source}, {"face", f}});
          }
          r = {{"count", n}, {"faces", faces}};
        }
        done.emplace_back(j.id, j.lease_token, Outcome::Done(std::move(r)));
      }
      Die((*store)->Complete(done).status(), "complete");
    }
  }
  json clusters = json::array();
  for (size_t at = 0, id = 1; at < members.size(); ++id) {
    const size_t size = std::min<size_t>(2 + rng() % 39, members.size() - at);
    json c = {{"id", id}, {"size", size}, {"representative", members[at]}, {"members", json::array()}};
    for (size_t k = 0; k < size; ++k) c["members"].push_back(members[at + k]);
    clusters.push_back(std::move(c));
    at += size;
  }
  auto dataset = (*store)->Claim("bench", {"face_clusters"}, 1, 600'000);
  Die(dataset.status(), "claim clusters");
  Die((*store)->Complete({FinishedJob((*dataset)[0].id, (*dataset)[0].lease_token,
                                      Outcome::Done({{"clusters", clusters}, {"noise", json::array()}}))}).status(),
      "complete clusters");
  std::printf("setup:       %lld images (at most %d px) written and analysed in %.1f s; %zu faces, %zu clusters\n",
              static_cast<long long>(FLAGS.items), FLAGS.side, Seconds(t0), members.size(), clusters.size());
  return std::move(store).value();
}

void Report(JobStore& store, const char* name) {
  ReportOptions o;
  o.dir = FLAGS.dir + "/report";
  const auto t0 = std::chrono::steady_clock::now();
  auto s = WriteReport(store, o);
  Die(s.status(), name);
  const double secs = Seconds(t0);
  const auto [bytes, files] = DirBytes(o.dir);
  std::printf("%-12s %7.1f s  %8.0f items/s  index.html %lld B, pages %.1f MB, everything %.1f MB in %lld files; "
              "pictures %lld made, %lld reused\n",
              name, secs, s->items / secs, static_cast<long long>(s->index_bytes), s->total_bytes / 1e6, bytes / 1e6,
              static_cast<long long>(files), static_cast<long long>(s->pictures_made),
              static_cast<long long>(s->pictures_reused));
}

void WebDataset(JobStore& store) {
  WebDatasetOptions o;
  o.dir = FLAGS.dir + "/wds";
  const auto t0 = std::chrono::steady_clock::now();
  auto s = WriteWebDataset(store, o);
  Die(s.status(), "webdataset");
  const double secs = Seconds(t0);
  std::printf("%-12s %7.1f s  %8.0f items/s  %lld shards, %.1f MB\n", "webdataset", secs, s->items / secs,
              static_cast<long long>(s->shards), s->bytes / 1e6);
}

}  // namespace
}  // namespace framemill

int main(int argc, char** argv) {
  using framemill::FLAGS;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char* flag) -> const char* {
      const std::string f = std::string(flag) + "=";
      return a.rfind(f, 0) == 0 ? argv[i] + f.size() : nullptr;
    };
    if (auto v = value("--items")) FLAGS.items = std::atoll(v);
    else if (auto v = value("--side")) FLAGS.side = std::atoi(v);
    else if (auto v = value("--dir")) FLAGS.dir = v;
    else if (auto v = value("--benchmarks")) FLAGS.benchmarks = v;
    else {
      std::fprintf(stderr, "unknown flag %s\n", argv[i]);
      return 2;
    }
  }
  std::filesystem::create_directories(FLAGS.dir);
  std::printf("report_bench: %lld items, images at most %d px, in %s (SQLite store; rerun reuses it)\n",
              static_cast<long long>(FLAGS.items), FLAGS.side, FLAGS.dir.c_str());
  framemill::StageGraph graph;
  std::string err;
  framemill::StageSpec lighting, faces, clusters;
  lighting.name = "lighting";
  faces.name = "faces";
  clusters.name = "face_clusters";
  clusters.deps = {"faces"};
  clusters.dataset_level = true;
  graph.Add(lighting, &err);
  graph.Add(faces, &err);
  graph.Add(clusters, &err);
  auto store = framemill::MakeStore(&graph);
  std::string list = FLAGS.benchmarks + ",";
  for (size_t p = 0, q; (q = list.find(',', p)) != std::string::npos; p = q + 1) {
    const std::string b = list.substr(p, q - p);
    if (b == "report_cold") {
      std::filesystem::remove_all(FLAGS.dir + "/report");
      framemill::Report(*store, "report_cold");
    } else if (b == "report_warm") {
      framemill::Report(*store, "report_warm");
    } else if (b == "webdataset") {
      framemill::WebDataset(*store);
    } else if (!b.empty()) {
      std::fprintf(stderr, "unknown benchmark %s\n", b.c_str());
      return 2;
    }
  }
  return 0;
}
