// URL lists: the sources `framemill enqueue` turns into URL items. Three forms, chosen
// by extension: `.txt` (one URL a line; blank lines and lines starting with '#'
// ignored), `.csv` (a header row naming a `url` column; RFC 4180 quoting, including
// newlines inside quotes), `.jsonl` (one object a line with a string `url`). Every other
// column or key is kept as the item's metadata (a JSON object). A UTF-8 BOM and CRLF
// line ends are accepted. A line that cannot be read, or whose URL is not http(s), is
// counted with its line number and skipped: one bad line never stops a list of millions.
// Streams the file (memory does not grow with its length). Plain functions; thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace framemill {

enum class UrlListFormat { kText, kCsv, kJsonl };

// By extension (case-insensitive); nullopt for anything else.
std::optional<UrlListFormat> UrlListFormatOf(const std::string& path);

struct UrlEntry {
  std::string url;
  std::string metadata = "{}";  // JSON object
  int64_t line = 0;             // 1-based, of the record's first line
};

struct BadLine {
  int64_t line = 0;
  std::string reason;
};

struct UrlListReport {
  int64_t records = 0;  // non-blank lines (records, for csv), header excluded
  int64_t urls = 0;     // accepted
  std::map<std::string, int64_t> rejected;  // reason -> count
  std::vector<BadLine> examples;            // the first few rejected lines
  int64_t rejected_total() const;
};

// True for an absolute http:// or https:// URL with a host and no whitespace.
bool IsHttpUrl(std::string_view url);

// Calls `fn` for each accepted URL, in file order; stops at the first error `fn`
// returns. Errors: InvalidArgument when the file cannot be opened or a .csv has no
// `url` column (naming the file); whatever `fn` returned.
Status ReadUrlList(const std::string& path, UrlListFormat format,
                   const std::function<Status(UrlEntry&&)>& fn, UrlListReport* report);

}  // namespace framemill
