// Motion benchmark, after leveldb's benchmarks/db_bench.cc: prints its setup, then one
// line per (workload, variant). It measures only; nothing is asserted.
//
//   motion_bench [--benchmarks=decode,motion,camera,flow,pose,audio_sync] [--reps=3] [--width=320]
//                [--video720=PATH] [--threads=N]
//
// Workloads (default: all, in this order):
//   decode   the analysis reader (libav*, one libswscale pass to the analysis width) against
//            OpenCV's FFmpeg backend (VideoCapture::read, then cv::resize INTER_AREA) over the
//            whole clip at 720p and 480p: frames/s, each frame decoded once
//   motion   the motion analysis (DIS flow, camera fit, residual, cut features) at --width:
//            frames/s with the frames already decoded ("decode excluded"), and the stage's
//            whole path from the file ("decode included")
//   camera   the camera model's accuracy against known motion: a 640x360 view sliding,
//            zooming and turning over a real photo (opencv-doc's aloeL.jpg), analysed at
//            widths 160 to 640 with each DIS preset: error of dx, zoom and rotation per frame
//   flow     flow accuracy on Middlebury's motorcycle stereo pair (python3-skimage, with its
//            ground-truth disparity): endpoint error in source pixels and ms per pair, for
//            DIS's presets, Farneback (the baseline) and lk_pyramid (the CPU twin of the
//            CUDA flow that MOTION_GPU selects) at analysis widths 160 to 741
//   pose     pose tracks (movenet-multipose, the default pose model) over vtest.avi's first
//            20 s, read in order at 5 frames/s and 640 wide, the camera's motion from the
//            motion analyser: analysed frames/s of the whole stage from the file, and of the
//            tracker alone on its output; skipped when the model is not installed
//   audio_sync the audio_sync stage on opencv-doc's Megamind.avi (11.3 s, speech, faces in
//            nearly every frame) on the CPU: seconds of media per second of compute for the
//            whole stage, without facemesh (audio_sync.mouth: none), and for its parts alone
//            (audio decode to 16 kHz, Silero VAD, video decode at 640 wide); skipped when
//            silero-vad, blazeface or facemesh is not installed
//
// The 720p clip is imageio's cockatoo.mp4 (handheld, 1280x720 h264, 280 frames); the
// 480p one is the same clip scaled by ffmpeg into a temporary file. Each timing is the
// median of --reps runs after one warm-up.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <opencv2/video/tracking.hpp>
#include <opencv2/videoio.hpp>

#include "analysis/motion_analysis.h"
#include "analysis/pose_tracks.h"
#include "bench/bench_support.h"
#include "gpu/ops.h"
#include "media/audio_reader.h"
#include "media/video_reader.h"
#include "models/model_store.h"
#include "models/voice_activity.h"
#include "stages/audio_sync_stage.h"
#include "stages/pose_stage.h"
#include "tests/support/model_test_support.h"
#include "tests/support/test_support.h"

