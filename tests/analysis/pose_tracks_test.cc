// Linking people into tracks, on people whose true identity the test knows.
#include "analysis/pose_tracks.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>

namespace framemill {
namespace {

// A standing person: a 40x100 box at (x, y) with the 17 keypoints laid out in it.
PoseSighting Person(float x, float y) {
  PoseSighting p;
  p.box = cv::Rect2f(x, y, 40, 100);
  p.score = 0.8f;
  for (int k = 0; k < 17; ++k) {
    const float row = k < 5 ? 0.08f : 0.25f + 0.125f * static_cast<float>((k - 5) / 2);
    const float side = k == 0 ? 0.5f : (k % 2 ? 0.3f : 0.7f);
    p.keypoints[k] = {x + side * 40, y + row * 100, 0.9f};
  }
  return p;
}

PoseFrame Frame(int64_t index, double fps, std::vector<PoseSighting> people) {
  PoseFrame f;
  f.frame = index;
  f.time_s = static_cast<double>(index) / fps;
  f.people = std::move(people);
  return f;
}

// Tracks over a 640x480 frame, with or without the camera's motion; every fragment counts.
size_t TrackCount(const std::vector<PoseFrame>& frames, bool camera) {
  PoseTrackOptions o;
  o.use_camera = camera;
  o.min_sightings = 1;
  return LinkPoseTracks(frames, {640, 480}, o).size();
}

// truth[frame][person] = the true identity; returns identity -> the track ids it got.
std::map<int, std::set<int>> IdsOf(const std::vector<PoseTrack>& tracks,
                                   const std::vector<PoseFrame>& frames,
                                   const std::vector<std::vector<int>>& truth) {
  std::map<int64_t, size_t> at;
  for (size_t i = 0; i < frames.size(); ++i) at[frames[i].frame] = i;
  std::map<int, std::set<int>> ids;
  size_t people = 0, tracked = 0;
  for (const auto& f : frames) people += f.people.size();
  for (const PoseTrack& t : tracks)
    for (const TrackedPose& tp : t.frames) {
      ids[truth[at.at(tp.frame)][tp.person]].insert(t.id);
      ++tracked;
    }
  EXPECT_EQ(tracked, people) << "every person is in exactly one track";
  return ids;
}

TEST(PoseTracksTest, TwoWalkersWhoCrossKeepTheirTracks) {
  std::vector<PoseFrame> frames;
  std::vector<std::vector<int>> truth;
  for (int i = 0; i < 20; ++i) {
    // A walks right, B left; they pass each other at frame 10, B slightly lower.
    const float a = 100 + 12.f * i, b = 340 - 12.f * i;
    // Detections come in no particular order.
    if (i % 2)
      frames.push_back(Frame(i, 10, {Person(b, 110), Person(a, 100)})), truth.push_back({1, 0});
    else
      frames.push_back(Frame(i, 10, {Person(a, 100), Person(b, 110)})), truth.push_back({0, 1});
  }
  auto tracks = LinkPoseTracks(frames, {640, 480});
  ASSERT_EQ(tracks.size(), 2u);
  auto ids = IdsOf(tracks, frames, truth);
  EXPECT_EQ(ids[0].size(), 1u);
  EXPECT_EQ(ids[1].size(), 1u);
  EXPECT_NE(*ids[0].begin(), *ids[1].begin());
  EXPECT_EQ(tracks[0].frames.size(), 20u);
}

TEST(PoseTracksTest, AShakingCameraIsFollowedWhenItsMotionIsKnown) {
  // A person standing still while a handheld camera jerks: the content moves 50 px, then
  // not at all, then 50 px... Each jump is wider than the person's box and no steady
  // velocity predicts it, so only the camera's motion can link the sightings.
  std::vector<PoseFrame> frames;
  float x = 100;
  for (int i = 0; i < 10; ++i) {
    const float step = i > 0 && i % 2 ? 50.f : 0.f;
    x += step;
    PoseFrame f = Frame(i * 2, 25, {Person(x, 200)});
    f.camera.known = i > 0;
    f.camera.dx = step / 2;  // per source frame; every 2nd frame is analysed
    frames.push_back(f);
  }
  EXPECT_EQ(TrackCount(frames, true), 1u);
  EXPECT_GE(TrackCount(frames, false), 3u);
}

TEST(PoseTracksTest, AZoomIsFollowedAboutTheFrameCentre) {
  // The camera zooms in 30% per analysed frame on a 640x480 frame: a person off-centre
  // moves outwards and grows, faster each frame.
  std::vector<PoseFrame> frames;
  const cv::Point2f c(320, 240);
  double s = 1;
  for (int i = 0; i < 6; ++i, s *= 1.3) {
    PoseSighting p = Person(0, 0);
    const cv::Point2f tl = c + static_cast<float>(s) * (cv::Point2f(420, 200) - c);
    p.box = cv::Rect2f(tl.x, tl.y, static_cast<float>(40 * s), static_cast<float>(100 * s));
    for (auto& k : p.keypoints) {
      const cv::Point2f q = c + static_cast<float>(s) * (cv::Point2f(420 + (k.x), 200 + k.y) - c);
      k.x = q.x;
      k.y = q.y;
    }
    PoseFrame f = Frame(i, 10, {p});
    f.camera.known = i > 0;
    f.camera.zoom = 1.3;
    frames.push_back(f);
  }
  EXPECT_EQ(TrackCount(frames, true), 1u);
  EXPECT_GE(TrackCount(frames, false), 2u);
}

TEST(PoseTracksTest, ACutEndsEveryTrackAndAGapEndsOne) {
  std::vector<PoseFrame> frames;
  for (int i = 0; i < 6; ++i) frames.push_back(Frame(i, 10, {Person(100, 100)}));
  frames[3].camera.cut = true;  // the same place in a new shot is someone else
  auto tracks = LinkPoseTracks(frames, {640, 480});
  ASSERT_EQ(tracks.size(), 2u);
  EXPECT_EQ(tracks[0].frames.back().frame, 2);
  EXPECT_EQ(tracks[1].frames.front().frame, 3);

  // Unseen for 0.5 s: the same track; for 1.5 s (past max_gap_s): a new one.
  std::vector<PoseFrame> gaps = {Frame(0, 10, {Person(100, 100)}), Frame(5, 10, {Person(100, 100)}),
                                 Frame(20, 10, {Person(100, 100)}), Frame(21, 10, {Person(100, 100)})};
  tracks = LinkPoseTracks(gaps, {640, 480});
  ASSERT_EQ(tracks.size(), 2u);
  EXPECT_EQ(tracks[0].frames.size(), 2u);
}

// Hysteresis: a person under start_score continues a track but keeps none of its own, and
// a track seen once is left out. Without it, a walker whose score dips just under the
// floor on one device but not on another (fp16 against fp32) is cut in two on one of them.
TEST(PoseTracksTest, AWeakPersonContinuesATrackButMakesNoneAlone) {
  PoseTrackOptions o;
  o.start_score = 0.15;
  o.keep_score = 0.10;
  auto scored = [](PoseSighting p, float score) { p.score = score; return p; };
  std::vector<PoseFrame> frames;
  for (int i = 0; i < 6; ++i) {
    const float walker = i == 2 || i == 3 ? 0.12f : 0.3f;  // dips under 0.15 for two frames
    frames.push_back(Frame(i, 5, {scored(Person(100 + 5.f * i, 100), walker),
                                  scored(Person(400, 100), 0.12f),              // weak all along
                                  scored(Person(250, 300), 0.09f)}));           // under keep_score
  }
  frames.push_back(Frame(6, 5, {scored(Person(500, 350), 0.5f)}));  // strong, but seen once
  const auto tracks = LinkPoseTracks(frames, {640, 480}, o);
  ASSERT_EQ(tracks.size(), 1u);
  ASSERT_EQ(tracks[0].frames.size(), 6u) << "the walker, its weak sightings included";
  for (const TrackedPose& tp : tracks[0].frames) EXPECT_EQ(tp.person, 0u);
}

// A keypoint's weight rises across a band of scores, so a score moved by fp16's noise
// across min_keypoint_score moves the similarity by a little, not by a keypoint's share.
TEST(PoseTracksTest, AKeypointCrossingItsScoreFloorMovesTheSimilarityALittle) {
  const PoseTrackOptions o;
  const PoseSighting a = Person(100, 100);
  PoseSighting b = Person(100, 100);
  b.keypoints[0].x += 30;  // the nose elsewhere, at the floor's score
  auto similarity = [&](float nose_score, double band) {
    b.keypoints[0].score = nose_score;
    return KeypointSimilarity(a, b, o.min_keypoint_score, band);
  };
  const double under = similarity(0.299f, o.keypoint_band), over = similarity(0.301f, o.keypoint_band);
  const double step_under = similarity(0.299f, 0), step_over = similarity(0.301f, 0);
  std::printf("[tracks] OKS with a stray nose at score 0.299 / 0.301: %.4f / %.4f; with a step: %.4f / %.4f\n",
              under, over, step_under, step_over);
  EXPECT_LT(std::fabs(under - over), 0.002);
  EXPECT_GT(std::fabs(step_under - step_over), 0.03) << "what the band replaces";
}

TEST(PoseTracksTest, KeypointSimilarityIsOneForTheSamePoseAndFallsWithDistance) {
  const PoseSighting a = Person(100, 100);
  EXPECT_DOUBLE_EQ(KeypointSimilarity(a, a, 0.3), 1.0);
  const double near = KeypointSimilarity(a, Person(104, 100), 0.3);
  const double far = KeypointSimilarity(a, Person(140, 100), 0.3);
  EXPECT_LT(near, 1.0);
  EXPECT_LT(far, near);
  PoseSighting unsure = a;
  for (auto& k : unsure.keypoints) k.score = 0.1f;
  EXPECT_EQ(KeypointSimilarity(a, unsure, 0.3), 0.0);
}

}  // namespace
}  // namespace framemill
