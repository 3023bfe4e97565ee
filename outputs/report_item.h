// One item as the report shows it: what its results say (Analyses: its size, the still's
// frame, its faces with their identity, the segment mask and the inpainted image), the
// analyses drawn over its still, its stages as chips, its picture and its card's line.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "outputs/unsafe.h"
#include "storage/job_store.h"

namespace framemill::report {

using nlohmann::json;

// A face the faces stage found, with its identity cluster.
struct FaceRef {
  int64_t frame = -1;
  int index = 0;
  std::array<float, 4> box{};
  int64_t cluster = -1;  // -1: noise or not clustered
  double quality = -1;   // the faces stage's `quality`; -1 when the result has none
};

// What the report knows of one item from its results.
struct Analyses {
  std::map<std::string, json> results;  // done stages
  double width = 0, height = 0;         // source pixels
  int64_t frame = -1;                   // video: the still's frame
  std::vector<FaceRef> faces;           // at the still (video) or all (image)
  std::vector<FaceRef> all_faces;       // every face with a box
  std::string mask;                     // segment mask at the still
  std::string inpainted;
};

using ClusterKey = std::tuple<std::string, int64_t, int>;  // item, frame, face

// The item's done results read, its still's frame, faces (with their clusters from
// `clusters`), mask and inpainted image.
Analyses Analyse(const ItemView& item, const std::map<ClusterKey, int64_t>& clusters);
// The analyses drawn over the still (objects, pose skeletons, faces by identity), as an SVG
// in source pixel coordinates; "" when the item's size is not known.
std::string OverlaySvg(const ItemView& item, const Analyses& a);
// Every stage as a chip (the item page); `compact`: done and skipped counted, the rest
// (failed, running, waiting their turn) named (the grid's cards).
std::string Chips(const ItemView& item, bool compact = false);
// Whether the item's pictures are blurred: categorize finds it unsafe by `unsafe` (nullptr:
// never, report --show-nsfw).
bool Blurred(const Analyses& a, const UnsafeOptions* unsafe);
// The still with its overlays, blurred as Blurred says; `prefix` leads from the page to the
// report's root.
std::string Picture(const ItemView& item, const Analyses& a, int side, const std::string& prefix,
                    bool have_still, bool lazy, const UnsafeOptions* blur);
// One figure or two a card can show in a line.
std::string CardLine(const ItemView& item, const Analyses& a);

}  // namespace framemill::report
