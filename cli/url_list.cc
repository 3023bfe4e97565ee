#include "cli/url_list.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/json_text.h"

namespace framemill {
namespace {

constexpr size_t kMaxExamples = 10;

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

std::string_view Trim(std::string_view s) {
  size_t b = s.find_first_not_of(" \t\r\n"), e = s.find_last_not_of(" \t\r\n");
  return b == std::string_view::npos ? std::string_view() : s.substr(b, e - b + 1);
}

// Reads physical lines, dropping a leading BOM and trailing CR, counting line numbers.
class LineReader {
 public:
  explicit LineReader(std::istream& in) : in_(in) {}
  bool Next(std::string* line) {
    if (!std::getline(in_, *line)) return false;
    ++number_;
    if (number_ == 1 && line->rfind("\xEF\xBB\xBF", 0) == 0) line->erase(0, 3);
    if (!line->empty() && line->back() == '\r') line->pop_back();
    return true;
  }
  int64_t number() const { return number_; }

 private:
  std::istream& in_;
  int64_t number_ = 0;
};

// One RFC 4180 record, which may span lines when a quoted field holds a newline.
// Returns false at end of file; `error` is set for a malformed record.
bool ReadCsvRecord(LineReader& r, std::vector<std::string>* fields, int64_t* first_line,
                   std::string* error) {
  fields->clear();
  error->clear();
  std::string line;
  if (!r.Next(&line)) return false;
  *first_line = r.number();
  std::string cur;
  bool quoted = false, after_quote = false, field_was_quoted = false;
  size_t i = 0;
  for (;;) {
    if (i == line.size()) {
      if (quoted) {  // newline inside a quoted field: the record goes on
        std::string more;
        if (!r.Next(&more)) {
          *error = "unterminated quoted field";
          fields->push_back(std::move(cur));
          return true;
        }
        cur += '\n';
        line = std::move(more);
        i = 0;
        continue;
      }
      fields->push_back(std::move(cur));
      return true;
    }
    char c = line[i++];
    if (quoted) {
      if (c == '"') {
        if (i < line.size() && line[i] == '"') {
          cur += '"';
          ++i;
        } else {
          quoted = false;
          after_quote = true;
        }
      } else {
        cur += c;
      }
    } else if (c == ',') {
      fields->push_back(std::move(cur));
      cur.clear();
      after_quote = field_was_quoted = false;
    } else if (c == '"' && cur.empty() && !field_was_quoted) {
      quoted = field_was_quoted = true;
    } else if (after_quote) {
      if (c == ' ' || c == '\t') continue;  // tolerated after the closing quote
      if (error->empty()) *error = "text after a closing quote";
      cur += c;
    } else {
      if (c == '"' && error->empty()) *error = "quote inside an unquoted field";
      cur += c;
    }
  }
}

class Sink {
 public:
  Sink(const std::function<Status(UrlEntry&&)>& fn, UrlListReport* report)
      : fn_(fn), report_(report) {}
  void Reject(int64_t line, const std::string& reason) {
    ++report_->rejected[reason];
    if (report_->examples.size() < kMaxExamples) report_->examples.push_back({line, reason});
  }
  Status Offer(std::string_view url, std::string metadata, int64_t line) {
    url = Trim(url);
    if (url.empty()) {
      Reject(line, "no url");
      return Status::OK();
    }
    if (!IsHttpUrl(url)) {
      Reject(line, "not an http(s) URL");
      return Status::OK();
    }
    ++report_->urls;
    return fn_(UrlEntry{std::string(url), std::move(metadata), line});
  }

