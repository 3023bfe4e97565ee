#include "analysis/pose_tracks.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "media/geometry.h"

namespace framemill {
namespace {

// COCO's per-keypoint sigmas (pycocotools), nose to ankles.
constexpr double kSigmas[17] = {.026, .025, .025, .035, .035, .079, .079, .072, .072,
                                .062, .062, .107, .107, .087, .087, .089, .089};

struct Live {
  PoseTrack track;
  PoseSighting last;       // moved with the camera frame by frame since it was seen
  int64_t frame = 0;       // where it was last seen
  double time_s = 0;
  cv::Point2f velocity;    // source px per source frame, camera removed
};

cv::Point2f Centre(const cv::Rect2f& r) { return {r.x + r.width / 2, r.y + r.height / 2}; }

// Applies `f` (a point map) to the box's corners and every keypoint.
template <typename F>
void MoveSighting(PoseSighting* p, F f) {
  const cv::Point2f a = f(p->box.tl()), b = f(p->box.br());
  p->box = cv::Rect2f(a, b);
  for (PosePoint& k : p->keypoints) {
    const cv::Point2f q = f(cv::Point2f(k.x, k.y));
    k.x = q.x;
    k.y = q.y;
  }
}

// The camera's motion over `gap` source frames, applied about the frame's centre.
void FollowCamera(const FrameCamera& cam, int64_t gap, cv::Point2f centre, PoseSighting* p) {
  const float s = static_cast<float>(std::pow(cam.zoom, static_cast<double>(gap)));
  const cv::Point2f d(static_cast<float>(cam.dx * gap), static_cast<float>(cam.dy * gap));
  MoveSighting(p, [&](cv::Point2f q) { return centre + s * (q - centre) + d; });
}

PoseSighting Predict(const Live& t, int64_t frame) {
  PoseSighting p = t.last;
  const cv::Point2f d = t.velocity * static_cast<float>(frame - t.frame);
  MoveSighting(&p, [&](cv::Point2f q) { return q + d; });
  return p;
}

double Affinity(const PoseSighting& predicted, const PoseSighting& seen, double min_score) {
  const double iou = IoU(predicted.box, seen.box);
  const double oks = KeypointSimilarity(predicted, seen, min_score);
  return oks > 0 ? 0.5 * iou + 0.5 * oks : iou;
}

}  // namespace

double KeypointSimilarity(const PoseSighting& a, const PoseSighting& b, double min_score) {
  const double area = std::max(1.0, static_cast<double>(a.box.area()));
  double sum = 0;
  int n = 0;
  for (int k = 0; k < 17; ++k) {
    const PosePoint &p = a.keypoints[k], &q = b.keypoints[k];
    if (p.score < min_score || q.score < min_score) continue;
    const double dx = p.x - q.x, dy = p.y - q.y;
    const double var = 4 * kSigmas[k] * kSigmas[k];
    sum += std::exp(-(dx * dx + dy * dy) / (var * area * 2));
    ++n;
  }
  return n ? sum / n : 0;
}

std::vector<PoseTrack> LinkPoseTracks(const std::vector<PoseFrame>& frames, cv::Size frame_size,
                                      const PoseTrackOptions& opt) {
  const cv::Point2f centre(frame_size.width / 2.f, frame_size.height / 2.f);
  std::vector<PoseTrack> done;
  std::vector<Live> live;
  int next_id = 0;
  int64_t previous = 0;
  auto end_where = [&](auto pred) {
    for (auto it = live.begin(); it != live.end();) {
      if (!pred(*it)) { ++it; continue; }
      done.push_back(std::move(it->track));
      it = live.erase(it);
    }
  };
  for (const PoseFrame& f : frames) {
    if (f.camera.cut) end_where([](const Live&) { return true; });
    end_where([&](const Live& t) { return f.time_s - t.time_s > opt.max_gap_s; });
    if (opt.use_camera && f.camera.known)  // no track is live before the first frame
      for (Live& t : live) FollowCamera(f.camera, f.frame - previous, centre, &t.last);
    previous = f.frame;

    // Every (track, person) pair worth linking, best first.
    std::vector<std::tuple<double, size_t, size_t>> pairs;
    for (size_t t = 0; t < live.size(); ++t) {
      const PoseSighting predicted = Predict(live[t], f.frame);
      for (size_t p = 0; p < f.people.size(); ++p) {
        const double a = Affinity(predicted, f.people[p], opt.min_keypoint_score);
        if (a >= opt.min_affinity) pairs.emplace_back(a, t, p);
      }
    }
    std::sort(pairs.begin(), pairs.end(), [](const auto& x, const auto& y) {
      return std::get<0>(x) > std::get<0>(y);
    });
    std::vector<bool> track_taken(live.size(), false), person_taken(f.people.size(), false);
    for (const auto& [a, t, p] : pairs) {
      if (track_taken[t] || person_taken[p]) continue;
      track_taken[t] = person_taken[p] = true;
      Live& l = live[t];
      const float gap = static_cast<float>(std::max<int64_t>(1, f.frame - l.frame));
      const cv::Point2f v = (Centre(f.people[p].box) - Centre(l.last.box)) / gap;
      l.velocity = l.track.frames.size() > 1 ? 0.5f * (l.velocity + v) : v;
      l.last = f.people[p];
      l.frame = f.frame;
      l.time_s = f.time_s;
      l.track.frames.push_back({f.frame, p});
    }
    for (size_t p = 0; p < f.people.size(); ++p) {
      if (person_taken[p]) continue;
      Live l;
      l.track.id = next_id++;
      l.track.frames.push_back({f.frame, p});
      l.last = f.people[p];
      l.frame = f.frame;
      l.time_s = f.time_s;
      live.push_back(std::move(l));
    }
  }
  end_where([](const Live&) { return true; });
  std::sort(done.begin(), done.end(), [](const PoseTrack& a, const PoseTrack& b) { return a.id < b.id; });
  return done;
}

}  // namespace framemill
