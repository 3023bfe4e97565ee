// Each setting is a row bound to a field of the module's own options (cli/settings.h): the
// defaults are those structs' own, and these tests check that loading with no input leaves
// them so, and that every setting reaches the field of the module it configures (and
// cli/options.h the values one module takes from another's settings).
#include "cli/options.h"

#include <gtest/gtest.h>

#include "stages/categorize_stage.h"
#include "stages/face_clusters_stage.h"
#include "stages/fetch_stage.h"

namespace framemill {
namespace {

Settings Defaults() {
  auto c = LoadSettings({});
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? *c : Settings{};
}

Settings With(std::map<std::string, std::string> env) {
  ConfigInputs in;
  in.env = std::move(env);
  auto c = LoadSettings(in);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? *c : Settings{};
}

TEST(OptionsTest, DefaultSettingsGiveEveryModuleItsOwnDefaults) {
  const Settings c = Defaults();
  StageOptions own;
  // The model directory's default is the user's (XDG cache: SettingsTest), not a constant.
  EXPECT_FALSE(c.models().empty());
  own.models_dir = c.models();
  EXPECT_EQ(c.stage, own) << "all eleven stage structs, fetch and out";
  EXPECT_EQ(c.run.gpu, gpu::GpuOptions{});

  const RunOptions run = ToRunOptions(c, {"lighting"}, false);
  const RunOptions own_run;
  const WorkerOptions own_worker;
  EXPECT_EQ(run.db, own_run.db);
  EXPECT_EQ(run.max_respawns, own_run.max_respawns);
  EXPECT_EQ(run.worker.batch, own_worker.batch);
  EXPECT_EQ(run.worker.lease_ms, own_worker.lease_ms);
  EXPECT_EQ(run.worker.poll_ms, own_worker.poll_ms);
  EXPECT_EQ(run.worker.retry.base_delay_ms, own_worker.retry.base_delay_ms);
  EXPECT_EQ(run.worker.retry.max_delay_ms, own_worker.retry.max_delay_ms);
  EXPECT_EQ(run.worker.horizon_ms, own_worker.horizon_ms);
  EXPECT_EQ(run.worker.budget.batch_ms, own_worker.budget.batch_ms);
  EXPECT_EQ(run.worker.budget.job_ms, own_worker.budget.job_ms);
  EXPECT_EQ(run.worker.budget.per_mb_ms, own_worker.budget.per_mb_ms);
  EXPECT_EQ(ToEnqueueOptions(c, {"lighting"}).max_attempts, EnqueueOptions{}.max_attempts);
  EXPECT_EQ(ToEnqueueOptions(c, {"lighting"}).priority, EnqueueOptions{}.priority);
}

TEST(OptionsTest, EverySettingReachesTheModuleItConfigures) {
  const Settings c = With({{"FRAMEMILL_OUT", "/o"},
                         {"FRAMEMILL_MODELS", "/m"},
                         {"FRAMEMILL_MAX_IMAGE_PIXELS", "1234"},
                         {"FRAMEMILL_MODEL_FRAMES", "7"},
                         {"FRAMEMILL_MAX_VIDEO_PIXELS", "5555"},
                         {"FRAMEMILL_MAX_VIDEO_FRAMES", "66"},
                         {"FRAMEMILL_CATEGORIZE_MIN_SCORE", "0.5"},
                         {"FRAMEMILL_FACES_EMBEDDING_MODEL", "mobilefacenet"},
                         {"FRAMEMILL_POSE_MODEL", "blazepose-full"},
                         {"FRAMEMILL_FACE_CLUSTERS_MIN_SIZE", "5"},
                         {"FRAMEMILL_FACE_CLUSTERS_SIMILARITY", "0.55"},
                         {"FRAMEMILL_FACE_CLUSTERS_BUDGET_MS", "777"},
                         {"FRAMEMILL_SEGMENT_MODEL", "isnet"},
                         {"FRAMEMILL_FETCH_CONCURRENCY", "3"},
                         {"FRAMEMILL_FETCH_PER_HOST", "2"},
                         {"FRAMEMILL_FETCH_CONNECT_TIMEOUT_MS", "11"},
                         {"FRAMEMILL_FETCH_TIMEOUT_MS", "22"},
                         {"FRAMEMILL_FETCH_MAX_BYTES", "33"},
                         {"FRAMEMILL_FETCH_MAX_REDIRECTS", "4"},
                         {"FRAMEMILL_FETCH_USER_AGENT", "ua/1"},
                         {"FRAMEMILL_FETCH_BATCH", "9"},
                         {"FRAMEMILL_FETCH_MAX_RETRY_AFTER_MS", "44"},
                         {"FRAMEMILL_FETCH_BLOCK_PRIVATE", "no"},
                         {"FRAMEMILL_DB", "/x.db"},
                         {"FRAMEMILL_WORKERS", "5"},
                         {"FRAMEMILL_BATCH", "6"},
                         {"FRAMEMILL_LEASE_MS", "7000"},
                         {"FRAMEMILL_HORIZON_MS", "4321"},
                         {"FRAMEMILL_BATCH_BUDGET_MS", "111"},
                         {"FRAMEMILL_JOB_BUDGET_MS", "222"},
                         {"FRAMEMILL_JOB_BUDGET_PER_MB_MS", "333"},
                         {"FRAMEMILL_MAX_ATTEMPTS", "8"},
                         {"FRAMEMILL_RETRY_BASE_MS", "100"},
                         {"ALL_GPU", "false"},
                         {"POSE_GPU", "true"},
                         {"GPU_BACKEND", "sim"},
                         {"GPU_DEVICE_ID", "2"},
                         {"GPU_MEMORY_LIMIT_GB", "1.5"},
                         {"GPU_BATCH_SIZE", "12"},
                         {"FRAMEMILL_SIM_VRAM_MB", "64"},
                         {"FRAMEMILL_SIM_COST", "2"},
                         {"FRAMEMILL_FACES_MIN_FACE_PX", "20"},
                         {"FRAMEMILL_FACES_MAX_TILES", "12"},
                         {"FRAMEMILL_FACES_MIN_PRESENCE", "0.2"},
                         {"FRAMEMILL_POSE_TRACK_MIN_AFFINITY", "0.4"},
                         {"FRAMEMILL_POSE_TRACK_MAX_GAP_S", "2.5"},
                         {"FRAMEMILL_POSE_TRACK_CAMERA", "false"},
                         {"FRAMEMILL_MOTION_FLOW_PRESET", "medium"},
                         {"FRAMEMILL_MOTION_MOVING_PX", "2"},
                         {"FRAMEMILL_MOTION_CUT_HISTOGRAM", "0.3"},
                         {"FRAMEMILL_MOTION_CUT_RESIDUAL", "0.6"},
                         {"FRAMEMILL_AUDIO_SYNC_MAX_OFFSET_S", "2"},
                         {"FRAMEMILL_AUDIO_SYNC_MOUTH", "none"},
                         {"FRAMEMILL_INPAINT_MODEL", "none"}});
  const StageOptions& s = c.stage;
  EXPECT_EQ(s.out_dir, "/o");
  EXPECT_EQ(s.models_dir, "/m");
  // media.*: one setting feeds the limits of every stage that decodes.
  for (const ImageLimits* l : {&s.lighting.limits, &s.inpaint.limits, &s.model_frames.limits})
    EXPECT_EQ(l->max_pixels, 1234);
  for (const VideoLimits* v : {&s.lighting.video_limits, &s.model_frames.video_limits,
                               &s.dedup.video_limits, &s.motion.video_limits,
                               &s.audio_sync.video_limits}) {
    EXPECT_EQ(v->max_pixels, 5555);
    EXPECT_EQ(v->max_frames, 66);
  }
  EXPECT_EQ(s.faces.tiles.min_face_px, 20);
  EXPECT_EQ(s.faces.tiles.max_tiles, 12);
  EXPECT_DOUBLE_EQ(s.faces.min_presence, 0.2);
  EXPECT_DOUBLE_EQ(s.pose.tracks.min_affinity, 0.4);
  EXPECT_DOUBLE_EQ(s.pose.tracks.max_gap_s, 2.5);
  EXPECT_FALSE(s.pose.tracks.use_camera);
  EXPECT_EQ(s.motion.analysis.preset, cv::DISOpticalFlow::PRESET_MEDIUM);
  EXPECT_DOUBLE_EQ(s.motion.analysis.moving_px, 2);
  EXPECT_DOUBLE_EQ(s.motion.analysis.cut_histogram, 0.3);
  EXPECT_DOUBLE_EQ(s.motion.analysis.cut_residual, 0.6);
  EXPECT_DOUBLE_EQ(s.audio_sync.sync.max_lag_s, 2);
  EXPECT_EQ(s.audio_sync.mesh_model, "") << "audio_sync.mouth: none";
  EXPECT_EQ(s.inpaint.model, "") << "inpaint.model: none";
  EXPECT_EQ(s.model_frames.video_frames, 7);
  ASSERT_TRUE(s.categorize.min_score.has_value());
  EXPECT_DOUBLE_EQ(*s.categorize.min_score, 0.5);
  EXPECT_EQ(s.faces.embedding_model, "mobilefacenet");
  EXPECT_EQ(s.pose.model, "blazepose-full");
  EXPECT_EQ(s.face_clusters.min_cluster_size, 5);
  EXPECT_DOUBLE_EQ(s.face_clusters.similarity, 0.55);
  EXPECT_EQ(s.segment.model, "isnet");
  EXPECT_EQ(s.fetch.concurrency, 3);
  EXPECT_EQ(s.fetch.per_host, 2);
  EXPECT_EQ(s.fetch.connect_timeout_ms, 11);
  EXPECT_EQ(s.fetch.total_timeout_ms, 22);
  EXPECT_EQ(s.fetch.max_bytes, 33);
  EXPECT_EQ(s.fetch.max_redirects, 4);
  EXPECT_EQ(s.fetch.user_agent, "ua/1");
  EXPECT_EQ(s.fetch.max_retry_after_ms, 44);
  EXPECT_FALSE(s.fetch.block_private);

  const RunOptions r = ToRunOptions(c, {"fetch", "pose"}, true);
  EXPECT_EQ(r.db, "/x.db");
  EXPECT_EQ(r.workers, 5);
  EXPECT_EQ(r.worker.batch, 6);
  EXPECT_EQ(r.worker.batch_by_stage.at(FetchStage::kName), 9);
  EXPECT_EQ(r.worker.lease_ms, 7000);
  EXPECT_EQ(r.worker.retry.base_delay_ms, 100);
  EXPECT_EQ(r.worker.horizon_ms, 4321);
  EXPECT_EQ(r.worker.budget.batch_ms, 111);
  EXPECT_EQ(r.worker.budget.job_ms, 222);
  EXPECT_EQ(r.worker.budget.per_mb_ms, 333);
  EXPECT_EQ(r.worker.budget.extra_by_stage.at(FetchStage::kName), 22);
  EXPECT_EQ(r.worker.budget.extra_by_stage.at(FaceClustersStage::kName), 777);
  EXPECT_EQ(r.worker.stages, (std::vector<std::string>{"fetch", "pose"}));
  EXPECT_TRUE(r.worker.forever);
  EXPECT_EQ(ToEnqueueOptions(c, {"pose"}).max_attempts, 8);

  const gpu::GpuOptions g = r.gpu;
  EXPECT_EQ(g.all, gpu::DeviceChoice::kCpu);
  EXPECT_EQ(g.ops.at("POSE"), gpu::DeviceChoice::kGpu);
  EXPECT_EQ(g.backend, "sim");
  EXPECT_EQ(g.device_id, 2);
  EXPECT_DOUBLE_EQ(g.memory_limit_gb, 1.5);
  EXPECT_EQ(g.batch_size, 12);
  EXPECT_EQ(g.sim_vram_mb, 64);
  EXPECT_DOUBLE_EQ(g.sim_cost, 2);
}

// categorize.min_score is auto by default: each detector shows objects from its own measured
// score (models/catalog.cc), so a user who switches to centernet gets centernet's, not
// yolov8s's. A number overrides it for every detector; `auto` restores it.
TEST(OptionsTest, TheShownScoreIsTheDetectorsOwnUnlessANumberIsSet) {
  EXPECT_EQ(Defaults().stage.categorize.detector, "yolov8s");
  EXPECT_FALSE(Defaults().stage.categorize.min_score.has_value());
  EXPECT_DOUBLE_EQ(ShownScore(Defaults().stage.categorize), 0.8);
  EXPECT_DOUBLE_EQ(ShownScore(With({{"FRAMEMILL_CATEGORIZE_DETECTOR", "centernet"}}).stage.categorize), 0.6);
  EXPECT_DOUBLE_EQ(ShownScore(With({{"FRAMEMILL_CATEGORIZE_DETECTOR", "yolov8m"}}).stage.categorize), 0.85);
  EXPECT_DOUBLE_EQ(ShownScore(With({{"FRAMEMILL_CATEGORIZE_DETECTOR", "yolov8n"}}).stage.categorize), 0.6);
  const Settings set = With({{"FRAMEMILL_CATEGORIZE_DETECTOR", "centernet"}, {"FRAMEMILL_CATEGORIZE_MIN_SCORE", "0.3"}});
  EXPECT_DOUBLE_EQ(ShownScore(set.stage.categorize), 0.3);
  EXPECT_FALSE(With({{"FRAMEMILL_CATEGORIZE_MIN_SCORE", " Auto "}}).stage.categorize.min_score.has_value());

  ConfigInputs bad;
  bad.env = {{"FRAMEMILL_CATEGORIZE_MIN_SCORE", "high"}};
  const auto c = LoadSettings(bad);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().ToString().find("auto or a number from 0 to 1"), std::string::npos) << c.status().ToString();
}

}  // namespace
}  // namespace framemill
