#include "stages/audio_sync_stage.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include <opencv2/imgproc.hpp>

#include "analysis/av_sync.h"
#include "analysis/av_sync_signals.h"
#include "analysis/motion_analysis.h"
#include "jobs/stage_names.h"
#include "media/audio_reader.h"
#include "media/video_reader.h"
#include "models/decode.h"
#include "models/run_model.h"
#include "models/voice_activity.h"
#include "stages/faces_stage.h"

namespace framemill {

namespace {

constexpr const char* kAudioSyncOperation = "AUDIO_SYNC";  // AUDIO_SYNC_GPU: faces and mouths
constexpr int kMotionWidth = 160;    // whole-frame motion is measured this wide
constexpr int kCutWidth = 160;       // cuts only: the motion analyser at half its default size

// The shot split audio_sync's per-shot estimates were measured with: motion's thresholds as
// they were before issue 74's search chose motion's own (bench/README.md). That search ran at
// motion's 320 px and on motion's goals; at 160 px its values changed audio_sync's answer on
// mux.js's test-segment.ts (confidence 0.383 where it was low), so they wait for a search of
// their own.
MotionAnalysisOptions AudioSyncCutOptions() {
  MotionAnalysisOptions o;
  o.cut_histogram = 0.15;
  o.isolated_histogram = 1.5;
  o.isolated_residual = 0.1;
  o.transitions.max_s = 3.0;
  o.transitions.mixed_lo = 0.15;
  o.transitions.edge = 0.04;
  // ...and these as they were before it too: the later searches (issue 74, parts 3 and 4)
  // moved them, and the whip-pan, ramp, wipe, span-margin and widening rules are off here.
  o.cut_residual = 0.45;
  o.flat_std = 10.0;
  o.transitions.change = 0.15;
  o.transitions.min_mixed = 2;
  o.transitions.max_step = 0.3;
  o.transitions.max_camera = 0.015;
  o.transitions.bump_min_mixed = 5;
  o.transitions.span_margin = 0;
  o.transitions.widen_ratio = 0;
  o.transitions.wipe_sweep = 2;  // a correlation is at most 1: no wipe
  o.slide_min_shift = 2;         // a shift is at most 0.5 of the width: no whip pan
  o.ramp_ratio = 1e9;            // no frame changes that much more than a cut: no ramp
  return o;
}
constexpr size_t kChunk = 16;        // frames held for one face-detection run
constexpr double kSilentPeak = 1e-4;  // audio whose peak is below this is digital silence
const double kNaN = std::numeric_limits<double>::quiet_NaN();
// facemesh: the face box grown by this much (human crops its mesh input about so).
constexpr float kMeshCropScale = 1.5f;
// A face must be clear to show a mouth: BlazeFace's dataset default (0.5) lets through
// faces in blocky graphics that correlate with nothing.
constexpr float kMinFaceScore = 0.5f;
constexpr float kMinFaceFlag = 0.5f;  // facemesh's presence below this: no face in the crop

// What the picture gives (analysis/av_sync_signals.h), and where its models ran.
struct PictureRead : VisualSeries {
  std::string face_device = "cpu", mesh_device = "";  // mesh_device "": no mouth measured
};

double MeanAbsDiff(const cv::Mat& a, const cv::Mat& b) {
  if (a.empty() || b.empty() || a.size() != b.size()) return kNaN;
  cv::Mat d;
  cv::absdiff(a, b, d);
  return cv::mean(d)[0];
}

// The mouth region of a face box: the lower half, inner 70% of the width.
cv::Rect LowerFace(const models::FaceBox& f, cv::Size image) {
  const float w = f.x2 - f.x1, h = f.y2 - f.y1;
  cv::Rect r(static_cast<int>(f.x1 + 0.15f * w), static_cast<int>(f.y1 + 0.5f * h),
             static_cast<int>(0.7f * w), static_cast<int>(0.5f * h));
  return r & cv::Rect(0, 0, image.width, image.height);
}

// Reads the video once, in order: whole-frame motion, lower-face motion and cuts.
class VisualReader {
 public:
  // `mesh` may be null: no mouth signal, the lower face's motion stands in.
  VisualReader(const AudioSyncOptions& o, models::ModelCache& cache, models::ModelRunner& detector,
               models::ModelRunner* mesh, const StageContext& ctx)
      : o_(o), cache_(cache), detector_(detector), mesh_(mesh), ctx_(ctx) {}

