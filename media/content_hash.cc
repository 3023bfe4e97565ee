#include "media/content_hash.h"

#include <xxhash.h>

#include <cstdio>

namespace framemill {

std::string ContentHashHex(uint64_t xxh3_64) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(xxh3_64));
  return hex;
}

std::string ContentHash128Hex(uint64_t high64, uint64_t low64) {
  return ContentHashHex(high64) + ContentHashHex(low64);
}

std::string ContentHashOf(std::string_view bytes) {
  return ContentHashHex(XXH3_64bits(bytes.data(), bytes.size()));
}

bool ContentHashMatches(std::string_view bytes, const std::string& recorded) {
  if (recorded.size() == 16) return ContentHashOf(bytes) == recorded;
  if (recorded.size() != 32) return false;
  const XXH128_hash_t h = XXH3_128bits(bytes.data(), bytes.size());
  return ContentHash128Hex(h.high64, h.low64) == recorded;
}

}  // namespace framemill
