// What identifies an item's bytes: the content hash enqueue records (xxh3-64, 16 lower-case
// hex digits), made in one place so that whoever checks a file against it later (the
// WebDataset export) computes exactly the same. Stateless; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace framemill {

// The digest as the store keeps it.
std::string ContentHashHex(uint64_t xxh3_64);
// The content hash of `bytes` in one call.
std::string ContentHashOf(std::string_view bytes);

}  // namespace framemill