  Result<PictureRead> Read(const std::string& path, double* fps) {
    VideoReaderOptions ro;
    ro.max_width = o_.analysis_width;
    ro.limits = o_.video_limits;
    auto reader = VideoReader::Open(path, ro);
    if (!reader.ok()) return reader.status();
    VideoReader& r = **reader;
    *fps = r.info().fps;
    if (r.info().fps > 0)
      r_limit_ = static_cast<int64_t>(std::ceil(o_.max_seconds * r.info().fps));
    const cv::Size out = r.output_size();
    const cv::Size cut_size(std::min(kCutWidth, out.width),
                            std::max(1, out.height * std::min(kCutWidth, out.width) / out.width));
    MotionAnalyser cuts(AudioSyncCutOptions(), cv::Size(r.info().width, r.info().height), cut_size,
                        r.info().fps);
    std::vector<VideoFrame> chunk;
    VideoFrame f;
    for (;;) {
      auto more = r.Next(&f);
      if (!more.ok()) return more.status();
      const bool end = !*more || (r_limit_ > 0 && f.index >= r_limit_);
      if (!end) {
        cv::Mat small;
        cv::resize(f.image, small, cut_size, 0, 0, cv::INTER_AREA);
        if (Status s = cuts.Add(f.index, f.time_s, small); !s.ok()) return s;
        chunk.push_back(std::move(f));
        f = VideoFrame{};
      }
      if (chunk.size() == kChunk || (end && !chunk.empty())) {
        if (Status s = Measure(chunk); !s.ok()) return s;
        chunk.clear();
      }
      if (end) break;
    }
    const MotionSummary summary = cuts.Finish(r.frames_decoded());
    series_.cut.assign(series_.times.size(), false);
    for (int64_t c : summary.cuts)
      if (c - first_index_ >= 0 && c - first_index_ < static_cast<int64_t>(series_.cut.size()))
        series_.cut[c - first_index_] = true;
    series_.cuts = summary.cuts;
    return std::move(series_);
  }

 private:
  Status Measure(const std::vector<VideoFrame>& chunk) {
    std::vector<cv::Mat> to_detect;
    std::vector<size_t> detected_at;
    for (size_t i = 0; i < chunk.size(); ++i)
      if ((chunk[i].index % std::max(1, o_.detect_every)) == 0) {
        to_detect.push_back(chunk[i].image);
        detected_at.push_back(i);
      }
    models::BatchOutputs heads;
    if (!to_detect.empty()) {
      auto r = models::RunModel(cache_, detector_, to_detect, ctx_.ladder, &series_.face_device,
                                kAudioSyncOperation);
      if (!r.ok()) return r.status();
      heads = std::move(r).value();
    }
    size_t next = 0;
    std::vector<cv::Mat> crops;
    std::vector<size_t> cropped_at;
    for (size_t i = 0; i < chunk.size(); ++i) {
      const VideoFrame& f = chunk[i];
      if (next < detected_at.size() && detected_at[next] == i) {
        models::BlazeFaceOptions bo;
        bo.min_score = kMinFaceScore;
        auto faces = models::DecodeFaceDetections(detector_.manifest(), heads[next++], f.image.size(), bo);
        if (!faces.ok()) return faces.status();
        have_face_ = !faces->empty();
        if (have_face_)
          face_ = *std::max_element(faces->begin(), faces->end(), [](const auto& a, const auto& b) {
            return (a.x2 - a.x1) * (a.y2 - a.y1) < (b.x2 - b.x1) * (b.y2 - b.y1);
          });
      }
      cv::Mat gray, small;
      cv::cvtColor(f.image, gray, cv::COLOR_BGR2GRAY);
      const int sw = std::min(kMotionWidth, gray.cols);
      cv::resize(gray, small, cv::Size(sw, std::max(1, gray.rows * sw / gray.cols)), 0, 0, cv::INTER_AREA);
      if (series_.times.empty()) first_index_ = f.index;
      series_.times.push_back(f.time_s);
      series_.frame.push_back(prev_small_.empty() ? 0.0 : MeanAbsDiff(small, prev_small_));
      series_.luma.push_back(cv::mean(small)[0]);
      double lower = kNaN;
      if (have_face_) {
        const cv::Rect roi = LowerFace(face_, gray.size());
        if (roi.area() >= 16 && !prev_gray_.empty()) lower = MeanAbsDiff(gray(roi), prev_gray_(roi));
        ++series_.frames_with_face;
        if (mesh_ != nullptr) {
          crops.push_back(FaceCrop(f.image, face_, kMeshCropScale));
          cropped_at.push_back(series_.mouth.size());
        }
      }
      series_.lower_face.push_back(lower);
      series_.mouth.push_back(kNaN);
      prev_small_ = small;
      prev_gray_ = gray;
    }
    return MeasureMouths(crops, cropped_at);
  }

