#include "configs/config.h"

#include "base/operations.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <functional>
#include <thread>

extern char** environ;

namespace framemill {
namespace {

using Setter = std::function<Status(Config&, const std::string& value, const std::string& where)>;
using Getter = std::function<std::string(const Config&)>;

struct Setting {
  std::string key;   // YAML path, dotted
  std::string env;   // environment variable, or empty
  std::string flag;  // command-line flag, or empty
  Setter set;
  Getter get;
};

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n"), e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

Status Bad(const std::string& where, const std::string& value, const std::string& expected) {
  return Status::InvalidArgument(where + ": invalid value '" + value + "', expected " + expected);
}

Result<int64_t> ParseInt(const std::string& raw, int64_t lo, int64_t hi, const std::string& where) {
  std::string v = Trim(raw);
  int64_t out = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (v.empty() || ec != std::errc() || p != v.data() + v.size() || out < lo || out > hi)
    return Bad(where, raw, "an integer from " + std::to_string(lo) + " to " + std::to_string(hi));
  return out;
}

Result<double> ParseDouble(const std::string& raw, double lo, double hi, const std::string& where) {
  std::string v = Trim(raw);
  try {
    size_t used = 0;
    double d = std::stod(v, &used);
    if (used == v.size() && d >= lo && d <= hi) return d;
  } catch (...) {
  }
  return Bad(where, raw, "a number from " + std::to_string(lo) + " to " + std::to_string(hi));
}

Result<bool> ParseBool(const std::string& raw, const std::string& where) {
  std::string v = Lower(Trim(raw));
  if (v == "true" || v == "1" || v == "yes") return true;
  if (v == "false" || v == "0" || v == "no") return false;
  return Bad(where, raw, "true/false/1/0/yes/no");
}

Result<Tristate> ParseTristate(const std::string& raw, const std::string& where) {
  if (Lower(Trim(raw)) == "auto") return Tristate::kAuto;
  auto b = ParseBool(raw, where);
  if (!b.ok()) return Bad(where, raw, "true/false/1/0/yes/no or auto");
  return *b ? Tristate::kOn : Tristate::kOff;
}

// 1.5 -> "1.5", 2.0 -> "2": as a user would write it in YAML.
std::string FormatNumber(double d) {
  std::string s = std::to_string(d);
  s.erase(s.find_last_not_of('0') + 1);
  if (s.back() == '.') s.pop_back();
  return s;
}

std::string TristateName(Tristate t) {
  return t == Tristate::kAuto ? "auto" : t == Tristate::kOn ? "true" : "false";
}

// Builders for the common field types. `ref` projects the field out of a Config.
template <typename F>
Setting Int(std::string key, std::string env, std::string flag, F ref, int64_t lo, int64_t hi) {
  return {key, env, flag,
          [=](Config& c, const std::string& v, const std::string& where) -> Status {
            auto n = ParseInt(v, lo, hi, where);
            if (!n.ok()) return n.status();
            ref(c) = static_cast<std::remove_reference_t<decltype(ref(c))>>(*n);
            return Status::OK();
          },
          [=](const Config& c) { return std::to_string(ref(const_cast<Config&>(c))); }};
}

template <typename F>
Setting Dbl(std::string key, std::string env, F ref, double lo, double hi) {
  return {key, env, "",
          [=](Config& c, const std::string& v, const std::string& where) -> Status {
            auto d = ParseDouble(v, lo, hi, where);
            if (!d.ok()) return d.status();
            ref(c) = *d;
            return Status::OK();
          },
          [=](const Config& c) { return FormatNumber(ref(const_cast<Config&>(c))); }};
}

template <typename F>
Setting Bool(std::string key, std::string env, F ref) {
  return {key, env, "",
          [=](Config& c, const std::string& v, const std::string& where) -> Status {
            auto b = ParseBool(v, where);
            if (!b.ok()) return b.status();
            ref(c) = *b;
            return Status::OK();
          },
          [=](const Config& c) { return std::string(ref(const_cast<Config&>(c)) ? "true" : "false"); }};
}

template <typename F>
Setting Str(std::string key, std::string env, std::string flag, F ref) {
  return {key, env, flag,
          [=](Config& c, const std::string& v, const std::string& where) -> Status {
            if (Trim(v).empty()) return Bad(where, v, "a non-empty value");
            ref(c) = Trim(v);
            return Status::OK();
          },
          [=](const Config& c) { return ref(const_cast<Config&>(c)); }};
}

// A string that may be empty (the setting then does nothing).
template <typename F>
Setting OptionalStr(std::string key, std::string env, F ref) {
  return {key, env, "",
          [=](Config& c, const std::string& v, const std::string&) -> Status {
            ref(c) = Trim(v);
            return Status::OK();
          },
          [=](const Config& c) { return ref(const_cast<Config&>(c)); }};
}

template <typename F>
Setting Enum(std::string key, std::string env, std::string flag, F ref,
             std::vector<std::string> allowed, std::map<std::string, std::string> refused = {}) {
  return {key, env, flag,
          [=](Config& c, const std::string& v, const std::string& where) -> Status {
            std::string l = Lower(Trim(v));
            auto r = refused.find(l);
            if (r != refused.end())
              return Status::InvalidArgument(where + ": '" + v + "' is not supported: " + r->second);
            if (std::find(allowed.begin(), allowed.end(), l) == allowed.end()) {
              std::string list;
              for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
              return Bad(where, v, "one of " + list);
            }
            ref(c) = l;
            return Status::OK();
          },
          [=](const Config& c) { return ref(const_cast<Config&>(c)); }};
}

std::string Join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ",") + x;
  return s;
}

