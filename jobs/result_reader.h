// Reading finished results back: what `export` prints and what a dataset-level stage
// (face_clusters) reads of its upstream stages. The job store implements it; a stage
// sees only this interface, never the store. Thread-safety: as the implementation's.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "base/status.h"

namespace framemill {

struct ExportRow {  // source: the path, or the URL for URL items (the export's `item`)
  std::string source, stage, device, result_json, artifacts_json;
  int64_t attempts = 0, finished_at = 0;
  int64_t job_id = 0;
};

class ResultReader {
 public:
  virtual ~ResultReader() = default;
  // Every done job's result (of `stage`, or all), in job order, each exactly once. Rows
  // are read in pages (StoreOptions::export_page_rows), each in its own read transaction,
  // and `fn` runs between them: a slow reader (a paused pager) holds no snapshot, so
  // writers and WAL checkpoints go on. An error from `fn` stops the walk and is returned.
  virtual Status ForEachResult(const std::string& stage,
                               const std::function<Status(const ExportRow&)>& fn) = 0;
  // The done jobs of `stage` whose finished_at is at least `since_ms` (the store's clock), as
  // ForEachResult reads them: what finished since a reader last looked (a job finished in
  // that millisecond again too). The store reads them by index; this default filters the
  // whole walk.
  virtual Status ForEachResultFinishedSince(const std::string& stage, int64_t since_ms,
                                            const std::function<Status(const ExportRow&)>& fn) {
    return ForEachResult(stage, [&](const ExportRow& r) { return r.finished_at >= since_ms ? fn(r) : Status::OK(); });
  }
  // The result of one item's `stage` job when it is done (a per-item stage reading what
  // it depends on: inpaint reads segment's mask); nullopt when that job is not done.
  virtual Result<std::optional<ExportRow>> ResultOf(int64_t item_id, const std::string& stage) = 0;
};

}  // namespace framemill
