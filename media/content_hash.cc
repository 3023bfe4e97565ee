#include "media/content_hash.h"

#include <xxhash.h>

#include <cstdio>

namespace framemill {

std::string ContentHashHex(uint64_t xxh3_64) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(xxh3_64));
  return hex;
}

std::string ContentHashOf(std::string_view bytes) {
  return ContentHashHex(XXH3_64bits(bytes.data(), bytes.size()));
}

}  // namespace framemill
