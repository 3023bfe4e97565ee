// The pictures the report shows, made once and kept under the report's assets/: a still
// of each item (the image, or one frame of a video) at the grid's and the item page's
// sizes, its face crops, and its image artifacts (segment masks as translucent overlays,
// inpainted images). Each is named by what it shows (content hash, frame, box; an
// artifact's path, size and mtime), so a report regenerated during a run decodes only
// what is new. Make may run on several threads at once (for different items); one report
// at a time per directory.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "base/path_map.h"
#include "base/status.h"
#include "storage/job_store.h"

namespace framemill {

struct FaceCrop {
  int64_t frame = -1;  // video frame; -1 for an image
  std::array<float, 4> box{};  // x1, y1, x2, y2 in source pixels
};

// The longest side of masks and inpainted images as the pages show them.
inline constexpr int kArtifactSide = 720;

// What one item's pages show; names are relative to the assets directory.
struct PictureRequest {
  int64_t frame = -1;                  // video: the frame of the still
  std::vector<int> still_sides;        // longest side of each still
  std::vector<FaceCrop> faces;
  std::vector<std::string> masks;      // mask artifacts (8-bit, non-zero = inside)
  std::vector<std::string> images;     // other image artifacts (inpainted)
  int artifact_side = kArtifactSide;
  std::vector<int64_t> clip_frames;    // video: a still of each (its clips' middle frames)...
  int clip_side = 160;                 // ...this long on its longest side
};

class ReportPictures {
 public:

  ReportPictures(std::string assets_dir, PathMap path_map);

  static std::string StillName(const ItemView& item, int64_t frame, int side);
  static std::string FaceName(const ItemView& item, const FaceCrop& face);
  // "" when the artifact is not there.
  static std::string ArtifactName(const std::string& path, int side, bool mask);

  // Makes whatever of `request` is missing. An item whose media cannot be read is an
  // error naming why (the report shows the item without a picture); so is an artifact
  // that cannot be decoded.
  Status Make(const ItemView& item, const PictureRequest& request);

  // Whether the picture `name` (as the names above give it) is there.
  bool Exists(const std::string& name) const;

  int64_t made() const { return made_.load(); }
  int64_t reused() const { return reused_.load(); }

 private:
  bool Have(const std::string& name);  // Exists, counted as reused
  Status Write(const std::string& name, const void* mat);  // cv::Mat
  // The still at each side and the face crops, from the item's media decoded once; a decode
  // that fails is the first error (what can be made still is).
  Status MakeStillsAndFaces(const ItemView& item, const PictureRequest& r, const std::vector<int>& sides,
                            const std::vector<FaceCrop>& faces, const std::vector<int64_t>& clips,
                            Status* first_error);
  // The stages' artifacts (masks drawn translucent, images as they are), fitted to their side.
  Status MakeArtifacts(const PictureRequest& r, Status* first_error);

  std::string dir_;
  PathMap path_map_;
  std::atomic<int64_t> made_{0}, reused_{0}, temp_{0};
};

}  // namespace framemill
