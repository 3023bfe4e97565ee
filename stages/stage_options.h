// The stages' settings, one struct per stage, and StageOptions holding them all. Each
// default is written once, here or in the struct of the algorithm a stage runs (nested,
// not mirrored: motion's options hold the motion analysis's); AddStageRows binds each to
// its setting (stages/stage_rows.cc), which the CLI resolves. A header of its own, so that
// code that configures stages need not include the stages. Plain values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "base/option_rows.h"
#include "fetch/fetcher.h"
#include "media/image.h"
#include "media/clip_writer.h"
#include "media/video.h"
#include "models/face_tiles.h"
#include "analysis/av_sync.h"
#include "analysis/clip_plan.h"
#include "analysis/motion_analysis.h"
#include "analysis/pose_tracks.h"
#include "analysis/same_picture.h"
#include "cluster/identity_options.h"
#include "cluster/near_duplicates.h"

namespace framemill {

// The lighting stage.
struct LightingOptions {
  ImageLimits limits;
  VideoLimits video_limits;
  int video_frames = 8;  // frames sampled from each video (media.video_sample_frames)
  // lighting.decode_min_side: a JPEG is decoded at libjpeg's 1/2, 1/4 or 1/8 scale as far
  // as its longest side keeps this many pixels; 0 decodes every pixel. At 256 a photo costs
  // 2.8x less than a full decode, and every statistic stays within the tolerance measured
  // in bench/README ("Lighting at the decode floor"): exposure 0.06 stops, colour
  // temperature 81 K, percentiles 0.025 luminance (95th percentile of photos).
  int decode_min_side = 256;

  bool operator==(const LightingOptions&) const = default;
};

// The media.* settings every neural stage shares.
struct ModelStageOptions {
  ImageLimits limits;
  VideoLimits video_limits;
  int video_frames = 4;  // frames sampled from each video (media.model_frames)
  // A stage that follows things over time (pose tracks) reads its videos in order
  // instead: frames at up to video_fps (fewer when video_frames would be passed), scaled
  // down to video_width. 0: sample video_frames evenly at full size.
  double video_fps = 0;
  int video_width = 0;

  bool operator==(const ModelStageOptions&) const = default;
};

struct CategorizeOptions {  // the categorize stage
  // categorize.detector: the object detector, yolov8s (Ultralytics' COCO export, AGPL-3.0), or
  // yolov8n, yolov8m (AGPL-3.0 / GPL-3.0), or centernet (human-models, MIT). yolov8s is the one
  // that shows at least 6 labelled objects in 10 with 9 shown labels in 10 right on ordinary
  // photos within 1.5x the CPU pipeline's time (bench/README.md, "Objects: choosing the
  // detector").
  std::string detector = "yolov8s";
  // categorize.min_score: objects at or above are shown (`categories`, the report). Empty
  // (auto): the detector's own, measured on labelled photos (ModelSpec::min_score;
  // ShownScore in stages/categorize_stage.h).
  std::optional<double> min_score;
  // categorize.floor: objects from here up to the shown score stay in `objects`, marked
  // `"below_threshold": true`, for those who want them; lower ones are dropped.
  double floor = 0.1;

  bool operator==(const CategorizeOptions&) const = default;
};

struct FacesOptions {  // the faces stage
  std::string embedding_model = "faceres";  // faceres | mobilefacenet (faces.embedding_model)
  std::string detector = "blazeface-tiled";  // or blazeface: the whole frame only (faces.detector)
  models::TileOptions tiles;                       // blazeface-tiled: faces.min_face_px, faces.max_tiles
  int max_faces = 100;                       // faces.max_faces
  // A proposed face is kept when the verifier's (facemesh's) face presence on its crop is at
  // least this (faces.min_presence; FacesStage says what was measured); 0 keeps them all.
  double min_presence = 0.5;

  bool operator==(const FacesOptions&) const = default;
};

struct DedupOptions {  // the dedup stage (dataset-level, after categorize)
  cluster::NearDuplicateOptions grouping;  // dedup.phash_distance, dedup.candidate_similarity
  SamePictureOptions confirm;              // dedup.min_inliers
  int video_frames = 4;                    // as categorize samples them (media.model_frames)
  VideoLimits video_limits;

  bool operator==(const DedupOptions&) const = default;
};

// The face_clusters stage (dataset-level): the identities' settings (their defaults in
// cluster/identity_options.h), and the one job's time budget.
struct FaceClustersOptions : cluster::IdentityOptions {
  int64_t budget_ms = 3'600'000;    // the one dataset-level job's time budget (face_clusters.budget_ms)

