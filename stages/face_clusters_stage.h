// `face_clusters`: one dataset-level job that groups every face the `faces` stage found
// into identities (operation FACE_CLUSTERING): it reads the faces results, finds the
// identities (cluster/identities.h: tracks, density, attachment), carries their ids over
// from the job's previous result (cluster/stable_ids.h) and writes the result. Faces
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

#include "cluster/identities.h"
#include "stages/stage.h"
#include "jobs/stage_names.h"
#include "stages/stage_options.h"

namespace framemill {

// Every face with an embedding in one `faces` result; `error` names what was malformed.
Status ParseFacesResult(const std::string& item, const std::string& result_json,
                        std::vector<cluster::FaceRef>* out);

class FaceClustersStage : public Stage {
 public:
  static constexpr const char* kName = stage_names::kFaceClusters;
  explicit FaceClustersStage(FaceClustersOptions options);
  const StageSpec& spec() const override { return spec_; }
  std::vector<Outcome> RunBatch(const std::vector<ClaimedJob>& jobs,
                                const StageContext& ctx) override;

  // The whole computation, from the faces and the previous result (null: none).
  Result<nlohmann::json> Cluster(std::vector<cluster::FaceRef> faces, const nlohmann::json* previous,
                                 gpu::ComputeBackend* device) const;

 private:
  Outcome RunOne(const StageContext& ctx) const;
  StageSpec spec_;
  FaceClustersOptions options_;
};

}  // namespace framemill
