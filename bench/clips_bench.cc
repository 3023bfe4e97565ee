// Clip writing benchmark, after leveldb's benchmarks/db_bench.cc: prints its setup, then
// one line per (workload, tool). It measures only; nothing is asserted.
//
//   clips_bench [--benchmarks=encode,copy] [--reps=3] [--span-s=10] [--threads=1]
//
// Workloads (default: both, in this order):
//   encode  every --span-s seconds of each source as a clip in encode mode (libx264
//           veryfast, crf 20, AAC 128 kb/s): framemill's WriteClips, one pass over the
//           source for all its clips, against ffmpeg run once per clip with the same
//           settings (`ffmpeg -ss S -to E -i SRC -c:v libx264 -preset veryfast -crf 20 -c:a aac
//           -b:a 128k`, input seeking, which decodes from the keyframe before S), both at
//           --threads encoder threads (a worker's share of the cores)
//   copy    the same spans in copy mode (no re-encoding) from an H.264 + AAC source:
//           WriteClips against `ffmpeg -ss S -to E -i SRC -c copy`
// Sources: opencv-doc's vtest.avi (79.5 s, 768x576, 10 fps, silent) and Megamind.avi
// (11.3 s, 720x528, 23.976 fps, AC-3 sound); copy's is both re-encoded once to H.264 + AAC
// by ffmpeg (keyframes every 2 s) into a temporary file. Each timing is the median of
// --reps runs after one warm-up. Printed per tool: wall ms, clips/s, and source hours per
// hour (the sources' seconds over the wall's).
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_support.h"
#include "media/clip_writer.h"
#include "media/video_reader.h"
#include "tests/support/test_support.h"

namespace framemill {
namespace {

namespace fs = std::filesystem;

struct Flags {
  std::string benchmarks = "encode,copy";
  int reps = 3;
  int span_s = 10;
  int threads = 1;
};

struct Source {
  std::string path;
  double fps = 0, seconds = 0;
  std::vector<ClipSpan> spans;
};

Source Describe(const std::string& path, int span_s) {
  Source s{path};
  auto r = VideoReader::Open(path, {});
  if (!r.ok()) return s;
  s.fps = (*r)->info().fps;
  const int64_t frames = (*r)->info().frames;
  s.seconds = frames / s.fps;
  const auto step = static_cast<int64_t>(span_s * s.fps);
  for (int64_t a = 0; a < frames; a += step) s.spans.push_back({a, std::min(frames, a + step)});
  return s;
}

int RunFfmpeg(const Source& s, const ClipSpan& span, const std::vector<std::string>& codec,
              const std::string& out) {
  std::vector<std::string> argv = {"/usr/bin/ffmpeg", "-v", "error", "-y",
                                   "-ss", std::to_string(span.start_frame / s.fps),
                                   "-to", std::to_string(span.end_frame / s.fps), "-i", s.path};
  argv.insert(argv.end(), codec.begin(), codec.end());
  argv.push_back(out);
  return testing::RunProcess(argv, {}, "/").exit_code;
}

void Report(const char* workload, const char* tool, double ms, size_t clips, double seconds) {
  std::printf("%-7s %-10s %9.0f ms  %6.2f clips/s  %7.1f source hours per hour\n", workload, tool,
              ms, clips / (ms / 1000), seconds / (ms / 1000));
}

void Compare(const char* workload, const std::vector<Source>& sources, const ClipEncoding& e,
             const std::vector<std::string>& ffmpeg_codec, const Flags& f, const std::string& dir) {
  size_t clips = 0;
  double seconds = 0;
  for (const Source& s : sources) clips += s.spans.size(), seconds += s.seconds;
  const ClipWriteOptions o{e, {}};
  int failures = 0;
  const double ours = bench::MedianMs(f.reps, [&] {
    for (const Source& s : sources) {
      auto r = WriteClips(s.path, s.spans, o, [&](size_t k) { return dir + "/ours" + std::to_string(k) + ".mp4"; });
      if (!r.ok()) ++failures;
    }
  });
  const double theirs = bench::MedianMs(f.reps, [&] {
    for (const Source& s : sources)
      for (size_t k = 0; k < s.spans.size(); ++k)
        if (RunFfmpeg(s, s.spans[k], ffmpeg_codec, dir + "/ffmpeg" + std::to_string(k) + ".mp4") != 0) ++failures;
  });
  Report(workload, "framemill", ours, clips, seconds);
  Report(workload, "ffmpeg", theirs, clips, seconds);
  std::printf("%-7s framemill / ffmpeg: %.2fx the time%s\n", workload, ours / theirs,
              failures ? "  (some runs FAILED)" : "");
}

}  // namespace
}  // namespace framemill

int main(int argc, char** argv) {
  using namespace framemill;
  Flags f;
  if (!bench::ParseFlags("clips_bench", argc, argv,
                         {{"--benchmarks=", &f.benchmarks}, {"--reps=", &f.reps, 1},
                          {"--span-s=", &f.span_s, 1}, {"--threads=", &f.threads, 1}}))
    return 2;
  testing::TempDir dir;
  std::vector<Source> sources;
  for (const char* v : {"vtest.avi", "Megamind.avi"}) sources.push_back(Describe(testing::SampleData(v), f.span_s));
  std::printf("clips_bench: CPU %s, %u cores; spans of %d s; %d encoder thread(s); median of %d\n",
              bench::CpuModel().c_str(), std::thread::hardware_concurrency(), f.span_s, f.threads, f.reps);
  for (const Source& s : sources)
    std::printf("  %s: %.1f s at %.3f fps, %zu clips\n", fs::path(s.path).filename().c_str(), s.seconds, s.fps,
                s.spans.size());
  const std::string threads = std::to_string(f.threads);
  if (bench::Listed(f.benchmarks, "encode")) {
    ClipEncoding e;
    e.threads = f.threads;
    Compare("encode", sources, e,
            {"-threads", threads, "-c:v", "libx264", "-preset", "veryfast", "-crf", "20", "-c:a", "aac",
             "-b:a", "128k"},
            f, dir.path());
  }
  if (bench::Listed(f.benchmarks, "copy")) {
    std::vector<Source> h264;
    for (const Source& s : sources) {
      const std::string out = dir / (fs::path(s.path).stem().string() + ".mp4");
      auto r = testing::RunProcess({"/usr/bin/ffmpeg", "-v", "error", "-y", "-i", s.path, "-c:v", "libx264",
                                    "-preset", "veryfast", "-g", std::to_string(static_cast<int>(2 * s.fps)),
                                    "-c:a", "aac", out}, {}, "/");
      if (r.exit_code != 0) std::printf("copy: could not make %s: %s\n", out.c_str(), r.err.c_str());
      h264.push_back(Describe(out, f.span_s));
    }
    ClipEncoding e;
    e.mode = ClipMode::kCopy;
    Compare("copy", h264, e, {"-c", "copy"}, f, dir.path());
  }
  return 0;
}
