// A file that is whole or absent: written under a temporary name beside it, then renamed
// into place (rename(2) is atomic within a directory), so a reader never sees half a file
// and a kill mid-write leaves at most a temporary. Used by every writer of artifacts,
// report pages, pictures and shards.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"

namespace framemill {

// Writes `bytes` to `path` through `path` + ".tmp" + `tag` (a tag that differs between
// concurrent writers of one path: a process id, a counter) and a rename, creating the
// directory. On failure the temporary is removed and the error names the file.
Status WriteFileAtomically(const std::string& path, std::string_view bytes,
                           std::string_view tag = "");

// The last step alone, for a temporary written by other means (a tar shard streamed by
// libarchive, a picture encoded by OpenCV): renames it to `path`, or removes it and says
// why not.
Status RenameIntoPlace(const std::string& temp, const std::string& path);

}  // namespace framemill