const std::vector<Setting>& Settings() {
  static const std::vector<Setting> table = [] {
    std::vector<Setting> t;
    t.push_back(Str("db", "FRAMEMILL_DB", "--db", [](Config& c) -> std::string& { return c.db; }));
    t.push_back(Str("out", "FRAMEMILL_OUT", "--out", [](Config& c) -> std::string& { return c.out; }));
    t.push_back(OptionalStr("path_map", "FRAMEMILL_PATH_MAP",
                            [](Config& c) -> std::string& { return c.path_map; }));
    t.push_back(Str("models", "FRAMEMILL_MODELS", "", [](Config& c) -> std::string& { return c.models; }));
    t.push_back(Int("workers", "FRAMEMILL_WORKERS", "--workers",
                    [](Config& c) -> int& { return c.workers; }, 1, 1024));
    t.push_back(Enum("log_level", "LOG_LEVEL", "", [](Config& c) -> std::string& { return c.log_level; },
                     {"trace", "debug", "info", "warn", "error"}));
    t.push_back(Int("enqueue.priority", "", "--priority",
                    [](Config& c) -> int& { return c.priority; }, -1'000'000, 1'000'000));
    t.push_back(Int("run.batch", "FRAMEMILL_BATCH", "--batch",
                    [](Config& c) -> int& { return c.run.batch; }, 1, 4096));
    t.push_back(Setting{
        "run.stages", "FRAMEMILL_STAGES", "--stages",
        [](Config& c, const std::string& v, const std::string& where) -> Status {
          std::vector<std::string> out;
          std::string cur;
          for (char ch : v + ",") {
            if (ch == ',') {
              if (!Trim(cur).empty()) out.push_back(Lower(Trim(cur)));
              cur.clear();
            } else {
              cur += ch;
            }
          }
          if (out.empty()) return Bad(where, v, "a comma-separated list of stage names, or all");
          c.run.stages = out;
          return Status::OK();
        },
        [](const Config& c) { return Join(c.run.stages); }});
    t.push_back(Int("run.lease_ms", "FRAMEMILL_LEASE_MS", "",
                    [](Config& c) -> int64_t& { return c.run.lease_ms; }, 200, 86'400'000));
    t.push_back(Int("run.poll_ms", "", "", [](Config& c) -> int64_t& { return c.run.poll_ms; }, 10, 60'000));
    t.push_back(Int("run.max_attempts", "FRAMEMILL_MAX_ATTEMPTS", "",
                    [](Config& c) -> int& { return c.run.max_attempts; }, 1, 100));
    t.push_back(Int("run.retry_base_ms", "FRAMEMILL_RETRY_BASE_MS", "",
                    [](Config& c) -> int64_t& { return c.run.retry_base_ms; }, 0, 3'600'000));
    t.push_back(Int("run.retry_max_ms", "", "",
                    [](Config& c) -> int64_t& { return c.run.retry_max_ms; }, 0, 86'400'000));
    t.push_back(Int("run.max_respawns", "", "",
                    [](Config& c) -> int& { return c.run.max_respawns; }, 0, 1'000'000));
    t.push_back(Int("run.horizon_ms", "FRAMEMILL_HORIZON_MS", "",
                    [](Config& c) -> int64_t& { return c.run.horizon_ms; }, 0, 365LL * 86'400'000));
    t.push_back(Int("run.batch_budget_ms", "FRAMEMILL_BATCH_BUDGET_MS", "",
                    [](Config& c) -> int64_t& { return c.run.batch_budget_ms; }, 0, 86'400'000));
    t.push_back(Int("run.job_budget_ms", "FRAMEMILL_JOB_BUDGET_MS", "",
                    [](Config& c) -> int64_t& { return c.run.job_budget_ms; }, 0, 86'400'000));
    t.push_back(Int("run.job_budget_per_mb_ms", "FRAMEMILL_JOB_BUDGET_PER_MB_MS", "",
                    [](Config& c) -> int64_t& { return c.run.job_budget_per_mb_ms; }, 0,
                    3'600'000));
    t.push_back(Int("media.max_image_pixels", "FRAMEMILL_MAX_IMAGE_PIXELS", "",
                    [](Config& c) -> int64_t& { return c.media.max_image_pixels; }, 1,
                    1'000'000'000'000));
    t.push_back(Int("media.max_video_pixels", "FRAMEMILL_MAX_VIDEO_PIXELS", "",
                    [](Config& c) -> int64_t& { return c.media.max_video_pixels; }, 1,
                    int64_t{1} << 40));
    t.push_back(Int("media.max_video_frames", "FRAMEMILL_MAX_VIDEO_FRAMES", "",
                    [](Config& c) -> int64_t& { return c.media.max_video_frames; }, 1,
                    int64_t{1} << 40));
    t.push_back(Int("media.video_sample_frames", "", "",
                    [](Config& c) -> int& { return c.media.video_sample_frames; }, 1, 10'000));
    t.push_back(Int("media.model_frames", "FRAMEMILL_MODEL_FRAMES", "",
                    [](Config& c) -> int& { return c.media.model_frames; }, 1, 1'000));
    t.push_back(Dbl("categorize.min_score", "FRAMEMILL_CATEGORIZE_MIN_SCORE",
                    [](Config& c) -> double& { return c.categorize.min_score; }, 0, 1));
    t.push_back(Enum("faces.embedding_model", "FRAMEMILL_FACES_EMBEDDING_MODEL", "",
                     [](Config& c) -> std::string& { return c.faces.embedding_model; },
                     {"mobilefacenet", "faceres"}));
    t.push_back(Enum("faces.detector", "FRAMEMILL_FACES_DETECTOR", "",
                     [](Config& c) -> std::string& { return c.faces.detector; },
                     {"blazeface-tiled", "blazeface"}));
    t.push_back(Int("faces.min_face_px", "FRAMEMILL_FACES_MIN_FACE_PX", "",
                    [](Config& c) -> int& { return c.faces.min_face_px; }, 4, 100'000));
    t.push_back(Int("faces.max_tiles", "FRAMEMILL_FACES_MAX_TILES", "",
                    [](Config& c) -> int& { return c.faces.max_tiles; }, 0, 10'000));
    t.push_back(Int("faces.max_faces", "FRAMEMILL_FACES_MAX_FACES", "",
                    [](Config& c) -> int& { return c.faces.max_faces; }, 1, 100'000));
    t.push_back(Int("face_clusters.min_cluster_size", "FRAMEMILL_FACE_CLUSTERS_MIN_SIZE", "",
                    [](Config& c) -> int& { return c.face_clusters.min_cluster_size; }, 2, 100'000));
    t.push_back(Dbl("face_clusters.similarity", "FRAMEMILL_FACE_CLUSTERS_SIMILARITY",
                    [](Config& c) -> double& { return c.face_clusters.similarity; }, -1, 1));
    t.push_back(Dbl("face_clusters.member_similarity", "FRAMEMILL_FACE_CLUSTERS_MEMBER_SIMILARITY",
                    [](Config& c) -> double& { return c.face_clusters.member_similarity; }, -1, 1));
    t.push_back(Dbl("face_clusters.split_similarity", "FRAMEMILL_FACE_CLUSTERS_SPLIT_SIMILARITY",
                    [](Config& c) -> double& { return c.face_clusters.split_similarity; }, -1, 1));
    t.push_back(Int("face_clusters.budget_ms", "FRAMEMILL_FACE_CLUSTERS_BUDGET_MS", "",
                    [](Config& c) -> int64_t& { return c.face_clusters.budget_ms; }, 0,
                    7 * int64_t{86'400'000}));
    t.push_back(Enum("pose.model", "FRAMEMILL_POSE_MODEL", "",
                     [](Config& c) -> std::string& { return c.pose.model; },
                     {"movenet-multipose", "movenet-lightning", "blazepose-full"}));
    t.push_back(Dbl("pose.min_person_score", "FRAMEMILL_POSE_MIN_PERSON_SCORE",
                    [](Config& c) -> double& { return c.pose.min_person_score; }, 0, 1));
    t.push_back(Dbl("pose.video_fps", "FRAMEMILL_POSE_VIDEO_FPS",
                    [](Config& c) -> double& { return c.pose.video_fps; }, 0.01, 1000));
    t.push_back(Int("pose.max_video_frames", "FRAMEMILL_POSE_MAX_VIDEO_FRAMES", "",
                    [](Config& c) -> int& { return c.pose.max_video_frames; }, 1, 100000));
    t.push_back(Int("pose.video_width", "FRAMEMILL_POSE_VIDEO_WIDTH", "",
                    [](Config& c) -> int& { return c.pose.video_width; }, 32, 8192));
    t.push_back(Dbl("pose.track_min_affinity", "FRAMEMILL_POSE_TRACK_MIN_AFFINITY",
                    [](Config& c) -> double& { return c.pose.track_min_affinity; }, 0, 1));
    t.push_back(Dbl("pose.track_max_gap_s", "FRAMEMILL_POSE_TRACK_MAX_GAP_S",
                    [](Config& c) -> double& { return c.pose.track_max_gap_s; }, 0, 3600));
    t.push_back(Bool("pose.track_camera", "FRAMEMILL_POSE_TRACK_CAMERA",
                     [](Config& c) -> bool& { return c.pose.track_camera; }));
    t.push_back(Enum("segment.model", "FRAMEMILL_SEGMENT_MODEL", "",
                     [](Config& c) -> std::string& { return c.segment.model; },
                     {"selfie", "isnet"}));
    t.push_back(Enum("inpaint.method", "FRAMEMILL_INPAINT_METHOD", "",
                     [](Config& c) -> std::string& { return c.inpaint.method; },
                     {"auto", "telea", "ns", "exemplar", "fsr_fast", "shiftmap"}));
    t.push_back(Str("inpaint.masks", "FRAMEMILL_INPAINT_MASKS", "",
                    [](Config& c) -> std::string& { return c.inpaint.masks; }));
    t.push_back(Dbl("inpaint.margin", "FRAMEMILL_INPAINT_MARGIN",
                    [](Config& c) -> double& { return c.inpaint.margin; }, 0, 0.5));
    t.push_back(Dbl("inpaint.max_coverage", "FRAMEMILL_INPAINT_MAX_COVERAGE",
                    [](Config& c) -> double& { return c.inpaint.max_coverage; }, 0.01, 0.999));
    t.push_back(Str("inpaint.model", "FRAMEMILL_INPAINT_MODEL", "",
                    [](Config& c) -> std::string& { return c.inpaint.model; }));
    t.push_back(Int("inpaint.model_size", "FRAMEMILL_INPAINT_MODEL_SIZE", "",
                    [](Config& c) -> int& { return c.inpaint.model_size; }, 16, 4096));
    t.push_back(Int("motion.analysis_width", "FRAMEMILL_MOTION_ANALYSIS_WIDTH", "",
                    [](Config& c) -> int& { return c.motion.analysis_width; }, 32, 8192));
    t.push_back(Dbl("motion.max_fps", "FRAMEMILL_MOTION_MAX_FPS",
                    [](Config& c) -> double& { return c.motion.max_fps; }, 0, 1000));
    t.push_back(Enum("motion.flow_preset", "FRAMEMILL_MOTION_FLOW_PRESET", "",
                     [](Config& c) -> std::string& { return c.motion.flow_preset; },
                     {"ultrafast", "fast", "medium"}));
    t.push_back(Dbl("motion.moving_px", "FRAMEMILL_MOTION_MOVING_PX",
                    [](Config& c) -> double& { return c.motion.moving_px; }, 0, 1000));
    t.push_back(Dbl("motion.cut_histogram", "FRAMEMILL_MOTION_CUT_HISTOGRAM",
                    [](Config& c) -> double& { return c.motion.cut_histogram; }, 0, 1));
    t.push_back(Dbl("motion.cut_residual", "FRAMEMILL_MOTION_CUT_RESIDUAL",
                    [](Config& c) -> double& { return c.motion.cut_residual; }, 0, 10));
    t.push_back(Dbl("audio_sync.max_seconds", "FRAMEMILL_AUDIO_SYNC_MAX_SECONDS",
                    [](Config& c) -> double& { return c.audio_sync.max_seconds; }, 1, 86400));
    t.push_back(Int("audio_sync.analysis_width", "FRAMEMILL_AUDIO_SYNC_ANALYSIS_WIDTH", "",
                    [](Config& c) -> int& { return c.audio_sync.analysis_width; }, 64, 8192));
    t.push_back(Int("audio_sync.detect_every", "FRAMEMILL_AUDIO_SYNC_DETECT_EVERY", "",
                    [](Config& c) -> int& { return c.audio_sync.detect_every; }, 1, 1000));
    t.push_back(Dbl("audio_sync.max_offset_s", "FRAMEMILL_AUDIO_SYNC_MAX_OFFSET_S",
                    [](Config& c) -> double& { return c.audio_sync.max_offset_s; }, 0.05, 10));
    t.push_back(Dbl("audio_sync.min_confidence", "FRAMEMILL_AUDIO_SYNC_MIN_CONFIDENCE",
                    [](Config& c) -> double& { return c.audio_sync.min_confidence; }, 0, 1));
    t.push_back(Dbl("audio_sync.min_shot_s", "FRAMEMILL_AUDIO_SYNC_MIN_SHOT_S",
                    [](Config& c) -> double& { return c.audio_sync.min_shot_s; }, 0.5, 86400));
    t.push_back(Enum("audio_sync.mouth", "FRAMEMILL_AUDIO_SYNC_MOUTH", "",
                     [](Config& c) -> std::string& { return c.audio_sync.mouth; },
                     {"facemesh", "none"}));
    t.push_back(Int("fetch.concurrency", "FRAMEMILL_FETCH_CONCURRENCY", "",
                    [](Config& c) -> int& { return c.fetch.concurrency; }, 1, 4096));
    t.push_back(Int("fetch.per_host", "FRAMEMILL_FETCH_PER_HOST", "",
                    [](Config& c) -> int& { return c.fetch.per_host; }, 1, 4096));
    t.push_back(Int("fetch.connect_timeout_ms", "FRAMEMILL_FETCH_CONNECT_TIMEOUT_MS", "",
                    [](Config& c) -> int64_t& { return c.fetch.connect_timeout_ms; }, 1,
                    3'600'000));
    t.push_back(Int("fetch.timeout_ms", "FRAMEMILL_FETCH_TIMEOUT_MS", "",
                    [](Config& c) -> int64_t& { return c.fetch.timeout_ms; }, 1, 86'400'000));
    t.push_back(Int("fetch.max_bytes", "FRAMEMILL_FETCH_MAX_BYTES", "",
                    [](Config& c) -> int64_t& { return c.fetch.max_bytes; }, 1,
                    1'000'000'000'000));
    t.push_back(Int("fetch.max_redirects", "FRAMEMILL_FETCH_MAX_REDIRECTS", "",
                    [](Config& c) -> int& { return c.fetch.max_redirects; }, 0, 100));
    t.push_back(Str("fetch.user_agent", "FRAMEMILL_FETCH_USER_AGENT", "",
                    [](Config& c) -> std::string& { return c.fetch.user_agent; }));
    t.push_back(Int("fetch.batch", "FRAMEMILL_FETCH_BATCH", "",
                    [](Config& c) -> int& { return c.fetch.batch; }, 1, 4096));
    t.push_back(Int("fetch.max_retry_after_ms", "FRAMEMILL_FETCH_MAX_RETRY_AFTER_MS", "",
                    [](Config& c) -> int64_t& { return c.fetch.max_retry_after_ms; }, 0,
                    30LL * 86'400'000));
    t.push_back(Bool("fetch.block_private", "FRAMEMILL_FETCH_BLOCK_PRIVATE",
                     [](Config& c) -> bool& { return c.fetch.block_private; }));
    t.push_back(Setting{"gpu.all", "ALL_GPU", "",
                        [](Config& c, const std::string& v, const std::string& where) -> Status {
                          auto t = ParseTristate(v, where);
                          if (!t.ok()) return t.status();
                          c.gpu.all = *t;
                          return Status::OK();
                        },
                        [](const Config& c) { return TristateName(c.gpu.all); }});
    for (const std::string& op : DeviceOperations()) {
      t.push_back(Setting{"gpu.ops." + Lower(op), op + "_GPU", "",
                          [op](Config& c, const std::string& v, const std::string& where) -> Status {
                            auto t = ParseTristate(v, where);
                            if (!t.ok()) return t.status();
                            c.gpu.ops[op] = *t;
                            return Status::OK();
                          },
                          [op](const Config& c) {
                            auto it = c.gpu.ops.find(op);
                            return TristateName(it == c.gpu.ops.end() ? Tristate::kAuto : it->second);
                          }});
    }
    t.push_back(Enum("gpu.backend", "GPU_BACKEND", "",
                     [](Config& c) -> std::string& { return c.gpu.backend; },
                     {"auto", "cuda", "cpu", "sim"},
                     {{"rocm", "only CUDA is supported (use auto, cuda, cpu or sim)"},
                      {"mps", "only CUDA is supported (use auto, cuda, cpu or sim)"}}));
    t.push_back(Int("gpu.device_id", "GPU_DEVICE_ID", "",
                    [](Config& c) -> int& { return c.gpu.device_id; }, 0, 1023));
    t.push_back(Dbl("gpu.memory_limit_gb", "GPU_MEMORY_LIMIT_GB",
                    [](Config& c) -> double& { return c.gpu.memory_limit_gb; }, 0, 1e6));
    t.push_back(Int("gpu.batch_size", "GPU_BATCH_SIZE", "",
                    [](Config& c) -> int& { return c.gpu.batch_size; }, 0, 65536));
    t.push_back(Int("gpu.sim_vram_mb", "FRAMEMILL_SIM_VRAM_MB", "",
                    [](Config& c) -> int& { return c.gpu.sim_vram_mb; }, 1, 10'000'000));
    t.push_back(Dbl("gpu.sim_cost", "FRAMEMILL_SIM_COST",
                    [](Config& c) -> double& { return c.gpu.sim_cost; }, 0.001, 1e6));
    return t;
  }();
  return table;
}

// Flattens a YAML mapping into dotted keys. Sequences become comma-joined lists.
Status Flatten(const YAML::Node& node, const std::string& prefix,
               std::map<std::string, std::string>* out, const std::string& file) {
  for (auto it = node.begin(); it != node.end(); ++it) {
    std::string key = prefix.empty() ? it->first.as<std::string>()
                                     : prefix + "." + it->first.as<std::string>();
    const YAML::Node& v = it->second;
    if (v.IsMap()) {
      FM_RETURN_IF_ERROR(Flatten(v, key, out, file));
    } else if (v.IsSequence()) {
      std::string joined;
      for (const auto& e : v) joined += (joined.empty() ? "" : ",") + e.as<std::string>();
      (*out)[key] = joined;
    } else if (v.IsNull()) {
      continue;  // "key:" with no value keeps the default
    } else {
      (*out)[key] = v.as<std::string>();
    }
  }
  return Status::OK();
}

}  // namespace



std::vector<std::string> SettingKeys() {
  std::vector<std::string> keys;
  for (const Setting& s : Settings()) keys.push_back(s.key);
  return keys;
}

std::map<std::string, std::string> ProcessEnvironment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string kv(*e);
    size_t eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return env;
}

// Models are large and the same for every dataset: fetched once per user, as the XDG base
// directory convention places caches.
std::string DefaultModelsDir(const std::map<std::string, std::string>& env) {
  auto xdg = env.find("XDG_CACHE_HOME");
  if (xdg != env.end() && !xdg->second.empty() && xdg->second[0] == '/')
    return xdg->second + "/framemill/models";
  auto home = env.find("HOME");
  if (home != env.end() && !home->second.empty()) return home->second + "/.cache/framemill/models";
  return "./framemill-models";
}

Result<Config> LoadConfig(const ConfigInputs& in) {
  Config c;
  c.workers = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  c.models = DefaultModelsDir(in.env);
  std::map<std::string, std::string> source;  // key -> where the value came from

  // The file: --config beats FRAMEMILL_CONFIG.
  std::string file = in.config_file_flag;
  std::string file_from = "flag --config";
  if (file.empty()) {
    auto it = in.env.find("FRAMEMILL_CONFIG");
    if (it != in.env.end() && !it->second.empty()) {
      file = it->second;
      file_from = "env FRAMEMILL_CONFIG";
    }
  }
  std::map<std::string, std::string> yaml;
  if (!file.empty()) {
    c.config_file = file;
    try {
      YAML::Node root = YAML::LoadFile(file);
      if (root.IsMap()) {
        FM_RETURN_IF_ERROR(Flatten(root, "", &yaml, file));
      } else if (!root.IsNull()) {
        return Status::InvalidArgument(file + " (" + file_from + "): the top level must be a mapping of settings");
      }
    } catch (const YAML::BadFile&) {
      return Status::InvalidArgument(file + " (" + file_from + "): cannot read the config file");
    } catch (const YAML::Exception& e) {
      return Status::InvalidArgument(file + " (" + file_from + "): invalid YAML: " + e.what());
    }
    for (const auto& [key, value] : yaml) {
      bool known = false;
      for (const Setting& s : Settings()) known |= s.key == key;
      if (!known)
        return Status::InvalidArgument(file + ": unknown key '" + key +
                                       "' (see configs/default.yaml for every setting)");
    }
  }

  for (const Setting& s : Settings()) {
    std::string from = "default";
    if (auto y = yaml.find(s.key); y != yaml.end()) {
      FM_RETURN_IF_ERROR(s.set(c, y->second, "key " + s.key + " in " + file));
      from = "config " + file;
    }
    if (!s.env.empty()) {
      if (auto e = in.env.find(s.env); e != in.env.end()) {
        FM_RETURN_IF_ERROR(s.set(c, e->second, "environment variable " + s.env));
        from = "env " + s.env;
      }
    }
    if (auto f = in.flags.find(s.key); f != in.flags.end()) {
      FM_RETURN_IF_ERROR(s.set(c, f->second, "flag " + (s.flag.empty() ? s.key : s.flag)));
      from = "flag " + s.flag;
    }
    c.provenance.push_back({s.key, s.get(c), from, s.env, s.flag});
  }
  if (c.run.retry_max_ms < c.run.retry_base_ms)
    return Status::InvalidArgument("run.retry_max_ms must be at least run.retry_base_ms");
  auto paths = PathMap::Parse(c.path_map);
  if (!paths.ok())
    return Status::InvalidArgument("path_map (FRAMEMILL_PATH_MAP): " + paths.status().message());
  c.paths = std::move(paths).value();
  return c;
}

}  // namespace framemill
