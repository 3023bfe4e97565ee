// `framemill report`: a static, self-contained HTML report of a job store: DIR/index.html
// (the overview: per-stage counts, throughput over time, failures by class, runs with
// their OOM and CPU-fallback counts), paged grids of items with their analyses drawn on
// them, a page per item, a page per identity cluster, and a page of failures with their
// history. No script, no server, no network at view time; pictures under DIR/assets/ are
// made once and kept (ReportPictures), so regenerating the report during a run is cheap
// and shows what is still running as such. Every page is written under a temporary name
// and renamed. Not thread-safe: one report at a time per directory.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/path_map.h"
#include "base/status.h"
#include "outputs/unsafe.h"
#include "storage/job_store.h"

namespace framemill {

struct ReportOptions {
  std::string dir;               // created if missing
  int64_t limit = 0;             // items with pages and thumbnails (0: all); counts cover all
  int page_size = 120;           // cards per grid page
  int thumb_side = 320;          // the grid's pictures
  int preview_side = 800;        // the item page's
  int max_faces_per_cluster = 120;
  // Pictures categorize finds unsafe (outputs/unsafe.h, the threshold export shares) are
  // blurred in the grid and on their page; report --show-nsfw: none.
  UnsafeOptions unsafe;
  bool blur_unsafe = true;
  PathMap path_map;              // where the store's canonical paths are on this machine
  int64_t now_ms = 0;            // the report's time (0: now)
};

struct ReportStats {
  int64_t items = 0, item_pages = 0, grid_pages = 0, clusters = 0, failures = 0;
  int64_t pictures_made = 0, pictures_reused = 0;
  int64_t index_bytes = 0, total_bytes = 0;
  std::vector<std::string> problems;  // "<item>: <why it has no picture>" (the first 20)
  int64_t problem_count = 0;
};

Result<ReportStats> WriteReport(JobStore& store, const ReportOptions& options);

}  // namespace framemill