  bool operator==(const FaceClustersOptions&) const = default;
};

struct MotionOptions {  // the motion stage
  VideoLimits video_limits;
  int analysis_width = 320;      // frames are analysed this wide, or narrower (motion.analysis_width)
  double max_fps = 30;           // analysed frames per second of video at most (motion.max_fps)
  // DIS preset (motion.flow_preset), moving_px, cut_histogram, cut_residual (motion.*)
  MotionAnalysisOptions analysis;

  bool operator==(const MotionOptions&) const = default;
};

struct PoseOptions {  // the pose stage
  // movenet-multipose (up to 6 people, tracked over videos) | movenet-lightning |
  // blazepose-full (pose.model)
  std::string model = "movenet-multipose";
  double min_person_score = 0.15;  // multipose: weaker people are dropped (pose.min_person_score)
  double video_fps = 5;            // multipose: frames analysed per second of video (pose.video_fps)
  int max_video_frames = 300;      //   and at most this many per video, spread over it (pose.max_video_frames)
  int video_width = 640;           //   each scaled down to this width (pose.video_width)
  // Tracks: min_affinity, max_gap_s, use_camera (pose.track_min_affinity, pose.track_max_gap_s,
  // pose.track_camera: the camera's motion taken out)
  PoseTrackOptions tracks;

  bool operator==(const PoseOptions&) const = default;
};

struct SegmentOptions {  // the segment stage
  std::string model = "selfie";  // selfie | isnet (segment.model)

  bool operator==(const SegmentOptions&) const = default;
};

struct InpaintOptions {  // the inpaint stage
  ImageLimits limits;
  std::string method = "auto";    // auto, or a method by name (analysis/inpaint_fill.h) (inpaint.method)
  std::string masks = "segment";  // segment | a folder of masks by file stem | one mask file (inpaint.masks)
  double margin = 0.01;           // segment masks grow by this fraction of the diagonal (inpaint.margin)
  double max_coverage = 0.9;      // larger holes are skipped (inpaint.max_coverage)
  std::string model;              // "": none; else a user's ONNX network (inpaint.model)
  int model_size = 512;           // its square input side (inpaint.model_size)

  bool operator==(const InpaintOptions&) const = default;
};

struct ClipsOptions {  // the clips stage
  VideoLimits video_limits;
  ClipPlanOptions plan;    // clips.min_s, clips.max_s
  ClipEncoding encoding;   // clips.mode, clips.preset, clips.crf, clips.audio_kbps

  bool operator==(const ClipsOptions&) const = default;
};

struct AudioSyncOptions {  // the audio_sync stage
  VideoLimits video_limits;
  double max_seconds = 120;      // only the first this many seconds are analysed (audio_sync.max_seconds)
  int analysis_width = 640;      // frames are scaled down to this width for faces (audio_sync.analysis_width)
  int detect_every = 3;          // faces are detected every Nth frame and held between (audio_sync.detect_every)
  SyncOptions sync;              // offsets searched: +-sync.max_lag_s (audio_sync.max_offset_s)
  double min_confidence = 0.25;  // below: low_confidence, with the reason (audio_sync.min_confidence)
  double min_shot_s = 3.0;       // shots at least this long get their own estimate (audio_sync.min_shot_s)
  std::string vad_model = "silero-vad";
  std::string face_model = "blazeface";
  std::string mesh_model = "facemesh";  // "": no mouth signal, the lower face's motion only
                                        // (audio_sync.mouth: facemesh | none)

  bool operator==(const AudioSyncOptions&) const = default;
};

// Every stage's settings, bound to the configuration by AddStageRows.
struct StageOptions {
  std::string out_dir = "./framemill-out";        // artifacts (`out`)
  std::string models_dir;  // installed models (`models`; configs/ gives the default)
  std::string cpu_precision = "auto";  // models on the CPU: auto | bf16 | fp32 (`cpu_precision`)
  fetch::FetchOptions fetch;  // its out_dir is out_dir
  LightingOptions lighting;
  ModelStageOptions model_frames;
  CategorizeOptions categorize;
  FacesOptions faces;
  FaceClustersOptions face_clusters;
  DedupOptions dedup;
  PoseOptions pose;
  SegmentOptions segment;
  InpaintOptions inpaint;
  MotionOptions motion;
  ClipsOptions clips;
  AudioSyncOptions audio_sync;

  bool operator==(const StageOptions&) const = default;
};

// The rows of every stage setting (media.*, categorize.*, faces.*, ...; stages/stage_rows.cc),
// bound to `o`'s fields, in the order `framemill config` lists them; `out` and `models`
// are the CLI's (they are also the fetcher's and the model cache's).
void AddStageRows(StageOptions* o, OptionRows* rows);

}  // namespace framemill
