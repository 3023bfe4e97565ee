// Whether categorize found a picture unsafe: one threshold that the report's blur and
// `export --safe/--unsafe` share (setting nsfw.unsafe_threshold, FRAMEMILL_UNSAFE_THRESHOLD).
// Stateless; thread-safe.
#pragma once

#include <nlohmann/json.hpp>

namespace framemill {

struct UnsafeOptions {
  // A picture whose categorize `nsfw.unsafe` (porn + hentai; a video's worst sampled frame)
  // is at least this is unsafe. 0.9, measured on every ordinary picture Debian ships
  // (bench/README "NSFW threshold", bench/nsfw_threshold.sh): of 1,157, 4 reach 0.5 (a retina
  // micrograph 0.87, apple.jpg 0.61), none 0.9; the smallest step of 0.05 that marks none.
  // Recall cannot be measured here: no labelled NSFW pictures.
  double threshold = 0.9;
};

// categorize's `nsfw.unsafe` in a result; 0 when it has none.
inline double UnsafeScore(const nlohmann::json& categorize_result) {
  if (!categorize_result.is_object()) return 0;
  const auto nsfw = categorize_result.find("nsfw");
  if (nsfw == categorize_result.end() || !nsfw->is_object()) return 0;
  const auto unsafe = nsfw->find("unsafe");
  return unsafe != nsfw->end() && unsafe->is_number() ? unsafe->get<double>() : 0;
}

inline bool IsUnsafe(double score, const UnsafeOptions& o) { return score >= o.threshold; }

}  // namespace framemill
