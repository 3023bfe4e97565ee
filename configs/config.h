// framemill's effective configuration, resolved once at start-up from built-in
// defaults < YAML file < environment < command-line flags. Nothing outside configs/
// reads the environment or YAML. Config is a plain value: copy freely; thread-safe to read.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/path_map.h"
#include "base/status.h"

namespace framemill {

enum class Tristate { kAuto, kOn, kOff };

struct RunConfig {
  int batch = 16;
  std::vector<std::string> stages = {"all"};
  int64_t lease_ms = 30'000;
  int64_t poll_ms = 500;
  int max_attempts = 3;
  int64_t retry_base_ms = 2'000;
  int64_t retry_max_ms = 300'000;
  int max_respawns = 100;  // crashed worker processes replaced per run before giving up
  int64_t horizon_ms = 600'000;  // without --forever, retries due later are left for a later run
  int64_t batch_budget_ms = 60'000;  // a stage batch's time budget: this, plus per job
  int64_t job_budget_ms = 60'000;    // this, plus per MB of the job's file
  int64_t job_budget_per_mb_ms = 2'000;
};

struct MediaConfig {
  int64_t max_image_pixels = 100'000'000;  // refuse larger images before decoding
  int video_sample_frames = 8;
  int model_frames = 4;  // frames sampled from each video by the neural stages
  int64_t max_video_pixels = 8192LL * 4320;  // per frame; larger videos are refused
  int64_t max_video_frames = 1'000'000;      // frames of a video the stages consider
};

// The neural stages (stages/*_stage.h); models are named as in `framemill models list`.
struct CategorizeConfig {
  double min_score = 0.2;  // detections below are dropped (human's object.minConfidence)
};
struct FacesConfig {
  std::string embedding_model = "faceres";  // faceres | mobilefacenet
  std::string detector = "blazeface-tiled";  // blazeface-tiled | blazeface (whole frame only)
  int min_face_px = 32;                      // blazeface-tiled: smallest face looked for
  int max_tiles = 48;                        // blazeface-tiled: per frame
  int max_faces = 100;                       // per frame (image or video frame)
};
struct FaceClustersConfig {
  int min_cluster_size = 3;        // faces (video tracks) an identity needs
  double similarity = 0.6;         // cosine below which two faces are never linked
  double member_similarity = 0.7;  // a member less similar to its cluster's mean is noise
  double split_similarity = 0.7;   // a cluster whose parts link this closely stays whole
  int64_t budget_ms = 3'600'000;   // the one dataset-level job's time budget
};
struct MotionConfig {  // stages/motion_stage.h
  int analysis_width = 320;     // flow is computed on frames this wide (or narrower)
  double max_fps = 30;          // analysed frames per second of video at most
  std::string flow_preset = "fast";  // DIS: ultrafast | fast | medium
  double moving_px = 1.0;       // residual speed, source px per frame, that counts as moving
  double cut_histogram = 0.15;  // a cut needs this histogram change...
  double cut_residual = 0.45;   // ...and this flow-compensated residual
};
struct AudioSyncConfig {  // stages/audio_sync_stage.h
  double max_seconds = 120;     // only the first this many seconds of a video are analysed
  int analysis_width = 640;     // frames are scaled to this width for faces and mouths
  int detect_every = 3;         // faces are detected every Nth frame and held between
  double max_offset_s = 1.0;    // offsets searched: +-this
  double min_confidence = 0.25;  // below: low_confidence, with the reason
  double min_shot_s = 3.0;      // shots at least this long get their own estimate
  std::string mouth = "facemesh";  // facemesh | none (the lower face's motion only)
};
struct PoseConfig {  // stages/pose_stage.h
  std::string model = "movenet-multipose";  // movenet-multipose | movenet-lightning | blazepose-full
  double min_person_score = 0.15;  // multipose: weaker people are dropped
  double video_fps = 5;            // multipose on videos: frames analysed per second...
  int max_video_frames = 300;      // ...and at most this many per video (a longer one is thinned)
  int video_width = 640;           // ...scaled down to this width
  double track_min_affinity = 0.3;  // tracks: 0.5 IoU + 0.5 OKS below this never links
  double track_max_gap_s = 1.0;     // tracks: unseen longer, a track ends
  bool track_camera = true;         // tracks: the camera's motion taken out
};
struct SegmentConfig {
  std::string model = "selfie";  // selfie | isnet
};
struct InpaintConfig {  // stages/inpaint_stage.h
  std::string method = "auto";    // auto (by hole size, as measured) | telea | ns | exemplar | fsr_fast | shiftmap
  std::string masks = "segment";  // segment (its mask) | a folder of masks by file stem | one mask file
  double margin = 0.01;           // segment masks grow by this fraction of the image's diagonal
  double max_coverage = 0.9;      // a larger hole is skipped (too little left to fill from)
  std::string model = "none";     // none | a user's ONNX inpainting network (image, mask -> image)
  int model_size = 512;           // the network's square input side
};

// The crawler's downloads (stages/fetch_stage.h, fetch/fetcher.h).
struct FetchConfig {
  int concurrency = 64;               // transfers in flight per worker process
  int per_host = 16;                  // of those, to one host
  int64_t connect_timeout_ms = 5'000;
  int64_t timeout_ms = 30'000;        // whole transfer
  int64_t max_bytes = 64LL << 20;     // enforced while streaming
  int max_redirects = 5;
  std::string user_agent = "framemill/0.1";
  int batch = 64;  // fetch jobs a worker claims and downloads at once (run.batch for other stages)
  int64_t max_retry_after_ms = 300'000;  // a server asking to wait longer fails the job
  bool block_private = true;  // refuse loopback, private, link-local and metadata addresses
};

struct GpuConfig {
  Tristate all = Tristate::kAuto;
  std::map<std::string, Tristate> ops;  // operation name (LIGHTING, POSE...) -> choice
  std::string backend = "auto";         // auto | cuda | cpu | sim
  int device_id = 0;
  double memory_limit_gb = 0;           // 0: no limit beyond the device's
  int batch_size = 0;                   // 0: tune to free VRAM
  int sim_vram_mb = 8192;
  double sim_cost = 1.0;                // multiplies each item's bytes on the sim device
};

struct Config {
  std::string db = "./framemill.db";
  // Where the shared store's canonical paths are on this machine (FRAMEMILL_PATH_MAP):
  // "canonical=local[;canonical=local]", parsed (into `paths`) when the configuration is read.
  std::string path_map;
  PathMap paths;
  std::string out = "./framemill-out";
  // Default: $XDG_CACHE_HOME/framemill/models, else ~/.cache/framemill/models.
  std::string models;
  std::string config_file;  // empty: none
  int workers = 1;          // default: number of cores, filled at load
  std::string log_level = "info";
  int priority = 0;
  RunConfig run;
  MediaConfig media;
  CategorizeConfig categorize;
  FacesConfig faces;
  FaceClustersConfig face_clusters;
  PoseConfig pose;
  AudioSyncConfig audio_sync;
  SegmentConfig segment;
  InpaintConfig inpaint;
  MotionConfig motion;
  FetchConfig fetch;
  GpuConfig gpu;

  // Where each effective value came from, in settings-table order.
  struct Provenance {
    std::string key, value, source, env, flag;
  };
  std::vector<Provenance> provenance;
};

struct ConfigInputs {
  std::map<std::string, std::string> env;    // variable -> value (the process's environment)
  std::map<std::string, std::string> flags;  // setting key -> value, only flags the user gave
  std::string config_file_flag;              // --config, overrides FRAMEMILL_CONFIG
};

// Resolves the configuration. Errors are InvalidArgument and name the offending
// variable, key (with the file) or flag, and what is accepted.
Result<Config> LoadConfig(const ConfigInputs& inputs);

// The process's environment as a map: the only place framemill reads it.
std::map<std::string, std::string> ProcessEnvironment();

// Every setting's key, in table order (tests check configs/default.yaml against it).
std::vector<std::string> SettingKeys();

}  // namespace framemill
