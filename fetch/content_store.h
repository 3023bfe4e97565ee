// Where downloads land, named by their content: out_dir/fetched/<hh>/<hash><ext>. A body is
// written to an unnamed temporary file (O_TMPFILE) while it arrives, or where the file system
// lacks it a named .part file that RemoveStaleTempFiles cleans up, and linked under its
// content hash only when complete: a crash leaves no partial file, and the same bytes from two
// URLs are stored once. Not thread-safe (one per Fetcher); distinct stores may share out_dir.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_set>

#include "base/status.h"

namespace framemill::fetch {

// Where content with this hash and format is stored: out_dir/fetched/<hh>/<hash><ext>.
std::string ContentPath(const std::string& out_dir, const std::string& hash,
                        const std::string& format);

// Removes named temporary files (the fallback used where the file system has no
// O_TMPFILE) under out_dir/fetched/tmp/ older than max_age_s. Call with 0 only while
// no Fetcher uses out_dir (e.g. the supervisor before starting workers).
Status RemoveStaleTempFiles(const std::string& out_dir, int64_t max_age_s);

// One body on its way to the store.
struct TempFile {
  int fd = -1;
  std::string path;  // set only for a named temporary file (no O_TMPFILE)
};

class ContentStore {
 public:
  explicit ContentStore(const std::string& out_dir);
  // Appends `bytes` to the file (opening it first), and clears them.
  Status Append(TempFile* f, std::string* bytes);
  // Gives the complete file its content-addressed name `target`. Same content already there
  // (another URL, another worker): that one is kept, ours disappears.
  Status Publish(TempFile* f, const std::string& target);
  // Closes the file and removes a named one that was not published.
  void Drop(TempFile* f);
  const std::string& tmp_dir() const { return tmp_dir_; }

 private:
  Status EnsureDir(const std::string& dir);
  Status OpenTemp(TempFile* f);

  std::string tmp_dir_;
  std::unordered_set<std::string> made_dirs_;
  bool tmpfile_ok_ = true;  // O_TMPFILE works here (turned off on the first refusal)
  uint64_t tmp_counter_ = 0;
};

}  // namespace framemill::fetch
