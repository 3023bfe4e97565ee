// What an item is: an image, a video, or (for the job store) the one item that stands
// for the whole dataset. Plain values; thread-safe.
#pragma once

#include <string_view>

namespace framemill {

// Persisted as integers in items.kind: never renumber. kDataset is never a file: it is
// the store's item for dataset-level stages.
enum class MediaKind : int { kDataset = 0, kImage = 1, kVideo = 2 };
std::string_view MediaKindName(MediaKind k);

}  // namespace framemill
