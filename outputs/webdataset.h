// `export --format webdataset`: the dataset as tar shards a training loader reads
// directly (the `webdataset` Python package, or plain tar). Each item is two members with
// one key, its content hash: `<key>.<ext>` (the media bytes) and `<key>.json` (every done
// result of the item, as `export --format jsonl` gives them). A shard is written under a
// temporary name and renamed when complete, so a killed export leaves no half shard.
// Not thread-safe; one export at a time per directory.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "base/path_map.h"
#include "base/status.h"
#include "outputs/export_filter.h"
#include "storage/job_store.h"

namespace framemill {

struct WebDatasetOptions {
  std::string dir;            // created if missing
  int64_t shard_size = 1000;  // items per shard
  PathMap path_map;           // where the store's canonical paths are on this machine
  ItemSelection selection;    // the items written (export's filters and --unique): default all
};

struct WebDatasetStats {
  int64_t items = 0, shards = 0, bytes = 0;
  int64_t duplicates = 0;        // same content as an earlier item: keyed <hash>_<item id>
  int64_t stale_removed = 0;     // shards of an earlier, longer export in the same directory
  std::vector<std::string> left_out;  // "<item>: <why>" (no readable media file)
};

// The key and the member names: what a reader groups by (webdataset: the basename up to
// its first dot), so neither may contain a dot.
std::string WebDatasetKey(const ItemView& item, bool duplicate);
std::string MediaExtension(const ItemView& item);

// Walks the store (JobStore::ForEachItem) and writes the shards. An item whose media
// cannot be read is left out and named in `left_out`; a write error is IOError naming
// the file, and what was renamed into place before it is complete.
Result<WebDatasetStats> WriteWebDataset(JobStore& store, const WebDatasetOptions& options);

// export --clips --format webdataset: a sample per clip that passes `clips` and `found`
// (outputs/clip_records.h) of the items options.selection keeps: `<key>.mp4`, the clip file
// byte for byte, and `<key>.json`, its record (item, key, span, figures, what was found in
// it). A clip file that is missing or not the size its result names is left out and named.
struct ClipFilter;
Result<WebDatasetStats> WriteClipsWebDataset(JobStore& store, const WebDatasetOptions& options,
                                             const ClipFilter& clips, const ExportFilter& found);

}  // namespace framemill
