// The model pool against the real converted models (FRAMEMILL_MODELS, default
// .cache/models; skipped when absent unless FRAMEMILL_REQUIRE_MODELS=1): lazy opening,
// cached failures, one runner per concurrent borrower; and the real binary's behaviour
// when a stage's model is not installed.
#include "stages/model_pool.h"

#include <gtest/gtest.h>

#include <barrier>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include <opencv2/imgcodecs.hpp>

#include "tests/support/model_test_support.h"
#include "tests/support/test_support.h"

namespace framemill {
namespace {

using testing::JobFor;
using testing::ModelsDir;
namespace fs = std::filesystem;

TEST(ModelPoolTest, MissingModelFailsWithTheStoresMessageEveryTime) {
  testing::TempDir empty;
  ModelPool pool(empty.path());
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

TEST(ModelPoolTest, FailureIsCachedUntilTheRecheckThenAnInstalledModelIsUsed) {
  FM_REQUIRE_MODEL("selfie");
  testing::TempDir dir;
  ModelPool cached(dir.path(), OpenCpuRunner, std::chrono::hours(1));
  ModelPool fresh(dir.path(), OpenCpuRunner, std::chrono::milliseconds(0));
  ASSERT_FALSE(cached.Borrow("selfie").ok());
  ASSERT_FALSE(fresh.Borrow("selfie").ok());
  fs::create_directory_symlink(ModelsDir() + "/selfie", dir / "selfie");
  EXPECT_FALSE(cached.Borrow("selfie").ok());  // within its recheck interval
  auto lease = fresh.Borrow("selfie");
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  EXPECT_EQ((*lease)->device(), "cpu");
  EXPECT_EQ((*lease)->manifest().name, "selfie");
}

TEST(ModelPoolTest, DamagedModelFileIsCorruptionNotACrash) {
  FM_REQUIRE_MODEL("selfie");
  testing::TempDir dir;
  fs::create_directory(dir / "selfie");
  for (const char* f : {"manifest.json", "model.fmg.json", "model.fmg.bin"})
    fs::copy_file(ModelsDir() + "/selfie/" + f, dir / "selfie/" + f);
  testing::WriteFile(dir / "selfie/model.onnx", "this is not an onnx file");
  ModelPool pool(dir.path());
  auto r = pool.Borrow("selfie");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsCorruption()) << r.status().ToString();
  EXPECT_FALSE(r.status().IsTransient());
}

TEST(ModelPoolTest, ConcurrentBorrowersGetTheirOwnRunnersWithIdenticalResults) {
  FM_REQUIRE_MODEL("selfie");
  ModelPool pool(ModelsDir());
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
  std::vector<ModelRunner*> seen(2, nullptr);
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

TEST(ModelPoolTest, SquareCropPadsOutsideTheImageWithBlack) {
  cv::Mat img(40, 60, CV_8UC3, cv::Scalar(10, 20, 30));
  cv::Mat c = SquareCrop(img, {5, 5}, 20);  // reaches 5 px past the top-left corner
  ASSERT_EQ(c.size(), cv::Size(20, 20));
  EXPECT_EQ(c.at<cv::Vec3b>(0, 0), cv::Vec3b(0, 0, 0));
  EXPECT_EQ(c.at<cv::Vec3b>(10, 10), cv::Vec3b(10, 20, 30));
  cv::Mat p = PadToSquare(img);
  ASSERT_EQ(p.size(), cv::Size(60, 60));
  EXPECT_EQ(p.at<cv::Vec3b>(39, 59), cv::Vec3b(10, 20, 30));
  EXPECT_EQ(p.at<cv::Vec3b>(40, 0), cv::Vec3b(0, 0, 0));
}

// The real binary with a model directory that lacks the segmentation model: every
// segment job fails once with the store's message, the other stages finish, exit 3.
TEST(ModelPoolTest, RunWithAMissingModelFailsThoseJobsAndExitsThree) {
  FM_REQUIRE_MODEL("movenet-lightning");
  testing::TempDir dir;
  fs::create_directory(dir / "models");
  fs::create_directory_symlink(ModelsDir() + "/movenet-lightning", dir / "models/movenet-lightning");
  const std::string media = dir / "media";
  fs::create_directory(media);
  for (const char* f : {"messi5.jpg", "basketball1.png", "fruits.jpg"})
    fs::copy_file(testing::SampleData(f), media + "/" + f);
  std::map<std::string, std::string> env = {{"FRAMEMILL_DB", dir / "fm.db"},
                                            {"FRAMEMILL_OUT", dir / "out"},
                                            {"FRAMEMILL_MODELS", dir / "models"},
                                            {"FRAMEMILL_STAGES", "lighting,pose,segment"}};
  auto enq = testing::RunProcess({FRAMEMILL_BIN, "enqueue", media}, env, dir.path());
  ASSERT_EQ(enq.exit_code, 0) << enq.err;
  auto run = testing::RunProcess({FRAMEMILL_BIN, "run", "--workers", "2"}, env, dir.path());
  EXPECT_EQ(run.exit_code, 3) << run.err;
  EXPECT_EQ(run.err.find("killed by signal"), std::string::npos) << run.err;
  const std::string db = dir / "fm.db";
  auto count = [&](const std::string& stage, int state) {
    return testing::QueryInt(db, "SELECT count(*) FROM jobs WHERE stage = '" + stage +
                                     "' AND state = " + std::to_string(state));
  };
  EXPECT_EQ(count("lighting", 2), 3);
  EXPECT_EQ(count("pose", 2), 3);
  EXPECT_EQ(count("segment", 3), 3);
  auto rows = testing::QueryRows(db, "SELECT last_error || '|' || attempts FROM jobs WHERE stage = 'segment'");
  ASSERT_EQ(rows.size(), 3u);
  for (const std::string& r : rows) {
    EXPECT_NE(r.find("model 'selfie' is not installed"), std::string::npos) << r;
    EXPECT_NE(r.find("framemill models fetch"), std::string::npos) << r;
    EXPECT_EQ(r.substr(r.rfind('|')), "|1") << r;  // permanent: not retried
  }
}

}  // namespace
}  // namespace framemill
