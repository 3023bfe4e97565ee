// `face_clusters`: one dataset-level job that groups every face the `faces` stage found
// into identities (operation FACE_CLUSTERING). Faces of a video are first linked into
// tracks across its sampled frames (box overlap and embedding), and a track counts as
// one point; tracks are clustered by density (cluster/: HDBSCAN* over a k-NN graph), and
// cluster ids carry over from the job's previous result (cluster/stable_ids.h). Faces
// that fit no identity are noise. Reads upstream results through StageContext::results.
// Not a PerJobStage (stages/per_job_stage.h): its one job is the dataset, not an item (no
// media kind to check, no artifact), and a throw while clustering is no item's bad input:
// it is left to the worker's boundary (internal, retried) rather than failed for good as
// Corruption, as the per-job loop fails the item that threw.
// Holds only configuration; RunBatch is thread-safe.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cluster/knn.h"
#include "stages/stage.h"
#include "jobs/stage_names.h"
#include "stages/stage_options.h"

namespace framemill {

// One face as the result names it: the item (as export names it), the frame for a
// video (-1 for an image), its index in that item's or frame's `faces` list.
struct FaceRef {
  std::string item;
  int64_t frame = -1;
  int face = 0;
  float box[4] = {0, 0, 0, 0};
  std::vector<float> embedding;
  float quality = 1;  // the faces stage's `quality` (1 for results written before it had one)
  std::string Key() const;  // unique per face, for stable ids
};

// Every face with an embedding in one `faces` result; `error` names what was malformed.
Status ParseFacesResult(const std::string& item, const std::string& result_json,
                        std::vector<FaceRef>* out);

// Groups the faces of one item into tracks: consecutive sampled frames, greedy by
// similarity among pairs whose boxes overlap by track_iou and whose embeddings are at
// least track_similarity alike. Images: one face, one track. Returns per track the
// indices into `faces`.
std::vector<std::vector<size_t>> LinkTracks(const std::vector<FaceRef>& faces,
                                            const FaceClustersOptions& options);

// Two faces seen in the same picture at the same time are two people: within each cluster,
// tracks are kept closest to the cluster's mean direction first, and a track seen in an
// (item, frame) a kept track is seen in goes to the noise (label -1); a cluster left with
// fewer than min_cluster_size tracks becomes noise. Returns the labels, per track, the
// clusters left numbered 0.. in their old order.
// Attaches each unlabelled track whose quality kept it from seeding (label -1 and not a
// seed) to the cluster whose mean direction is closest, when at least `min_similarity`;
// the others stay noise. Returns the labels.
std::vector<int> AttachToClusters(const cluster::Embeddings& e, const std::vector<bool>& seed,
                                  std::vector<int> label, float min_similarity);

std::vector<int> SeparateCoOccurring(const std::vector<FaceRef>& faces,
                                     const std::vector<std::vector<size_t>>& tracks,
                                     const cluster::Embeddings& e, std::vector<int> label,
                                     int min_cluster_size);

class FaceClustersStage : public Stage {
 public:
  static constexpr const char* kName = stage_names::kFaceClusters;
  explicit FaceClustersStage(FaceClustersOptions options);
  const StageSpec& spec() const override { return spec_; }
  std::vector<Outcome> RunBatch(const std::vector<ClaimedJob>& jobs,
                                const StageContext& ctx) override;

  // The whole computation, from the faces and the previous result (null: none).
  Result<nlohmann::json> Cluster(std::vector<FaceRef> faces, const nlohmann::json* previous,
                                 gpu::ComputeBackend* device) const;

 private:
  Outcome RunOne(const StageContext& ctx) const;
  StageSpec spec_;
  FaceClustersOptions options_;
};

}  // namespace framemill
