// A real SQLite job store holding real image files and results shaped as the stages
// write them, for the report's and the WebDataset export's tests. Use from one thread.
#pragma once

#include <xxhash.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "jobs/stage_graph.h"
#include "storage/job_store.h"
#include "tests/support/test_support.h"

namespace framemill::testing {

inline std::string ContentHash(const std::string& path) {
  const std::string bytes = ReadFile(path);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx",
                static_cast<unsigned long long>(XXH3_64bits(bytes.data(), bytes.size())));
  return hex;
}

class ResultStore {
 public:
  // Stages lighting, faces, categorize (images); face_clusters (dataset-level, after faces) and
  // dedup (dataset-level, after categorize).
  explicit ResultStore(const std::string& db) {
    std::string err;
    StageSpec a;
    a.name = "lighting";
    graph_.Add(a, &err);
    StageSpec faces;
    faces.name = "faces";
    graph_.Add(faces, &err);
    StageSpec categorize;
    categorize.name = "categorize";
    graph_.Add(categorize, &err);
    StageSpec dedup;
    dedup.name = "dedup";
    dedup.deps = {"categorize"};
    dedup.dataset_level = true;
    graph_.Add(dedup, &err);
    StageSpec clusters;
    clusters.name = "face_clusters";
    clusters.deps = {"faces"};
    clusters.dataset_level = true;
    graph_.Add(clusters, &err);
    auto s = OpenJobStore(db, &graph_, SystemClock());
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(s).value();
  }

  JobStore& store() { return *store_; }

  void Enqueue(const std::vector<std::string>& paths, std::vector<std::string> stages) {
    std::vector<NewItem> items;
    for (const auto& p : paths) {
      NewItem it;
      it.source = p;
      it.kind = MediaKind::kImage;
      it.size = static_cast<int64_t>(std::filesystem::file_size(p));
      it.content_hash = ContentHash(p);
      it.media_info = R"({"format":")" + std::string(p.ends_with(".png") ? "png" : "jpeg") + "\"}";
      items.push_back(it);
    }
    EnqueueOptions o;
    o.stages = std::move(stages);
    auto r = store_->Enqueue(items, o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }

  // Claims every claimable job of `stage` and finishes each with what `decide` says.
  void Finish(const std::string& stage, const std::function<Outcome(const ClaimedJob&)>& decide) {
    auto jobs = store_->Claim("test", {stage}, 1000, 60'000);
    ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
    std::vector<FinishedJob> done;
    for (const ClaimedJob& j : *jobs) done.emplace_back(j.id, j.lease_token, decide(j));
    auto c = store_->Complete(done);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
  }

 private:
  StageGraph graph_;
  std::unique_ptr<JobStore> store_;
};

// A store of `images` real photos (longest side `side`) under a temporary folder, for the
// outputs' tests to finish jobs in and write from.
class PhotoStoreTest : public ::testing::Test {
 protected:
  void MakeStore(int images, int side) {
    paths_ = MakeRealImages(dir_ / "media", images, side);
    rs_ = std::make_unique<ResultStore>(dir_ / "fm.db");
  }
  TempDir dir_;
  std::vector<std::string> paths_;
  std::unique_ptr<ResultStore> rs_;
};

}  // namespace framemill::testing
