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
  float best = 0;          // its strongest person's score
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

// 0.5 IoU + 0.5 OKS, the OKS weighed in by its keypoints' weight up to one keypoint's, so
// that a keypoint's score crossing the band moves the affinity a little, never a jump.
double Affinity(const PoseSighting& predicted, const PoseSighting& seen, const PoseTrackOptions& o) {
  double weight = 0;
  const double oks = KeypointSimilarity(predicted, seen, o.min_keypoint_score, o.keypoint_band, &weight);
  const double share = 0.5 * std::min(1.0, weight);
  return (1 - share) * IoU(predicted.box, seen.box) + share * oks;
}

double KeypointWeight(float a, float b, double centre, double band) {
  const double s = std::min(a, b);
  if (band <= 0) return s >= centre ? 1 : 0;
  return std::clamp((s - (centre - band / 2)) / band, 0.0, 1.0);
}

}  // namespace

double KeypointSimilarity(const PoseSighting& a, const PoseSighting& b, double min_score,
                          double band, double* weight) {
  const double area = std::max(1.0, static_cast<double>(a.box.area()));
  double sum = 0, total = 0;
  for (int k = 0; k < 17; ++k) {
    const PosePoint &p = a.keypoints[k], &q = b.keypoints[k];
    const double w = KeypointWeight(p.score, q.score, min_score, band);
    if (w <= 0) continue;
    const double dx = p.x - q.x, dy = p.y - q.y;
    const double var = 4 * kSigmas[k] * kSigmas[k];
    sum += w * std::exp(-(dx * dx + dy * dy) / (var * area * 2));
    total += w;
  }
  if (weight) *weight = total;
  return total > 0 ? sum / total : 0;
}

namespace {

// The tracks live at one frame, and those that ended.
class Linker {
 public:
  Linker(cv::Size frame_size, const PoseTrackOptions& o)
      : centre_(frame_size.width / 2.f, frame_size.height / 2.f), opt_(o) {}

  void Add(const PoseFrame& f) {
    if (f.camera.cut) EndWhere([](const Live&) { return true; });
    EndWhere([&](const Live& t) { return f.time_s - t.time_s > opt_.max_gap_s; });
    if (opt_.use_camera && f.camera.known)  // no track is live before the first frame
      for (Live& t : live_) FollowCamera(f.camera, f.frame - previous_, centre_, &t.last);
    previous_ = f.frame;
    std::vector<bool> track_taken(live_.size(), false), person_taken(f.people.size(), false);
    // The people who may start a track first, then the weaker ones for the tracks left.
    Match(f, true, &track_taken, &person_taken);
    Match(f, false, &track_taken, &person_taken);
    for (size_t p = 0; p < f.people.size(); ++p)
      if (!person_taken[p] && Kept(f.people[p])) Start(f, p);
  }

  std::vector<PoseTrack> Finish() {
    EndWhere([](const Live&) { return true; });
    std::sort(done_.begin(), done_.end(), [](const PoseTrack& a, const PoseTrack& b) { return a.id < b.id; });
    for (size_t i = 0; i < done_.size(); ++i) done_[i].id = static_cast<int>(i);
    return std::move(done_);
  }

 private:
  bool Strong(const PoseSighting& p) const { return p.score >= opt_.start_score; }
  bool Kept(const PoseSighting& p) const { return p.score >= std::min(opt_.keep_score, opt_.start_score); }

  template <typename Pred>
  void EndWhere(Pred pred) {
    for (auto it = live_.begin(); it != live_.end();) {
      if (!pred(*it)) { ++it; continue; }
      if (static_cast<int>(it->track.frames.size()) >= opt_.min_sightings && it->best >= opt_.start_score)
        done_.push_back(std::move(it->track));
      it = live_.erase(it);
    }
  }

  // Links the free tracks with the free people of one strength, greedily from the best pair.
  void Match(const PoseFrame& f, bool strong, std::vector<bool>* track_taken,
             std::vector<bool>* person_taken) {
    std::vector<std::tuple<double, size_t, size_t>> pairs;
    for (size_t t = 0; t < live_.size(); ++t) {
      if ((*track_taken)[t]) continue;
      const PoseSighting predicted = Predict(live_[t], f.frame);
      for (size_t p = 0; p < f.people.size(); ++p) {
        if ((*person_taken)[p] || Strong(f.people[p]) != strong || !Kept(f.people[p])) continue;
        const double a = Affinity(predicted, f.people[p], opt_);
        if (a >= opt_.min_affinity) pairs.emplace_back(a, t, p);
      }
    }
    std::sort(pairs.begin(), pairs.end(), [](const auto& x, const auto& y) {
      return std::get<0>(x) > std::get<0>(y);
    });
    for (const auto& [a, t, p] : pairs) {
      if ((*track_taken)[t] || (*person_taken)[p]) continue;
      (*track_taken)[t] = (*person_taken)[p] = true;
      Continue(&live_[t], f, p);
    }
  }

  void Continue(Live* l, const PoseFrame& f, size_t p) {
    const float gap = static_cast<float>(std::max<int64_t>(1, f.frame - l->frame));
    const cv::Point2f v = (Centre(f.people[p].box) - Centre(l->last.box)) / gap;
    l->velocity = l->track.frames.size() > 1 ? 0.5f * (l->velocity + v) : v;
    See(l, f, p);
  }

  void Start(const PoseFrame& f, size_t p) {
    Live l;
    l.track.id = next_id_++;
    See(&l, f, p);
    live_.push_back(std::move(l));
  }

  static void See(Live* l, const PoseFrame& f, size_t p) {
    l->best = std::max(l->best, f.people[p].score);
    l->last = f.people[p];
    l->frame = f.frame;
    l->time_s = f.time_s;
    l->track.frames.push_back({f.frame, p});
  }

  const cv::Point2f centre_;
  const PoseTrackOptions& opt_;
  std::vector<PoseTrack> done_;
  std::vector<Live> live_;
  int next_id_ = 0;
  int64_t previous_ = 0;
};

}  // namespace

std::vector<PoseTrack> LinkPoseTracks(const std::vector<PoseFrame>& frames, cv::Size frame_size,
                                      const PoseTrackOptions& options) {
  Linker linker(frame_size, options);
  for (const PoseFrame& f : frames) linker.Add(f);
  return linker.Finish();
}

}  // namespace framemill
