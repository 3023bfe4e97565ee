// What the neural stages share (stages/model_stage.h): the crops their models see, and
// the real binary's behaviour when a stage's model is not installed.
#include "stages/model_stage.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "tests/support/model_test_support.h"
#include "tests/support/test_support.h"

namespace framemill {
namespace {

using testing::ModelsDir;
namespace fs = std::filesystem;

TEST(ModelStageTest, SquareCropPadsOutsideTheImageWithBlack) {
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

// The real binary with a segmentation model that `run`'s check sees installed (its
// manifest) but that does not load (a missing one stops the run before it claims: the
// PreflightTest): every segment job fails once with the model's error, the other stages
// finish, exit 3.
TEST(ModelStageTest, RunWithADamagedModelFailsThoseJobsAndExitsThree) {
  FM_REQUIRE_MODEL("movenet-multipose");  // pose's default model
  FM_REQUIRE_MODEL("selfie");
  testing::TempDir dir;
  fs::create_directories(dir / "models/selfie");
  fs::create_directory_symlink(ModelsDir() + "/movenet-multipose", dir / "models/movenet-multipose");
  fs::copy_file(ModelsDir() + "/selfie/manifest.json", dir / "models/selfie/manifest.json");
  for (const auto& e : fs::directory_iterator(ModelsDir() + "/selfie"))
    if (e.path().filename() != "manifest.json")
      testing::WriteFile(dir / ("models/selfie/" + e.path().filename().string()), "damaged");
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
    EXPECT_NE(r.find("model selfie: cannot load"), std::string::npos) << r;
    EXPECT_EQ(r.substr(r.rfind('|')), "|1") << r;  // permanent: not retried
  }
}

}  // namespace
}  // namespace framemill
