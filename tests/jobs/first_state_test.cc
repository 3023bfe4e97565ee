// The rule for a new job's first state (jobs/first_state.h), alone: the store only writes
// what it decides (tests/storage/job_store_test.cc checks that end to end).
#include <gtest/gtest.h>

#include "jobs/first_state.h"

namespace framemill {
namespace {

StageSpec Spec(std::string name, std::vector<std::string> deps = {}, bool images = true,
               bool videos = true) {
  StageSpec s;
  s.name = std::move(name);
  s.deps = std::move(deps);
  s.images = images;
  s.videos = videos;
  return s;
}

std::string Show(const FirstState& f) {
  return std::string(JobStateName(f.state)) + "|" + f.error_class + "|" + f.reason;
}

TEST(FirstStateTest, ALocalItemsStageWithoutDependenciesIsPending) {
  EXPECT_EQ(Show(DecideFirstState(Spec("lighting"), MediaKind::kImage, std::nullopt, {})),
            "pending||");
}

TEST(FirstStateTest, AStageWaitsUntilEveryDependencyIsDone) {
  const StageSpec inpaint = Spec("inpaint", {"segment"});
  EXPECT_EQ(DecideFirstState(inpaint, MediaKind::kImage, std::nullopt,
                             {{"segment", JobState::kPending}}).state, JobState::kWaiting);
  EXPECT_EQ(DecideFirstState(inpaint, MediaKind::kImage, std::nullopt,
                             {{"segment", JobState::kRunning}}).state, JobState::kWaiting);
  EXPECT_EQ(DecideFirstState(inpaint, MediaKind::kImage, std::nullopt,
                             {{"segment", JobState::kDone}}).state, JobState::kPending);
}

TEST(FirstStateTest, AFailedOrSkippedDependencyEndsTheJobAtOnceWithTheReason) {
  const StageSpec s = Spec("inpaint", {"segment"});
  EXPECT_EQ(Show(DecideFirstState(s, MediaKind::kImage, std::nullopt, {{"segment", JobState::kFailed}})),
            "failed|dependency_failed|dependency segment failed");
  EXPECT_EQ(Show(DecideFirstState(s, MediaKind::kImage, std::nullopt, {{"segment", JobState::kSkipped}})),
            "skipped|not_applicable|dependency segment was skipped");
  // Skipped stays skipped whatever a later dependency did.
  const StageSpec two = Spec("x", {"a", "b"});
  EXPECT_EQ(DecideFirstState(two, MediaKind::kImage, std::nullopt,
                             {{"a", JobState::kSkipped}, {"b", JobState::kFailed}}).state,
            JobState::kSkipped);
}

TEST(FirstStateTest, AStageThatDoesNotApplyToTheKindIsSkipped) {
  EXPECT_EQ(Show(DecideFirstState(Spec("motion", {}, false, true), MediaKind::kImage, std::nullopt, {})),
            "skipped|not_applicable|motion does not apply to image items");
}

TEST(FirstStateTest, AUrlItemsJobsWaitForTheDownloadAndItsKindIsJudgedOnlyAfter) {
  const StageSpec motion = Spec("motion", {}, false, true);
  // Not downloaded yet: the kind recorded is a guess, so the job waits instead.
  EXPECT_EQ(DecideFirstState(motion, MediaKind::kImage, JobState::kPending, {}).state,
            JobState::kWaiting);
  // Downloaded: pending, or skipped when the download found a kind the stage does not take.
  EXPECT_EQ(DecideFirstState(motion, MediaKind::kVideo, JobState::kDone, {}).state,
            JobState::kPending);
  EXPECT_EQ(DecideFirstState(motion, MediaKind::kImage, JobState::kDone, {}).state,
            JobState::kSkipped);
  // The download failed: nothing to analyse.
  EXPECT_EQ(Show(DecideFirstState(Spec("lighting"), MediaKind::kImage, JobState::kFailed, {})),
            "skipped|fetch_failed|the fetch of this URL failed");
}

}  // namespace
}  // namespace framemill