namespace framemill {
namespace {

namespace fs = std::filesystem;

struct Flags {
  std::string benchmarks = "decode,motion,camera,flow,pose,audio_sync";
  std::string video720 = testing::ImageioData("cockatoo.mp4");
  std::string skimage = "/usr/lib/python3/dist-packages/skimage/data";
  int reps = 3;
  int width = 320;
  int threads = 0;  // >0: OpenCV's threads, as a worker's share of the cores (1 with 2 workers on 2)
};

using bench::Listed;
using bench::MedianMs;
using bench::NowMs;

std::vector<VideoFrame> ReadAll(const std::string& path, int width) {
  VideoReaderOptions o;
  o.max_width = width;
  auto r = VideoReader::Open(path, o);
  std::vector<VideoFrame> out;
  if (!r.ok()) {
    std::fprintf(stderr, "motion_bench: %s\n", r.status().ToString().c_str());
    return out;
  }
  VideoFrame f;
  while (*(*r)->Next(&f)) out.push_back(f), f = VideoFrame();
  return out;
}

void Decode(const Flags& flags, const std::string& label, const std::string& path) {
  int64_t n = 0;
  const double ours = MedianMs(flags.reps, [&] { n = int64_t(ReadAll(path, flags.width).size()); });
  const double opencv = MedianMs(flags.reps, [&] {
    cv::VideoCapture cap(path, cv::CAP_FFMPEG);
    cv::Mat frame, small;
    while (cap.read(frame)) {
      const int h = int(std::lround(double(frame.rows) * flags.width / frame.cols)) & ~1;
      cv::resize(frame, small, cv::Size(flags.width, h), 0, 0, cv::INTER_AREA);
    }
  });
  std::printf("decode_%-5s %lld frames to width %d: libav reader %.1f frames/s, OpenCV read+resize "
              "%.1f frames/s (%.2fx)\n",
              label.c_str(), static_cast<long long>(n), flags.width, n * 1000.0 / ours,
              n * 1000.0 / opencv, opencv / ours);
}

void Motion(const Flags& flags, const std::string& label, const std::string& path) {
  auto frames = ReadAll(path, flags.width);
  if (frames.size() < 2) return;
  VideoReaderOptions probe;
  auto r = VideoReader::Open(path, probe);
  const cv::Size source((*r)->info().width, (*r)->info().height);
  const cv::Size analysis = frames[0].image.size();
  const double analysed = MedianMs(flags.reps, [&] {
    MotionAnalyser a({}, source, analysis, (*r)->info().fps);
    for (const auto& f : frames) (void)a.Add(f.index, f.time_s, f.image);
    a.Finish(int64_t(frames.size()));
  });
  const double whole = MedianMs(flags.reps, [&] {
    VideoReaderOptions o;
    o.max_width = flags.width;
    auto reader = VideoReader::Open(path, o);
    MotionAnalyser a({}, source, analysis, (*r)->info().fps);
    VideoFrame f;
    while (*(*reader)->Next(&f)) (void)a.Add(f.index, f.time_s, f.image);
    a.Finish((*reader)->frames_decoded());
  });
  const double n = double(frames.size());
  std::printf("motion_%-5s %dx%d -> %dx%d, %zu frames: %.1f frames/s decode excluded, %.1f frames/s "
              "decode included\n",
              label.c_str(), source.width, source.height, analysis.width, analysis.height,
              frames.size(), n * 1000.0 / analysed, n * 1000.0 / whole);
}

void Camera(const Flags& flags) {
  const cv::Mat photo = cv::imread(testing::SampleData("aloeL.jpg"));
  const cv::Size view(640, 360);
  struct Truth {
    const char* name;
    testing::SyntheticCamera cam;
    double dx, zoom, rotation;  // content motion per frame
  } truths[] = {{"pan 3 px", {.velocity = {3, 0}}, -3, 1, 0},
                {"pan 0.4 px", {.velocity = {0.4, 0}}, -0.4, 1, 0},
                {"zoom 1%", {.zoom = 1.01}, 0, 1.01, 0},
                {"turn 0.5 deg", {.turn_deg = 0.5}, 0, 1, -0.5}};
  std::printf("camera: 30 frames of a %dx%d view over aloeL.jpg per motion; |error| per frame\n",
              view.width, view.height);
  for (const Truth& t : truths) {
    const auto frames = testing::FilmPhoto(photo, t.cam, view, 30);
    for (int width : {160, 320, 480, 640})
      for (auto [name, preset] : {std::pair{"ultrafast", cv::DISOpticalFlow::PRESET_ULTRAFAST},
                                  std::pair{"fast", cv::DISOpticalFlow::PRESET_FAST},
                                  std::pair{"medium", cv::DISOpticalFlow::PRESET_MEDIUM}}) {
        const cv::Size size(width, width * view.height / view.width);
        MotionAnalysisOptions o;
        o.preset = preset;
        MotionAnalyser a(o, view, size, 25);
        const double t0 = NowMs();
        for (size_t k = 0; k < frames.size(); ++k) {
          cv::Mat small;
          cv::resize(frames[k], small, size, 0, 0, cv::INTER_AREA);
          (void)a.Add(int64_t(k), k / 25.0, small);
        }
        const MotionSummary m = a.Finish(int64_t(frames.size()));
        const double ms = (NowMs() - t0) / double(frames.size());
        std::printf("camera %-13s width %3d %-9s dx %.3f px  zoom %.5f  rotation %.4f deg  "
                    "(%.2f ms/frame)\n",
                    t.name, width, name, std::abs(m.overall.camera.dx - t.dx),
                    std::abs(m.overall.camera.zoom - t.zoom),
                    std::abs(m.overall.camera.rotation_deg - t.rotation), ms);
      }
  }
}

// Endpoint error over pixels with known disparity (the flow left -> right is (-d, 0)),
// in source pixels, of a flow computed at `width` and scaled back up.
double EndpointError(const cv::Mat& flow_small, const cv::Mat& disparity) {
  cv::Mat flow;
  cv::resize(flow_small, flow, disparity.size(), 0, 0, cv::INTER_LINEAR);
  flow *= double(disparity.cols) / flow_small.cols;
  double sum = 0;
  int64_t n = 0;
  for (int y = 0; y < disparity.rows; ++y)
    for (int x = 0; x < disparity.cols; ++x) {
      const float d = disparity.at<float>(y, x);
      if (!std::isfinite(d)) continue;
      const cv::Point2f f = flow.at<cv::Point2f>(y, x);
      sum += std::hypot(f.x + d, f.y);
      ++n;
    }
  return n ? sum / n : NAN;
}

void Flow(const Flags& flags) {
  const std::string pfm = (fs::temp_directory_path() / "framemill_motorcycle_disp.pfm").string();
  auto conv = testing::RunProcess(
      {"/usr/bin/python3", FRAMEMILL_SOURCE_DIR "/tools/media/disparity_to_pfm.py",
       flags.skimage + "/motorcycle_disp.npz", pfm});
  cv::Mat left = cv::imread(flags.skimage + "/motorcycle_left.png", cv::IMREAD_GRAYSCALE);
  cv::Mat right = cv::imread(flags.skimage + "/motorcycle_right.png", cv::IMREAD_GRAYSCALE);
  cv::Mat disparity = cv::imread(pfm, cv::IMREAD_UNCHANGED);
  if (conv.exit_code != 0 || left.empty() || disparity.empty()) {
    std::fprintf(stderr, "motion_bench: flow: cannot read the Middlebury pair (%s)\n", conv.err.c_str());
    return;
  }
  if (disparity.channels() > 1) cv::extractChannel(disparity, disparity, 0);
  std::printf("flow: Middlebury motorcycle %dx%d, disparity up to %.0f px; EPE in source px\n",
              left.cols, left.rows, 60.0);
  for (int width : {160, 320, 480, left.cols}) {
    const cv::Size size(width, int(std::lround(double(left.rows) * width / left.cols)));
    cv::Mat l, r;
    cv::resize(left, l, size, 0, 0, cv::INTER_AREA);
    cv::resize(right, r, size, 0, 0, cv::INTER_AREA);
    struct Variant {
      const char* name;
      std::function<void(cv::Mat*)> run;
    };
    std::vector<Variant> variants;
    for (auto [name, preset] : {std::pair{"dis_ultrafast", cv::DISOpticalFlow::PRESET_ULTRAFAST},
                                std::pair{"dis_fast", cv::DISOpticalFlow::PRESET_FAST},
                                std::pair{"dis_medium", cv::DISOpticalFlow::PRESET_MEDIUM}}) {
      auto dis = cv::DISOpticalFlow::create(preset);
      variants.push_back({name, [=](cv::Mat* f) { dis->calc(l, r, *f); }});
    }
    // Farneback with OpenCV's sample parameters, and with a wider window and more levels
    // (the best of a few tried on this pair).
    variants.push_back({"farneback", [=](cv::Mat* f) {
                          cv::calcOpticalFlowFarneback(l, r, *f, 0.5, 3, 15, 3, 5, 1.2, 0);
                        }});
    variants.push_back({"farneback_wide", [=](cv::Mat* f) {
                          cv::calcOpticalFlowFarneback(l, r, *f, 0.5, 6, 31, 5, 7, 1.5, 0);
                        }});
    variants.push_back({"lk_pyramid", [=](cv::Mat* f) {  // the device flow's CPU twin
                          *f = gpu::DenseFlowCpu({l, r}, gpu::FlowSpec{});
                        }});
    for (auto& v : variants) {
      cv::Mat flow;
      const double ms = MedianMs(flags.reps, [&] { v.run(&flow); });
      std::printf("flow_%-4d %-14s EPE %6.2f px   %8.2f ms/pair\n", width, v.name,
                  EndpointError(flow, disparity), ms);
    }
  }
}

void Pose(const Flags& flags) {
  if (!fs::exists(fs::path(testing::ModelsDir()) / "movenet-multipose" / "manifest.json")) {
    std::printf("pose         skipped: movenet-multipose is not installed in %s\n",
                testing::ModelsDir().c_str());
    return;
  }
  ModelStageOptions first_20s;
  first_20s.video_limits.max_frames = 200;  // vtest.avi: 10 frames/s
  PoseStage stage(std::make_shared<models::ModelCache>(testing::ModelsDir()), first_20s, PoseOptions{});
  const ClaimedJob job = testing::JobFor("pose", testing::SampleData("vtest.avi"), MediaKind::kVideo);
  Outcome out;
  const double whole = MedianMs(flags.reps, [&] { out = stage.Run(job); });
  if (out.kind != Outcome::Kind::kDone) {
    std::printf("pose         failed: %s\n", out.error.ToString().c_str());
    return;
  }
  // The tracker again on the stage's own people (the tracks list every sighting once).
  std::map<int64_t, PoseFrame> by_frame;
  for (const auto& f : out.result["frames"]) {
    PoseFrame& pf = by_frame[f["frame"].get<int64_t>()];
    pf.frame = f["frame"].get<int64_t>();
    pf.time_s = f["time_s"].get<double>();
    if (f.contains("camera"))
      pf.camera = {f["camera"]["known"].get<bool>(), f["camera"]["dx"].get<double>(),
                   f["camera"]["dy"].get<double>(), f["camera"]["zoom"].get<double>(),
                   f["camera"]["cut"].get<bool>()};
  }
  for (const auto& t : out.result["tracks"])
    for (const auto& s : t["frames"]) {
      PoseSighting p;
      auto b = s["box"].get<std::vector<float>>();
      p.box = cv::Rect2f(b[0], b[1], b[2], b[3]);
      for (size_t k = 0; k < 17; ++k)
        p.keypoints[k] = {s["keypoints"][k][0].get<float>(), s["keypoints"][k][1].get<float>(),
                          s["keypoints"][k][2].get<float>()};
      by_frame[s["frame"].get<int64_t>()].people.push_back(p);
    }
  std::vector<PoseFrame> frames;
  size_t people = 0;
  for (auto& [_, f] : by_frame) people += f.people.size(), frames.push_back(std::move(f));
  size_t tracks = 0;
  const double link = MedianMs(flags.reps, [&] { tracks = LinkPoseTracks(frames, {768, 576}).size(); });
  // The stage's reading alone: every frame decoded once, the kept ones converted.
  VideoReaderOptions ro;
  ro.max_width = PoseOptions{}.video_width;
  ro.max_fps = PoseOptions{}.video_fps;
  ro.limits = first_20s.video_limits;
  const double decode = MedianMs(flags.reps, [&] {
    auto r = VideoReader::Open(job.source, ro);
    VideoFrame f;
    while (r.ok() && *(*r)->Next(&f)) {
    }
  });
  const double n = static_cast<double>(frames.size());
  std::printf("pose_tracks  vtest.avi 768x576, first 20 s, %zu frames analysed, %zu people, %zu tracks "
              "(%zu again): %.1f frames/s whole stage (decode, model, camera, tracks); decode alone "
              "%.1f, tracker alone %.0f frames/s\n",
              frames.size(), people, out.result["tracks"].size(), tracks, n * 1000.0 / whole,
              n * 1000.0 / decode, n * 1000.0 / link);
}

void AudioSync(const Flags& flags) {
  for (const char* m : {"silero-vad", "blazeface", "facemesh"})
    if (!fs::exists(fs::path(testing::ModelsDir()) / m / "manifest.json")) {
      std::printf("audio_sync   skipped: %s is not installed in %s\n", m, testing::ModelsDir().c_str());
      return;
    }
  testing::TempDir out;
  const std::string clip = testing::SampleData("Megamind.avi");
  const ClaimedJob job = testing::JobFor("audio_sync", clip, MediaKind::kVideo);
  auto cache = std::make_shared<models::ModelCache>(testing::ModelsDir());
  AudioSyncStage stage(cache, AudioSyncOptions{}, out.path());
  AudioSyncOptions no_mesh_options;
  no_mesh_options.mesh_model = "";
  AudioSyncStage no_mesh(cache, no_mesh_options, out.path());
  Outcome o, o2;
  const double whole = MedianMs(flags.reps, [&] { o = stage.Run(job); });
  const double without_mesh = MedianMs(flags.reps, [&] { o2 = no_mesh.Run(job); });
  if (o.kind != Outcome::Kind::kDone) {
    std::printf("audio_sync   failed: %s\n", o.error.ToString().c_str());
    return;
  }
  Result<AudioTrack> audio = Status::Internal("not read");
  const double decode_audio = MedianMs(flags.reps, [&] { audio = ReadAudio(clip); });
  auto man = models::ModelStore(testing::ModelsDir()).Open("silero-vad");
  auto vad = models::VoiceActivity::Open(*man);
  const double vad_ms = MedianMs(flags.reps, [&] { (void)(*vad)->Run(audio->samples); });
  VideoReaderOptions ro;
  ro.max_width = AudioSyncOptions{}.analysis_width;
  int64_t frames = 0;
  const double decode_video = MedianMs(flags.reps, [&] {
    auto r = VideoReader::Open(clip, ro);
    VideoFrame f;
    frames = 0;
    while (r.ok() && *(*r)->Next(&f)) ++frames;
  });
  const double s = audio->seconds();
  auto rate = [&](double ms) { return s * 1000.0 / ms; };
  std::printf("audio_sync   Megamind.avi %.2f s, %lld frames: whole stage %.1f s of media per s (%.0f ms; "
              "offset %.1f ms, %s); without facemesh %.1f (%.0f ms); parts alone: audio decode %.0f, "
              "VAD %.0f, video decode at 640 wide %.1f\n",
              s, static_cast<long long>(frames), rate(whole), whole, o.result["offset_ms"].get<double>(),
              o.result["signal"].get<std::string>().c_str(), rate(without_mesh), without_mesh,
              rate(decode_audio), rate(vad_ms), rate(decode_video));
}

int Main(int argc, char** argv) {
  Flags flags;
  if (!bench::ParseFlags("motion_bench", argc, argv,
                         {{"--benchmarks=", &flags.benchmarks}, {"--video720=", &flags.video720},
                          {"--reps=", &flags.reps, 1}, {"--width=", &flags.width, 32},
                          {"--threads=", &flags.threads, 1}}))
    return 2;
  if (flags.threads > 0) cv::setNumThreads(flags.threads);
  testing::TempDir tmp;
  const std::string video480 = tmp / "480p.mp4";
  auto scaled = testing::RunProcess({"/usr/bin/ffmpeg", "-v", "error", "-y", "-i", flags.video720, "-vf",
                                     "scale=854:480", "-c:v", "libx264", "-preset", "fast", video480});
  std::printf("motion_bench: 720p %s; 480p %s\n", flags.video720.c_str(),
              scaled.exit_code == 0 ? "the same, scaled by ffmpeg" : "unavailable (no ffmpeg)");
  std::printf("cpu:          %u hardware threads; OpenCV threads %d\n",
              std::thread::hardware_concurrency(), cv::getNumThreads());
  std::printf("reps:         median of %d after a warm-up; analysis width %d\n", flags.reps, flags.width);
  std::printf("------------------------------------------------------------------\n");
  std::vector<std::pair<std::string, std::string>> clips = {{"720p", flags.video720}};
  if (scaled.exit_code == 0) clips.push_back({"480p", video480});
  if (Listed(flags.benchmarks, "decode"))
    for (const auto& [label, path] : clips) Decode(flags, label, path);
  if (Listed(flags.benchmarks, "motion"))
    for (const auto& [label, path] : clips) Motion(flags, label, path);
  if (Listed(flags.benchmarks, "camera")) Camera(flags);
  if (Listed(flags.benchmarks, "flow")) Flow(flags);
  if (Listed(flags.benchmarks, "pose")) Pose(flags);
  if (Listed(flags.benchmarks, "audio_sync")) AudioSync(flags);
  return 0;
}

}  // namespace
}  // namespace framemill

int main(int argc, char** argv) { return framemill::Main(argc, argv); }
