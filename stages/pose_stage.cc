#include "stages/pose_stage.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <tbb/parallel_for.h>

#include <opencv2/imgproc.hpp>

#include "analysis/motion_analysis.h"
#include "jobs/stage_names.h"

namespace framemill {
namespace {

const char* const kCoco[17] = {
    "nose",          "left_eye",       "right_eye",      "left_ear",   "right_ear",
    "left_shoulder", "right_shoulder", "left_elbow",     "right_elbow", "left_wrist",
    "right_wrist",   "left_hip",       "right_hip",      "left_knee",  "right_knee",
    "left_ankle",    "right_ankle"};

// BlazePose's 33 body landmarks; the model's last 6 are auxiliary (ROI, not body parts).
const char* const kBlazePose[33] = {
    "nose", "left_eye_inner", "left_eye", "left_eye_outer", "right_eye_inner", "right_eye",
    "right_eye_outer", "left_ear", "right_ear", "mouth_left", "mouth_right", "left_shoulder",
    "right_shoulder", "left_elbow", "right_elbow", "left_wrist", "right_wrist", "left_pinky",
    "right_pinky", "left_index", "right_index", "left_thumb", "right_thumb", "left_hip",
    "right_hip", "left_knee", "right_knee", "left_ankle", "right_ankle", "left_heel",
    "right_heel", "left_foot_index", "right_foot_index"};

// The decoded pose as named points in image pixels, and its mean score (over the 33
// body landmarks for BlazePose).
nlohmann::json Keypoints(const std::string& model, const models::PoseDecoded& p, cv::Size image) {
  nlohmann::json out = nlohmann::json::array();
  double sum = 0;
  size_t scored = 0;
  for (size_t k = 0; k < p.keypoints.size(); ++k) {
    const models::PoseKeypoint& kp = p.keypoints[k];
    out.push_back({{"name", k < 17 ? kCoco[k] : "keypoint_" + std::to_string(k)},
                   {"x", kp.x * image.width}, {"y", kp.y * image.height}, {"score", kp.score}});
    sum += kp.score;
    ++scored;
  }
  const float fx = static_cast<float>(image.width) / p.input.width;
  const float fy = static_cast<float>(image.height) / p.input.height;
  for (size_t k = 0; k < p.landmarks.size(); ++k) {
    const models::PoseLandmark& l = p.landmarks[k];
    out.push_back({{"name", k < 33 ? kBlazePose[k] : "auxiliary_" + std::to_string(k - 33)},
                   {"x", l.x * fx}, {"y", l.y * fy}, {"z", l.z},
                   {"score", l.visibility}, {"presence", l.presence}});
    if (k < 33) {
      sum += l.visibility;
      ++scored;
    }
  }
  nlohmann::json r = {{"model", model}, {"keypoints", out},
                      {"score", scored ? sum / static_cast<double>(scored) : 0.0}};
  if (p.has_pose_score) r["pose_score"] = p.pose_score;
  return r;
}

// The people multipose found above the score floor, strongest first, in source pixels
// (`scale`: source px per image px); the strongest is also the result's own keypoints.
nlohmann::json People(const std::string& model, const std::vector<models::PosePerson>& found,
                      cv::Size image, double scale, double min_score) {
  std::vector<const models::PosePerson*> kept;
  for (const models::PosePerson& p : found)
    if (p.score >= min_score) kept.push_back(&p);
  std::sort(kept.begin(), kept.end(), [](auto* a, auto* b) { return a->score > b->score; });
  const double w = image.width * scale, h = image.height * scale;
  nlohmann::json people = nlohmann::json::array();
  for (const models::PosePerson* p : kept) {
    nlohmann::json kps = nlohmann::json::array();
    for (size_t k = 0; k < p->keypoints.size(); ++k)
      kps.push_back({{"name", kCoco[k]}, {"x", p->keypoints[k].x * w},
                     {"y", p->keypoints[k].y * h}, {"score", p->keypoints[k].score}});
    people.push_back({{"box", {p->xmin * w, p->ymin * h, (p->xmax - p->xmin) * w, (p->ymax - p->ymin) * h}},
                      {"score", p->score}, {"keypoints", std::move(kps)}});
  }
  nlohmann::json r = {{"model", model}, {"people", people}};
  r["keypoints"] = people.empty() ? nlohmann::json::array() : people[0]["keypoints"];
  r["score"] = people.empty() ? 0.0 : people[0]["score"].get<double>();
  return r;
}

PoseSighting Sighting(const nlohmann::json& person) {
  PoseSighting s;
  const auto b = person["box"].get<std::vector<float>>();
  s.box = cv::Rect2f(b[0], b[1], b[2], b[3]);
  s.score = person["score"].get<float>();
  for (size_t k = 0; k < 17 && k < person["keypoints"].size(); ++k) {
    const auto& kp = person["keypoints"][k];
    s.keypoints[k] = {kp["x"].get<float>(), kp["y"].get<float>(), kp["score"].get<float>()};
  }
  return s;
}

// A video's frames (multipose results) as the tracker's input.
std::vector<PoseFrame> TrackerFrames(const std::vector<nlohmann::json>& frames) {
  std::vector<PoseFrame> out;
  for (const auto& f : frames) {
    PoseFrame pf;
    pf.frame = f["frame"].get<int64_t>();
    pf.time_s = f.value("time_s", 0.0);
    if (f.contains("camera")) {
      const auto& c = f["camera"];
      pf.camera = {c.value("known", false), c.value("dx", 0.0), c.value("dy", 0.0),
                   c.value("zoom", 1.0), c.value("cut", false)};
    }
    for (const auto& p : f["people"]) pf.people.push_back(Sighting(p));
    out.push_back(std::move(pf));
  }
  return out;
}

double Round(const nlohmann::json& v, double per_unit) {
  return std::round(v.get<double>() * per_unit) / per_unit;
}

nlohmann::json TrackJson(const PoseTrack& t, const std::vector<nlohmann::json>& frames,
                         const std::map<int64_t, size_t>& at) {
  nlohmann::json seen = nlohmann::json::array();
  double sum = 0;
  for (const TrackedPose& tp : t.frames) {
    const auto& person = frames[at.at(tp.frame)]["people"][tp.person];
    // Rounded: a video holds hundreds of sightings, and a tenth of a pixel is below the
    // model's own precision (4 px cells refined by an offset).
    nlohmann::json kps = nlohmann::json::array(), box = nlohmann::json::array();
    for (const auto& k : person["keypoints"])
      kps.push_back({Round(k["x"], 10), Round(k["y"], 10), Round(k["score"], 1000)});
    for (const auto& v : person["box"]) box.push_back(Round(v, 10));
    seen.push_back({{"frame", tp.frame}, {"box", std::move(box)},
                    {"score", Round(person["score"], 1000)}, {"keypoints", std::move(kps)}});
    sum += person["score"].get<double>();
  }
  return {{"id", t.id}, {"first_frame", t.frames.front().frame}, {"last_frame", t.frames.back().frame},
          {"mean_score", sum / static_cast<double>(t.frames.size())}, {"frames", std::move(seen)}};
}

// Tracks want a video's frames in order, and more of them than a few samples.
ModelStageOptions VideoFrames(ModelStageOptions frames, const PoseOptions& o) {
  if (o.model != "movenet-multipose") return frames;
  frames.video_fps = o.video_fps;
  frames.video_frames = o.max_video_frames;
  frames.video_width = o.video_width;
  return frames;
}

}  // namespace

PoseStage::PoseStage(std::shared_ptr<models::ModelCache> cache, ModelStageOptions frames,
                     PoseOptions options)
    : ModelStage(stage_names::kPose, std::move(cache), VideoFrames(frames, options)),
      options_(std::move(options)) {}

void PoseStage::AddCamera(const ModelBatch& batch, std::vector<FrameResult>* results) const {
  // One analyser per video, fed its frames in order, at the motion stage's default width.
  std::map<size_t, std::vector<size_t>> by_job;
  for (size_t i = 0; i < batch.frames.size(); ++i)
    if (batch.frames[i].index >= 0) by_job[batch.frames[i].job].push_back(i);
  for (const auto& [job, idx] : by_job) {
    const cv::Mat& first = batch.frames[idx.front()].bgr;
    const double scale = batch.frames[idx.front()].scale;
    const cv::Size source(static_cast<int>(first.cols * scale), static_cast<int>(first.rows * scale));
    const int w = std::min(first.cols, MotionOptions{}.analysis_width);
    const cv::Size analysis(w, std::max(1, first.rows * w / first.cols));
    const double span_s = batch.frames[idx.back()].time_s - batch.frames[idx.front()].time_s;
    const double sampled_fps = span_s > 0 ? double(idx.size() - 1) / span_s : 0;
    MotionAnalyser motion(MotionAnalysisOptions{}, source, analysis, sampled_fps);
    bool ok = true;
    for (size_t i : idx) {
      cv::Mat small;
      cv::resize(batch.frames[i].bgr, small, analysis, 0, 0, cv::INTER_AREA);
      ok = ok && motion.Add(batch.frames[i].index, batch.frames[i].time_s, small).ok();
    }
    if (!ok) continue;  // tracks go on without the camera
    motion.Finish(batch.frames[idx.back()].index + 1);
    std::map<int64_t, const PairMotion*> pair_at;
    for (const PairMotion& p : motion.pairs()) pair_at[p.frame] = &p;
    for (size_t i : idx) {
      auto it = pair_at.find(batch.frames[i].index);
      if (it == pair_at.end()) continue;
      const CameraMotion& c = it->second->camera;
      (*results)[i].result["camera"] = {{"known", c.valid}, {"dx", c.dx}, {"dy", c.dy},
                                        {"zoom", c.zoom}, {"cut", it->second->cut}};
    }
  }
}

Status PoseStage::Analyse(const ModelBatch& batch, const StageContext& ctx,
                          std::vector<FrameResult>* results, std::string* device) {
  models::ModelRunner& runner = *batch.runners.front();
  // In chunks: a video read for tracks holds hundreds of frames, and each padded copy is
  // as large again.
  constexpr size_t kChunk = 32;
  for (size_t start = 0; start < batch.frames.size(); start += kChunk) {
    const size_t end = std::min(batch.frames.size(), start + kChunk);
    // The host's work on each frame, before and after the model, on the worker's threads at
    // once: the device waits for it.
    std::vector<cv::Mat> squares(end - start);
    tbb::parallel_for(start, end, [&](size_t i) { squares[i - start] = PadToSquare(batch.frames[i].bgr); });
    auto outs = RunModel(runner, squares, ctx, device);
    if (!outs.ok()) return outs.status();
    FM_RETURN_IF_ERROR(ForEachFrame(start, end, [&](size_t i) -> Status {
      auto pose = models::DecodePose(runner.manifest(), (*outs)[i - start]);
      if (!pose.ok()) return pose.status();
      // The padding is at the bottom and right: square pixels are image pixels.
      (*results)[i].result = FrameResultJson(runner.manifest().name, *pose, batch.frames[i],
                                             squares[i - start].size());
      return Status::OK();
    }));
  }
  if (multi() && options_.tracks.use_camera) AddCamera(batch, results);
  return Status::OK();
}

nlohmann::json PoseStage::FrameResultJson(const std::string& model, const models::PoseDecoded& pose,
                                          const ModelFrame& f, cv::Size square) const {
  if (!multi()) return Keypoints(model, pose, square);
  // A video's frames keep the weaker people who may continue a track (the tracks decide).
  const double floor = f.index >= 0 ? std::min(options_.min_person_score, options_.tracks.keep_score)
                                    : options_.min_person_score;
  nlohmann::json r = People(model, pose.people, square, f.scale, floor);
  if (f.index >= 0) {  // what the tracks need besides the people
    r["time_s"] = f.time_s;
    r["size"] = {f.bgr.cols * f.scale, f.bgr.rows * f.scale};
  }
  return r;
}

PoseTrackOptions PoseStage::TrackOptions(const std::vector<PoseFrame>& frames) const {
  PoseTrackOptions o = options_.tracks;
  o.start_score = options_.min_person_score;
  // A long video thinned to max_video_frames: a track may skip a frame or two all the same.
  std::vector<double> steps;
  for (size_t i = 1; i < frames.size(); ++i) steps.push_back(frames[i].time_s - frames[i - 1].time_s);
  if (steps.empty()) return o;
  std::nth_element(steps.begin(), steps.begin() + steps.size() / 2, steps.end());
  o.max_gap_s = std::max(options_.tracks.max_gap_s, 2.5 * steps[steps.size() / 2]);
  return o;
}

void PoseStage::Summarise(const std::vector<nlohmann::json>& frames, nlohmann::json* r) const {
  SummariseMean(frames, "score", "mean_score", r);
  if (!multi()) return;
  const std::vector<PoseFrame> in = TrackerFrames(frames);
  cv::Size size;
  if (!frames.empty() && frames[0].contains("size"))
    size = cv::Size(frames[0]["size"][0].get<int>(), frames[0]["size"][1].get<int>());
  std::map<int64_t, size_t> at;
  for (size_t i = 0; i < frames.size(); ++i) at[frames[i]["frame"].get<int64_t>()] = i;
  nlohmann::json tracks = nlohmann::json::array();
  std::map<int64_t, size_t> tracked;  // frame -> its people in tracks
  for (const PoseTrack& t : LinkPoseTracks(in, size, TrackOptions(in))) {
    tracks.push_back(TrackJson(t, frames, at));
    for (const TrackedPose& tp : t.frames) ++tracked[tp.frame];
  }
  // The tracks hold the video's people; the frames keep what they add: count and camera.
  nlohmann::json compact = nlohmann::json::array();
  size_t most = 0, cameras = 0;
  for (const auto& f : frames) {
    const size_t people = tracked[f["frame"].get<int64_t>()];
    nlohmann::json c = {{"frame", f["frame"]}, {"time_s", f.value("time_s", 0.0)}, {"people", people}};
    if (f.contains("camera")) {
      c["camera"] = f["camera"];
      cameras += f["camera"].value("known", false);
    }
    most = std::max(most, people);
    compact.push_back(std::move(c));
  }
  (*r)["keypoint_names"] = std::vector<std::string>(std::begin(kCoco), std::end(kCoco));
  (*r)["tracks"] = std::move(tracks);
  (*r)["people_max"] = most;
  (*r)["camera_compensated"] = cameras > 0;
  (*r)["frames"] = std::move(compact);
}

}  // namespace framemill
