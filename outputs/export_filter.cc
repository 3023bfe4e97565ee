#include "outputs/export_filter.h"

#include <algorithm>
#include <charconv>
#include <map>

#include "jobs/stage_names.h"
#include "outputs/result_json.h"

namespace framemill {
namespace {

bool ParseCount(std::string_view text, int64_t* out) {
  const char* end = text.data() + text.size();
  auto [at, ec] = std::from_chars(text.data(), end, *out);
  return ec == std::errc() && at == end && *out >= 0;
}

// categorize's shown labels: its `categories` (weaker objects are not among them).
std::set<std::string> ShownLabels(const nlohmann::json& categorize) {
  std::set<std::string> out;
  const auto c = categorize.find("categories");
  if (c == categorize.end() || !c->is_array()) return out;
  for (const auto& entry : *c)
    if (entry.is_object() && entry.contains("label") && entry["label"].is_string())
      out.insert(entry["label"].get<std::string>());
  return out;
}

bool LabelsPass(const ExportFilter& f, const nlohmann::json& categorize) {
  const std::set<std::string> shown = ShownLabels(categorize);
  auto shown_any = [&](const std::vector<std::string>& list) {
    return std::any_of(list.begin(), list.end(), [&](const std::string& l) { return shown.count(l) > 0; });
  };
  if (!f.labels.empty() && !shown_any(f.labels)) return false;
  return !shown_any(f.no_labels);
}

bool ContentPasses(const ExportFilter& f, const nlohmann::json& categorize) {
  if (f.content.empty()) return true;
  const auto c = categorize.find("content");
  return c != categorize.end() && c->is_object() && c->value("type", "") == f.content;
}

bool SafetyPasses(const ExportFilter& f, const nlohmann::json& categorize) {
  if (f.safety == ExportFilter::Safety::kAny) return true;
  if (!categorize.contains("nsfw")) return false;  // not analysed: neither safe nor unsafe
  const bool unsafe = IsUnsafe(UnsafeScore(categorize), f.unsafe);
  return unsafe == (f.safety == ExportFilter::Safety::kUnsafe);
}

// faces' count of an image, or a video's most in one sampled frame; -1 when neither is there.
int64_t FaceCount(const nlohmann::json& faces) {
  for (const char* key : {"count", "max_faces"}) {
    const auto it = faces.find(key);
    if (it != faces.end() && it->is_number_integer()) return it->get<int64_t>();
  }
  return -1;
}

// Each item's done result of `stage`, parsed, with only the keys the filters read: a whole
// result holds every object, or every face's embedding, which a large store cannot keep for
// all its items at once.
Status ReadResults(ResultReader& results, const char* stage, std::initializer_list<const char*> keys,
                   std::map<std::string, nlohmann::json>* out) {
  return results.ForEachResult(stage, [&](const ExportRow& r) {
    auto j = nlohmann::json::parse(r.result_json, nullptr, false);
    if (j.is_discarded() || !j.is_object())
      return Status::Corruption(std::string("the ") + stage + " result of " + r.source +
                                " is not readable: rerun " + stage);
    nlohmann::json kept = nlohmann::json::object();
    for (const char* key : keys)
      if (auto it = j.find(key); it != j.end()) kept[key] = std::move(*it);
    (*out)[r.source] = std::move(kept);
    return Status::OK();
  });
}

}  // namespace

std::vector<std::string> SplitCommaList(const std::string& text) {
  std::vector<std::string> out;
  size_t begin = 0;
  while (begin <= text.size()) {
    size_t end = text.find(',', begin);
    if (end == std::string::npos) end = text.size();
    std::string item = text.substr(begin, end - begin);
    while (!item.empty() && item.front() == ' ') item.erase(0, 1);
    while (!item.empty() && item.back() == ' ') item.pop_back();
    out.push_back(std::move(item));
    begin = end + 1;
  }
  return out;
}

bool ExportFilter::UsesCategorize() const {
  return !labels.empty() || !no_labels.empty() || !content.empty() || safety != Safety::kAny;
}

Status ParseFaceCount(const std::string& text, ExportFilter* filter) {
  const size_t dash = text.find('-');
  int64_t lo = 0, hi = -1;
  const bool ok = dash == std::string::npos
                      ? ParseCount(text, &lo)
                      : ParseCount(std::string_view(text).substr(0, dash), &lo) &&
                            ParseCount(std::string_view(text).substr(dash + 1), &hi) && lo <= hi;
  if (!ok)
    return Status::InvalidArgument("--faces: expected N (at least N faces) or N-M (N to M), "
                                   "whole numbers with N <= M, got '" + text + "'");
  filter->min_faces = lo;
  filter->max_faces = hi;
  return Status::OK();
}

bool Passes(const ExportFilter& f, const nlohmann::json* categorize, const nlohmann::json* faces) {
  if (f.UsesCategorize()) {
    if (categorize == nullptr) return false;
    if (!LabelsPass(f, *categorize) || !ContentPasses(f, *categorize) || !SafetyPasses(f, *categorize))
      return false;
  }
  if (f.UsesFaces()) {
    const int64_t n = faces == nullptr ? -1 : FaceCount(*faces);
    if (n < f.min_faces || (f.max_faces >= 0 && n > f.max_faces)) return false;
  }
  return true;
}

Result<ItemSelection> ItemSelection::Make(ResultReader& results, const ExportFilter& filter, bool unique) {
  ItemSelection s;
  if (unique) {
    auto copies = DuplicateMembers(results);
    if (!copies.ok()) return copies.status();
    s.copies_ = std::move(copies).value();
  }
  if (!filter.UsesCategorize() && !filter.UsesFaces()) return s;
  std::map<std::string, nlohmann::json> categorize, faces;
  if (filter.UsesCategorize())
    FM_RETURN_IF_ERROR(ReadResults(results, stage_names::kCategorize, {"categories", "content", "nsfw"}, &categorize));
  if (filter.UsesFaces())
    FM_RETURN_IF_ERROR(ReadResults(results, stage_names::kFaces, {"count", "max_faces"}, &faces));
  s.passing_.emplace();
  auto find = [](const std::map<std::string, nlohmann::json>& m, const std::string& item) {
    const auto it = m.find(item);
    return it == m.end() ? nullptr : &it->second;
  };
  // An item passes only with a result of each stage a filter reads: the first such stage's
  // items are every candidate.
  for (const auto& [item, result] : filter.UsesCategorize() ? categorize : faces)
    if (Passes(filter, find(categorize, item), find(faces, item))) s.passing_->insert(item);
  return s;
}

bool ItemSelection::Keeps(const std::string& item) const {
  if (copies_.count(item) > 0) return false;
  return !passing_.has_value() || passing_->count(item) > 0;
}

}  // namespace framemill
