// Where stages put the files they write, and how: under FRAMEMILL_OUT/<stage>/, named by
// item, frame and the claim's lease token (a worker that lost its lease writes beside
// the new holder's file, never over it), written to a temporary name and renamed, so a
// reader or a rerun after a crash sees a whole file or none. Stateless; thread-safe.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <string_view>

#include "base/status.h"
#include "jobs/job.h"

namespace framemill {

// `path` made absolute (against the working directory) and normalised; as it is when
// that fails.
std::string AbsolutePath(const std::string& path);

// The absolute directory for one stage's artifacts under `out_dir`.
std::string ArtifactDir(const std::string& out_dir, const std::string& stage);

// <dir>/<item>[-f<frame>]-<lease token in hex>.<ext>; frame < 0: none.
std::string ArtifactPath(const std::string& dir, const ClaimedJob& job, int64_t frame,
                         const std::string& ext);

// Removes this job's item's files of `ext` that other claims of it wrote under `dir` (and
// their temporaries): what a worker killed mid-job, or a lost lease, left. Only the claim
// that holds the lease calls it: an older holder's result is fenced out, so its files are
// no one's.
Status RemoveEarlierAttempts(const std::string& dir, const ClaimedJob& job, const std::string& ext);

// The files of `item` with `ext` under `dir` (their temporaries too) that `keep` does not name:
// what a stale attempt left when it was killed after writing them and before its completion
// was refused. Only for an item whose job is done, `keep` being its result's artifacts (an
// attempt may be writing otherwise). Returns how many there were: removed unless `dry_run`.
Result<int64_t> RemoveUnlistedArtifacts(const std::string& dir, int64_t item, const std::string& ext,
                                        const std::set<std::string>& keep, bool dry_run);

// Writes `bytes` at `path` (creating its directory) through a temporary name.
Status WriteArtifact(const std::string& path, std::string_view bytes);

}  // namespace framemill
