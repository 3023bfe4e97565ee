#include "cli/options.h"

#include "stages/face_clusters_stage.h"
#include "stages/fetch_stage.h"

namespace framemill {
namespace {

gpu::DeviceChoice ToChoice(Tristate t) {
  switch (t) {
    case Tristate::kOn: return gpu::DeviceChoice::kGpu;
    case Tristate::kOff: return gpu::DeviceChoice::kCpu;
    case Tristate::kAuto: break;
  }
  return gpu::DeviceChoice::kAuto;
}

}  // namespace

StageOptions ToStageOptions(const Config& c) {
  StageOptions o;
  o.out_dir = c.out;
  o.models_dir = c.models;
  o.fetch.concurrency = c.fetch.concurrency;
  o.fetch.per_host = c.fetch.per_host;
  o.fetch.connect_timeout_ms = c.fetch.connect_timeout_ms;
  o.fetch.total_timeout_ms = c.fetch.timeout_ms;
  o.fetch.max_bytes = c.fetch.max_bytes;
  o.fetch.max_redirects = c.fetch.max_redirects;
  o.fetch.user_agent = c.fetch.user_agent;
  o.fetch.max_retry_after_ms = c.fetch.max_retry_after_ms;
  o.fetch.block_private = c.fetch.block_private;
  o.lighting.limits.max_pixels = c.media.max_image_pixels;
  o.lighting.video_frames = c.media.video_sample_frames;
  o.model_frames.limits.max_pixels = c.media.max_image_pixels;
  o.model_frames.video_frames = c.media.model_frames;
  o.lighting.video_limits.max_pixels = o.model_frames.video_limits.max_pixels = c.media.max_video_pixels;
  o.lighting.video_limits.max_frames = o.model_frames.video_limits.max_frames = c.media.max_video_frames;
  o.categorize.min_score = c.categorize.min_score;
  o.faces.embedding_model = c.faces.embedding_model;
  o.faces.detector = c.faces.detector;
  o.faces.min_face_px = c.faces.min_face_px;
  o.faces.max_tiles = c.faces.max_tiles;
  o.faces.max_faces = c.faces.max_faces;
  o.face_clusters.min_cluster_size = c.face_clusters.min_cluster_size;
  o.face_clusters.similarity = c.face_clusters.similarity;
  o.face_clusters.member_similarity = c.face_clusters.member_similarity;
  o.face_clusters.split_similarity = c.face_clusters.split_similarity;
  o.pose.model = c.pose.model;
  o.pose.min_person_score = c.pose.min_person_score;
  o.pose.video_fps = c.pose.video_fps;
  o.pose.max_video_frames = c.pose.max_video_frames;
  o.pose.video_width = c.pose.video_width;
  o.pose.track_min_affinity = c.pose.track_min_affinity;
  o.pose.track_max_gap_s = c.pose.track_max_gap_s;
  o.pose.track_camera = c.pose.track_camera;
  o.segment.model = c.segment.model;
  o.inpaint.limits = o.model_frames.limits;
  o.inpaint.method = c.inpaint.method;
  o.inpaint.masks = c.inpaint.masks;
  o.inpaint.margin = c.inpaint.margin;
  o.inpaint.max_coverage = c.inpaint.max_coverage;
  o.inpaint.model = c.inpaint.model == "none" ? "" : c.inpaint.model;
  o.inpaint.model_size = c.inpaint.model_size;
  o.motion.video_limits = o.model_frames.video_limits;
  o.audio_sync.video_limits = o.model_frames.video_limits;
  o.audio_sync.max_seconds = c.audio_sync.max_seconds;
  o.audio_sync.analysis_width = c.audio_sync.analysis_width;
  o.audio_sync.detect_every = c.audio_sync.detect_every;
  o.audio_sync.max_offset_s = c.audio_sync.max_offset_s;
  o.audio_sync.min_confidence = c.audio_sync.min_confidence;
  o.audio_sync.min_shot_s = c.audio_sync.min_shot_s;
  o.audio_sync.mesh_model = c.audio_sync.mouth == "none" ? "" : c.audio_sync.mouth;
  o.motion.analysis_width = c.motion.analysis_width;
  o.motion.max_fps = c.motion.max_fps;
  o.motion.preset = c.motion.flow_preset;
  o.motion.moving_px = c.motion.moving_px;
  o.motion.cut_histogram = c.motion.cut_histogram;
  o.motion.cut_residual = c.motion.cut_residual;
  return o;
}

gpu::GpuOptions ToGpuOptions(const Config& c) {
  gpu::GpuOptions o;
  o.all = ToChoice(c.gpu.all);
  for (const auto& [op, t] : c.gpu.ops) o.ops[op] = ToChoice(t);
  o.backend = c.gpu.backend;
  o.device_id = c.gpu.device_id;
  o.memory_limit_gb = c.gpu.memory_limit_gb;
  o.batch_size = c.gpu.batch_size;
  o.sim_vram_mb = c.gpu.sim_vram_mb;
  o.sim_cost = c.gpu.sim_cost;
  return o;
}

RunOptions ToRunOptions(const Config& c, const std::vector<std::string>& stages, bool forever) {
  RunOptions o;
  o.db = c.db;
  o.workers = c.workers;
  o.max_respawns = c.run.max_respawns;
  o.gpu = ToGpuOptions(c);
  WorkerOptions& w = o.worker;
  w.stages = stages;
  w.batch = c.run.batch;
  // The fetch stage's transfers overlap only within one batch: it has a batch of its own.
  w.batch_by_stage[FetchStage::kName] = c.fetch.batch;
  w.lease_ms = c.run.lease_ms;
  w.poll_ms = c.run.poll_ms;
  w.retry.base_delay_ms = c.run.retry_base_ms;
  w.retry.max_delay_ms = c.run.retry_max_ms;
  w.forever = forever;
  w.path_map = c.paths;
  w.horizon_ms = c.run.horizon_ms;
  w.budget.batch_ms = c.run.batch_budget_ms;
  w.budget.job_ms = c.run.job_budget_ms;
  w.budget.per_mb_ms = c.run.job_budget_per_mb_ms;
  // Transfers of one batch overlap, each bounded by the fetch timeout.
  w.budget.extra_by_stage[FetchStage::kName] = c.fetch.timeout_ms;
  w.budget.extra_by_stage[FaceClustersStage::kName] = c.face_clusters.budget_ms;
  return o;
}

EnqueueOptions ToEnqueueOptions(const Config& c, const std::vector<std::string>& stages) {
  EnqueueOptions o;
  o.stages = stages;
  o.priority = c.priority;
  o.max_attempts = c.run.max_attempts;
  o.path_map = c.paths;
  return o;
}

}  // namespace framemill
