// `framemill enqueue`: turns sources (directories, media files, URL lists) into items
// and jobs. Files are recognised by content; unchanged files (same size and mtime as
// stored) are not read again; new or touched ones are hashed in parallel and written in
// large transactions. A URL list (.txt/.csv/.jsonl named as a source, see url_list.h)
// is streamed into URL items, 10k per transaction; a URL already stored adds nothing.
// Single-threaded caller; uses TBB internally.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "storage/job_store.h"

namespace framemill {

struct EnqueueReport {
  int64_t files_seen = 0;
  int64_t media_files = 0;
  std::map<std::string, int64_t> skipped;  // reason -> count
  std::map<std::string, std::string> skipped_example;  // reason -> one path
  // Entries of a directory source that could not be read (enqueue then exits 3).
  std::map<std::string, int64_t> unreadable;               // reason -> count
  std::map<std::string, std::string> unreadable_example;   // reason -> one path
  EnqueueStats stats;
  // URL lists
  int64_t url_lists = 0, urls_seen = 0;
  std::map<std::string, int64_t> urls_rejected;  // reason -> count
  std::vector<std::string> rejected_examples;    // "file:line: reason", the first few
};

struct EnqueueProgress {
  int64_t files_seen = 0, files_read = 0, to_read = 0, items_written = 0;
  int64_t urls_read = 0;
  bool done = false;
};

// Errors: InvalidArgument for a source that does not exist or cannot be used (exit 2);
// store errors otherwise. `progress` (may be empty) is called from the caller's thread.
Result<EnqueueReport> EnqueueSources(JobStore& store, const std::vector<std::string>& sources,
                                     const EnqueueOptions& options,
                                     const std::function<void(const EnqueueProgress&)>& progress);

}  // namespace framemill
