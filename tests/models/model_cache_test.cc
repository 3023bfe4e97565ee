// The model cache against the real converted models (FRAMEMILL_MODELS, default
// .cache/models; skipped when absent unless FRAMEMILL_REQUIRE_MODELS=1): lazy opening,
// cached failures, one runner per concurrent borrower, device engines beside CPU runners.
#include "models/model_cache.h"

#include <gtest/gtest.h>

#include <barrier>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include <opencv2/imgcodecs.hpp>

#include "gpu/compute_backend.h"
#include "tests/support/model_test_support.h"
#include "tests/support/test_support.h"

namespace framemill {
namespace {

using testing::ModelsDir;
namespace fs = std::filesystem;

TEST(ModelCacheTest, MissingModelFailsWithTheStoresMessageEveryTime) {
  testing::TempDir empty;
  models::ModelCache pool(empty.path());
  auto first = pool.Borrow("selfie");
  ASSERT_FALSE(first.ok());
  EXPECT_TRUE(first.status().IsNotFound()) << first.status().ToString();
  EXPECT_FALSE(first.status().IsTransient());
  EXPECT_NE(first.status().message().find("framemill models fetch"), std::string::npos);
  EXPECT_NE(first.status().message().find("FRAMEMILL_MODELS"), std::string::npos);
  for (int i = 0; i < 100; ++i) {
    auto again = pool.Borrow("selfie");
    ASSERT_FALSE(again.ok());
    EXPECT_EQ(again.status().ToString(), first.status().ToString());
  }
  EXPECT_EQ(pool.Created("selfie"), 0);
  auto unknown = pool.Borrow("no-such-model");
  ASSERT_FALSE(unknown.ok());
  EXPECT_TRUE(unknown.status().IsInvalidArgument()) << unknown.status().ToString();
}

TEST(ModelCacheTest, FailureIsCachedUntilTheRecheckThenAnInstalledModelIsUsed) {
  FM_REQUIRE_MODEL("selfie");
  testing::TempDir dir;
  models::ModelCache cached(dir.path(), {}, std::chrono::hours(1));  // {}: OpenRunner
  models::ModelCache fresh(dir.path(), {}, std::chrono::milliseconds(0));
  ASSERT_FALSE(cached.Borrow("selfie").ok());
  ASSERT_FALSE(fresh.Borrow("selfie").ok());
  fs::create_directory_symlink(ModelsDir() + "/selfie", dir / "selfie");
  EXPECT_FALSE(cached.Borrow("selfie").ok());  // within its recheck interval
  auto lease = fresh.Borrow("selfie");
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  EXPECT_EQ((*lease)->device(), "cpu");
  EXPECT_EQ((*lease)->manifest().name, "selfie");
}

TEST(ModelCacheTest, DamagedModelFileIsCorruptionNotACrash) {
  FM_REQUIRE_MODEL("selfie");
  testing::TempDir dir;
  fs::create_directory(dir / "selfie");
  for (const char* f : {"manifest.json", "model.onnx", "model.fmg.json"})
    fs::copy_file(ModelsDir() + "/selfie/" + f, dir / "selfie/" + f);
  testing::WriteFile(dir / "selfie/model.fmg.bin", "these are not the graph's weights");
  models::ModelCache pool(dir.path());
  auto r = pool.Borrow("selfie");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsCorruption()) << r.status().ToString();
  EXPECT_FALSE(r.status().IsTransient());
}

TEST(ModelCacheTest, ConcurrentBorrowersGetTheirOwnRunnersWithIdenticalResults) {
  FM_REQUIRE_MODEL("selfie");
  models::ModelCache pool(ModelsDir());
  const std::vector<cv::Mat> images = {cv::imread(testing::SampleData("messi5.jpg")),
                                       cv::imread(testing::SampleData("basketball1.png"))};
  // Reference: one thread alone.
  std::vector<std::vector<models::OutputTensor>> want;
  {
    auto l = pool.Borrow("selfie");
    ASSERT_TRUE(l.ok()) << l.status().ToString();
    auto r = (*l)->Run(images);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    want = std::move(r).value();
  }
  EXPECT_EQ(pool.Created("selfie"), 1);
  // Two threads that hold their leases at the same time, each running several times.
  std::barrier both(2);
  std::vector<std::vector<std::vector<models::OutputTensor>>> got(2);
  std::vector<std::string> errors(2);
  std::vector<models::ModelRunner*> seen(2, nullptr);
  auto work = [&](int t) {
    auto l = pool.Borrow("selfie");
    if (!l.ok()) {
      errors[t] = l.status().ToString();
      both.arrive_and_drop();
      return;
    }
    seen[t] = &**l;
    both.arrive_and_wait();  // both leases held from here on
    for (int rep = 0; rep < 3; ++rep) {
      auto r = (*l)->Run(images);
      if (!r.ok()) {
        errors[t] = r.status().ToString();
        return;
      }
      got[t] = std::move(r).value();
    }
  };
  std::thread a(work, 0), b(work, 1);
  a.join();
  b.join();
  ASSERT_EQ(errors[0], "");
  ASSERT_EQ(errors[1], "");
  EXPECT_NE(seen[0], seen[1]);
  EXPECT_EQ(pool.Created("selfie"), 2);  // the idle one was reused, one more opened
  for (int t = 0; t < 2; ++t) {
    ASSERT_EQ(got[t].size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got[t][i][0].data, want[i][0].data);
  }
  auto again = pool.Borrow("selfie");  // returned leases are reused
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(pool.Created("selfie"), 2);
}

TEST(ModelCacheTest, DeviceRunnersAreCachedPerDeviceBesideTheCpuOnes) {
  FM_REQUIRE_MODEL("mobilefacenet");
  models::ModelCache cache(ModelsDir());
  auto sim = gpu::MakeSimBackend(/*vram_mb=*/256);
  auto other = gpu::MakeSimBackend(/*vram_mb=*/256);
  const models::ModelRunner* on_sim = nullptr;
  {
    auto cpu = cache.Borrow("mobilefacenet");
    auto dev = cache.Borrow("mobilefacenet", sim.get());
    ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
    ASSERT_TRUE(dev.ok()) << dev.status().ToString();
    EXPECT_EQ((*cpu)->device(), "cpu");
    EXPECT_EQ((*dev)->device(), "sim:0");
    EXPECT_EQ((*cpu)->BatchBytesPerImage(), 0);
    EXPECT_GT((*dev)->BatchBytesPerImage(), 0) << "the engine's memory plan";
    on_sim = &**dev;
  }
  EXPECT_EQ(cache.Created("mobilefacenet"), 2);
  {
    auto again = cache.Borrow("mobilefacenet", sim.get());  // the same engine, weights kept
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(&**again, on_sim);
    auto elsewhere = cache.Borrow("mobilefacenet", other.get());  // another device: its own
    ASSERT_TRUE(elsewhere.ok());
    EXPECT_NE(&**elsewhere, on_sim);
  }
  EXPECT_EQ(cache.Created("mobilefacenet"), 3);
  cache.Forget(sim.get());  // its engines go; the other device's and the CPU's stay
  auto after = cache.Borrow("mobilefacenet", sim.get());
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(cache.Created("mobilefacenet"), 4);
  auto cpu = cache.Borrow("mobilefacenet");
  ASSERT_TRUE(cpu.ok());
  EXPECT_EQ(cache.Created("mobilefacenet"), 4);
}

TEST(ModelCacheTest, ADeviceThatCannotHoldTheWeightsIsAskedAgainEveryTime) {
  FM_REQUIRE_MODEL("centernet");  // 8 MB of weights
  models::ModelCache cache(ModelsDir());
  auto small = gpu::MakeSimBackend(/*vram_mb=*/4);
  for (int i = 0; i < 2; ++i) {
    auto r = cache.Borrow("centernet", small.get());
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(r.status().IsOutOfMemory()) << r.status().ToString();  // for the ladder
  }
  EXPECT_EQ(cache.Created("centernet"), 0);
  auto cpu = cache.Borrow("centernet");  // the CPU is not blamed for the device
  EXPECT_TRUE(cpu.ok()) << cpu.status().ToString();
}

}  // namespace
}  // namespace framemill
