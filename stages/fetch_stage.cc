#include "stages/fetch_stage.h"

#include <nlohmann/json.hpp>

#include "media/sniff.h"

namespace framemill {
namespace {

constexpr size_t kHeadBytes = 256 * 1024;  // enough for any image header we probe

// What enqueue records for a local file, so a fetched item looks the same.
nlohmann::json MediaInfoOf(const std::string& path, const std::string& fallback_format) {
  nlohmann::json info = nlohmann::json::object();
  info["format"] = fallback_format;
  auto head = ReadFileBytes(path, kHeadBytes);
  if (!head.ok()) return info;
  auto sniffed = SniffMedia(*head);
  if (!sniffed) return info;
  info["format"] = sniffed->format;
  if (sniffed->kind == MediaKind::kImage) {
    auto hdr = ProbeImageHeader(*head, sniffed->format);
    if (hdr.ok()) {
      info["width"] = hdr->width;
      info["height"] = hdr->height;
    }
  }
  return info;
}

Outcome ToOutcome(const ClaimedJob& job, const fetch::FetchResult& r) {
  if (!r.status.ok()) {
    std::string cls = fetch::FailureClassName(r.failure);
    if (r.failure == fetch::FailureClass::kNone) cls = "transfer";
    return Outcome::Failed(r.status, cls, r.retry_after_ms);
  }
  FetchedFile file;
  file.path = r.path;
  file.kind = r.kind;
  file.content_hash = r.content_hash;
  file.bytes = r.bytes;
  file.media_info = MediaInfoOf(r.path, r.format);
  nlohmann::json res;
  res["url"] = job.source;
  res["final_url"] = r.final_url;
  res["path"] = r.path;
  res["content_hash"] = r.content_hash;
  res["bytes"] = r.bytes;
  res["media"] = MediaKindName(r.kind);
  res["format"] = r.format;
  res["http_status"] = r.http_status;
  res["seconds"] = r.seconds;
  res["media_info"] = file.media_info;
  auto info = nlohmann::json::parse(job.media_info, nullptr, false);
  if (info.is_object() && info.contains("metadata")) res["metadata"] = info["metadata"];
  Outcome out = Outcome::Done(std::move(res));
  out.artifacts.push_back(r.path);
  out.fetched = std::move(file);
  return out;
}

}  // namespace

FetchStage::FetchStage(fetch::FetchOptions options) : options_(std::move(options)) {
  spec_.name = kName;
  spec_.downloads = true;
}

fetch::Fetcher& FetchStage::ThisThreadsFetcher() {
  std::lock_guard<std::mutex> l(mu_);
  auto& f = fetchers_[std::this_thread::get_id()];
  if (!f) f = std::make_unique<fetch::Fetcher>(options_);
  return *f;
}

std::vector<Outcome> FetchStage::RunBatch(const std::vector<ClaimedJob>& jobs,
                                          const StageContext& ctx) {
  std::vector<Outcome> out;
  if (jobs.empty() || ctx.stopped()) return out;
  std::vector<std::string> urls;
  urls.reserve(jobs.size());
  for (const ClaimedJob& j : jobs) urls.push_back(j.source);
  // One FetchAll for the whole batch: the transfers overlap, which is the point.
  std::vector<fetch::FetchResult> results = ThisThreadsFetcher().FetchAll(urls);
  out.reserve(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (i < results.size()) {
      out.push_back(ToOutcome(jobs[i], results[i]));
    } else {
      out.push_back(Outcome::Failed(
          Status::Internal("the fetcher returned no result for this URL"), "transfer"));
    }
  }
  return out;
}

}  // namespace framemill
