// The stage settings' rows: each YAML key and environment variable bound to the field of
// the stage options that it sets (stages/stage_options.h). Defaults live in the structs.
#include <opencv2/video/tracking.hpp>

#include "analysis/inpaint_fill.h"
#include "stages/stage_options.h"

namespace framemill {
namespace {

// One field of the video limits of every stage that reads videos.
std::vector<int64_t*> EveryVideoLimit(StageOptions* o, int64_t VideoLimits::*field) {
  std::vector<int64_t*> out;
  for (VideoLimits* v : {&o->lighting.video_limits, &o->model_frames.video_limits,
                         &o->dedup.video_limits, &o->motion.video_limits,
                         &o->clips.video_limits, &o->audio_sync.video_limits})
    out.push_back(&(v->*field));
  return out;
}

// media.*: limits every stage that decodes images or videos shares, and frame sampling.
void AddMediaRows(StageOptions* o, OptionRows* rows) {
  rows->push_back(IntRow("media.max_image_pixels", "FRAMEMILL_MAX_IMAGE_PIXELS", "",
                         {&o->lighting.limits.max_pixels, &o->model_frames.limits.max_pixels,
                          &o->inpaint.limits.max_pixels},
                         1, 1'000'000'000'000));
  rows->push_back(IntRow("media.max_video_pixels", "FRAMEMILL_MAX_VIDEO_PIXELS", "",
                         EveryVideoLimit(o, &VideoLimits::max_pixels), 1, int64_t{1} << 40));
  rows->push_back(IntRow("media.max_video_frames", "FRAMEMILL_MAX_VIDEO_FRAMES", "",
                         EveryVideoLimit(o, &VideoLimits::max_frames), 1, int64_t{1} << 40));
  rows->push_back(IntRow("media.video_sample_frames", "", "", {&o->lighting.video_frames}, 1,
                         10'000));
  rows->push_back(IntRow("media.model_frames", "FRAMEMILL_MODEL_FRAMES", "",
                         {&o->model_frames.video_frames, &o->dedup.video_frames}, 1, 1'000));
}

void AddLightingRows(LightingOptions* l, OptionRows* rows) {
  rows->push_back(IntRow("lighting.decode_min_side", "FRAMEMILL_LIGHTING_DECODE_MIN_SIDE", "",
                         {&l->decode_min_side}, 0, 100'000));
}

void AddDedupRows(DedupOptions* d, OptionRows* rows) {
  rows->push_back(IntRow("dedup.phash_distance", "FRAMEMILL_DEDUP_PHASH_DISTANCE", "",
                         {&d->grouping.phash_distance}, 0, 64));
  rows->push_back(NumberRow("dedup.candidate_similarity", "FRAMEMILL_DEDUP_CANDIDATE_SIMILARITY",
                            &d->grouping.candidate_similarity, -1, 1));
  rows->push_back(IntRow("dedup.min_inliers", "FRAMEMILL_DEDUP_MIN_INLIERS", "",
                         {&d->confirm.min_inliers}, 4, 100'000));
}

void AddFacesRows(StageOptions* o, OptionRows* rows) {
  rows->push_back(TextChoiceRow("categorize.detector", "FRAMEMILL_CATEGORIZE_DETECTOR", "",
                                &o->categorize.detector,
                                {"centernet", "yolov8n", "yolov8s", "yolov8m"}));
  rows->push_back(AutoNumberRow("categorize.min_score", "FRAMEMILL_CATEGORIZE_MIN_SCORE",
                                &o->categorize.min_score, 0, 1));
  rows->push_back(NumberRow("categorize.floor", "FRAMEMILL_CATEGORIZE_FLOOR",
                            &o->categorize.floor, 0, 1));
  FacesOptions& f = o->faces;
  rows->push_back(TextChoiceRow("faces.embedding_model", "FRAMEMILL_FACES_EMBEDDING_MODEL", "",
                                &f.embedding_model, {"mobilefacenet", "faceres"}));
  rows->push_back(TextChoiceRow("faces.detector", "FRAMEMILL_FACES_DETECTOR", "", &f.detector,
                                {"blazeface-tiled", "blazeface"}));
  rows->push_back(IntRow("faces.min_face_px", "FRAMEMILL_FACES_MIN_FACE_PX", "",
                         {&f.tiles.min_face_px}, 4, 100'000));
  rows->push_back(IntRow("faces.max_tiles", "FRAMEMILL_FACES_MAX_TILES", "", {&f.tiles.max_tiles},
                         0, 10'000));
  rows->push_back(IntRow("faces.max_faces", "FRAMEMILL_FACES_MAX_FACES", "", {&f.max_faces}, 1,
                         100'000));
  rows->push_back(NumberRow("faces.min_presence", "FRAMEMILL_FACES_MIN_PRESENCE",
                            &f.min_presence, 0, 1));
  FaceClustersOptions& c = o->face_clusters;
  rows->push_back(IntRow("face_clusters.min_cluster_size", "FRAMEMILL_FACE_CLUSTERS_MIN_SIZE", "",
                         {&c.min_cluster_size}, 2, 100'000));
  rows->push_back(NumberRow("face_clusters.similarity", "FRAMEMILL_FACE_CLUSTERS_SIMILARITY",
                            &c.similarity, -1, 1));
  rows->push_back(NumberRow("face_clusters.member_similarity",
                            "FRAMEMILL_FACE_CLUSTERS_MEMBER_SIMILARITY", &c.member_similarity,
                            -1, 1));
  rows->push_back(NumberRow("face_clusters.split_similarity",
                            "FRAMEMILL_FACE_CLUSTERS_SPLIT_SIMILARITY", &c.split_similarity, -1,
                            1));
  rows->push_back(NumberRow("face_clusters.seed_quality", "FRAMEMILL_FACE_CLUSTERS_SEED_QUALITY",
                            &c.seed_quality, 0, 1));
  rows->push_back(IntRow("face_clusters.budget_ms", "FRAMEMILL_FACE_CLUSTERS_BUDGET_MS", "",
                         {&c.budget_ms}, 0, 7 * int64_t{86'400'000}));
}

void AddPoseRows(PoseOptions* p, OptionRows* rows) {
  rows->push_back(TextChoiceRow("pose.model", "FRAMEMILL_POSE_MODEL", "", &p->model,
                                {"movenet-multipose", "movenet-lightning", "blazepose-full"}));
  rows->push_back(NumberRow("pose.min_person_score", "FRAMEMILL_POSE_MIN_PERSON_SCORE",
                            &p->min_person_score, 0, 1));
  rows->push_back(NumberRow("pose.video_fps", "FRAMEMILL_POSE_VIDEO_FPS", &p->video_fps, 0.01,
                            1000));
  rows->push_back(IntRow("pose.max_video_frames", "FRAMEMILL_POSE_MAX_VIDEO_FRAMES", "",
                         {&p->max_video_frames}, 1, 100000));
  rows->push_back(IntRow("pose.video_width", "FRAMEMILL_POSE_VIDEO_WIDTH", "", {&p->video_width},
                         32, 8192));
  rows->push_back(NumberRow("pose.track_min_affinity", "FRAMEMILL_POSE_TRACK_MIN_AFFINITY",
                            &p->tracks.min_affinity, 0, 1));
  rows->push_back(NumberRow("pose.track_max_gap_s", "FRAMEMILL_POSE_TRACK_MAX_GAP_S",
                            &p->tracks.max_gap_s, 0, 3600));
  rows->push_back(BoolRow("pose.track_camera", "FRAMEMILL_POSE_TRACK_CAMERA",
                          &p->tracks.use_camera));
  rows->push_back(NumberRow("pose.track_keep_score", "FRAMEMILL_POSE_TRACK_KEEP_SCORE",
                            &p->tracks.keep_score, 0, 1));
  rows->push_back(IntRow("pose.track_min_sightings", "FRAMEMILL_POSE_TRACK_MIN_SIGHTINGS", "",
                         {&p->tracks.min_sightings}, 1, 100000));
  rows->push_back(NumberRow("pose.track_keypoint_band", "FRAMEMILL_POSE_TRACK_KEYPOINT_BAND",
                            &p->tracks.keypoint_band, 0, 1));
}

// inpaint.model: "none", or the path of a user's network (stored as "" for none).
OptionRow InpaintModelRow(std::string* field) {
  OptionRow r = TextRow("inpaint.model", "FRAMEMILL_INPAINT_MODEL", "", field);
  auto set = r.set;
  r.set = [set, field](const std::string& v, const std::string& where) -> Status {
    FM_RETURN_IF_ERROR(set(v, where));
    if (*field == "none") field->clear();
    return Status::OK();
  };
  r.get = [field] { return field->empty() ? std::string("none") : *field; };
  return r;
}

void AddInpaintRows(StageOptions* o, OptionRows* rows) {
  rows->push_back(TextChoiceRow("segment.model", "FRAMEMILL_SEGMENT_MODEL", "", &o->segment.model,
                                {"selfie", "isnet"}));
  InpaintOptions& i = o->inpaint;
  std::vector<std::string> methods = {"auto"};  // and every method by name (analysis/inpaint_fill.h)
  for (InpaintMethod m : AllInpaintMethods()) methods.emplace_back(InpaintMethodName(m));
  rows->push_back(TextChoiceRow("inpaint.method", "FRAMEMILL_INPAINT_METHOD", "", &i.method, methods));
  rows->push_back(TextRow("inpaint.masks", "FRAMEMILL_INPAINT_MASKS", "", &i.masks));
  rows->push_back(NumberRow("inpaint.margin", "FRAMEMILL_INPAINT_MARGIN", &i.margin, 0, 0.5));
  rows->push_back(NumberRow("inpaint.max_coverage", "FRAMEMILL_INPAINT_MAX_COVERAGE",
                            &i.max_coverage, 0.01, 0.999));
  rows->push_back(InpaintModelRow(&i.model));
  rows->push_back(IntRow("inpaint.model_size", "FRAMEMILL_INPAINT_MODEL_SIZE", "",
                         {&i.model_size}, 16, 4096));
}

void AddMotionRows(MotionOptions* m, OptionRows* rows) {
  rows->push_back(IntRow("motion.analysis_width", "FRAMEMILL_MOTION_ANALYSIS_WIDTH", "",
                         {&m->analysis_width}, 32, 8192));
  rows->push_back(NumberRow("motion.max_fps", "FRAMEMILL_MOTION_MAX_FPS", &m->max_fps, 0, 1000));
  rows->push_back(ChoiceRow("motion.flow_preset", "FRAMEMILL_MOTION_FLOW_PRESET", "",
                            &m->analysis.preset, FlowPresets()));
  rows->push_back(NumberRow("motion.moving_px", "FRAMEMILL_MOTION_MOVING_PX",
                            &m->analysis.moving_px, 0, 1000));
  rows->push_back(NumberRow("motion.cut_histogram", "FRAMEMILL_MOTION_CUT_HISTOGRAM",
                            &m->analysis.cut_histogram, 0, 1));
  rows->push_back(NumberRow("motion.cut_residual", "FRAMEMILL_MOTION_CUT_RESIDUAL",
                            &m->analysis.cut_residual, 0, 10));
}

// libx264's presets, fastest first.
const std::vector<std::string>& X264Presets() {
  static const std::vector<std::string> presets = {"ultrafast", "superfast", "veryfast", "faster",
                                                   "fast", "medium", "slow", "slower", "veryslow"};
  return presets;
}

void AddClipsRows(ClipsOptions* c, OptionRows* rows) {
  rows->push_back(NumberRow("clips.min_s", "FRAMEMILL_CLIPS_MIN_S", &c->plan.min_s, 0, 86400));
  rows->push_back(NumberRow("clips.max_s", "FRAMEMILL_CLIPS_MAX_S", &c->plan.max_s, 0.1, 86400));
  rows->push_back(ChoiceRow("clips.mode", "FRAMEMILL_CLIPS_MODE", "", &c->encoding.mode,
                            Choices<ClipMode>{{"encode", ClipMode::kEncode}, {"copy", ClipMode::kCopy}}));
  rows->push_back(TextChoiceRow("clips.preset", "FRAMEMILL_CLIPS_PRESET", "", &c->encoding.preset,
                                X264Presets()));
  rows->push_back(IntRow("clips.crf", "FRAMEMILL_CLIPS_CRF", "", {&c->encoding.crf}, 0, 51));
  rows->push_back(IntRow("clips.audio_kbps", "FRAMEMILL_CLIPS_AUDIO_KBPS", "",
                         {&c->encoding.audio_kbps}, 16, 512));
}

void AddAudioSyncRows(AudioSyncOptions* a, OptionRows* rows) {
  rows->push_back(NumberRow("audio_sync.max_seconds", "FRAMEMILL_AUDIO_SYNC_MAX_SECONDS",
                            &a->max_seconds, 1, 86400));
  rows->push_back(IntRow("audio_sync.analysis_width", "FRAMEMILL_AUDIO_SYNC_ANALYSIS_WIDTH", "",
                         {&a->analysis_width}, 64, 8192));
  rows->push_back(IntRow("audio_sync.detect_every", "FRAMEMILL_AUDIO_SYNC_DETECT_EVERY", "",
                         {&a->detect_every}, 1, 1000));
  rows->push_back(NumberRow("audio_sync.max_offset_s", "FRAMEMILL_AUDIO_SYNC_MAX_OFFSET_S",
                            &a->sync.max_lag_s, 0.05, 10));
  rows->push_back(NumberRow("audio_sync.min_confidence", "FRAMEMILL_AUDIO_SYNC_MIN_CONFIDENCE",
                            &a->min_confidence, 0, 1));
  rows->push_back(NumberRow("audio_sync.min_shot_s", "FRAMEMILL_AUDIO_SYNC_MIN_SHOT_S",
                            &a->min_shot_s, 0.5, 86400));
  rows->push_back(ChoiceRow<std::string>("audio_sync.mouth", "FRAMEMILL_AUDIO_SYNC_MOUTH", "",
                                         &a->mesh_model, {{"facemesh", "facemesh"}, {"none", ""}}));
}

}  // namespace

void AddStageRows(StageOptions* o, OptionRows* rows) {
  AddMediaRows(o, rows);
  AddLightingRows(&o->lighting, rows);
  AddDedupRows(&o->dedup, rows);
  AddFacesRows(o, rows);
  AddPoseRows(&o->pose, rows);
  AddInpaintRows(o, rows);
  AddMotionRows(&o->motion, rows);
  AddClipsRows(&o->clips, rows);
  AddAudioSyncRows(&o->audio_sync, rows);
  fetch::AddFetchRows(&o->fetch, rows);
}

}  // namespace framemill
