// The stage DAG: which media kinds each stage applies to and what it depends on.
// Built once at start-up, then read-only; safe to share between threads after that.
#pragma once

#include <string>
#include <vector>

#include "jobs/job.h"

namespace framemill {

struct StageSpec {
  std::string name;
  bool images = true;
  bool videos = true;
  std::vector<std::string> deps;  // stages of the same item that must be done first
  // A dataset-level stage has one job for the whole store, runnable once every job of
  // its `deps` stages is terminal, and queued again when new items arrive.
  bool dataset_level = false;
  // A downloading stage turns URL items into local files: every URL item gets its job,
  // every other job of a URL item waits on it, and when it fails for good they are
  // skipped (there is nothing to analyse). At most one per graph.
  bool downloads = false;

  bool AppliesTo(MediaKind k) const {
    return dataset_level ? k == MediaKind::kDataset
                         : (k == MediaKind::kImage ? images : k == MediaKind::kVideo && videos);
  }
};

class StageGraph {
 public:
  // Fails (returns false, with `error`) on a duplicate name, an unknown dependency or a
  // second downloading stage; add dependencies first, which also rules out cycles.
  bool Add(StageSpec spec, std::string* error);
  const StageSpec* Find(const std::string& name) const;
  const std::vector<StageSpec>& stages() const { return stages_; }  // dependency order
  std::vector<std::string> Names() const;
  // The downloading stage, or null when the graph has none (URL items cannot be enqueued).
  const StageSpec* Downloader() const;

  // `selected` plus everything it depends on, in dependency order. Unknown names are
  // reported in `error` (listing the valid ones) and an empty vector is returned.
  std::vector<std::string> Closure(const std::vector<std::string>& selected,
                                   std::string* error) const;

 private:
  std::vector<StageSpec> stages_;
};

}  // namespace framemill