  // Mouth opening per crop: the inner-lip gap over the distance between the corners.
  Status MeasureMouths(const std::vector<cv::Mat>& crops, const std::vector<size_t>& at) {
    if (crops.empty()) return Status::OK();
    auto out = models::RunModel(cache_, *mesh_, crops, ctx_.ladder, &series_.mesh_device, kAudioSyncOperation);
    if (!out.ok()) return out.status();
    const models::ModelManifest& m = mesh_->manifest();
    // In the model's input pixels: a mouth narrower than one of them is a degenerate mesh.
    const cv::Size input(m.preprocess.width, m.preprocess.height);
    for (size_t k = 0; k < crops.size(); ++k) {
      auto mesh = models::DecodeFaceMesh(m, (*out)[k], input);
      if (!mesh.ok()) return mesh.status();
      if (mesh->presence < kMinFaceFlag) continue;
      if (auto opening = models::MouthOpening(*mesh)) {
        series_.mouth[at[k]] = *opening;
        ++series_.frames_with_mouth;
      }
    }
    return Status::OK();
  }

  const AudioSyncOptions& o_;
  models::ModelCache& cache_;
  models::ModelRunner& detector_;
  models::ModelRunner* mesh_;
  const StageContext& ctx_;
  PictureRead series_;
  int64_t r_limit_ = 0;
  int64_t first_index_ = 0;
  bool have_face_ = false;
  models::FaceBox face_;
  cv::Mat prev_small_, prev_gray_;
};

nlohmann::json EstimateJson(const SyncEstimate& e) {
  nlohmann::json j = {{"signal", e.signal}, {"offset_ms", Rounded(e.offset_s * 1000, 1)},
                      {"confidence", Rounded(e.confidence, 3)}, {"peak", Rounded(e.peak, 3)}};
  if (!e.reason.empty()) j["reason"] = e.reason;
  return j;
}

nlohmann::json ShotsJson(const std::vector<ShotEstimate>& shots) {
  nlohmann::json out = nlohmann::json::array();
  for (const ShotEstimate& s : shots) {
    nlohmann::json j = EstimateJson(s.estimate);
    j["start_s"] = Rounded(s.start_s, 3);
    j["end_s"] = Rounded(s.end_s, 3);
    out.push_back(j);
  }
  return out;
}

// The sound, read and scored. *skip says why a video has none to compare (no audio stream,
// a silent track); other errors fail the job.
struct Sound {
  AudioTrack audio;
  std::vector<float> speech;  // Silero's probability per window
  int window = 512;
  std::string device;         // where the VAD's encoder ran
};

// Silero's encoder runs on our engine where AUDIO_SYNC does (a device, else the CPU), its
// recurrent decoder on the CPU.
Result<Sound> HearSound(const std::string& path, const AudioSyncOptions& o, models::ModelCache& cache,
                        const StageContext& ctx, std::string* skip) {
  AudioReadOptions ao;
  ao.max_seconds = o.max_seconds;
  auto audio = ReadAudio(path, ao);
  if (!audio.ok()) {
    if (audio.status().IsNotFound()) *skip = "the video has no audio stream";
    return audio.status();
  }
  float peak = 0;
  for (float v : audio->samples) peak = std::max(peak, std::fabs(v));
  if (peak < kSilentPeak) {
    *skip = "the audio track is silent (peak " + std::to_string(peak) + ")";
    return Status::NotFound(*skip);
  }
  auto encoder = cache.Borrow(o.vad_model);
  if (!encoder.ok()) return encoder.status();
  auto vad = models::VoiceActivity::Open((*encoder)->manifest(), /*with_encoder=*/false);
  if (!vad.ok()) return vad.status();
  if ((*vad)->sample_rate() != audio->sample_rate)
    return Status::Internal("the VAD wants " + std::to_string((*vad)->sample_rate()) + " Hz");
  std::string device = "cpu";
  auto probs = (*vad)->Run(audio->samples, [&](const gpu::Tensor& windows) {
    return models::RunModelOnTensor(cache, **encoder, windows, ctx.ladder, &device, kAudioSyncOperation);
  });
  if (!probs.ok()) return probs.status();
  return Sound{std::move(audio).value(), std::move(probs).value(), (*vad)->window(), device};
}

// The contract's keys and what stands behind them.
nlohmann::json ResultJson(const Sound& sound, const VisualSeries& visual, double fps,
                          const std::vector<Candidate>& all, const Candidate* best, double min_confidence) {
  double speech = 0;
  for (float p : sound.speech) speech += p > 0.5f;
  nlohmann::json r;
  r["container_offset_ms"] = Rounded(sound.audio.start_offset_s * 1000, 1);
  r["audio"] = {{"codec", sound.audio.codec}, {"seconds", Rounded(sound.audio.seconds(), 3)},
                {"speech_fraction", sound.speech.empty() ? 0.0 : Rounded(speech / sound.speech.size(), 3)}};
  r["fps"] = fps;
  r["frames_analysed"] = visual.times.size();
  r["face_fraction"] = Rounded(static_cast<double>(visual.frames_with_face) / visual.times.size(), 3);
  r["candidates"] = nlohmann::json::array();
  for (const Candidate& c : all) r["candidates"].push_back(EstimateJson(c.estimate));
  if (best == nullptr) {
    r["offset_ms"] = 0.0;
    r["confidence"] = 0.0;
    r["signal"] = "none";
    r["low_confidence"] = true;
    r["reason"] = all.empty() ? "neither the sound nor the picture varies enough to compare"
                              : all.front().estimate.reason;
    return r;
  }
  const SyncEstimate& e = best->estimate;
  for (const char* key : {"offset_ms", "confidence", "signal", "peak"}) r[key] = EstimateJson(e)[key];
  if (e.confidence < min_confidence) {
    r["low_confidence"] = true;
    r["reason"] = !e.reason.empty() ? e.reason
                                    : "no clear match between sound and picture (the best correlation "
                                      "peak is not clearly above the next)";
  }
  return r;
}

}  // namespace

// A still image has no sound: its job is skipped with the reason.
AudioSyncStage::AudioSyncStage(std::shared_ptr<models::ModelCache> cache, AudioSyncOptions options,
                               const std::string& out_dir)
    : PerJobStage(MakeSpec(stage_names::kAudioSync, Takes::kVideos), out_dir),
      cache_(std::move(cache)), options_(std::move(options)) {}

std::vector<std::string> AudioSyncStage::Models() const {
  std::vector<std::string> names = {options_.vad_model, options_.face_model};
  if (!options_.mesh_model.empty()) names.push_back(options_.mesh_model);
  return names;
}

Outcome AudioSyncStage::RunOne(const ClaimedJob& job, const StageContext& ctx) {
  std::string skip;
  auto sound = HearSound(job.source, options_, *cache_, ctx, &skip);
  if (!sound.ok()) return skip.empty() ? Outcome::Failed(sound.status()) : Outcome::Skipped(skip);

  auto detector = cache_->Borrow(options_.face_model);
  if (!detector.ok()) return Outcome::Failed(detector.status());
  // The mouth needs facemesh; without it the lower face's motion stands in (recorded).
  std::optional<models::ModelCache::Lease> mesh;
  std::string no_mesh = options_.mesh_model.empty() ? "audio_sync.mouth is none" : "";
  if (!options_.mesh_model.empty()) {
    auto m = cache_->Borrow(options_.mesh_model);
    if (m.ok()) mesh.emplace(std::move(m).value());
    else no_mesh = m.status().ToString();
  }
  double fps = 0;
  VisualReader reader(options_, *cache_, **detector, mesh ? &**mesh : nullptr, ctx);
  auto visual = reader.Read(job.source, &fps);
  if (!visual.ok()) return Outcome::Failed(visual.status());
  if (visual->times.size() < 3)
    return Outcome::Skipped("audio_sync needs a moving picture; the video has " +
                            std::to_string(visual->times.size()) + " frame(s)");

  const Signals signals = MakeSignals({&sound->audio, &sound->speech, sound->window}, *visual);
  const SyncOptions& so = options_.sync;
  const std::vector<std::pair<double, double>> shots = Shots(*visual, fps);
  const std::vector<Candidate> all = Compare(signals, so, shots);
  const Candidate* best = Best(all);

  nlohmann::json result = ResultJson(*sound, *visual, fps, all, best, options_.min_confidence);
  if (!no_mesh.empty()) result["mouth_unavailable"] = no_mesh;
  // Shots long enough get their own estimate from the same pair of signals.
  if (best != nullptr && !visual->cuts.empty()) {
    result["shots"] = ShotsJson(ShotEstimates(*best->audio, *best->visual, shots, so, options_.min_shot_s));
    result["cuts"] = visual->cuts;
  }
  // The signals on their grid: the CSV artifact, named under "series".
  return DoneWithArtifact(job, "csv", SeriesCsv(signals), "series", std::move(result),
                          gpu::OneDevice({sound->device, visual->face_device, visual->mesh_device}));
}

}  // namespace framemill