 private:
  const std::function<Status(UrlEntry&&)>& fn_;
  UrlListReport* report_;
};

Status ReadText(LineReader& r, Sink& sink, UrlListReport* report) {
  std::string line;
  while (r.Next(&line)) {
    std::string_view t = Trim(line);
    if (t.empty() || t[0] == '#') continue;
    ++report->records;
    FM_RETURN_IF_ERROR(sink.Offer(t, "{}", r.number()));
  }
  return Status::OK();
}

Status ReadCsv(const std::string& path, LineReader& r, Sink& sink, UrlListReport* report) {
  std::vector<std::string> header, fields;
  int64_t line = 0;
  std::string error;
  // The header is the first non-blank record.
  for (;;) {
    if (!ReadCsvRecord(r, &header, &line, &error))
      return Status::InvalidArgument("URL list '" + path + "' is empty (a .csv needs a header row with a url column)");
    if (!(header.size() == 1 && Trim(header[0]).empty())) break;
  }
  int url_col = -1;
  for (size_t i = 0; i < header.size(); ++i) {
    header[i] = std::string(Trim(header[i]));
    if (Lower(header[i]) == "url" && url_col < 0) url_col = static_cast<int>(i);
  }
  if (url_col < 0)
    return Status::InvalidArgument("URL list '" + path + "': the header row (line " +
                                   std::to_string(line) + ") has no 'url' column");
  while (ReadCsvRecord(r, &fields, &line, &error)) {
    if (fields.size() == 1 && Trim(fields[0]).empty()) continue;  // blank line
    ++report->records;
    if (!error.empty()) {
      sink.Reject(line, "malformed CSV: " + error);
      continue;
    }
    if (fields.size() != header.size()) {
      sink.Reject(line, "wrong number of fields");
      continue;
    }
    nlohmann::json meta = nlohmann::json::object();
    for (size_t i = 0; i < fields.size(); ++i)
      if (static_cast<int>(i) != url_col) meta[header[i]] = fields[i];
    FM_RETURN_IF_ERROR(sink.Offer(fields[url_col], JsonDump(meta), line));
  }
  return Status::OK();
}

Status ReadJsonl(LineReader& r, Sink& sink, UrlListReport* report) {
  std::string line;
  while (r.Next(&line)) {
    std::string_view t = Trim(line);
    if (t.empty()) continue;
    ++report->records;
    auto j = nlohmann::json::parse(t, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
      sink.Reject(r.number(), "not a JSON object");
      continue;
    }
    auto it = j.find("url");
    if (it == j.end() || !it->is_string()) {
      sink.Reject(r.number(), "no string 'url' key");
      continue;
    }
    std::string url = it->get<std::string>();
    j.erase(it);
    FM_RETURN_IF_ERROR(sink.Offer(url, JsonDump(j), r.number()));
  }
  return Status::OK();
}

}  // namespace

int64_t UrlListReport::rejected_total() const {
  int64_t n = 0;
  for (const auto& [reason, count] : rejected) n += count;
  return n;
}

std::optional<UrlListFormat> UrlListFormatOf(const std::string& path) {
  size_t dot = path.find_last_of('.');
  if (dot == std::string::npos || path.find('/', dot) != std::string::npos) return std::nullopt;
  std::string ext = Lower(path.substr(dot));
  if (ext == ".txt") return UrlListFormat::kText;
  if (ext == ".csv") return UrlListFormat::kCsv;
  if (ext == ".jsonl") return UrlListFormat::kJsonl;
  return std::nullopt;
}

bool IsHttpUrl(std::string_view url) {
  std::string head = Lower(std::string(url.substr(0, 8)));
  size_t rest;
  if (head.rfind("http://", 0) == 0) rest = 7;
  else if (head.rfind("https://", 0) == 0) rest = 8;
  else return false;
  if (url.size() <= rest) return false;
  for (char c : url)
    if (static_cast<unsigned char>(c) <= ' ' || c == 0x7f) return false;
  // A host: something before the first '/', '?' or '#' that is not only a port or userinfo.
  std::string_view authority = url.substr(rest, url.find_first_of("/?#", rest) - rest);
  size_t at = authority.rfind('@');
  if (at != std::string_view::npos) authority = authority.substr(at + 1);
  return !authority.empty() && authority[0] != ':';
}

Status ReadUrlList(const std::string& path, UrlListFormat format,
                   const std::function<Status(UrlEntry&&)>& fn, UrlListReport* report) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::InvalidArgument("URL list '" + path + "' cannot be read");
  std::vector<char> buf(1 << 20);
  in.rdbuf()->pubsetbuf(buf.data(), static_cast<std::streamsize>(buf.size()));
  LineReader r(in);
  Sink sink(fn, report);
  switch (format) {
    case UrlListFormat::kText: FM_RETURN_IF_ERROR(ReadText(r, sink, report)); break;
    case UrlListFormat::kCsv: FM_RETURN_IF_ERROR(ReadCsv(path, r, sink, report)); break;
    case UrlListFormat::kJsonl: FM_RETURN_IF_ERROR(ReadJsonl(r, sink, report)); break;
  }
  if (in.bad()) return Status::IOError("reading URL list '" + path + "' failed");
  return Status::OK();
}

}  // namespace framemill
