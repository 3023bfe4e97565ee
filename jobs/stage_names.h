// The names of this build's stages, as the store, `--stages`, the results and the report
// know them. Persisted (jobs.stage, results by stage): never renamed. Every reference to
// a stage by name in code goes through these, so a search finds every user of a stage.
#pragma once

namespace framemill::stage_names {

inline constexpr char kFetch[] = "fetch";
inline constexpr char kLighting[] = "lighting";
inline constexpr char kMotion[] = "motion";
inline constexpr char kClips[] = "clips";
inline constexpr char kCategorize[] = "categorize";
inline constexpr char kDedup[] = "dedup";
inline constexpr char kFaces[] = "faces";
inline constexpr char kFaceClusters[] = "face_clusters";
inline constexpr char kPose[] = "pose";
inline constexpr char kSegment[] = "segment";
inline constexpr char kInpaint[] = "inpaint";
inline constexpr char kAudioSync[] = "audio_sync";

// Every stage of this build: the default registry (stages/registry.cc) holds exactly these
// (StageRegistryTest checks it), so a new stage is named here once.
inline constexpr const char* kAll[] = {kFetch, kLighting, kMotion, kClips, kCategorize, kDedup, kFaces,
                                       kFaceClusters, kPose, kSegment, kInpaint, kAudioSync};

}  // namespace framemill::stage_names
