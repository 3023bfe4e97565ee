// The loop every per-job stage shares (stages/per_job_stage.h): the kind check from the
// spec, the stop check, one job's throw failing that job alone, and the artifact written
// whole under the stage's directory.
#include "stages/per_job_stage.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <new>
#include <stdexcept>

#include "base/clock.h"
#include "stages/artifact.h"
#include "tests/support/test_support.h"

namespace framemill {
namespace {

// Writes its job's source as a .txt artifact; a source "throw" throws.
class EchoStage : public PerJobStage {
 public:
  EchoStage(Takes takes, const std::string& out_dir) : PerJobStage(MakeSpec("echo", takes), out_dir) {}
  explicit EchoStage(Takes takes) : PerJobStage(MakeSpec("echo", takes)) {}
  int runs = 0;

 protected:
  Outcome RunOne(const ClaimedJob& job, const StageContext&) override {
    ++runs;
    if (job.source == "throw") throw std::runtime_error("cannot read it");
    return DoneWithArtifact(job, "txt", job.source, "copy", {{"bytes", job.source.size()}}, "cpu");
  }
};

ClaimedJob Job(MediaKind kind, std::string source = "hello", int64_t item = 7) {
  ClaimedJob j;
  j.id = item;
  j.item_id = item;
  j.stage = "echo";
  j.kind = kind;
  j.source = std::move(source);
  j.lease_token = 0xabc;
  return j;
}

TEST(PerJobStageTest, AJobOfAKindTheSpecDoesNotTakeIsSkippedWithTheStagesReason) {
  testing::TempDir dir;
  EchoStage videos(Takes::kVideos, dir / "out");
  const Outcome image = videos.Run(Job(MediaKind::kImage));
  EXPECT_EQ(image.kind, Outcome::Kind::kSkipped);
  EXPECT_EQ(image.error.message(), "echo applies to videos only");
  EXPECT_EQ(videos.runs, 0);

  EchoStage images(Takes::kImages, dir / "out");
  EXPECT_EQ(images.Run(Job(MediaKind::kVideo)).error.message(), "echo applies to images only");
  EchoStage both(Takes::kImagesAndVideos, dir / "out");
  EXPECT_EQ(both.Run(Job(MediaKind::kDataset)).error.message(), "echo applies to images and videos");
  EXPECT_EQ(both.Run(Job(MediaKind::kImage)).kind, Outcome::Kind::kDone);
}

TEST(PerJobStageTest, TheArtifactIsWrittenUnderTheStagesDirectoryAndNamedInTheResult) {
  testing::TempDir dir;
  EchoStage stage(Takes::kImagesAndVideos, dir / "out");
  const Outcome o = stage.Run(Job(MediaKind::kImage, "some bytes", 42));
  ASSERT_EQ(o.kind, Outcome::Kind::kDone) << o.error.ToString();
  const std::string path = o.result["copy"].get<std::string>();
  EXPECT_EQ(path, AbsolutePath(dir / "out") + "/echo/42-0000000000000abc.txt");
  EXPECT_EQ(o.artifacts, std::vector<std::string>{path});
  EXPECT_EQ(o.result["bytes"], 10);
  EXPECT_EQ(testing::ReadFile(path), "some bytes");

  EchoStage none(Takes::kImagesAndVideos);  // made without an artifact directory
  const Outcome f = none.Run(Job(MediaKind::kImage));
  ASSERT_TRUE(f.failed());
  EXPECT_EQ(f.error.code(), Status::Code::kInternal);
}

TEST(PerJobStageTest, AThrowFailsThatJobAloneAndTheLoopGoesOn) {
  testing::TempDir dir;
  EchoStage stage(Takes::kImagesAndVideos, dir / "out");
  gpu::CpuLadder cpu(SystemClock());
  const std::vector<Outcome> out = stage.RunBatch(
      {Job(MediaKind::kImage, "a", 1), Job(MediaKind::kImage, "throw", 2), Job(MediaKind::kImage, "c", 3)},
      StageContext{cpu.get()});
  ASSERT_EQ(out.size(), 3u);
  EXPECT_TRUE(out[0].done());
  ASSERT_TRUE(out[1].failed());
  EXPECT_EQ(out[1].error.code(), Status::Code::kInternal);  // jobs/failure.h: retried
  EXPECT_EQ(out[1].error.message(), "echo: cannot read it");
  EXPECT_TRUE(out[2].done());
}

// std::bad_alloc in a stage is the host's memory, not the job: retried, in its own class.
TEST(PerJobStageTest, OutOfHostMemoryFailsTheJobTransientlyInTheResourcesClass) {
  class Hungry : public PerJobStage {
   public:
    Hungry() : PerJobStage(MakeSpec("hungry", Takes::kImagesAndVideos)) {}
   protected:
    Outcome RunOne(const ClaimedJob&, const StageContext&) override { throw std::bad_alloc(); }
  };
  gpu::CpuLadder cpu(SystemClock());
  const std::vector<Outcome> out = Hungry().RunBatch({Job(MediaKind::kImage)}, StageContext{cpu.get()});
  ASSERT_EQ(out.size(), 1u);
  ASSERT_TRUE(out[0].failed());
  EXPECT_TRUE(out[0].error.IsOutOfMemory());
  EXPECT_TRUE(out[0].error.IsTransient());
  EXPECT_EQ(out[0].ErrorClass(), "resources");
}

TEST(PerJobStageTest, AStoppedContextStartsNothing) {
  testing::TempDir dir;
  EchoStage stage(Takes::kImagesAndVideos, dir / "out");
  gpu::CpuLadder cpu(SystemClock());
  std::atomic<bool> stop{true};
  EXPECT_TRUE(stage.RunBatch({Job(MediaKind::kImage)}, StageContext{cpu.get(), &stop}).empty());
  EXPECT_EQ(stage.runs, 0);
}

}  // namespace
}  // namespace framemill
