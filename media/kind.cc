#include "media/kind.h"

namespace framemill {

std::string_view MediaKindName(MediaKind k) {
  switch (k) {
    case MediaKind::kDataset: return "dataset";
    case MediaKind::kImage: return "image";
    case MediaKind::kVideo: return "video";
  }
  return "unknown";
}

}  // namespace framemill
