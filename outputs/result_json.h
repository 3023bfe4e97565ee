// One done job's result as every output shows it (`export --format jsonl`, the WebDataset
// shards' per-item JSON, the report): the contract's keys, built in one place so the
// three cannot drift apart. Stateless; thread-safe.
#pragma once

#include <cstdint>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "storage/job_store.h"

namespace framemill {

// {"device", "attempts", "result", "artifacts"} of a done job; JSON that does not parse
// (it never should) is kept as a string rather than dropped.
nlohmann::json DoneResultJson(const std::string& device, int64_t attempts,
                              const std::string& result_json, const std::string& artifacts_json);

// A whole item: {"key", "item" (+ "item_hex" when not UTF-8), "kind", "media",
// "results": {stage: DoneResultJson}, "states": {stage: "done"|"failed"|...},
// "reasons": {stage: {"class", "message"}} for failed and skipped jobs}.
nlohmann::json ItemJson(const ItemView& item, const std::string& key);

// The items `dedup` found to be copies of another (every group member but the
// representative), as export names them: what `export --unique` leaves out, in every
// format. Empty when dedup has no result.
Result<std::set<std::string>> DuplicateMembers(ResultReader& results);

}  // namespace framemill
