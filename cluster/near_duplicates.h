// Near-duplicate pictures (the `dedup` stage): a compact signature per picture, and groups
// of pictures that show the same thing. Two signals propose pairs: a perceptual hash
// (OpenCV contrib's pHash: resized, re-compressed, re-lit copies) and an image embedding
// (near neighbours by cosine: crops, rotations, colour changes). A pair the hash proposes
// is joined; a pair only the embedding proposes is joined when a check on the pixels
// confirms it, because textures and scenes of one kind come as close as copies
// (bench/README "Near-duplicates"). Plain functions; thread-compatible.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <opencv2/core.hpp>

#include "base/status.h"

namespace framemill::cluster {

struct PictureSignature {
  uint64_t phash = 0;
  std::vector<float> embedding;  // unit length (stored as int8: 1/127 steps)
  int64_t pixels = 0;            // of the picture as decoded
  int64_t bytes = 0;             // of its file: among equal sizes, the less compressed copy
  double sharpness = 0;          // variance of the Laplacian at 256 px: the sharper copy
};

// The signature of a decoded 8-bit BGR picture with its embedding (any length; normalised).
PictureSignature MakeSignature(const cv::Mat& bgr, const std::vector<float>& embedding);
// {"phash": 16 hex digits, "embedding": 2 hex digits per int8 value, "pixels", "bytes", "sharpness"}
nlohmann::json ToJson(const PictureSignature& s);
Result<PictureSignature> SignatureFromJson(const nlohmann::json& j);
int HammingDistance(uint64_t a, uint64_t b);

struct NearDuplicateOptions {
  int phash_distance = 8;             // pHash bits that may differ for the hash to propose a pair
  double candidate_similarity = 0.8;  // cosine at which the embedding proposes a pair
  int neighbours = 10;                // nearest neighbours searched per picture
  int64_t exact_up_to = 20'000;       // exact neighbour search up to this many pictures, HNSW beyond

  bool operator==(const NearDuplicateOptions&) const = default;
};

// How a member is tied to its group: the signal that proposed the pair and its cosine.
struct Link {
  size_t other = 0;
  double similarity = 0;
  std::string signal;  // "phash" or "embedding"
};

struct DuplicateGroup {
  size_t representative = 0;  // the largest picture, then the largest file, then the sharpest
  std::vector<Link> members;  // every other picture of the group, tied to the representative
};

// true when two pictures (indices into the signatures) show the same thing.
using ConfirmFn = std::function<bool(size_t a, size_t b)>;

struct GroupingStats {
  int64_t proposed_by_hash = 0, proposed_by_embedding = 0, confirmed = 0, refused = 0;
  std::string neighbours;  // "exact" or "hnsw"
};

// Groups of pictures of two or more items, the representative's index ascending. `item_of`
// (empty: each picture is its own item) names each picture's item: the pictures of one item
// (a video's sampled frames) are one from the start, so an item is in at most one group and
// a group is never one item's pictures alone. Members include the representative item's
// other pictures; a member joined only through its item's pictures has an empty signal.
Result<std::vector<DuplicateGroup>> GroupNearDuplicates(const std::vector<PictureSignature>& pictures,
                                                        const NearDuplicateOptions& options,
                                                        const ConfirmFn& confirm,
                                                        GroupingStats* stats = nullptr,
                                                        const std::vector<int64_t>& item_of = {});

}  // namespace framemill::cluster
