// The motion stage's shot boundaries on a labelled set, again and again with other thresholds:
// what bench/shot_search.py searches with. Decodes each video once (as the motion stage reads
// it, MotionReaderOptions: 320 wide, 30 frames a second, the skipped frames too) and keeps its
// frames; each optical flow is computed once and kept, by the bytes of the frames it joins, so
// a replay costs the decision and the features around the flow, not the decoding or the flow.
//
//   shot_replay DIR NAME...   then one JSON object a line on stdin: {"cut_histogram": 0.2,
//                             "transitions.min_mixed": 3, ...} (any of DecisionParameters;
//                             the rest at their defaults)
//
// Prints, for each line read, one line: {"NAME": {"cuts": [...], "transitions": [[first,
// last], ...]}, ...}, the boundaries as the motion stage's result would hold them. A line
// that is not an object of known names gets {"error": "..."}. Two threads, a video each.
#include <cstdio>
#include <iostream>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>
#include <opencv2/video/tracking.hpp>

#include "analysis/motion_analysis.h"
#include "media/video_reader.h"
#include "stages/motion_stage.h"

namespace framemill {
namespace {

struct Video {
  std::string name;
  cv::Size source, analysed;
  double fps = 0, analysed_fps = 0;
  int64_t frames = 0;
  std::vector<VideoFrame> decoded;
  std::map<std::pair<size_t, size_t>, cv::Mat> flows;  // by the two frames' bytes' hashes
};

Result<Video> Decode(const std::string& dir, const std::string& name, const MotionOptions& m) {
  auto reader = VideoReader::Open(dir + "/" + name, MotionReaderOptions(m));
  if (!reader.ok()) return reader.status();
  VideoReader& r = **reader;
  Video v;
  v.name = name;
  v.source = cv::Size(r.info().width, r.info().height);
  v.analysed = r.output_size();
  v.fps = r.info().fps;
  v.analysed_fps = AnalysedFps(m, v.fps);
  for (VideoFrame f;;) {
    auto more = r.Next(&f);
    if (!more.ok()) return more.status();
    if (!*more) break;
    f.image = f.image.clone();
    v.decoded.push_back(std::move(f));
  }
  v.frames = r.frames_decoded();
  return v;
}

size_t Hash(const cv::Mat& m) {
  return std::hash<std::string_view>{}(
      std::string_view(reinterpret_cast<const char*>(m.data), m.total() * m.elemSize()));
}

nlohmann::json Replay(Video& v, const MotionAnalysisOptions& options) {
  cv::Ptr<cv::DISOpticalFlow> dis = cv::DISOpticalFlow::create(options.preset);
  FlowFn flow = [&v, dis](const cv::Mat& from, const cv::Mat& to) -> Result<cv::Mat> {
    cv::Mat& f = v.flows[{Hash(from), Hash(to)}];
    if (f.empty()) dis->calc(from, to, f);
    return f;
  };
  MotionAnalyser analyser(options, v.source, v.analysed, v.analysed_fps, flow);
  for (const VideoFrame& f : v.decoded) {
    if (!f.kept) {
      analyser.Skipped(f.index, f.image);
    } else if (Status s = analyser.Add(f.index, f.time_s, f.image); !s.ok()) {
      return {{"error", s.ToString()}};
    }
  }
  const MotionSummary s = analyser.Finish(v.frames);
  nlohmann::json transitions = nlohmann::json::array();
  for (const GradualTransition& t : s.transitions) transitions.push_back({t.first, t.last});
  return {{"cuts", s.cuts}, {"transitions", transitions}};
}

// `line`'s values over the defaults; an error names what is wrong.
Result<MotionAnalysisOptions> Parse(const std::string& line) {
  MotionAnalysisOptions o;
  const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
  if (!j.is_object()) return Status::InvalidArgument("not a JSON object: " + line);
  auto params = DecisionParameters(&o);
  for (const auto& [key, value] : j.items()) {
    auto p = std::find_if(params.begin(), params.end(), [&](const auto& d) { return d.name == key; });
    if (p == params.end() || !value.is_number()) return Status::InvalidArgument("no number parameter " + key);
    if (p->real != nullptr) *p->real = value.get<double>();
    if (p->whole != nullptr) *p->whole = static_cast<int>(value.get<double>());
  }
  return o;
}

int Main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: shot_replay DIR NAME...\n");
    return 2;
  }
  const MotionOptions m;  // the stage's reading defaults
  std::vector<Video> videos;
  for (int i = 2; i < argc; ++i) {
    auto v = Decode(argv[1], argv[i], m);
    if (!v.ok()) {
      std::fprintf(stderr, "%s: %s\n", argv[i], v.status().ToString().c_str());
      return 1;
    }
    videos.push_back(std::move(v).value());
  }
  std::fprintf(stderr, "shot_replay: %zu videos decoded\n", videos.size());
  for (std::string line; std::getline(std::cin, line);) {
    auto options = Parse(line);
    if (!options.ok()) {
      std::printf("%s\n", nlohmann::json{{"error", options.status().ToString()}}.dump().c_str());
      std::fflush(stdout);
      continue;
    }
    std::vector<nlohmann::json> out(videos.size());
    std::mutex mu;
    size_t next = 0;
    auto work = [&] {
      for (;;) {
        size_t i;
        {
          std::lock_guard<std::mutex> lock(mu);
          if (next == videos.size()) return;
          i = next++;
        }
        out[i] = Replay(videos[i], *options);
      }
    };
    std::thread a(work), b(work);
    a.join();
    b.join();
    nlohmann::json all = nlohmann::json::object();
    for (size_t i = 0; i < videos.size(); ++i) all[videos[i].name] = out[i];
    std::printf("%s\n", all.dump().c_str());
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace
}  // namespace framemill

int main(int argc, char** argv) { return framemill::Main(argc, argv); }
