// Which items `export` writes, in every format: those that pass every filter a curator gave
// (../shared/CONTRACT.md: --label, --no-label, --content, --safe/--unsafe, --faces) and, with
// --unique, one item per dedup group. Decided from the done results of categorize, faces and
// dedup as ResultReader gives them, so both engines decide alike.
// ExportFilter and Passes are stateless; an ItemSelection is read-only once made.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "outputs/unsafe.h"
#include "storage/job_store.h"

namespace framemill {

struct ExportFilter {
  std::vector<std::string> labels;     // --label: any of these of categorize's shown labels
  std::vector<std::string> no_labels;  // --no-label: none of them
  std::string content;                 // --content: photo | drawing; empty: any
  enum class Safety { kAny, kSafe, kUnsafe } safety = Safety::kAny;  // --safe | --unsafe
  // --faces N (at least N) or N-M: faces' `count` (a video: `max_faces`, the most in one
  // sampled frame). -1: any.
  int64_t min_faces = -1, max_faces = -1;
  UnsafeOptions unsafe;

  bool UsesCategorize() const;
  bool UsesFaces() const { return min_faces >= 0; }
};

// "a, b,c" as ["a", "b", "c"]: a comma-separated flag's items, spaces around each trimmed.
std::vector<std::string> SplitCommaList(const std::string& text);

// --faces: "N" or "N-M" with 0 <= N <= M; InvalidArgument naming the flag otherwise.
Status ParseFaceCount(const std::string& text, ExportFilter* filter);

// Whether an item passes `filter`, given its done categorize and faces results (nullptr: that
// job is not done, and a filter that needs it leaves the item out).
bool Passes(const ExportFilter& filter, const nlohmann::json* categorize, const nlohmann::json* faces);

class ItemSelection {
 public:
  ItemSelection() = default;  // every item

  // The filters' and --unique's choice over the store's done results.
  static Result<ItemSelection> Make(ResultReader& results, const ExportFilter& filter, bool unique);

  // `item` as ExportRow and ItemView name it.
  bool Keeps(const std::string& item) const;

 private:
  std::set<std::string> copies_;                  // --unique: dedup's members but the first
  std::optional<std::set<std::string>> passing_;  // no value: no filter given
};

}  // namespace framemill
