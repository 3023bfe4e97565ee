// What identifies an item's bytes: the content hash the store records, made in one place so
// that whoever checks a file against it later (the WebDataset export) computes exactly the
// same. Two kinds: enqueue hashes local files with xxh3-64 (16 lower-case hex digits), the
// fetcher hashes downloads with xxh3-128 (32, its canonical big-endian form).
// Stateless; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace framemill {

// The digest as the store keeps it.
std::string ContentHashHex(uint64_t xxh3_64);
std::string ContentHash128Hex(uint64_t high64, uint64_t low64);
// The content hash of `bytes` in one call (xxh3-64).
std::string ContentHashOf(std::string_view bytes);
// `recorded` is the content hash of `bytes`, of whichever kind it is; false for a hash of
// neither length.
bool ContentHashMatches(std::string_view bytes, const std::string& recorded);

}  // namespace framemill
